// Layouts: the stride order and contiguity of each input, and the order in
// which every computed value is produced, propagated from the inputs so a
// transposed input gives a transposed output where accesses stay coalesced.
#pragma once

#include <span>
#include <vector>

#include "core/concretize/concrete_fusion.h"

namespace kf {

// An input's stride order (4 bits per dim, outermost first) and contiguity
// (1 bit per dim), computed without allocating: it is part of every key.
struct LayoutCode {
  uint64_t order = 0;
  uint32_t contiguous = 0;
  uint32_t expanded = 0;  // dims of size > 1 and stride 0
  // The largest power of two (<= 16) dividing, in elements, every stride
  // but the innermost of the dims of size > 1: 16 for a dense tensor
  // whatever its extents (its rows are read as flat vectors where the
  // extents are odd, and dynamic odd and even extents share one key).
  // Below a plan's vector width, that tensor's rows start misaligned.
  int row_alignment = 16;
};
LayoutCode encode_layout(const InputMeta& input);
// The order part alone, for any tensor's sizes and strides (a caller's
// output of kf_execute_into): dims of size <= 1 keep their place, the
// others sorted by stride, largest first, ties by index.
uint64_t encode_order(std::span<const int64_t> sizes, std::span<const int64_t> strides);
// The stride order (outermost dim first) of an order code of `rank` dims.
std::vector<int> decode_order(uint64_t code, size_t rank);

InputLayout analyze_layout(const InputMeta& input);

// Fills c.stride_orders for every value (needs c.input_layouts and
// c.size_classes). Pinned output orders override the propagated one.
void propagate_layouts(ConcreteFusion& c);

// Fills c.extent_deps for every value (needs c.size_classes).
void propagate_extent_deps(ConcreteFusion& c);

}  // namespace kf
