// Pointwise kernels: a grid-stride loop per group of outputs, over the
// domain in the schedule's order (the outputs' memory order). Where the
// loop has a vector plan, a 16-byte path runs when its run-time conditions
// hold (alignment, unit inner stride, extents a multiple of the width):
// each thread loads `unroll` vectors per step, all before any is used
// (more bytes in flight; vector u of a step is u * blockDim.x vectors after
// the first, so each load stays coalesced). The scalar loop runs otherwise,
// several positions per thread and step in the same way, its inputs
// loaded as one-element vectors (PointwiseLoop::elements):
// in the same kernel behind a run-time test, or, as the kernel source
// writes them, in a scalar twin the host picks (KernelPlan::scalar_twins).
#include <algorithm>
#include <map>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {

// Vectors of vp (the loop's 16-byte vectors, or its one-element loads:
// PointwiseLoop::elements), U per thread and step, from linear position
// `first` (one-element loads only: the positions flat vectors leave).
void vector_loop(KernelWriter& w, const PointwiseLoop& loop, const VectorPlan& vp, int U, const std::string& first = "0") {
  const int64_t dom = loop.outputs[0];
  const int V = vp.width;
  const std::string nv = V == 1 ? w.numel(dom) : w.hoist("long long", "n", w.numel(dom) + " / " + std::to_string(V));
  const std::string times_v = V == 1 ? std::string() : " * " + std::to_string(V);
  w.open("for (long long q = " + (first == "0" ? std::string() : first + " + ") + "(long long)blockIdx.x * blockDim.x * " +
         std::to_string(U) + " + threadIdx.x; q < " + nv + "; q += (long long)gridDim.x * blockDim.x * " +
         std::to_string(U) + ")");
  std::vector<std::string> ok(static_cast<size_t>(U));
  std::vector<std::vector<std::string>> base(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) {
    const std::string qu = w.fresh("qu");
    w.line("const long long " + qu + " = q + (long long)" + std::to_string(u) + " * blockDim.x;");
    ok[static_cast<size_t>(u)] = u == 0 ? std::string() : qu + " < " + nv;
    base[static_cast<size_t>(u)] =
        unravel_in_order(w, dom, loop.order, "(" + qu + " < " + nv + " ? " + qu + " : 0)" + times_v, "_" + std::to_string(u));
  }
  const KernelWriter::Section loads = w.reserve();
  w.section = 0;
  // (the plan's inputs read at a shift: a cat's operands, a pad's input;
  // one-element loads leave those reads where they are used)
  w.shifted_reads = V > 1;
  for (int u = 0; u < U; ++u) {
    w.open(u == 0 ? std::string() : "if (" + ok[static_cast<size_t>(u)] + ")");
    w.group = u;
    vector_group(w, vp, loop.outputs, base[static_cast<size_t>(u)], [](int) {});
    w.close();
  }
  w.shifted_reads = false;
  w.fill(loads, vector_loads(w, V, 0, ok));
  w.close();
}

// A loop with an in-place window (PointwiseLoop::window: the loop's last
// `window` dims in its order, a rotary embedding's head dim): vectors of
// vp, U per thread, over block iterations of whole windows, each computing
// every value, then a barrier, then storing, so that no read of an input
// updated in place sees another thread's store (a thread reads its
// element's other half, which a neighbour stores). An iteration spans the
// most whole windows that blockDim.x * U * V positions hold; a window
// longer than that runs over copies of those inputs (the launch checks the
// same bound: LaunchRule::windows), an iteration then spanning all of
// them. The loop's bounds are the block's, so every thread reaches the
// barrier; positions past the iteration or the domain are computed at
// position 0 and not stored.
void window_loop(KernelWriter& w, const PointwiseLoop& loop, const VectorPlan& vp, int U) {
  const int64_t dom = loop.outputs[0];
  const int V = vp.width;
  const std::string nv = V == 1 ? w.numel(dom) : w.hoist("long long", "n", w.numel(dom) + " / " + std::to_string(V));
  std::string window = "1LL";
  for (size_t k = loop.order.size() - static_cast<size_t>(loop.window); k < loop.order.size(); ++k)
    window += " * (long long)" + w.extent(dom, loop.order[k]);
  const std::string win = w.hoist("long long", "kfwin", window);
  const std::string span = "((long long)blockDim.x * " + std::to_string(U * V) + ")";
  const std::string per = w.hoist("long long", "kfper", "(" + win + " <= " + span + " ? " + span + " / " + win + " * " + win +
                                                           " : " + span + ") / " + std::to_string(V));
  const std::string times_v = V == 1 ? std::string() : " * " + std::to_string(V);
  w.open("for (long long qb = (long long)blockIdx.x * " + per + "; qb < " + nv + "; qb += (long long)gridDim.x * " + per + ")");
  std::vector<std::string> ok(static_cast<size_t>(U));
  std::vector<std::vector<std::string>> base(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) {
    const std::string t = w.fresh("kft"), in = w.fresh("kfin");
    w.line("const long long " + t + " = (long long)threadIdx.x + (long long)" + std::to_string(u) + " * blockDim.x;");
    w.line("const bool " + in + " = " + t + " < " + per + " && qb + " + t + " < " + nv + ";");
    ok[static_cast<size_t>(u)] = in;
    base[static_cast<size_t>(u)] =
        unravel_in_order(w, dom, loop.order, "(" + in + " ? qb + " + t + " : 0)" + times_v, "_" + std::to_string(u));
  }
  const KernelWriter::Section loads = w.reserve();
  w.section = 0;
  w.shifted_reads = V > 1;
  std::vector<GroupStores> stores;
  for (int u = 0; u < U; ++u) {
    w.group = u;
    stores.push_back(vector_group_values(w, vp, loop.outputs, base[static_cast<size_t>(u)], [](int) {}));
  }
  w.shifted_reads = false;
  w.fill(loads, vector_loads(w, V, 0, ok));
  w.line("__syncthreads();");
  for (int u = 0; u < U; ++u) {
    w.group = u;
    w.open("if (" + ok[static_cast<size_t>(u)] + ")");
    store_vector_group(w, vp, stores[static_cast<size_t>(u)]);
    w.close();
  }
  w.close();
}

// "_u" or "_u_l" (appended piecewise: g++ 12 warns, -Wrestrict, a false
// positive, on "_" + std::to_string(u)).
std::string lane_suffix(int u, int l) {
  std::string s(1, '_');
  s += std::to_string(u);
  if (l >= 0) s.append(1, '_').append(std::to_string(l));
  return s;
}

// Flat vectors (the scalar twin's fast path, for calls that fail the
// vector checks on an extent: an odd last dim): vector u of a step holds V
// consecutive linear positions of the domain, whose lanes may lie in two
// rows, so each lane has its own index. Tensors dense in the domain's order
// (their offset is the linear position: x, the output) move as 16-byte
// vectors; the others (a per-row value broadcast along the row, a weight)
// are read per lane. The vectors start at position `head` (below V): the
// first where the plan's first tensor is aligned (a storage offset shared
// by an in-place output and its input); the positions before and the last
// (numel - head) % V run one per thread step. Returns the run-time
// condition of the path (each vector tensor aligned at `head`, dense) and
// sets *head_expr to head's value.
std::string flat_vector_loop(KernelWriter& w, const ExtentSets& sets, const PointwiseLoop& loop, int U,
                             const std::string& head, std::string* head_expr) {
  const int64_t dom = loop.outputs[0];
  const VectorPlan& vp = loop.flat;  // (read at every domain index)
  use_vectors(w, vp);
  w.lane_width = 0;  // no lanes seen through a slice's shift: the lanes are not along one dim
  w.exact_lanes = true;
  const int V = vp.width;
  const auto vector_bytes = [&](int64_t v) { return std::min(V * dtype_size(w.fusion().value(v).dtype), kVectorBytes); };
  if (vp.outputs.empty() && vp.inputs.empty()) {
    *head_expr = "0LL";  // (nothing moves as a vector: no tensor to align)
  } else {
    const int64_t t = !vp.outputs.empty() ? vp.outputs.front() : vp.inputs.begin()->first;
    const std::string b = std::to_string(vector_bytes(t));
    *head_expr = "(long long)((" + b + " - (unsigned long long)" + w.pointer(t) + " % " + b + ") % " + b + " / " +
                 std::to_string(dtype_size(w.fusion().value(t).dtype)) + ")";
  }
  const std::string nv = w.fresh("n");  // (not hoisted: head is defined with the path's condition)
  w.line("const long long " + nv + " = (" + w.numel(dom) + " - " + head + ") / " + std::to_string(V) + ";");
  w.open("for (long long q = (long long)blockIdx.x * blockDim.x * " + std::to_string(U) + " + threadIdx.x; q < " + nv +
         "; q += (long long)gridDim.x * blockDim.x * " + std::to_string(U) + ")");
  std::vector<std::string> ok(static_cast<size_t>(U)), first(static_cast<size_t>(U));
  std::vector<std::vector<std::string>> base(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) {
    const std::string qu = w.fresh("qu");
    w.line("const long long " + qu + " = q + (long long)" + std::to_string(u) + " * blockDim.x;");
    ok[static_cast<size_t>(u)] = u == 0 ? std::string() : qu + " < " + nv;
    first[static_cast<size_t>(u)] = head + " + (" + qu + " < " + nv + " ? " + qu + " : 0) * " + std::to_string(V);
    base[static_cast<size_t>(u)] = unravel_in_order(w, dom, loop.order, first[static_cast<size_t>(u)], lane_suffix(u, -1));
  }
  const KernelWriter::Section loads = w.reserve();
  w.section = 0;
  const size_t d = vp.dim;  // the innermost dim of the domain's order
  for (int u = 0; u < U; ++u) {
    const auto& b = base[static_cast<size_t>(u)];
    w.open(u == 0 ? std::string() : "if (" + ok[static_cast<size_t>(u)] + ")");
    w.group = u;
    // Most vectors lie in one row: their lanes share the other dims'
    // indices (a per-row value is read once); the others unravel each lane.
    w.open("if (" + b[d] + " + " + std::to_string(V) + " <= " + w.extent(dom, d) + ")");
    vector_group(w, vp, loop.outputs, b, [](int) {});
    w.close_open("else");
    std::vector<std::vector<std::string>> lanes = {b};
    for (int l = 1; l < V; ++l)
      lanes.push_back(unravel_in_order(w, dom, loop.order, first[static_cast<size_t>(u)] + " + " + std::to_string(l),
                                       lane_suffix(u, l), true));  // (read by broadcast reads only)
    vector_group(w, vp, loop.outputs, b, [](int) {}, &lanes);
    w.close();
    w.close();
  }
  w.fill(loads, vector_loads(w, V, 0, ok));
  w.close();
  w.exact_lanes = false;
  // The conditions: each vector tensor aligned and dense in domain order.
  std::vector<std::string> conds;
  std::map<int64_t, std::vector<int>> vectors;
  for (const auto& [key, vr] : w.vector_regs) vectors.emplace(key.first, vr.dims);
  for (int64_t o : vp.outputs) vectors.emplace(o, vector_dims(w, o, dom, vp.dim));
  conds.push_back(head + " <= " + w.numel(dom));
  for (const auto& [v, dims] : vectors) {
    conds.push_back("((unsigned long long)(" + w.pointer(v) + " + " + head + ") % " + std::to_string(vector_bytes(v)) +
                    " == 0)");
    std::string dense = "1";  // the stride a dense tensor has along the next dim out
    for (size_t k = loop.order.size(); k-- > 0;) {
      const size_t d = loop.order[k];
      if (w.size_class(dom, d) != SizeClass::Many) continue;
      const size_t j = static_cast<size_t>(std::find(dims.begin(), dims.end(), static_cast<int>(d)) - dims.begin());
      if (!sets.same(v, static_cast<int>(j), dom, static_cast<int>(d))) {
        const std::string e = w.extent(v, j);  // (hoisted in this order on every compiler)
        conds.push_back(e + " == " + w.extent(dom, d));
      }
      conds.push_back("(long long)" + w.stride(v, j) + " == " + dense);
      dense = dense == "1" ? "(long long)" + w.extent(dom, d) : dense + " * " + w.extent(dom, d);
    }
  }
  return all_of(conds);
}

}  // namespace

void emit_pointwise(KernelWriter& w, const Task& /*task*/, const PointwiseParams& p, std::vector<ArgCheck>* checks) {
  const ExtentSets& sets = extent_sets_of(w.concrete());
  std::vector<ArgCheck> unused;
  if (checks == nullptr) checks = &unused;
  for (const PointwiseLoop& loop : p.loops) {
    const int64_t dom = loop.outputs[0];
    use_vectors(w, loop.vectors);
    // w.paths: the vector loop, the scalar one, or both behind a run-time test.
    const bool vector_path = loop.vectors.width > 0 && w.paths != KernelWriter::Paths::Scalar;
    const bool scalar_path = loop.vectors.width == 0 || w.paths != KernelWriter::Paths::Vector;
    if (vector_path) {
      const KernelWriter::Section cond = w.reserve();
      const std::string ok = w.fresh("kfvec");
      w.open(scalar_path ? "if (" + ok + ")" : "");
      if (loop.window > 0) window_loop(w, loop, loop.vectors, loop.unroll);
      else vector_loop(w, loop, loop.vectors, loop.unroll);
      const size_t vd = loop.vectors.dim;
      checks->push_back(w.extent_multiple(dom, vd, loop.vectors.width));
      if (scalar_path) {
        std::vector<std::string> conds = {w.extent(dom, vd) + " % " + std::to_string(loop.vectors.width) + " == 0"};
        used_vector_conditions(w, sets, loop.vectors, dom, false, &conds, checks);
        w.fill(cond, {"const bool " + ok + " = " + all_of(conds) + ";"});
        w.close_open("else");
      } else {  // the host checks them
        used_vector_conditions(w, sets, loop.vectors, dom, false, nullptr, checks);
        w.close();
      }
    } else {
      w.open("");
    }
    if (!scalar_path) continue;
    if (loop.window > 0) {  // (no flat vectors: they cross windows)
      VectorPlan unit = loop.elements;
      if (unit.width == 0) {
        unit.width = 1;
        unit.dim = loop.order.back();
      }
      use_vectors(w, unit);
      window_loop(w, loop, unit, std::max(p.scalar_unroll, 1));
      w.close();
      continue;
    }
    const std::string n = w.numel(dom);
    // The scalar twin: flat vectors where the tensors allow, then the
    // positions they leave (all of them where they do not).
    // (A loop whose tensors are all misaligned has no vector twin: its
    // one kernel runs them, from their shared alignment.)
    std::string first = "0";
    if (loop.flat.width > 0 && (w.paths == KernelWriter::Paths::Scalar || loop.vectors.width == 0)) {
      const KernelWriter::Section cond = w.reserve();
      const std::string flat = w.fresh("kfflat"), head = w.fresh("kfhead");
      w.open("if (" + flat + ")");
      std::string head_expr;
      const std::string flat_ok = flat_vector_loop(w, sets, loop, loop.unroll, head, &head_expr);
      w.close();
      first = w.fresh("kffirst");
      const std::string V = std::to_string(loop.flat.width);
      w.fill(cond, {"const long long " + head + " = " + head_expr + ";", "const bool " + flat + " = " + flat_ok + ";",
                    "const long long " + first + " = " + flat + " ? " + head + " + (" + n + " - " + head + ") / " + V +
                        " * " + V + " : 0;"});
      use_vectors(w, loop.vectors);
      // The head, before the vectors' first position.
      w.open("if (" + flat + ") for (long long q = " + std::string(kThread) + "; q < " + head + "; q += " + kGridStride + ")");
      std::vector<std::string> idx = unravel_in_order(w, dom, loop.order, "q", "_h");
      for (int64_t o : loop.outputs) w.store(o, idx, w.value_at(o, idx));
      w.close();
    }
    if (p.scalar_unroll > 1 && loop.elements.width > 0) {
      use_vectors(w, loop.elements);
      vector_loop(w, loop, loop.elements, p.scalar_unroll, first);
    } else {
      w.open("for (long long q = " + (first == "0" ? std::string() : first + " + ") + kThread + "; q < " + n + "; q += " +
             kGridStride + ")");
      std::vector<std::string> idx = unravel_in_order(w, dom, loop.order, "q");
      for (int64_t o : loop.outputs) w.store(o, idx, w.value_at(o, idx));
      w.close();
    }
    w.close();
  }
}

}  // namespace kf
