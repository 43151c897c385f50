#include "core/schedule/registry.h"

#include "core/schedule/row_domain.h"
#include "core/schedule/schedulers.h"

namespace kf {

ScheduleProposal propose_schedule(const ConcreteFusion& c, const Task& task, const Tuning& tuning) {
  const Fusion& f = *c.fusion;
  ScheduleProposal p;
  if (task.exprs.empty()) {
    p.why = "the task has no exprs (nothing to generate)";
    return p;
  }
  if (task.outputs.empty()) {
    p.why = "the task has no outputs";
    return p;
  }
  bool reduces = false;
  for (int64_t ei : task.exprs) {
    const OpCategory cat = op_info(f.exprs[static_cast<size_t>(ei)].op).category;
    if (cat == OpCategory::Library) {
      p.why = "matmul runs as a library segment (cuBLASLt)";
      return p;
    }
    if (cat == OpCategory::Communication) {
      p.why = "communication runs through the call's communicator";
      return p;
    }
    if (cat == OpCategory::Scan) {
      if (std::optional<ScanParams> s = schedule_scan(c, task, tuning, &p.why)) p.schedule = *s;
      return p;
    }
    if (cat == OpCategory::Scatter) {
      if (std::optional<ScatterParams> s = schedule_scatter(c, task, tuning, &p.why)) p.schedule = *s;
      return p;
    }
    reduces = reduces || cat == OpCategory::Reduction;
  }
  if (!reduces) {
    if (std::optional<TiledParams> t = schedule_tiled(c, task, tuning, nullptr)) p.schedule = std::move(*t);
    else p.schedule = schedule_pointwise(c, task, tuning);
    return p;
  }
  const std::optional<RowDomain> rows = find_row_domain(c, task, &p.why);
  if (!rows) {
    std::string why_not;
    if (std::optional<RowParams> io = schedule_inner_outer(c, task, tuning, &why_not)) {
      p.schedule = std::move(*io);
      p.why.clear();
    }
    return p;
  }
  if (std::optional<ColumnParams> col = schedule_column(c, task, *rows, tuning, nullptr)) p.schedule = std::move(*col);
  else p.schedule = schedule_row(c, task, *rows, tuning);
  return p;
}

}  // namespace kf
