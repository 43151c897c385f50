// dst = src between tensors of equal sizes and any strides. The layout is
// first collapsed (size-1 dims dropped, dims ordered by the destination's
// strides, neighbours that are contiguous in both merged), so most copies
// become one contiguous block (cuMemcpyAsync); the rest run a small
// generated kernel, one per (element size, collapsed rank), compiled
// through the kernel cache.
#pragma once

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

// The dim along which the source is contiguous (stride 1) when it is not
// the destination's innermost (a transpose), else -1. Such copies go
// through shared-memory tiles: the per-element kernel reads one element
// per 32-byte sector along the destination's walk, one L2 request each.
int transposed_dim(const CopyLayout& l);
// The tiled kernel for a transposed_dim `a`: 32 x 32 tiles of dims (a,
// last), read along a and written along the last dim, 256 threads, the
// other dims one tile row of blocks each. Arguments as the strided copy's.
std::string transpose_copy_name(int element_bytes, int rank, int a);
std::string transpose_copy_source(int element_bytes, int rank, int a);

}  // namespace kf::cuda
