// Grouping of exprs into segments, the heart of segmentation:
//  1. top-down: cut the fusion only at segment_set edges (stages) and around
//     library groups: a matmul/linear alone, or the matmul pattern that
//     starts at it (matmul_pattern.h: bias add and activation run in the
//     library call's epilogue) when the scheduler accepts it; each remaining
//     connected group is kept when a scheduler accepts it;
//  2. groups that no scheduler accepts (or that would close a cycle through
//     a library group) are shattered into single exprs;
//  3. bottom-up: neighbouring groups (producer -> consumer, same stage) merge
//     when a scheduler accepts the merged group and the segment graph stays
//     acyclic, trying first the edges that carry the largest intermediates;
//  4. sideways: plain-loop groups of a stage that no path of values joins
//     merge into one kernel of several loops (a few at a time), where a
//     scheduler accepts them together; so do reduction groups that read
//     one tensor (`merge_reductions`), which one kernel then reads once.
// Exprs that no output needs are dropped. The result is deterministic and
// in a valid run order.
#pragma once

#include <functional>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/ir/task.h"

namespace kf {

// accepts(exprs): whether a scheduler takes this set of exprs as one segment
// (asked for library patterns too).
using AcceptsGroup = std::function<bool(const std::vector<int64_t>& exprs)>;

// Returns groups of expr indices, each sorted, in run order.
std::vector<std::vector<int64_t>> group_exprs(const ConcreteFusion& c, const AcceptsGroup& accepts,
                                             bool merge_reductions = true);

}  // namespace kf
