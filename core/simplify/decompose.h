// Decompositions: ops that kfuse defines in terms of others, rewritten
// once per definition before anything else sees the exprs (unlike
// simplify's rewrites, they are not optional: no backend implements the
// ops themselves). Same contract as simplify: every value id keeps its
// meaning, the last expr of a replacement computes the defined value, new
// intermediates get new ids, records are untouched.
//
//   argmax(x) {axes=[d], keepdim=k}   (argmin: min in place of max)
//     m   = max(x) {axes=[d], keepdim=true}
//     hit = eq(x, m)  [or isnan(x), for floats: NaN is the maximum]
//     i   = iota(size(x, d), 0, 1) as int64, laid along dim d
//     idx = min(where(hit, i, INT64_MAX)) {axes=[d], keepdim=k}
//   The first index of the extreme value, as torch; every scheduler that
//   runs a softmax (a reduction, then the input again) runs it.
#pragma once

#include <cstddef>

#include "core/ir/fusion.h"

namespace kf {

// Rewrites fusion.exprs in place; returns the number of decompositions.
// Call before simplify and Fusion::finish.
size_t decompose(Fusion& fusion);

}  // namespace kf
