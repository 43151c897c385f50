// The column scheduler: reductions over outer dims with the innermost dim
// kept (sum over rows of a row-major matrix). Rows are strided in memory,
// so one block per row would read one element per row; instead a block
// reduces a slab of rows for a tile of contiguous columns, and the rows are
// split over blocks whose partials a second kernel combines in order.
// Domain-shaped outputs that do not read a reduction result (a bias
// gradient's grad input) are written where kernel 1 visits each element,
// exactly once.
#include "core/schedule/schedulers.h"
#include "core/schedule/why_not.h"
#include "core/schedule/vector_plan.h"

namespace kf {

std::optional<ColumnParams> schedule_column(const ConcreteFusion& c, const Task& task, const RowDomain& rows,
                                            std::string* why) {
  const size_t r = rows.reduced.size();
  if (rows.normalizes) return reject(why, "domain-shaped outputs that read a reduction result");
  if (rows.phases.size() != 1) return reject(why, "reductions in several phases");
  if (r == 0 || rows.reduced[r - 1] || c.size_classes[static_cast<size_t>(rows.domain)][r - 1] != SizeClass::Many)
    return reject(why, "the innermost dim is reduced or of size class 0/1");
  for (int64_t ei : rows.phases[0]) {
    const Op op = c.fusion->exprs[static_cast<size_t>(ei)].op;
    if (op == Op::VAR || op == Op::VAR_MEAN) return reject(why, "a variance (Welford partials are not split)");
  }
  ColumnParams p;
  p.rows = rows;
  p.vectors = plan_vectors(c, task, rows.domain_outputs, rows.domain, r - 1);
  return p;
}

}  // namespace kf
