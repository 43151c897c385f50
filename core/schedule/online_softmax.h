// Online softmax normalizer: a row's max and its sum of exp(x - max)
// computed in one pass instead of two (Milakov and Gimelshein, "Online
// normalizer calculation for softmax", arXiv:1805.02867). Each thread
// keeps the pair (m, s) for its elements; two pairs combine as
// m = max(m1, m2), s = s1 * exp(m1 - m) + s2 * exp(m2 - m). Softmax,
// log-softmax, log-sum-exp and cross-entropy then need one block-wide
// reduction for both statistics, a streamed row is read once less, and a
// row whose only outputs are row statistics (cross-entropy's loss) is read
// in a single pass.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/ir/task.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

// The (max expr, sum expr) pairs of `rows` that one pass can compute: a
// float32 sum(exp(sub(a, m'))) in the phase after m = max(a) of the same
// value a, m' being m seen through shape ops only (unsqueeze, expand).
std::vector<std::pair<int64_t, int64_t>> online_softmax_pairs(const Fusion& f, const Task& task, const RowDomain& rows);

// `rows.phases` with each pair's sum moved into its max's phase (phases
// left empty dropped): the phases a kernel computing the pairs online runs.
std::vector<std::vector<int64_t>> online_phases(const RowDomain& rows,
                                                const std::vector<std::pair<int64_t, int64_t>>& pairs);

}  // namespace kf
