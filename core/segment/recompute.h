// Recomputed gather operands: a gather or index_select reads its data
// operand only at the indices. Where that operand is computed in another
// group, from the fusion's inputs by pointwise ops alone, and is not a
// fusion output, the gather's group computes it again at the gathered
// elements instead of reading it materialized: cross-entropy's
// gather(cast(logits), label) had its float32 logits written whole by the
// log-sum-exp's kernel for one element a row (seed 1857099843 c0010:
// 1.65 GB written and re-read for 16 KB; docs/perf-log.md session 50).
// The groups then share the chain's exprs (each computes its own values);
// `shared_producer` tells segmentation which outputs stop crossing.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/ir/fusion.h"
#include "core/segment/grouping.h"

namespace kf {

// accepts(exprs, recomputed): whether a scheduler takes `exprs` as one
// segment where the values of `recomputed` (a subset) are computed again
// there and so are none of its outputs.
using AcceptsRecomputing =
    std::function<bool(const std::vector<int64_t>& exprs, const std::vector<int64_t>& recomputed)>;

// Adds to each group the pointwise chains of its gathers' data operands
// (up to kMaxRecomputed exprs each) where `accepts` takes the group with
// them; groups stay sorted.
void recompute_gathered_operands(const Fusion& f, const AcceptsRecomputing& accepts,
                                 std::vector<std::vector<int64_t>>* groups);

inline constexpr size_t kMaxRecomputed = 8;

}  // namespace kf
