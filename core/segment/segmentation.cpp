#include "core/segment/segmentation.h"

#include "core/schedule/in_place.h"
#include "core/segment/grouping.h"
#include "core/segment/recompute.h"

#include <algorithm>
#include <set>

namespace kf {

namespace {

// Which values each expr's outputs flow to, for building Tasks of groups.
struct Consumers {
  std::vector<std::vector<int64_t>> of;  // value id -> expr indices
  std::vector<bool> is_output;
  explicit Consumers(const Fusion& f) : of(f.values.size()), is_output(f.values.size(), false) {
    for (size_t i = 0; i < f.exprs.size(); ++i)
      for (int64_t in : f.exprs[i].inputs) of[static_cast<size_t>(in)].push_back(static_cast<int64_t>(i));
    for (const Output& o : f.outputs) is_output[static_cast<size_t>(o.value)] = true;
  }
};

// exprs must be sorted. `groups_of` (empty while grouping): per expr, the
// groups that hold it; a reader in groups that all compute the value
// themselves (recompute.h) does not make it an output.
Task task_of_group(const Fusion& f, const Consumers& consumers, const std::vector<int64_t>& exprs,
                   const std::vector<std::vector<int64_t>>& groups = {},
                   const std::vector<std::vector<size_t>>& groups_of = {}) {
  auto used_outside = [&](int64_t out) {
    size_t id = static_cast<size_t>(out);
    if (consumers.is_output[id]) return true;
    const int64_t p = f.value(out).producer;
    for (int64_t c : consumers.of[id]) {
      if (std::binary_search(exprs.begin(), exprs.end(), c)) continue;
      if (groups_of.empty() || groups_of[static_cast<size_t>(c)].empty()) return true;
      for (size_t h : groups_of[static_cast<size_t>(c)])
        if (!std::binary_search(groups[h].begin(), groups[h].end(), p)) return true;
    }
    return false;
  };
  return make_task(f, exprs, used_outside);
}

}  // namespace

Segmentation segment_fusion(const ConcreteFusion& concrete, const Tuning& tuning) {
  const ConcreteFusion* c = &concrete;
  const Fusion& f = *c->fusion;
  Segmentation result;
  Segmentation* seg = &result;
  seg->concrete = c;
  Consumers consumers(f);
  auto accepts = [&](const std::vector<int64_t>& exprs) {
    return schedule_segment(*c, task_of_group(f, consumers, exprs), tuning).accepted;
  };
  std::vector<std::vector<int64_t>> groups = group_exprs(*c, accepts, tuning.merge_sibling_reductions != 0);
  if (tuning.recompute_gathered != 0) {
    auto accepts_recomputing = [&](const std::vector<int64_t>& exprs, const std::vector<int64_t>& recomputed) {
      auto used_outside = [&](int64_t out) {
        const size_t id = static_cast<size_t>(out);
        if (consumers.is_output[id]) return true;
        if (std::binary_search(recomputed.begin(), recomputed.end(), f.value(out).producer)) return false;
        for (int64_t r : consumers.of[id])
          if (!std::binary_search(exprs.begin(), exprs.end(), r)) return true;
        return false;
      };
      return schedule_segment(*c, make_task(f, exprs, used_outside), tuning).accepted;
    };
    recompute_gathered_operands(f, accepts_recomputing, &groups);
  }
  std::vector<std::vector<size_t>> groups_of(f.exprs.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t e : groups[g]) groups_of[static_cast<size_t>(e)].push_back(g);

  std::vector<bool> produced_by_segment(f.values.size(), false);
  std::vector<int64_t> last_reader(f.values.size(), -1);
  for (auto& g : groups) {
    Segment s;
    s.task = task_of_group(f, consumers, g, groups, groups_of);
    s.scheduler = classify_task(f, s.task);
    s.schedule = schedule_segment(*c, s.task, tuning, &s.unscheduled_why).schedule;
    if (s.schedule && s.scheduler != SchedulerKind::Library && s.scheduler != SchedulerKind::Communication) {
      s.scheduler = kind_of(*s.schedule);
      s.in_place_inputs = inputs_read_where_written(*c, s.task, *s.schedule);
    }
    if (s.scheduler == SchedulerKind::Library && s.task.exprs.size() > 1) {
      Task pattern = s.task;  // the whole segment is the pattern
      s.task.children.push_back(std::move(pattern));
    }
    std::set<int64_t> extents;
    for (int64_t ei : s.task.exprs)
      for (int64_t out : f.exprs[static_cast<size_t>(ei)].outputs)
        for (int64_t d : c->extent_deps[static_cast<size_t>(out)])
          if (d < 0) extents.insert(d);
    s.api_inputs = s.task.inputs;
    for (auto it = extents.rbegin(); it != extents.rend(); ++it) s.api_inputs.push_back(*it);
    const int64_t index = static_cast<int64_t>(seg->segments.size());
    for (int64_t in : s.task.inputs) last_reader[static_cast<size_t>(in)] = index;
    for (int64_t out : s.task.outputs) produced_by_segment[static_cast<size_t>(out)] = true;
    seg->segments.push_back(std::move(s));
  }
  for (size_t id = 0; id < f.values.size(); ++id) {
    if (!produced_by_segment[id] || consumers.is_output[id] || last_reader[id] < 0) continue;
    seg->segments[static_cast<size_t>(last_reader[id])].dead_after.push_back(static_cast<int64_t>(id));
  }
  seg->run_plan = plan_run(f, seg->segments, c->relayout_outputs, c->relayout_inputs);
  return result;
}

}  // namespace kf
