#include "core/runtime/cuda/strided_copy.h"

#include <algorithm>

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

std::string strided_copy_name(int element_bytes, int rank) {
  return "kf_strided_copy_e" + std::to_string(element_bytes) + "_r" + std::to_string(rank);
}

std::string strided_copy_source(int element_bytes, int rank) {
  const char* type = element_bytes == 1   ? "unsigned char"
                     : element_bytes == 2 ? "unsigned short"
                     : element_bytes == 4 ? "unsigned int"
                                          : "unsigned long long";
  const std::string r = std::to_string(rank);
  return "// kfuse strided copy: " + std::to_string(element_bytes) + "-byte elements, rank " + r +
         "\nstruct KfArgs { long long a[" + std::to_string(3 + 3 * rank) + "]; };\n"
         "extern \"C\" __global__ void " + strided_copy_name(element_bytes, rank) + "(KfArgs args) {\n"
         "  typedef " + type + " T;\n"
         "  T* dst = (T*)args.a[0];\n"
         "  const T* src = (const T*)args.a[1];\n"
         "  const long long n = args.a[2];\n"
         "  const long long step = (long long)gridDim.x * blockDim.x;\n"
         "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {\n"
         "    long long rest = i, s = 0, d = 0;\n"
         "#pragma unroll\n"
         "    for (int k = " + r + " - 1; k >= 0; --k) {\n"
         "      const long long size = args.a[3 + k];\n"
         "      const long long idx = rest % size;\n"
         "      rest /= size;\n"
         "      s += idx * args.a[3 + " + r + " + k];\n"
         "      d += idx * args.a[3 + 2 * " + r + " + k];\n"
         "    }\n"
         "    dst[d] = src[s];\n"
         "  }\n"
         "}\n";
}

}  // namespace kf::cuda
