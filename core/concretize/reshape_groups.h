// How a reshape regroups dims, from the sizes of one call. A reshape of
// [B, C, HW] to [B, G, C/G, HW] keeps B and HW and splits C: groups
// {1 in, 1 out}, {1 in, 2 out}, {1 in, 1 out}. Where a group is one dim on
// each side the index passes through (the extents are equal), so a kernel
// reads the input at the output's index there: no division, and 16-byte
// vectors along a kept innermost dim. The grouping joins the
// concretization key (calls that group differently get their own
// kernels), as nvFuser concretizes its reshapes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ir/index_rules.h"  // ReshapeGroup: the reshape's index rule reads it

namespace kf {

// The finest grouping of `in` and `out` (equal element counts) into
// consecutive dims of equal products; size-1 dims join the group before
// them (or the first). A zero extent anywhere: one group of everything.
ReshapeGroups reshape_groups(std::span<const int64_t> in, std::span<const int64_t> out);

// The grouping as key words: their count, then one word per group
// (in_dims << 8 | out_dims). Allocates nothing beyond `words` (it runs on
// every execute).
void append_reshape_key(std::span<const int64_t> in, std::span<const int64_t> out, std::vector<int64_t>* words);

}  // namespace kf
