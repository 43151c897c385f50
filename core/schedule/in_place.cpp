#include "core/schedule/in_place.h"

#include "core/schedule/access_map.h"

namespace kf {

std::vector<int64_t> inputs_read_where_written(const ConcreteFusion& c, const Task& task,
                                               const KernelSchedule& schedule) {
  std::vector<int64_t> out;
  const auto* p = std::get_if<PointwiseParams>(&schedule);
  // A second loop may read what the first wrote, in other threads.
  if (p == nullptr || p->loops.size() != 1) return out;
  const PointwiseLoop& loop = p->loops[0];
  const int64_t dom = loop.outputs.at(0);
  const IndexMap id = identity_map(c, dom);
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : loop.outputs) roots.push_back({o, id});
  const AccessMap reads = trace_accesses(c, task, roots);
  for (int64_t in : task.inputs) {
    const Value& v = c.fusion->value(in);
    if (v.is_scalar) continue;
    const std::vector<IndexMap>* maps = reads.find(in);
    if (maps == nullptr) continue;  // not read at all: nothing to protect, but nothing to gain either
    bool identity = true;
    for (const IndexMap& m : *maps) identity = identity && m == id;
    if (identity) out.push_back(in);
  }
  return out;
}

}  // namespace kf
