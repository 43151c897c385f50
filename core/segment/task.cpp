#include "core/segment/task.h"

#include <algorithm>

namespace kf {

Task make_task(const Fusion& fusion, std::vector<int64_t> exprs,
               const std::vector<bool>& used_outside) {
  Task t;
  std::sort(exprs.begin(), exprs.end());  // fusion order is a valid run order
  t.exprs = std::move(exprs);
  std::vector<bool> produced(fusion.values.size(), false), listed(fusion.values.size(), false);
  for (int64_t e : t.exprs)
    for (int64_t out : fusion.exprs[static_cast<size_t>(e)].outputs) produced[static_cast<size_t>(out)] = true;
  for (int64_t e : t.exprs)
    for (int64_t in : fusion.exprs[static_cast<size_t>(e)].inputs) {
      size_t i = static_cast<size_t>(in);
      if (produced[i] || listed[i] || fusion.value(in).kind == ValueKind::Constant) continue;
      listed[i] = true;
      t.inputs.push_back(in);
    }
  for (int64_t e : t.exprs)
    for (int64_t out : fusion.exprs[static_cast<size_t>(e)].outputs)
      if (used_outside[static_cast<size_t>(out)]) t.outputs.push_back(out);
  return t;
}

Task root_task(const Fusion& fusion) {
  std::vector<int64_t> all(fusion.exprs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  std::vector<bool> used_outside(fusion.values.size(), false);
  for (const Output& o : fusion.outputs) used_outside[static_cast<size_t>(o.value)] = true;
  return make_task(fusion, std::move(all), used_outside);
}

}  // namespace kf
