// The CPU backend: host memory, and segments run by the reference
// interpreter (eval.h) one expr at a time.
//
// KFUSE_CPU_DRY_RUN=1 (read once; spellings: core/util/env_switch.h) makes it dispatch segments and copies
// without computing them: outputs keep their contents. It exists to measure
// the shared host path (binding, concretization lookup, executor) without a
// GPU: bench/host_latency_bench --dry-run and the instruction budget test.
#include <cstdint>
#include <cstdlib>

#include "core/runtime/backend.h"
#include "core/runtime/cpu/eval.h"
#include "core/runtime/cpu/host_memory.h"
#include "core/util/dl_layout.h"
#include "core/util/env_switch.h"
#include "core/util/error.h"
#include "core/util/scratch.h"

namespace kf {

namespace {

bool dry_run() {
  static const bool on = env_switch("KFUSE_CPU_DRY_RUN", false);
  return on;
}

cpu::TensorView view_of(const DLTensor& t, DType dtype) {
  cpu::TensorView v;
  v.dtype = dtype;
  v.sizes.assign(t.shape, t.shape + t.ndim);
  v.strides.resize(static_cast<size_t>(t.ndim));
  dl_strides(t, v.strides.data());
  // In integer arithmetic, as the checks compute it: an empty tensor (never
  // addressed) may have NULL data or an offset that wraps around (2^64 - 4
  // on an empty output), which pointer arithmetic may not express.
  v.data = reinterpret_cast<std::byte*>(dl_address(t));
  return v;
}

class CpuBackend final : public Backend {
 public:
  // Counted against the host memory limit (host_memory.h), as the
  // backend's own tensors are.
  void* allocate(size_t bytes, int, const ExecOptions&) override { return cpu::host_allocate(bytes); }
  void release(void* ptr, size_t bytes, int, const ExecOptions&) override { cpu::host_release(ptr, bytes); }

  void run_segment(const Plan& plan, size_t index, const ValueSizes&, const DLTensor* const* inputs,
                   DLTensor* const* outputs, const ExecOptions&) override {
    if (dry_run()) return;
    const Fusion& f = plan.fusion();
    const Segment& seg = plan.segmentation.segments[index];
    // This thread's environment, sized to the fusion once and cleared of
    // what this segment set when it ends (also by an exception): a segment
    // costs its own size, not the fusion's (32,000 segments once took 3.7 s).
    Scratch<cpu::Env> scratch;
    cpu::Env& env = *scratch;
    if (env.values.size() < f.values.size()) {
      env.values.resize(f.values.size());
      env.ready.resize(f.values.size(), false);
      env.reads.resize(f.values.size(), 0);
    }
    struct Clear {
      cpu::Env& env;
      const Segment& seg;
      const Fusion& f;
      void unset(int64_t id) {
        env.unset(id);
        env.reads[static_cast<size_t>(id)] = 0;
      }
      ~Clear() {
        for (int64_t id : seg.task.inputs) unset(id);
        for (int64_t ei : seg.task.exprs)
          for (int64_t id : f.exprs[static_cast<size_t>(ei)].inputs) unset(id);  // constants
        for (int64_t ei : seg.task.exprs)
          for (int64_t id : f.exprs[static_cast<size_t>(ei)].outputs) unset(id);
      }
    } clear{env, seg, f};
    // Each value's reads in this segment: what may be deferred, and when
    // each value is released (eval.h).
    for (int64_t ei : seg.task.exprs)
      for (int64_t id : f.exprs[static_cast<size_t>(ei)].inputs) ++env.reads[static_cast<size_t>(id)];
    for (int64_t id : seg.task.outputs) env.reads[static_cast<size_t>(id)] += cpu::Env::kResult;
    for (size_t k = 0; k < seg.task.inputs.size(); ++k) {
      int64_t id = seg.task.inputs[k];
      env.set(id, view_of(*inputs[k], f.value(id).dtype));
    }
    for (int64_t ei : seg.task.exprs)
      for (int64_t id : f.exprs[static_cast<size_t>(ei)].inputs) {
        const Value& v = f.value(id);
        if (v.kind == ValueKind::Constant && !env.ready[static_cast<size_t>(id)]) env.set(id, cpu::constant_view(v));
      }
    for (int64_t ei : seg.task.exprs) cpu::eval_expr(f, f.exprs[static_cast<size_t>(ei)], env);
    // Outputs may alias inputs of this segment: take private copies of every
    // result that still points into borrowed memory before writing any.
    std::vector<cpu::TensorView> results;
    for (int64_t out : seg.task.outputs) {
      cpu::TensorView r = env.get(out);
      results.push_back(r.storage ? r : cpu::own_copy(r));
    }
    for (size_t k = 0; k < results.size(); ++k) {
      cpu::TensorView dst = view_of(*outputs[k], results[k].dtype);
      if (dst.sizes != results[k].sizes)
        fail(KF_ERR_SHAPE_MISMATCH, "segment ", index, ": output ", k, " (value ",
             seg.task.outputs[k], ") has the wrong shape");
      cpu::copy_into(results[k], dst);
    }
  }

  void copy(const DLTensor& src, const DLTensor& dst, const ExecOptions&) override {
    if (dry_run()) return;
    auto s = from_dlpack(src.dtype).value_or(DType::Bool);
    auto d = from_dlpack(dst.dtype).value_or(DType::Bool);
    cpu::TensorView sv = view_of(src, s);
    cpu::copy_into(cpu::own_copy(sv), view_of(dst, d));  // src and dst may overlap
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Backend& backend_for(DeviceKind kind) {
  return kind == DeviceKind::CPU ? cpu_backend() : cuda_backend();
}

}  // namespace kf
