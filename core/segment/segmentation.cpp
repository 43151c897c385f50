#include "core/segment/segmentation.h"

#include <algorithm>
#include <mutex>
#include <set>

namespace kf {

namespace {

// Stage of each expr: segment_set starts a new stage after its producer.
std::vector<int64_t> expr_stages(const Fusion& f) {
  std::vector<int64_t> value_stage(f.values.size(), 0), stage(f.exprs.size(), 0);
  for (size_t i = 0; i < f.exprs.size(); ++i) {
    const Expr& e = f.exprs[i];
    int64_t s = 0;
    for (int64_t in : e.inputs) s = std::max(s, value_stage[static_cast<size_t>(in)]);
    if (e.op == Op::SEGMENT_SET) ++s;
    stage[i] = s;
    for (int64_t out : e.outputs) value_stage[static_cast<size_t>(out)] = s;
  }
  return stage;
}

}  // namespace

std::shared_ptr<Segmentation> segment_fusion(const ConcreteFusion& concrete) {
  const ConcreteFusion* c = &concrete;
  const Fusion& f = *c->fusion;
  auto seg = std::make_shared<Segmentation>();
  seg->concrete = c;
  std::vector<int64_t> stage = expr_stages(f);
  int64_t num_stages = f.exprs.empty() ? 0 : *std::max_element(stage.begin(), stage.end()) + 1;

  // A value is used outside its segment when it is a fusion output or an
  // expr of another stage reads it.
  std::vector<int64_t> producer_stage(f.values.size(), -1);
  for (size_t i = 0; i < f.exprs.size(); ++i)
    for (int64_t out : f.exprs[i].outputs) producer_stage[static_cast<size_t>(out)] = stage[i];
  std::vector<bool> used_outside(f.values.size(), false);
  for (const Output& o : f.outputs) used_outside[static_cast<size_t>(o.value)] = true;
  for (size_t i = 0; i < f.exprs.size(); ++i)
    for (int64_t in : f.exprs[i].inputs) {
      int64_t ps = producer_stage[static_cast<size_t>(in)];
      if (ps >= 0 && ps != stage[i]) used_outside[static_cast<size_t>(in)] = true;
    }

  std::vector<std::vector<int64_t>> groups(static_cast<size_t>(num_stages));
  for (size_t i = 0; i < f.exprs.size(); ++i) groups[static_cast<size_t>(stage[i])].push_back(static_cast<int64_t>(i));

  std::vector<bool> is_output(f.values.size(), false);
  for (const Output& o : f.outputs) is_output[static_cast<size_t>(o.value)] = true;
  std::vector<int64_t> last_reader(f.values.size(), -1);
  for (auto& g : groups) {
    Segment s;
    s.task = make_task(f, std::move(g), used_outside);
    s.scheduler = classify_task(f, s.task);
    std::set<int64_t> extents;
    for (int64_t ei : s.task.exprs)
      for (int64_t out : f.exprs[static_cast<size_t>(ei)].outputs)
        for (int64_t d : c->extent_deps[static_cast<size_t>(out)])
          if (d < 0) extents.insert(d);
    s.api_inputs = s.task.inputs;
    for (auto it = extents.rbegin(); it != extents.rend(); ++it) s.api_inputs.push_back(*it);
    const int64_t index = static_cast<int64_t>(seg->segments.size());
    for (int64_t in : s.task.inputs) last_reader[static_cast<size_t>(in)] = index;
    seg->segments.push_back(std::move(s));
  }
  for (size_t id = 0; id < f.values.size(); ++id) {
    if (producer_stage[id] < 0 || is_output[id] || last_reader[id] < 0) continue;
    seg->segments[static_cast<size_t>(last_reader[id])].dead_after.push_back(static_cast<int64_t>(id));
  }
  return seg;
}

std::shared_ptr<const Segmentation> segmentation_of(const std::shared_ptr<ConcreteFusion>& c) {
  static std::mutex mutex;  // segmentation is built once per concrete fusion
  std::lock_guard<std::mutex> lock(mutex);
  if (!c->segmentation) c->segmentation = segment_fusion(*c);
  return c->segmentation;
}

}  // namespace kf
