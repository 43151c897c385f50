// dst = src between tensors of equal sizes and any strides. The layout is
// first collapsed (size-1 dims dropped, dims ordered by the destination's
// strides, neighbours that are contiguous in both merged), so most copies
// become one contiguous block (cuMemcpyAsync); permutations run the tiled
// kernel of permute_copy.h; the rest run a small generated per-element
// kernel, one per (element size, collapsed rank), compiled through the
// kernel cache.
#pragma once

#include <compare>
#include <cstdint>
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

// The kernel's name and source. Arguments (KfArgs, as in kernel_plan.h):
// dst, src, numel, sizes[rank], src strides[rank], dst strides[rank].
std::string strided_copy_name(int element_bytes, int rank);
std::string strided_copy_source(int element_bytes, int rank);

// Everything strided_copy_source reads (its arguments): the copy kernels
// are cached under it per device (copy_kernels.h).
struct StridedCopyVariant {
  int element_bytes = 0, rank = 0;
  auto operator<=>(const StridedCopyVariant&) const = default;
  std::string name() const { return strided_copy_name(element_bytes, rank); }
  std::string source() const { return strided_copy_source(element_bytes, rank); }
};

}  // namespace kf::cuda
