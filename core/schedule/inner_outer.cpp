// The inner-outer scheduler (nvFuser's "inner-outer persistent"): a task
// whose reductions reduce either the domain's inner dims (per row, like a
// normalization) or exactly the remaining outer dims (per column), as norm
// backward does: grad input needs row sums, grad weight and bias are column
// sums. One row kernel computes the rows and accumulates the column sums of
// its rows into per-block partials; a small second kernel finishes them.
// Without it such a task is cut into a row segment and column segments
// with full-size intermediates between them.
#include <algorithm>
#include <set>

#include "core/concretize/extent_sets.h"
#include "core/schedule/why_not.h"
#include "core/schedule/row_domain.h"
#include "core/schedule/schedulers.h"

namespace kf {

std::optional<RowParams> schedule_inner_outer(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                              std::string* why) {
  const Fusion& f = *c.fusion;
  const ExtentSets& sets = extent_sets_of(c);
  // The reductions by pattern: inner ones reduce the logical innermost dim.
  // (Still the logical one, not RowDomain::order's: with a transposed input
  // the row kernel then runs without vectors, correct but strided.)
  std::vector<int64_t> inner, outer;
  std::vector<bool> inner_dims, outer_dims;
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (op_info(e.op).category != OpCategory::Reduction) continue;
    const std::vector<bool> dims = reduced_dims(e, c.size_classes[static_cast<size_t>(e.inputs[0])].size());
    if (dims.empty()) return reject(why, "a reduction of a rank-0 value");
    std::vector<bool>& pattern = dims.back() ? inner_dims : outer_dims;
    if (!pattern.empty() && pattern != dims) return reject(why, "reductions over more than two sets of dims");
    pattern = dims;
    (dims.back() ? inner : outer).push_back(ei);
  }
  if (inner.empty() || outer.empty()) return reject(why, "not both row and column reductions");
  if (inner_dims.size() != outer_dims.size()) return reject(why, "row and column reductions of different ranks");
  for (size_t d = 0; d < inner_dims.size(); ++d)
    if (inner_dims[d] == outer_dims[d]) return reject(why, "column reductions that do not reduce exactly the kept dims");

  // Column results are complete only after every row: task outputs only.
  std::set<int64_t> outer_results;
  for (int64_t ei : outer) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (e.op == Op::VAR || e.op == Op::VAR_MEAN) return reject(why, "a column variance (Welford partials are not split)");
    for (int64_t o : e.outputs) outer_results.insert(o);
  }
  Task rows_task;
  rows_task.inputs = task.inputs;
  std::vector<int64_t> outer_inputs;
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (std::find(outer.begin(), outer.end(), ei) != outer.end()) {
      outer_inputs.push_back(e.inputs[0]);
      continue;
    }
    for (int64_t in : e.inputs)
      if (outer_results.contains(in)) return reject(why, "a column reduction's result is used inside the task");
    rows_task.exprs.push_back(ei);
  }
  std::vector<int64_t> outer_outputs;
  for (int64_t o : task.outputs) (outer_results.contains(o) ? outer_outputs : rows_task.outputs).push_back(o);
  if (rows_task.outputs.empty()) return reject(why, "no row outputs");

  const std::optional<RowDomain> rows = find_row_domain(c, rows_task, why, outer_inputs);
  if (!rows) return std::nullopt;
  for (int64_t in : outer_inputs)
    if (!sets.same_sizes(in, rows->domain)) return reject(why, "a column reduction over another domain than the rows'");

  RowDomain o;
  o.domain = rows->domain;
  o.reduced = outer_dims;
  o.order = rows->order;  // (the finishing kernel walks the columns as the rows' kernel wrote them)
  o.phases = {outer};
  o.row_outputs = outer_outputs;
  Tuning t = tuning;
  t.row_vectors = tuning.inner_outer_vectors;
  t.row_stream_single_pass = 0;  // (their rows keep the register kernel)
  t.row_across_outputs = 0;      // (the across kernel has no outer reductions)
  RowParams p = schedule_row(c, task, *rows, t);
  // Column partials per thread (elements a thread holds, times outer
  // reductions) past Tuning::inner_outer_partials: one vector (layernorm
  // backward in bf16 keeps dw's and db's partials of 2 x 8 elements).
  const size_t partials = static_cast<size_t>(p.vectors.width) * static_cast<size_t>(p.vectors_per_thread) * outer.size();
  if (t.row_vectors > 1 && partials > static_cast<size_t>(tuning.inner_outer_partials)) {
    t.row_vectors = 1;
    p = schedule_row(c, task, *rows, t);
  }
  p.outer = std::move(o);
  p.cluster_max = 0;  // (the cluster row kernel has no outer reductions)
  p.cluster_stageable = false;
  p.stage_outer = !p.staged.empty();
  p.outer_threads_per_sm = tuning.inner_outer_threads_per_sm;
  p.kernels = plan_row_kernels(p, tuning);  // (again: the outer reductions change them)
  return p;
}

}  // namespace kf
