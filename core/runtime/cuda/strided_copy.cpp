#include "core/runtime/cuda/strided_copy.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>

namespace kf::cuda {

CopyLayout collapse_copy(const std::vector<int64_t>& sizes, const std::vector<int64_t>& src_strides,
                         const std::vector<int64_t>& dst_strides) {
  CopyLayout out;
  out.numel = 1;
  for (int64_t s : sizes) out.numel *= s;
  if (out.numel == 0) return out;
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1) dims.push_back(d);
  // Outermost first by destination stride, so consecutive threads write
  // consecutive addresses.
  std::stable_sort(dims.begin(), dims.end(),
                   [&](size_t a, size_t b) { return dst_strides[a] > dst_strides[b]; });
  for (size_t d : dims) {
    if (!out.sizes.empty()) {
      size_t last = out.sizes.size() - 1;
      // The previous (outer) dim steps over exactly this one in both tensors: merge.
      if (out.src_strides[last] == src_strides[d] * sizes[d] &&
          out.dst_strides[last] == dst_strides[d] * sizes[d]) {
        out.sizes[last] *= sizes[d];
        out.src_strides[last] = src_strides[d];
        out.dst_strides[last] = dst_strides[d];
        continue;
      }
    }
    out.sizes.push_back(sizes[d]);
    out.src_strides.push_back(src_strides[d]);
    out.dst_strides.push_back(dst_strides[d]);
  }
  if (out.sizes.empty()) out = {1, {1}, {1}, {1}};
  return out;
}

int widen_copy(CopyLayout* l, int element_bytes, uint64_t src, uint64_t dst) {
  const size_t r = l->sizes.size();
  if (r == 0 || l->numel == 0 || l->src_strides[r - 1] != 1 || l->dst_strides[r - 1] != 1) return element_bytes;
  // Every byte count a wide element must divide.
  uint64_t bits = src | dst | static_cast<uint64_t>(l->sizes[r - 1] * element_bytes);
  for (size_t d = 0; d + 1 < r; ++d)
    bits |= static_cast<uint64_t>(l->src_strides[d] * element_bytes) | static_cast<uint64_t>(l->dst_strides[d] * element_bytes);
  int wide = element_bytes;
  while (wide < 16 && (bits & static_cast<uint64_t>(2 * wide - 1)) == 0) wide *= 2;
  const int64_t k = wide / element_bytes;
  if (k == 1) return element_bytes;
  l->sizes[r - 1] /= k;
  l->numel /= k;
  for (size_t d = 0; d + 1 < r; ++d) {
    l->src_strides[d] /= k;
    l->dst_strides[d] /= k;
  }
  return wide;
}

bool copy_fits_int32(const CopyLayout& l) {
  constexpr int64_t kLimit = int64_t{1} << 31;
  if (l.numel >= kLimit) return false;
  int64_t src_end = 0, dst_end = 0;  // the largest offsets, below 2^31 each step
  for (size_t d = 0; d < l.sizes.size(); ++d) {
    if (l.src_strides[d] < 0 || l.dst_strides[d] < 0 || l.sizes[d] >= kLimit) return false;
    const int64_t n = l.sizes[d] - 1;
    if (l.src_strides[d] > 0 && n > (kLimit - 1 - src_end) / l.src_strides[d]) return false;
    if (l.dst_strides[d] > 0 && n > (kLimit - 1 - dst_end) / l.dst_strides[d]) return false;
    src_end += n * l.src_strides[d];
    dst_end += n * l.dst_strides[d];
  }
  return true;
}

std::string strided_copy_name(int element_bytes, int rank, bool index32) {
  return "kf_strided_copy_e" + std::to_string(element_bytes) + "_r" + std::to_string(rank) + (index32 ? "_i32" : "");
}

std::string strided_copy_source(int element_bytes, int rank, bool index32) {
  const char* type = element_bytes == 1   ? "unsigned char"
                     : element_bytes == 2 ? "unsigned short"
                     : element_bytes == 4 ? "unsigned int"
                     : element_bytes == 8 ? "unsigned long long"
                                          : "kf_chunk16";
  const std::string r = std::to_string(rank);
  // (index32: the element's offsets in int, the grid-stride loop's counter
  // in 64 bits so that its last step cannot wrap)
  const std::string I = index32 ? "int" : "long long";
  return "// kfuse strided copy: " + std::to_string(element_bytes) + "-byte elements, rank " + r +
         (index32 ? ", 32-bit offsets" : "") + "\nstruct KfArgs { long long a[" + std::to_string(3 + 3 * rank) +
         "]; };\n"
         "struct alignas(16) kf_chunk16 { unsigned long long lo, hi; };\n"
         "extern \"C\" __global__ void " + strided_copy_name(element_bytes, rank, index32) + "(KfArgs args) {\n"
         "  typedef " + type + " T;\n"
         "  typedef " + I + " I;\n"
         "  T* dst = (T*)args.a[0];\n"
         "  const T* src = (const T*)args.a[1];\n"
         "  const long long n = args.a[2];\n"
         "  const long long step = (long long)gridDim.x * blockDim.x;\n"
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
         "    I rest = (I)i, s = 0, d = 0;\n"
         "#pragma unroll\n"
         "    for (int k = " + r + " - 1; k >= 0; --k) {\n"
         "      const I size = (I)args.a[3 + k];\n"
         "      const I idx = rest % size;\n"
         "      rest /= size;\n"
         "      s += idx * (I)args.a[3 + " + r + " + k];\n"
         "      d += idx * (I)args.a[3 + 2 * " + r + " + k];\n"
         "    }\n"
         "    dst[d] = src[s];\n"
         "  }\n"
         "}\n";
}

void strided_copy_walk(const CopyLayout& l, bool index32, const std::function<void(int64_t, int64_t)>& visit) {
  const size_t r = l.sizes.size();
  for (int64_t i = 0; i < l.numel; ++i) {
    int64_t rest = i, s = 0, d = 0;
    for (size_t k = r; k-- > 0;) {
      const int64_t idx = rest % l.sizes[k];
      rest /= l.sizes[k];
      s += idx * l.src_strides[k];
      d += idx * l.dst_strides[k];
    }
    // (the kernel's int arithmetic: exact where copy_fits_int32 holds)
    if (index32 && (s > INT32_MAX || d > INT32_MAX || s < 0 || d < 0)) throw std::logic_error("int offset overflow");
    visit(s, d);
  }
}

}  // namespace kf::cuda
