#include "core/schedule/online_softmax.h"

#include <algorithm>

namespace kf {

namespace {

// The expr of the task producing `v`, or nullptr (a task input).
const Expr* producer_in(const Fusion& f, const Task& task, int64_t v) {
  if (std::find(task.inputs.begin(), task.inputs.end(), v) != task.inputs.end()) return nullptr;
  const int64_t p = f.value(v).producer;
  return p < 0 ? nullptr : &f.exprs[static_cast<size_t>(p)];
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> online_softmax_pairs(const Fusion& f, const Task& task, const RowDomain& rows) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t ph = 1; ph < rows.phases.size(); ++ph)
    for (int64_t si : rows.phases[ph]) {
      const Expr& sum = f.exprs[static_cast<size_t>(si)];
      if (sum.op != Op::SUM || f.value(sum.inputs[0]).dtype != DType::F32) continue;
      const Expr* ex = producer_in(f, task, sum.inputs[0]);
      if (ex == nullptr || ex->op != Op::EXP) continue;
      const Expr* sub = producer_in(f, task, ex->inputs[0]);
      if (sub == nullptr || sub->op != Op::SUB) continue;
      const int64_t a = sub->inputs[0];
      int64_t m = sub->inputs[1];
      // m' back to m through shape ops (the keepdim=false case's unsqueeze).
      for (const Expr* e = producer_in(f, task, m); e != nullptr && op_info(e->op).category == OpCategory::Shape;
           e = producer_in(f, task, m))
        m = e->inputs[0];
      const Expr* mx = producer_in(f, task, m);
      if (mx == nullptr || mx->op != Op::MAX || mx->inputs[0] != a || f.value(a).dtype != DType::F32 ||
          f.value(m).dtype != DType::F32)
        continue;
      const int64_t mi = f.value(m).producer;
      if (std::find(rows.phases[ph - 1].begin(), rows.phases[ph - 1].end(), mi) == rows.phases[ph - 1].end()) continue;
      pairs.emplace_back(mi, si);
    }
  return pairs;
}

std::vector<std::vector<int64_t>> online_phases(const RowDomain& rows,
                                                const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::vector<std::vector<int64_t>> phases = rows.phases;
  for (const auto& [mi, si] : pairs)
    for (size_t ph = 1; ph < phases.size(); ++ph) {
      auto it = std::find(phases[ph].begin(), phases[ph].end(), si);
      if (it == phases[ph].end()) continue;
      phases[ph].erase(it);
      phases[ph - 1].push_back(si);
    }
  std::erase_if(phases, [](const std::vector<int64_t>& p) { return p.empty(); });
  return phases;
}

}  // namespace kf
