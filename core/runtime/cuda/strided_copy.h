// dst = src between tensors of equal sizes and any strides. The layout is
// first collapsed (size-1 dims dropped, dims ordered by the destination's
// strides, neighbours that are contiguous in both merged), so most copies
// become one contiguous block (cuMemcpyAsync); permutations run the tiled
// kernel of permute_copy.h; the rest run a small generated per-element
// kernel, one per (element size, collapsed rank, index width), compiled
// through the kernel cache. Before it, a copy that keeps both tensors'
// innermost dim contiguous (padded rows, storage offsets) is widened to
// elements of up to 16 bytes (widen_copy), and index math takes 32 bits
// where every offset fits (copy_fits_int32): one 4-byte element a thread
// with a 64-bit division per dim ran at 20% of DRAM, instruction-bound
// (docs/perf-log.md session 45 §4).
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kf::cuda {

struct CopyLayout {
  int64_t numel = 0;
  std::vector<int64_t> sizes;        // outermost first; at least one dim when numel > 0
  std::vector<int64_t> src_strides;  // elements
  std::vector<int64_t> dst_strides;
  bool contiguous() const {
    return sizes.size() == 1 && src_strides[0] == 1 && dst_strides[0] == 1;
  }
};

CopyLayout collapse_copy(const std::vector<int64_t>& sizes, const std::vector<int64_t>& src_strides,
                         const std::vector<int64_t>& dst_strides);

// The widest element, in bytes (a power of two from element_bytes up to
// 16), that copies collapsed layout `l` of element_bytes elements from
// address `src` to address `dst`: both tensors' innermost dim has stride 1,
// and both addresses, the inner extent's bytes and every other stride's
// bytes are multiples of it. `l` becomes the same copy in elements of that
// width (the inner extent and the other strides divided; numel too).
int widen_copy(CopyLayout* l, int element_bytes, uint64_t src, uint64_t dst);

// Whether the per-element kernel may index `l` in 32 bits: numel and
// every offset either tensor's elements take below 2^31, strides >= 0.
bool copy_fits_int32(const CopyLayout& l);

// The kernel's name and source. Arguments (KfArgs, as in kernel_plan.h):
// dst, src, numel, sizes[rank], src strides[rank], dst strides[rank].
// element_bytes 1, 2, 4, 8 or 16.
std::string strided_copy_name(int element_bytes, int rank, bool index32 = false);
std::string strided_copy_source(int element_bytes, int rank, bool index32 = false);

// The (source, destination) offsets, in elements, that the kernel copies,
// in its thread order: its index math on the host, for tests.
void strided_copy_walk(const CopyLayout& l, bool index32, const std::function<void(int64_t, int64_t)>& visit);

// Everything strided_copy_source reads (its arguments): the copy kernels
// are cached under it per device (copy_kernels.h).
struct StridedCopyVariant {
  int element_bytes = 0, rank = 0;
  bool index32 = false;
  auto operator<=>(const StridedCopyVariant&) const = default;
  std::string name() const { return strided_copy_name(element_bytes, rank, index32); }
  std::string source() const { return strided_copy_source(element_bytes, rank, index32); }
};

}  // namespace kf::cuda
