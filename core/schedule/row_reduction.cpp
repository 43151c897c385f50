// The row scheduler (reductions and normalizations): one block per row.
// When the innermost dim is reduced, the row can be held in registers as
// 16-byte vectors (the block then sized per call to the row), or, when it
// is too long for them, staged in shared memory; any row, and any layout,
// also runs re-read from memory in every phase.
#include <algorithm>

#include "core/schedule/schedulers.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {
constexpr int kStreamingBlock = 256;
constexpr int kCachedBlock = 1024;  // the most threads a row may need (the block is chosen per call)
}  // namespace

RowParams schedule_row(const ConcreteFusion& c, const Task& task, const RowDomain& rows, const Tuning& tuning) {
  RowParams p;
  p.rows = rows;
  p.vectors_per_thread = tuning.row_vectors;
  const size_t r = rows.reduced.size();
  if (r > 0 && rows.reduced[r - 1] && c.size_classes[static_cast<size_t>(rows.domain)][r - 1] == SizeClass::Many)
    p.vectors = plan_vectors(c, task, rows.domain_outputs, rows.domain, r - 1);
  p.block = p.vectors.width > 0 ? kCachedBlock : kStreamingBlock;
  // Staged: the vector inputs read at every element of the row and varying
  // across rows (x, dy); those broadcast over the rows (weights) are reused
  // by every row from the caches and would only cost shared memory. Only
  // rows read more than once: a single pass (a plain row sum) gains nothing.
  const bool output_pass = !rows.domain_outputs.empty();
  if (rows.phases.size() + (output_pass ? 1 : 0) < 2) return p;
  for (const auto& [in, dims] : p.vectors.inputs) {
    bool whole_row = true, varies = false;
    for (size_t d = 0; d < r; ++d) {
      const bool read = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
      if (rows.reduced[d]) whole_row = whole_row && read;
      else varies = varies || (read && c.size_classes[static_cast<size_t>(rows.domain)][d] == SizeClass::Many);
    }
    if (whole_row && varies) p.staged.push_back(in);
  }
  return p;
}

}  // namespace kf
