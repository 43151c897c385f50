// The pointwise scheduler: grid-stride loops over the outputs' sizes (one
// loop per group of outputs of provably equal sizes), with a 16-byte
// vector path along the last dim where the layouts allow.
#include <algorithm>

#include "core/schedule/extent_sets.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/vector_plan.h"

namespace kf {

std::vector<std::vector<int64_t>> pointwise_loops(const ConcreteFusion& c, const Task& task) {
  const ExtentSets& sets = extent_sets_of(c);
  std::vector<std::vector<int64_t>> loops;
  for (int64_t o : task.outputs) {
    auto it = std::find_if(loops.begin(), loops.end(),
                           [&](const std::vector<int64_t>& l) { return sets.same_sizes(l[0], o); });
    if (it == loops.end()) loops.push_back({o});
    else it->push_back(o);
  }
  return loops;
}

PointwiseParams schedule_pointwise(const ConcreteFusion& c, const Task& task, const Tuning& tuning) {
  PointwiseParams p;
  p.unroll = tuning.pointwise_unroll;
  for (std::vector<int64_t>& outs : pointwise_loops(c, task)) {
    const int64_t dom = outs[0];
    const size_t r = c.size_classes[static_cast<size_t>(dom)].size();
    PointwiseLoop loop;
    loop.vectors = r > 0 ? plan_vectors(c, task, outs, dom, r - 1) : VectorPlan{};
    loop.outputs = std::move(outs);
    p.loops.push_back(std::move(loop));
  }
  return p;
}

}  // namespace kf
