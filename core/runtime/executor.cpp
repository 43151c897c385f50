#include "core/runtime/executor.h"

#include <algorithm>
#include <vector>

#include "core/runtime/backend.h"
#include "core/runtime/collective.h"
#include "core/runtime/cpu/tensor_view.h"
#include "core/segment/task_sizes.h"
#include "core/util/error.h"
#include "core/util/scratch.h"

namespace kf {

namespace {

// A compact intermediate tensor owned by the executor for one call.
struct Intermediate {
  DLTensor tensor{};
  Extents shape, strides;
  size_t bytes = 0;
  bool live = false;
};

// Per-call state of execute(), kept per thread (Scratch) so that its
// storage is reused.
struct RunState {
  std::vector<Intermediate> intermediates;  // per RunPlan slot
  std::vector<const DLTensor*> ins;
  std::vector<DLTensor*> outs;
};

// Releases the intermediates still live when a run ends (also by an exception).
class IntermediateGuard {
 public:
  IntermediateGuard(Backend& backend, Device device, const ExecOptions& options,
                    std::vector<Intermediate>& slots)
      : backend_(backend), device_(device), options_(options), slots_(slots) {}
  ~IntermediateGuard() {
    for (Intermediate& t : slots_) release(t);
  }
  DLTensor* make(Intermediate& t, DType dtype, std::span<const int64_t> sizes, const std::vector<int>& order) {
    t.shape.assign(sizes.begin(), sizes.end());
    t.strides = cpu::compact_strides_inline(sizes, order);
    t.bytes = static_cast<size_t>(std::max<int64_t>(numel(sizes), 1)) * static_cast<size_t>(dtype_size(dtype));
    t.tensor.data = backend_.allocate(t.bytes, device_.id, options_);
    t.live = true;
    t.tensor.device = device_.kind == DeviceKind::CPU ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device_.id};
    t.tensor.ndim = static_cast<int>(sizes.size());
    t.tensor.dtype = to_dlpack(dtype);
    t.tensor.shape = t.shape.data();
    t.tensor.strides = t.strides.data();
    t.tensor.byte_offset = 0;
    return &t.tensor;
  }
  void release(Intermediate& t) {
    if (!t.live) return;
    t.live = false;
    backend_.release(t.tensor.data, t.bytes, device_.id, options_);
  }

 private:
  Backend& backend_;
  Device device_;
  const ExecOptions& options_;
  std::vector<Intermediate>& slots_;
};

}  // namespace

void execute(const Plan& p, const Binding& b, const DLTensor* const* inputs, DLTensor* const* outputs,
             const ExecOptions& options) {
  const ConcreteFusion& c = *p.concrete;
  const Segmentation& s = p.segmentation;
  const Fusion& f = *c.fusion;
  const RunPlan& plan = s.run_plan;
  Backend& backend = backend_for(c.device.kind);
  check_communicator(f, c.device.kind, options, "kf_execute");
  Scratch<RunState> state;
  state->intermediates.assign(plan.intermediates.size(), Intermediate{});
  IntermediateGuard guard(backend, c.device, options, state->intermediates);
  auto tensor = [&](TensorRef r) -> DLTensor* {
    switch (r.kind) {
      case TensorRef::Kind::Input: return const_cast<DLTensor*>(inputs[r.index]);
      case TensorRef::Kind::Output: return outputs[r.index];
      case TensorRef::Kind::Intermediate: break;
    }
    return &state->intermediates[r.index].tensor;
  };

  for (size_t k = 0; k < s.segments.size(); ++k) {
    const SegmentRun& run = plan.segments[k];
    state->ins.clear();
    for (TensorRef r : run.inputs) state->ins.push_back(tensor(r));
    state->outs.clear();
    for (TensorRef r : run.outputs) {
      if (r.kind == TensorRef::Kind::Intermediate) {
        const int64_t id = plan.intermediates[r.index];
        state->outs.push_back(guard.make(state->intermediates[r.index], f.value(id).dtype, b.sizes[id],
                                         c.stride_orders[static_cast<size_t>(id)]));
      } else {
        state->outs.push_back(tensor(r));
      }
    }
    run_any_segment(backend, p, k, b.sizes, state->ins.data(), state->outs.data(), options);
    for (uint32_t slot : run.release_after) guard.release(state->intermediates[slot]);
  }

  // Outputs that are inputs, repeated outputs, and deferred aliased outputs.
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const DLTensor* src = tensor(plan.final_values[i]);
    if (src != outputs[i]) backend.copy(*src, *outputs[i], options);
  }
}

namespace {

// The segment at `index`, after checking the tensors a caller passes for
// its value inputs (and, when given, its outputs): count, rank, dtype,
// device. `fn` names the API call.
const Segment& checked_segment(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                               DLTensor* const* outputs, size_t num_outputs, const char* fn) {
  const ConcreteFusion& c = *p.concrete;
  const Segmentation& s = p.segmentation;
  const Fusion& f = *c.fusion;
  if (index >= s.segments.size())
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": index ", index, " is out of range (", s.segments.size(), " segments)");
  const Segment& seg = s.segments[index];
  if (num_inputs != seg.task.inputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": segment ", index, " has ", seg.task.inputs.size(), " value inputs, got ",
         num_inputs);
  if (outputs != nullptr && num_outputs != seg.task.outputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": segment ", index, " has ", seg.task.outputs.size(), " outputs, got ",
         num_outputs);
  auto check = [&](const DLTensor* t, int64_t id, const char* what, size_t k) {
    const Value& v = f.value(id);
    if (t == nullptr)
      fail(KF_ERR_INVALID_ARGUMENT, fn, ": ", what, " ", k, " (value ", id, ") is NULL");
    if (t->ndim != v.rank)
      fail(KF_ERR_SHAPE_MISMATCH, fn, ": ", what, " ", k, " (value ", id,
           "): expected rank ", v.rank, ", got rank ", t->ndim);
    auto dt = from_dlpack(t->dtype);
    if (!((dt && *dt == v.dtype) || (v.dtype == DType::Bool && accepts_as_bool(t->dtype))))
      fail(KF_ERR_DTYPE_MISMATCH, fn, ": ", what, " ", k, " (value ", id,
           "): expected ", dtype_name(v.dtype), ", got ", describe_dlpack(t->dtype));
    if (v.rank > 0 && t->shape == nullptr)
      fail(KF_ERR_INVALID_ARGUMENT, fn, ": ", what, " ", k, ": shape is NULL");
    std::optional<DeviceKind> kind = device_kind(t->device);
    bool cpu = kind == DeviceKind::CPU;
    bool on_device = kind && (c.device.kind == DeviceKind::CPU ? cpu : (!cpu || v.is_scalar));
    if (!on_device)
      fail(KF_ERR_DEVICE_MISMATCH, fn, ": ", what, " ", k, " (value ", id,
           ") is not on the fusion's device");
  };
  for (size_t k = 0; k < num_inputs; ++k) check(inputs[k], seg.task.inputs[k], "input", k);
  if (outputs != nullptr)
    for (size_t k = 0; k < num_outputs; ++k) check(outputs[k], seg.task.outputs[k], "output", k);
  return seg;
}

}  // namespace

void execute_segment(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                     DLTensor* const* outputs, size_t num_outputs, const ExecOptions& options) {
  const ConcreteFusion& c = *p.concrete;
  const Fusion& f = *c.fusion;
  static DLTensor* const kNone[1] = {nullptr};
  const Segment& seg = checked_segment(p, index, inputs, num_inputs, num_outputs ? outputs : kNone, num_outputs,
                                       "kf_execute_segment");
  Scratch<ValueSizes> sizes;
  task_sizes(f, seg.task, inputs, sizes.get());
  check_communicator(f, c.device.kind, options, "kf_execute_segment");
  run_any_segment(backend_for(c.device.kind), p, index, *sizes, inputs, outputs, options);
}

void segment_output_shape(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                          size_t output, int64_t* shape, size_t rank) {
  const char* fn = "kf_segment_output_shape";
  const Segment& seg = checked_segment(p, index, inputs, num_inputs, nullptr, 0, fn);
  const Fusion& f = p.fusion();
  if (output >= seg.task.outputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": output ", output, " is out of range (segment ", index, " has ",
         seg.task.outputs.size(), " outputs)");
  const int64_t id = seg.task.outputs[output];
  if (rank != static_cast<size_t>(f.value(id).rank))
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": rank is ", rank, ", expected the output's rank ", f.value(id).rank);
  Scratch<ValueSizes> sizes;
  task_sizes(f, seg.task, inputs, sizes.get());
  const std::span<const int64_t> s = (*sizes)[id];
  std::copy(s.begin(), s.end(), shape);
}

}  // namespace kf
