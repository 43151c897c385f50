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

constexpr int kNoWindow = 1 << 30;

// How many innermost dims of `order` a window must span to hold a read at
// `m` of the element the identity `id` names: 0 for that element; past
// order.size() (kNoWindow) where the read leaves every window. A dim read
// off the element must be one of the window's, and so must the domain dim
// it reads (a plain entry); an opaque, shifted or zero index along a
// window dim stays inside its extent, so inside the window.
int window_needed(const IndexMap& id, const IndexMap& m, const std::vector<size_t>& order) {
  if (m.size() != id.size()) return kNoWindow;
  const auto depth = [&](int d) {
    auto it = std::find(order.begin(), order.end(), static_cast<size_t>(d));
    return it == order.end() ? kNoWindow : static_cast<int>(order.end() - it);
  };
  int need = 0;
  for (size_t j = 0; j < m.size(); ++j) {
    if (m[j] == id[j]) continue;
    if (id[j] < 0) return kNoWindow;
    need = std::max(need, depth(id[j]));
    if (m[j] >= 0) need = std::max(need, depth(m[j]));
  }
  return need;
}

// A pointwise loop's reads: its access map and identity.
struct LoopReads {
  IndexMap id;
  AccessMap reads;
};

LoopReads loop_reads(const ConcreteFusion& c, const Task& task, const PointwiseLoop& loop) {
  LoopReads r;
  r.id = identity_map(c, loop.outputs.at(0));
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : loop.outputs) roots.push_back({o, r.id});
  r.reads = trace_accesses(c, task, roots);
  return r;
}

// The task inputs a pointwise kernel may overwrite (inputs_read_where_written).
std::vector<int64_t> pointwise_inputs_read_where_written(const ConcreteFusion& c, const Task& task,
                                                         const PointwiseParams& p) {
  // (Without in_place_loops, a kernel of several loops keeps every output
  // in an intermediate, as before it was analysed per loop.)
  if (p.loops.size() != 1 && !p.in_place_loops) return {};
  std::vector<LoopReads> loops;
  for (const PointwiseLoop& l : p.loops) loops.push_back(loop_reads(c, task, l));
  std::vector<int64_t> out;
  for (int64_t in : task.inputs) {
    if (c.fusion->value(in).is_scalar) continue;
    size_t reader = loops.size(), readers = 0;
    for (size_t k = 0; k < loops.size(); ++k)
      if (loops[k].reads.find(in) != nullptr) reader = k, ++readers;
    if (readers != 1) continue;  // not read (nothing gained), or read by two loops
    // Every output updating `in` in this loop: a thread may still run an
    // earlier loop while another stores into `in` in a later one.
    const PointwiseLoop& loop = p.loops[reader];
    const auto has = [](const std::vector<int64_t>& vs, int64_t v) { return std::find(vs.begin(), vs.end(), v) != vs.end(); };
    bool outputs_here = true;
    for (const Output& o : c.fusion->outputs)
      if (o.alias_input >= 0 && c.fusion->inputs[static_cast<size_t>(o.alias_input)] == in && has(task.outputs, o.value))
        outputs_here = outputs_here && has(loop.outputs, o.value);
    if (!outputs_here) continue;
    bool local = true;
    for (const IndexMap& m : *loops[reader].reads.find(in))
      local = local && window_needed(loops[reader].id, m, loop.order) <= loop.window;
    if (local) out.push_back(in);
  }
  return out;
}

}  // namespace

int in_place_window(const ConcreteFusion& c, const Task& task, const PointwiseLoop& loop) {
  const LoopReads r = loop_reads(c, task, loop);
  int need = 0;
  for (int64_t in : aliased_inputs(c, loop.outputs))
    if (const std::vector<IndexMap>* maps = r.reads.find(in))
      for (const IndexMap& m : *maps) need = std::max(need, window_needed(r.id, m, loop.order));
  return need == kNoWindow ? -1 : need;
}

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
    return pointwise_inputs_read_where_written(c, task, *p);
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
