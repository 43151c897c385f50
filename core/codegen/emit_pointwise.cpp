// Pointwise kernels: a grid-stride loop per group of outputs, over the
// domain in the schedule's order (the outputs' memory order). Where the
// loop has a vector plan, a 16-byte path runs when its run-time conditions
// hold (alignment, unit inner stride, extents a multiple of the width):
// each thread loads `unroll` vectors per step, all before any is used
// (more bytes in flight; vector u of a step is u * blockDim.x vectors after
// the first, so each load stays coalesced). The scalar loop runs otherwise:
// in the same kernel behind a run-time test, or, as the kernel source
// writes them, in a scalar twin the host picks (KernelPlan::scalar_twins).
#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"

namespace kf {

namespace {

void vector_loop(KernelWriter& w, const PointwiseLoop& loop, int U) {
  const VectorPlan& vp = loop.vectors;
  const int64_t dom = loop.outputs[0];
  const int V = vp.width;
  const std::string nv = w.hoist("long long", "n", w.numel(dom) + " / " + std::to_string(V));
  w.open("for (long long q = (long long)blockIdx.x * blockDim.x * " + std::to_string(U) + " + threadIdx.x; q < " + nv +
         "; q += (long long)gridDim.x * blockDim.x * " + std::to_string(U) + ")");
  std::vector<std::string> ok(static_cast<size_t>(U));
  std::vector<std::vector<std::string>> base(static_cast<size_t>(U));
  for (int u = 0; u < U; ++u) {
    const std::string qu = w.fresh("qu");
    w.line("const long long " + qu + " = q + (long long)" + std::to_string(u) + " * blockDim.x;");
    ok[static_cast<size_t>(u)] = u == 0 ? std::string() : qu + " < " + nv;
    base[static_cast<size_t>(u)] =
        unravel_in_order(w, dom, loop.order, "(" + qu + " < " + nv + " ? " + qu + " : 0) * " + std::to_string(V), "_" + std::to_string(u));
  }
  const KernelWriter::Section loads = w.reserve();
  w.section = 0;
  for (int u = 0; u < U; ++u) {
    w.open(u == 0 ? std::string() : "if (" + ok[static_cast<size_t>(u)] + ")");
    w.group = u;
    vector_group(w, vp, loop.outputs, base[static_cast<size_t>(u)], [](int) {});
    w.close();
  }
  w.fill(loads, vector_loads(w, V, 0, ok));
  w.close();
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
      vector_loop(w, loop, loop.unroll);
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
    const std::string n = w.numel(dom);
    w.open("for (long long q = " + std::string(kThread) + "; q < " + n + "; q += " + kGridStride + ")");
    std::vector<std::string> idx = unravel_in_order(w, dom, loop.order, "q");
    for (int64_t o : loop.outputs) w.store(o, idx, w.value_at(o, idx));
    w.close();
    w.close();
  }
}

}  // namespace kf
