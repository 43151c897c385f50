// The pointwise scheduler: grid-stride loops over the outputs' sizes (one
// loop per group of outputs of provably equal sizes) in the outputs' memory
// order, with a 16-byte vector path along their innermost dim where the
// layouts allow.
#include <algorithm>
#include <set>
#include <string>

#include "core/schedule/access_map.h"
#include "core/schedule/in_place.h"

#include "core/concretize/extent_sets.h"
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

std::vector<size_t> loop_order(const ConcreteFusion& c, int64_t dom) {
  const size_t r = c.size_classes[static_cast<size_t>(dom)].size();
  const std::vector<int>& order = c.stride_orders[static_cast<size_t>(dom)];
  std::vector<size_t> dims(r);
  for (size_t d = 0; d < r; ++d) dims[d] = d;
  if (order.size() != r) return dims;
  for (size_t d = 0; d < r; ++d) dims[d] = static_cast<size_t>(order[d]);
  return dims;
}

namespace {

size_t many_dims(const ConcreteFusion& c, int64_t v) {
  const std::vector<SizeClass>& cl = c.size_classes[static_cast<size_t>(v)];
  return static_cast<size_t>(std::count(cl.begin(), cl.end(), SizeClass::Many));
}

// The vector loads a step of a loop over `outs` makes beyond one per
// vector input read at a shift only (no plain map: VectorPlan entries
// kShiftedIndex): such an input is loaded once per path from the outputs that
// reaches it through a different sequence of slices, cat parts and pads
// (each such path reads it at its own shift, a vector of its own; the
// AccessMap's shifted entries keep the alignment, not the offset, so they
// cannot tell them apart). Counts up to `enough`; paths multiply through
// a definition's diamonds (a cat of a value with itself, sliced, 40 times
// over: 2^40 of them), so the walk also stops after kMaxPathSteps states,
// returning what it counted.
size_t shifted_loads_per_step(const ConcreteFusion& c, const Task& task, const std::vector<int64_t>& outs,
                              const VectorPlan& vectors, size_t enough) {
  constexpr size_t kMaxPathSteps = 4096;
  if (std::none_of(vectors.inputs.begin(), vectors.inputs.end(),
                   [](const auto& in) { return std::any_of(in.second.begin(), in.second.end(), is_shifted); }))
    return 0;  // (no shifted vector input: nothing to count, no walk)
  const Fusion& f = *c.fusion;
  std::set<int64_t> in_task;
  for (int64_t ei : task.exprs)
    for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) in_task.insert(o);
  std::set<std::pair<int64_t, std::string>> seen;
  std::vector<std::pair<int64_t, std::string>> stack;
  for (int64_t o : outs) stack.push_back({o, ""});
  size_t loads = 0;
  std::set<int64_t> reached;
  for (size_t steps = 0; !stack.empty() && steps < kMaxPathSteps && loads - reached.size() < enough; ++steps) {
    auto [v, path] = std::move(stack.back());
    stack.pop_back();
    if (!seen.insert({v, path}).second) continue;
    if (auto in = vectors.inputs.find(v);
        in != vectors.inputs.end() && std::any_of(in->second.begin(), in->second.end(), is_shifted))
      ++loads, reached.insert(v);
    if (!in_task.contains(v)) continue;
    const Expr& e = f.exprs[static_cast<size_t>(f.value(v).producer)];
    for (size_t k = 0; k < e.inputs.size(); ++k) {
      std::string p = path;
      if (e.op == Op::SLICE) p += "s" + std::to_string(SliceAttrs(e).start) + ",";
      else if (e.op == Op::CAT) p += "c" + std::to_string(k) + ",";
      else if (e.op == Op::PAD) p += "p,";
      stack.push_back({e.inputs[k], std::move(p)});
    }
  }
  return loads - reached.size();
}

}  // namespace

PointwiseParams schedule_pointwise(const ConcreteFusion& c, const Task& task, const Tuning& tuning) {
  PointwiseParams p;
  p.unroll = tuning.pointwise_unroll;
  p.min_blocks = tuning.pointwise_min_blocks;
  // Per loop: its vectors at any alignment (the flat vectors' plan where
  // every tensor is misaligned, below).
  std::vector<VectorPlan> any_alignment;
  for (std::vector<int64_t>& outs : pointwise_loops(c, task)) {
    const int64_t dom = outs[0];
    PointwiseLoop loop;
    VectorPlan any;  // (empty: the rule off, or no order)
    loop.order = loop_order(c, dom);
    loop.unroll = p.unroll;
    if (!loop.order.empty()) {
      const IndexMap id = identity_map(c, dom);
      std::vector<std::pair<int64_t, IndexMap>> roots;
      for (int64_t o : outs) roots.push_back({o, id});
      // (with shifts: a cat's operands, a pad's input and a slice's input
      // are vector inputs too where their bound or start keeps lanes together)
      const AccessMap reads = trace_accesses(c, task, roots, true, SliceReads::AtStart);
      loop.vectors = plan_vectors(c, task, outs, dom, loop.order.back(), &reads);
      if (tuning.pointwise_vector_rule == 1 && many_dims(c, dom) >= 3) {
        // Mixed dtypes over three or more dims: each vector's index costs
        // two divisions and three-term addresses, so lanes of the narrowest
        // dtype halve that work per element (rope: 0.244 -> 0.210 ms on an
        // H200). Fewer steps per thread keep the bytes in flight. Over two
        // dims the split wide vectors cost more than they save
        // (residual_add_cast 0.766 -> 0.797 ms): docs/perf-log.md, session 11.
        const int before = loop.vectors.width;
        narrow_vectors(c, &loop.vectors);
        if (before > 0) loop.unroll = std::max(1, p.unroll * before / loop.vectors.width);
      }
      keep_aligned_shifts(&loop.vectors);
      loop.elements = plan_element_loads(c, task, dom, loop.order.back(), reads);
      if (tuning.pointwise_flat_head != 0) any = plan_vectors(c, task, outs, dom, loop.order.back(), &reads, {}, nullptr, 1);
    }
    any_alignment.push_back(std::move(any));
    loop.outputs = std::move(outs);
    p.loops.push_back(std::move(loop));
  }
  p.grid = grid_targets(tuning);
  if (p.loops.size() > 1) p.grid.waves = tuning.grid.waves;
  // Rotary embeddings in place read the element's other half: written in
  // place through windows (PointwiseLoop::window) instead of an
  // intermediate and a copy, which doubled their traffic (seed 1857099843
  // c0073, c0142, c0008 at 0.43-0.48x torch.compile, docs/perf-log.md
  // session 50 §7).
  // Only loops with vectors whose window is the innermost dim alone: on an
  // H200 (docs/perf-log.md session 52 §1) those ran 1.09-2.01x faster on
  // 30 plans of 12 seeds, while a loop without vectors (a q at offset
  // 4097: 0.48x) or a window of 2-4 dims (q with its sequence dim
  // innermost, or [1, 96, 128] windows: 0.61-0.98x, but one 1.45x) lost.
  p.in_place_loops = tuning.pointwise_in_place_windows != 0;
  if (p.in_place_loops)
    for (PointwiseLoop& loop : p.loops) {
      const int window = in_place_window(c, task, loop);
      loop.window = window == 1 && loop.vectors.width > 0 ? 1 : 0;
    }
  // Outputs written straight into a misaligned input are stored per lane;
  // those the run plan sends to an intermediate (the input is read
  // elsewhere: a rotary embedding's other half) keep their vectors.
  const std::vector<int64_t> in_place = inputs_read_where_written(c, task, p);
  bool one_step = false;  // (Tuning::pointwise_shifted_loads_one_step)
  for (size_t k = 0; k < p.loops.size(); ++k) {
    PointwiseLoop& loop = p.loops[k];
    const int64_t dom = loop.outputs[0];
    drop_misaligned(c, dom, in_place, &loop.vectors);
    // Flat vectors start where the first of their tensors is aligned (the
    // kernel peels the positions before: flat_vector_loop), so tensors
    // that share one misalignment keep them: a cross-entropy backward in
    // place into logits at a storage offset of 3, which the loop above
    // left without vectors (seed 1857099843 c0154: one element a thread,
    // 24% of the copy ceiling, docs/perf-log.md session 50). Where some
    // tensors stay aligned, the misaligned ones are left out of the flat
    // plan as before, or the head could not align both.
    const VectorPlan& flat_from = loop.vectors.width > 0 ? loop.vectors : any_alignment[k];
    if (flat_from.width > 0 && loop.window == 0) {  // (flat vectors cross windows)
      loop.flat = inputs_reading(c, dom, std::vector<bool>(loop.order.size(), true), flat_from);
      // The inputs flat vectors leave are read per lane: their dtype no
      // longer sets the width. A bool mask broadcast over the heads kept
      // fp16 scores at 16 lanes (32 bytes a tensor), whose straddling
      // branch unravels every lane: 112 registers, 25% occupancy, 44% of
      // DRAM (seed 243917705 c0177, docs/perf-log.md session 44).
      // (Only ever narrower: where the plan's width came from the widest
      // dtype, it stays.)
      const int before = loop.flat.width;
      narrow_vectors(c, &loop.flat);
      loop.flat.width = std::min(before, loop.flat.width);
    }
    const size_t enough = static_cast<size_t>(tuning.pointwise_shifted_loads_one_step);
    one_step = one_step || shifted_loads_per_step(c, task, loop.outputs, loop.vectors, enough) >= enough;
  }
  // (The loops share one kernel, so its registers: all take one step.)
  if (one_step)
    for (PointwiseLoop& loop : p.loops) loop.unroll = 1;
  p.scalar_unroll = one_step ? std::max(1, tuning.pointwise_scalar_unroll / 2) : tuning.pointwise_scalar_unroll;
  return p;
}

}  // namespace kf
