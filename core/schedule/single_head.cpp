#include "core/schedule/single_head.h"

#include "core/ir/op_table.h"

namespace kf {

std::optional<int64_t> single_head_expr(const ConcreteFusion& c, const Task& task, OpCategory head,
                                        const std::string& noun, std::string* why) {
  const Fusion& f = *c.fusion;
  auto reject = [why](std::string reason) -> std::optional<int64_t> {
    if (why != nullptr) *why = std::move(reason);
    return std::nullopt;
  };
  int64_t found = -1;
  for (int64_t ei : task.exprs) {
    const Op op = f.exprs[static_cast<size_t>(ei)].op;
    const OpCategory cat = op_info(op).category;
    if (cat == head) {
      if (found >= 0) return reject("two " + noun + "s in one task (each runs alone)");
      found = ei;
    } else if (!is_pointwise(op) && cat != OpCategory::Shape && cat != OpCategory::Creation &&
               cat != OpCategory::Indexing && cat != OpCategory::Query) {
      return reject("a " + noun + " with a " + std::string(op_name(op)) + " (only its producers computed inline join it)");
    }
  }
  if (found < 0) return reject("no " + noun + " in the task");
  const Expr& e = f.exprs[static_cast<size_t>(found)];
  if (task.outputs.size() != 1 || task.outputs[0] != e.outputs[0])
    return reject("a " + noun + " task must write the " + noun + "'s result and nothing else");
  return found;
}

}  // namespace kf
