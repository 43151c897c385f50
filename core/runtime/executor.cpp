#include "core/runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/runtime/backend.h"
#include "core/runtime/collective.h"
#include "core/runtime/compact_strides.h"
#include "core/runtime/outputs.h"
#include "core/concretize/overlap.h"
#include "core/segment/task_sizes.h"
#include "core/util/byte_count.h"
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
  // Per input: a copy of each scalar input, over its bytes in scalar_bits.
  std::vector<DLTensor> scalars;
  std::vector<uint64_t> scalar_bits;
};

// "intermediate value 5", streamed only when a message is built.
struct IntermediateName {
  int64_t value;
};
std::ostream& operator<<(std::ostream& os, const IntermediateName& n) { return os << "intermediate value " << n.value; }

// Releases the intermediates still live when a run ends (also by an exception).
class IntermediateGuard {
 public:
  IntermediateGuard(Backend& backend, Device device, const ExecOptions& options,
                    std::vector<Intermediate>& slots)
      : backend_(backend), device_(device), options_(options), slots_(slots) {}
  ~IntermediateGuard() {
    for (Intermediate& t : slots_) release(t);
  }
  DLTensor* make(Intermediate& t, int64_t value, DType dtype, std::span<const int64_t> sizes,
                 const std::vector<int>& order) {
    t.shape.assign(sizes.begin(), sizes.end());
    t.strides = compact_strides_inline(sizes, order);
    t.bytes = allocation_bytes(numel(sizes), dtype_size(dtype), IntermediateName{value});
    try {
      t.tensor.data = backend_.allocate(t.bytes, device_.id, options_);
    } catch (const Error& e) {
      if (e.status() != KF_ERR_OUT_OF_MEMORY) throw;
      fail(KF_ERR_OUT_OF_MEMORY, IntermediateName{value}, ": ", e.what());
    }
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
  // Scalar inputs are values, read when the call binds them, and outputs may
  // share their memory (check_output skips scalars): a segment that runs
  // after one wrote such an output must still see the bound value (a shape
  // scalar read again would size the segment's results differently). Each
  // segment reads a copy taken before any runs.
  bool has_scalars = false;
  for (int64_t id : f.inputs) has_scalars = has_scalars || f.value(id).is_scalar;
  if (has_scalars) {
    state->scalars.assign(f.inputs.size(), DLTensor{});  // data NULL: not a scalar
    state->scalar_bits.assign(f.inputs.size(), 0);
    for (size_t i = 0; i < f.inputs.size(); ++i) {
      const Value& v = f.value(f.inputs[i]);
      if (!v.is_scalar) continue;
      DLTensor& t = state->scalars[i];
      t = *inputs[i];
      std::memcpy(&state->scalar_bits[i], b.inputs[i].data, static_cast<size_t>(dtype_size(v.dtype)));
      t.data = &state->scalar_bits[i];
      t.byte_offset = 0;
    }
  }
  auto tensor = [&](TensorRef r) -> DLTensor* {
    switch (r.kind) {
      case TensorRef::Kind::Input:
        if (has_scalars && state->scalars[r.index].data != nullptr) return &state->scalars[r.index];
        return const_cast<DLTensor*>(inputs[r.index]);
      case TensorRef::Kind::Output: return outputs[r.index];
      case TensorRef::Kind::Intermediate: break;
    }
    return &state->intermediates[r.index].tensor;
  };

  for (size_t k = 0; k < s.segments.size(); ++k) {
    const SegmentRun& run = plan.segments[k];
    // Inputs laid out across their rows: copied into kfuse's layout first.
    for (const InputCopy& in : run.copy_in) {
      const int64_t id = f.inputs[in.input];
      const DLTensor* copy = guard.make(state->intermediates[in.slot], id, f.value(id).dtype, b.sizes[id],
                                        c.stride_orders[static_cast<size_t>(id)]);
      backend.copy(*inputs[in.input], *copy, options);
    }
    state->ins.clear();
    for (TensorRef r : run.inputs) state->ins.push_back(tensor(r));
    state->outs.clear();
    for (TensorRef r : run.outputs) {
      if (r.kind == TensorRef::Kind::Intermediate) {
        const int64_t id = plan.intermediates[r.index];
        state->outs.push_back(guard.make(state->intermediates[r.index], id, f.value(id).dtype, b.sizes[id],
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

void prepare(const Plan& p, const Binding& b) { backend_for(p.concrete->device.kind).prepare(p, b.sizes); }

bool prepared(const Plan& p) {
  // (a CPU plan needs no backend: the CUDA one is not asked, so no driver loads)
  return p.concrete->device.kind == DeviceKind::CPU || backend_for(p.concrete->device.kind).prepared(p);
}

namespace {

// Per-call state of a segment run on its own, kept per thread (Scratch).
struct SegmentCall {
  std::vector<InputMeta> inputs;
  std::vector<MemoryRegion> outputs;
  ValueSizes sizes;
};

// The segment at `index`, after checking the tensors a caller passes for
// its value inputs exactly as kf_execute checks a fusion's inputs (rank,
// dtype, device, sizes, strides, offset, alignment, data), then inferring
// the sizes of its values into call.sizes. With `outputs`, also checks each
// output as kf_execute_into does (shape, strides, data, alignment, no
// self-overlap, no memory shared with an input or another output). `fn`
// names the API call.
const Segment& checked_segment(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                               DLTensor* const* outputs, size_t num_outputs, const char* fn, SegmentCall& call) {
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
  call.inputs.resize(num_inputs);
  for (size_t k = 0; k < num_inputs; ++k) {
    const int64_t id = seg.task.inputs[k];
    const TensorName name{fn, "input", k, id};
    read_tensor(f.value(id), inputs[k], name, &call.inputs[k]);
    const InputMeta& m = call.inputs[k];
    // 0-dim CPU tensors may accompany GPU tensors (passed by value).
    if (!(m.device == c.device) && !(m.sizes.empty() && m.device.kind == DeviceKind::CPU))
      fail(KF_ERR_DEVICE_MISMATCH, name, " is not on the fusion's device");
  }
  task_sizes(f, seg.task, call.inputs, &call.sizes);
  if (outputs == nullptr) return seg;
  call.outputs.clear();
  for (size_t k = 0; k < num_outputs; ++k) {
    const int64_t id = seg.task.outputs[k];
    const TensorName name{fn, "output", k, id};
    const MemoryRegion out = check_output_tensor(f.value(id), call.sizes[id], outputs[k], c.device, name);
    for (size_t i = 0; i < num_inputs; ++i) {
      const InputMeta& m = call.inputs[i];
      const Value& in = f.value(seg.task.inputs[i]);
      if (!in.is_scalar && may_overlap_input(out, m, dtype_size(in.dtype)))
        fail(KF_ERR_INVALID_ARGUMENT, name, ": memory overlaps input ", i,
             " (a segment run on its own never writes memory it reads)");
    }
    check_disjoint_from(out, call.outputs, name);
    call.outputs.push_back(out);
  }
  return seg;
}

}  // namespace

void execute_segment(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                     DLTensor* const* outputs, size_t num_outputs, const ExecOptions& options) {
  const ConcreteFusion& c = *p.concrete;
  const Fusion& f = *c.fusion;
  const char* fn = "kf_execute_segment";
  Scratch<SegmentCall> call;
  // Outputs are checked (their count too) even when none are given.
  static DLTensor* const kNone[1] = {nullptr};
  checked_segment(p, index, inputs, num_inputs, num_outputs ? outputs : kNone, num_outputs, fn, *call);
  check_communicator(f, c.device.kind, options, fn);
  run_any_segment(backend_for(c.device.kind), p, index, call->sizes, inputs, outputs, options);
}

void segment_output_shape(const Plan& p, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                          size_t output, int64_t* shape, size_t rank) {
  const char* fn = "kf_segment_output_shape";
  Scratch<SegmentCall> call;
  const Segment& seg = checked_segment(p, index, inputs, num_inputs, nullptr, 0, fn, *call);
  const Fusion& f = p.fusion();
  if (output >= seg.task.outputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": output ", output, " is out of range (segment ", index, " has ",
         seg.task.outputs.size(), " outputs)");
  const int64_t id = seg.task.outputs[output];
  if (rank != static_cast<size_t>(f.value(id).rank))
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": rank is ", rank, ", expected the output's rank ", f.value(id).rank);
  const std::span<const int64_t> s = call->sizes[id];
  std::copy(s.begin(), s.end(), shape);
}

}  // namespace kf
