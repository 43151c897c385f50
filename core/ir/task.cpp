#include "core/ir/task.h"

#include <algorithm>
#include <unordered_set>

namespace kf {

Task make_task(const Fusion& fusion, std::vector<int64_t> exprs,
               const std::function<bool(int64_t)>& used_outside) {
  Task t;
  std::sort(exprs.begin(), exprs.end());  // fusion order is a valid run order
  t.exprs = std::move(exprs);
  std::unordered_set<int64_t> produced, listed;
  for (int64_t e : t.exprs)
    for (int64_t out : fusion.exprs[static_cast<size_t>(e)].outputs) produced.insert(out);
  for (int64_t e : t.exprs)
    for (int64_t in : fusion.exprs[static_cast<size_t>(e)].inputs) {
      if (produced.count(in) || fusion.value(in).kind == ValueKind::Constant) continue;
      if (listed.insert(in).second) t.inputs.push_back(in);
    }
  // A value that only dead exprs read outside the set is not handed out:
  // they never run (a definition may hold some, and the simplify stage
  // leaves the sqrt of a reciprocal(sqrt(x)) it rewrote).
  for (int64_t e : t.exprs)
    for (int64_t out : fusion.exprs[static_cast<size_t>(e)].outputs)
      if (used_outside(out) && fusion.needed_outside(out, t.exprs)) t.outputs.push_back(out);
  return t;
}

Task root_task(const Fusion& fusion) {
  std::vector<int64_t> all(fusion.exprs.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  std::vector<bool> is_output(fusion.values.size(), false);
  for (const Output& o : fusion.outputs) is_output[static_cast<size_t>(o.value)] = true;
  return make_task(fusion, std::move(all), [&](int64_t id) { return is_output[static_cast<size_t>(id)]; });
}

}  // namespace kf
