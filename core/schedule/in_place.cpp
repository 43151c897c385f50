#include "core/schedule/in_place.h"

#include <algorithm>

#include "core/schedule/access_map.h"
#include "core/schedule/row_domain.h"

namespace kf {

namespace {

// The task inputs (values) that outputs `outs` update in place.
std::vector<int64_t> aliased_inputs(const ConcreteFusion& c, const std::vector<int64_t>& outs) {
  std::vector<int64_t> in;
  for (const Output& o : c.fusion->outputs)
    if (o.alias_input >= 0 && std::find(outs.begin(), outs.end(), o.value) != outs.end())
      in.push_back(c.fusion->inputs[static_cast<size_t>(o.alias_input)]);
  return in;
}

bool tiled(const TiledParams& t, int64_t v) {
  return std::any_of(t.inputs.begin(), t.inputs.end(), [&](const TiledInput& in) { return in.value == v; });
}

}  // namespace

std::vector<int64_t> tiles_overwritten_in_phase_1(const ConcreteFusion& c, const TiledParams& t) {
  std::vector<int64_t> out;
  for (int64_t v : aliased_inputs(c, t.outputs_a))
    if (tiled(t, v)) out.push_back(v);
  return out;
}

std::vector<int64_t> inputs_read_where_written(const ConcreteFusion& c, const Task& task,
                                               const KernelSchedule& schedule) {
  std::vector<int64_t> out, unsafe;
  AccessMap reads;
  IndexMap id;
  if (const auto* p = std::get_if<PointwiseParams>(&schedule)) {
    // A second loop may read what the first wrote, in other threads.
    if (p->loops.size() != 1) return out;
    const PointwiseLoop& loop = p->loops[0];
    id = identity_map(c, loop.outputs.at(0));
    std::vector<std::pair<int64_t, IndexMap>> roots;
    for (int64_t o : loop.outputs) roots.push_back({o, id});
    reads = trace_accesses(c, task, roots);
  } else if (const auto* t = std::get_if<TiledParams>(&schedule)) {
    // Each tile's reads (phase 1 into shared memory, phase 2 by the thread
    // that computes the element) come before the barrier that precedes
    // its stores in phase 3, or in the same thread in phase 2; tiles are
    // disjoint. Phase 1's outputs (outputs_a) are stored by threads along
    // a, after a barrier that follows the tiles' fill where they update a
    // tiled input (tiles_overwritten_in_phase_1), and before phase 2,
    // whose threads along b read other elements: an input they update
    // qualifies only where phase 2 reads it from its tile (the vector
    // branch issues phase 2's loads of the other inputs before phase 1).
    // Without this, an AdamW step whose moment is stored column-major
    // beside row-major parameters copied all three results afterwards
    // (seed 1056028048 c0197, 0.44x torch.compile, session 43).
    id = identity_map(c, t->outputs.at(0));
    std::vector<std::pair<int64_t, IndexMap>> roots;
    for (int64_t o : t->outputs) roots.push_back({o, id});
    reads = trace_accesses(c, task, roots);
    for (int64_t v : aliased_inputs(c, t->outputs_a))
      if (!tiled(*t, v)) unsafe.push_back(v);
  } else if (const auto* r = std::get_if<RowParams>(&schedule)) {
    // Every phase reads the row before a barrier (of the block, of the
    // cluster, or a kernel boundary for split rows), and the domain outputs
    // are written in the last pass, each element by the thread that reads
    // it there (from registers, shared memory or memory). Left out: outer
    // reductions (norm backward's column sums read rows other blocks
    // write) and outputs stored through a view (group norm).
    if (r->has_outer() || !r->rows.views.empty()) return out;
    id = identity_map(c, r->rows.domain);
    reads = row_accesses(c, task, r->rows);
  } else if (const auto* s = std::get_if<ScatterParams>(&schedule)) {
    // The tensor scattered into is read by the copy kernel at the element
    // it writes, and by the sorted path's apply at each run's target,
    // where the same thread stores the run's result or leaves a partial
    // (the combine reads partials only); the atomic kernels read the
    // result alone. In place, the copy is left out (step_launch.h).
    const int64_t self = c.fusion->exprs[static_cast<size_t>(s->expr)].inputs[0];
    if (std::find(task.inputs.begin(), task.inputs.end(), self) != task.inputs.end()) out.push_back(self);
    return out;
  } else {
    return out;
  }
  for (int64_t in : task.inputs) {
    const Value& v = c.fusion->value(in);
    if (v.is_scalar || std::find(unsafe.begin(), unsafe.end(), in) != unsafe.end()) continue;
    const std::vector<IndexMap>* maps = reads.find(in);
    if (maps == nullptr) continue;  // not read: an output aliasing it gains nothing here
    bool identity = true;
    for (const IndexMap& m : *maps) identity = identity && m == id;
    if (identity) out.push_back(in);
  }
  return out;
}

}  // namespace kf
