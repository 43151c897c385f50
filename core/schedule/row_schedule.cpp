#include "core/schedule/row_schedule.h"

#include <unordered_map>

#include <algorithm>

#include "core/schedule/extent_sets.h"

namespace kf {

namespace {

bool reject(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return false;
}

std::vector<bool> reduced_dims(const Expr& e, size_t rank) {
  const size_t first_axis = (e.op == Op::VAR || e.op == Op::VAR_MEAN) ? 2 : 1;
  std::vector<bool> reduced(rank, false);
  for (size_t i = first_axis; i < e.attrs.size(); ++i) reduced[static_cast<size_t>(e.attrs[i])] = true;
  return reduced;
}

// Whether `v` is row-shaped: the domain's kept dims, with (keepdim) or
// without the reduced dims as size-1 dims.
bool is_row_shaped(const ConcreteFusion& c, const ExtentSets& sets, const RowSchedule& s, int64_t v) {
  const auto& vc = c.size_classes[static_cast<size_t>(v)];
  const size_t r = s.reduced.size();
  size_t kept = 0;
  for (bool b : s.reduced) kept += !b;
  if (vc.size() == r) {
    for (size_t d = 0; d < r; ++d) {
      if (s.reduced[d] ? vc[d] != SizeClass::One
                       : !sets.same(v, static_cast<int>(d), s.domain, static_cast<int>(d)))
        return false;
    }
    return true;
  }
  if (vc.size() != kept) return false;
  size_t k = 0;
  for (size_t d = 0; d < r; ++d) {
    if (s.reduced[d]) continue;
    if (!sets.same(v, static_cast<int>(k), s.domain, static_cast<int>(d))) return false;
    ++k;
  }
  return true;
}

}  // namespace

bool schedule_row(const ConcreteFusion& c, const Task& task, RowSchedule* out, std::string* why) {
  const Fusion& f = *c.fusion;
  RowSchedule s;
  if (task.exprs.empty()) return reject(why, "the task has no exprs (nothing to generate)");
  if (task.outputs.empty()) return reject(why, "the task has no outputs");
  std::vector<int64_t> reductions;
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    const OpCategory cat = op_info(e.op).category;
    if (cat == OpCategory::Library) return reject(why, "matmul runs as a library segment (cuBLASLt)");
    if (cat == OpCategory::Reduction) reductions.push_back(ei);
  }
  const ExtentSets& sets = extent_sets_of(c);

  if (reductions.empty()) {
    s.kind = SchedulerKind::Pointwise;
    for (int64_t o : task.outputs) {
      auto it = std::find_if(s.loops.begin(), s.loops.end(),
                             [&](const std::vector<int64_t>& l) { return sets.same_sizes(l[0], o); });
      if (it == s.loops.end()) s.loops.push_back({o});
      else it->push_back(o);
    }
    *out = std::move(s);
    return true;
  }

  // Every reduction reduces the same dims of a domain of the same sizes.
  const Expr& first = f.exprs[static_cast<size_t>(reductions[0])];
  s.domain = first.inputs[0];
  const size_t rank = c.size_classes[static_cast<size_t>(s.domain)].size();
  s.reduced = reduced_dims(first, rank);
  for (int64_t ei : reductions) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    const int64_t in = e.inputs[0];
    if (!sets.same_sizes(in, s.domain) ||
        reduced_dims(e, c.size_classes[static_cast<size_t>(in)].size()) != s.reduced)
      return reject(why, "reductions over different domains: " + std::string(op_name(e.op)) +
                             " of value " + std::to_string(in) + " and " +
                             std::string(op_name(first.op)) + " of value " +
                             std::to_string(s.domain) +
                             " do not reduce the same dims of provably equal sizes");
  }

  // Phase of each reduction: how many reductions lie upstream of its input.
  // A map sized by the task, not the fusion: segmentation asks about many
  // small groups of one large fusion.
  std::unordered_map<int64_t, int64_t> level;
  level.reserve(task.exprs.size() * 2);
  auto level_of = [&level](int64_t v) {
    auto it = level.find(v);
    return it == level.end() ? int64_t{0} : it->second;
  };
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    int64_t l = 0;
    for (int64_t in : e.inputs) l = std::max(l, level_of(in));
    if (op_info(e.op).category == OpCategory::Reduction) {
      if (static_cast<size_t>(l) >= s.phases.size()) s.phases.resize(static_cast<size_t>(l) + 1);
      s.phases[static_cast<size_t>(l)].push_back(ei);
      ++l;
    }
    for (int64_t o : e.outputs) level[o] = l;
  }

  bool normalizes = false;
  for (int64_t o : task.outputs) {
    if (sets.same_sizes(o, s.domain)) {
      s.domain_outputs.push_back(o);
      if (level_of(o) > 0) normalizes = true;
    } else if (level_of(o) > 0 && is_row_shaped(c, sets, s, o)) {
      s.row_outputs.push_back(o);
    } else {
      return reject(why, "output value " + std::to_string(o) +
                             " has sizes that neither the reduction domain (value " +
                             std::to_string(s.domain) + ") nor its rows provably have");
    }
  }
  s.kind = normalizes ? SchedulerKind::Normalization : SchedulerKind::Reduction;
  *out = std::move(s);
  return true;
}

}  // namespace kf
