#include "core/schedule/scheduler_kind.h"

#include <vector>

namespace kf {

std::string_view scheduler_name(SchedulerKind kind) {
  switch (kind) {
    case SchedulerKind::Pointwise: return "pointwise";
    case SchedulerKind::Reduction: return "reduction";
    case SchedulerKind::Normalization: return "normalization";
    case SchedulerKind::Library: return "library";
    case SchedulerKind::NoOp: return "no_op";
    case SchedulerKind::Communication: return "communication";
    case SchedulerKind::Scatter: return "scatter";
    case SchedulerKind::Scan: return "scan";
  }
  return "unknown";
}

SchedulerKind classify_task(const Fusion& fusion, const Task& task) {
  if (task.exprs.empty()) return SchedulerKind::NoOp;
  bool has_reduction = false;
  for (int64_t ei : task.exprs) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    auto cat = op_info(e.op).category;
    if (cat == OpCategory::Library) return SchedulerKind::Library;
    if (cat == OpCategory::Communication) return SchedulerKind::Communication;
    if (cat == OpCategory::Scatter) return SchedulerKind::Scatter;
    if (cat == OpCategory::Scan) return SchedulerKind::Scan;
    if (cat == OpCategory::Reduction) has_reduction = true;
  }
  if (!has_reduction) return SchedulerKind::Pointwise;
  // Values downstream of some reduction (inside the task).
  std::vector<bool> reduced(fusion.values.size(), false);
  for (int64_t ei : task.exprs) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    bool from_reduction = op_info(e.op).category == OpCategory::Reduction;
    bool meets_input = false, any_reduced = false;
    for (int64_t in : e.inputs) {
      if (reduced[static_cast<size_t>(in)]) any_reduced = true;
      else if (!fusion.value(in).is_scalar) meets_input = true;
    }
    if (any_reduced && meets_input && !from_reduction) return SchedulerKind::Normalization;
    if (from_reduction || any_reduced)
      for (int64_t out : e.outputs) reduced[static_cast<size_t>(out)] = true;
  }
  return SchedulerKind::Reduction;
}

}  // namespace kf
