// The column scheduler: reductions over outer dims with the innermost dim
// in memory kept (sum over rows of a row-major matrix, over the columns of
// a transposed one; RowDomain::order). Rows are strided in memory,
// so one block per row would read one element per row; instead a block
// reduces a slab of rows for a tile of contiguous columns, and the rows are
// split over blocks whose partials a second kernel combines in order.
// Domain-shaped outputs that do not read a reduction result (a bias
// gradient's grad input) are written where kernel 1 visits each element,
// exactly once; a normalization over the outer dims (softmax over dim 0)
// runs its phases one after the other and an epilogue writes the outputs
// (kernel_schedule.h).
#include "core/schedule/online_softmax.h"
#include "core/schedule/row_domain.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/why_not.h"
#include "core/schedule/vector_plan.h"

namespace kf {

std::optional<ColumnParams> schedule_column(const ConcreteFusion& c, const Task& task, const RowDomain& rows,
                                            const Tuning& tuning, std::string* why) {
  // The innermost dim in memory, not the last logical one: a transposed
  // input reduced over its logical last dim is a column reduction in memory.
  const std::optional<size_t> inner = innermost_dim(c, rows);
  if (!inner || rows.reduced[*inner]) return reject(why, "the innermost dim in memory is reduced, or every dim is of size class 0/1");
  ColumnParams p;
  p.rows = rows;
  p.grid = grid_targets(tuning);
  p.scalar_rows = tuning.column_scalar_rows;
  p.any_rows = tuning.column_any_rows;
  p.vectors = plan_vectors(c, task, plain_domain_outputs(rows), rows.domain, *inner);
  // Inputs read at one index for all of a thread's columns (an index_select's
  // index, a per-row weight) neither take vectors nor narrow them.
  drop_lane_invariant(c, task, row_accesses(c, task, rows), &p.vectors);
  add_view_vectors(c, rows, &p.vectors);
  if (!rows.normalizes && p.rows.phases.size() == 1) p.short_rows = tuning.column_short_rows;
  if (rows.normalizes || tuning.column_online_statistics != 0) {
    p.online = online_softmax_pairs(*c.fusion, task, rows);
    p.rows.phases = online_phases(rows, p.online);
  }
  if (rows.normalizes && p.vectors.width > 0 && p.vectors.inputs.size() <= 1 && tuning.column_epilogue_blocks > 1)
    p.epilogue_blocks = tuning.column_epilogue_blocks;
  return p;
}

}  // namespace kf
