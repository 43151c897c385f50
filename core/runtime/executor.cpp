#include "core/runtime/executor.h"

#include <algorithm>
#include <memory>
#include <unordered_map>

#include "core/runtime/backend.h"
#include "core/runtime/cpu/tensor_view.h"
#include "core/util/error.h"

namespace kf {

namespace {

// A compact intermediate tensor owned by the executor for one call.
struct Intermediate {
  DLTensor tensor{};
  Sizes shape;
  std::vector<int64_t> strides;
  size_t bytes = 0;
};

class IntermediatePool {
 public:
  IntermediatePool(Backend& backend, Device device, const ExecOptions& options)
      : backend_(backend), device_(device), options_(options) {}
  ~IntermediatePool() {
    for (auto& [id, t] : live_) free_one(*t);
  }
  DLTensor* make(int64_t id, DType dtype, const Sizes& sizes, const std::vector<int>& order) {
    auto t = std::make_unique<Intermediate>();
    t->shape = sizes;
    t->strides = cpu::compact_strides(sizes, order);
    t->bytes = static_cast<size_t>(std::max<int64_t>(numel(sizes), 1)) * static_cast<size_t>(dtype_size(dtype));
    t->tensor.data = backend_.allocate(t->bytes, device_.id, options_);
    t->tensor.device = device_.kind == DeviceKind::CPU ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, device_.id};
    t->tensor.ndim = static_cast<int>(sizes.size());
    t->tensor.dtype = to_dlpack(dtype);
    t->tensor.shape = t->shape.data();
    t->tensor.strides = t->strides.data();
    DLTensor* p = &t->tensor;
    live_[id] = std::move(t);
    return p;
  }
  void drop(int64_t id) {
    auto it = live_.find(id);
    if (it == live_.end()) return;
    free_one(*it->second);
    live_.erase(it);
  }

 private:
  void free_one(Intermediate& t) { backend_.release(t.tensor.data, t.bytes, device_.id, options_); }
  Backend& backend_;
  Device device_;
  ExecOptions options_;
  std::unordered_map<int64_t, std::unique_ptr<Intermediate>> live_;
};

}  // namespace

void execute(const ConcreteFusion& c, const Segmentation& s, const Binding& b,
             const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options) {
  const Fusion& f = *c.fusion;
  Backend& backend = backend_for(c.device.kind);
  IntermediatePool pool(backend, c.device, options);
  std::vector<const DLTensor*> where(f.values.size(), nullptr);
  for (size_t i = 0; i < f.inputs.size(); ++i) where[static_cast<size_t>(f.inputs[i])] = inputs[i];

  // Outputs aliasing an input that a later segment still reads are computed
  // into a temporary and copied over the input at the end.
  std::vector<int64_t> last_read_segment(f.values.size(), -1);
  for (size_t k = 0; k < s.segments.size(); ++k)
    for (int64_t in : s.segments[k].task.inputs) last_read_segment[static_cast<size_t>(in)] = static_cast<int64_t>(k);
  std::vector<int64_t> producer_segment(f.values.size(), -1);
  for (size_t k = 0; k < s.segments.size(); ++k)
    for (int64_t out : s.segments[k].task.outputs) producer_segment[static_cast<size_t>(out)] = static_cast<int64_t>(k);

  std::vector<bool> direct_output(f.values.size(), false);
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Output& o = f.outputs[i];
    size_t id = static_cast<size_t>(o.value);
    if (direct_output[id] || f.value(o.value).is_input()) continue;  // copied below
    if (o.alias_input >= 0) {
      int64_t aliased = f.inputs[static_cast<size_t>(o.alias_input)];
      if (last_read_segment[static_cast<size_t>(aliased)] >= producer_segment[id]) continue;
    }
    where[id] = outputs[i];
    direct_output[id] = true;
  }

  for (size_t k = 0; k < s.segments.size(); ++k) {
    const Segment& seg = s.segments[k];
    std::vector<const DLTensor*> ins;
    for (int64_t in : seg.task.inputs) ins.push_back(where[static_cast<size_t>(in)]);
    std::vector<DLTensor*> outs;
    for (int64_t out : seg.task.outputs) {
      size_t id = static_cast<size_t>(out);
      if (!direct_output[id]) {
        const Value& v = f.value(out);
        where[id] = pool.make(out, v.dtype, b.sizes[id], c.stride_orders[id]);
      }
      outs.push_back(const_cast<DLTensor*>(where[id]));
    }
    backend.run_segment(c, s, k, ins.data(), outs.data(), options);
    for (int64_t dead : seg.dead_after) pool.drop(dead);
  }

  // Outputs that are inputs, repeated outputs, and deferred aliased outputs.
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    const Output& o = f.outputs[i];
    const DLTensor* src = where[static_cast<size_t>(o.value)];
    if (src != outputs[i]) backend.copy(*src, *outputs[i], options);
  }
}

void execute_segment(const ConcreteFusion& c, const Segmentation& s, size_t index,
                     const DLTensor* const* inputs, size_t num_inputs, DLTensor* const* outputs,
                     size_t num_outputs, const ExecOptions& options) {
  const Fusion& f = *c.fusion;
  if (index >= s.segments.size())
    fail(KF_ERR_INVALID_ARGUMENT, "kf_execute_segment: index ", index, " is out of range (",
         s.segments.size(), " segments)");
  const Segment& seg = s.segments[index];
  if (num_inputs != seg.task.inputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, "kf_execute_segment: segment ", index, " has ",
         seg.task.inputs.size(), " value inputs, got ", num_inputs);
  if (num_outputs != seg.task.outputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, "kf_execute_segment: segment ", index, " has ",
         seg.task.outputs.size(), " outputs, got ", num_outputs);
  auto check = [&](const DLTensor* t, int64_t id, const char* what, size_t k) {
    const Value& v = f.value(id);
    if (t == nullptr)
      fail(KF_ERR_INVALID_ARGUMENT, "kf_execute_segment: ", what, " ", k, " (value ", id, ") is NULL");
    if (t->ndim != v.rank)
      fail(KF_ERR_SHAPE_MISMATCH, "kf_execute_segment: ", what, " ", k, " (value ", id,
           "): expected rank ", v.rank, ", got rank ", t->ndim);
    auto dt = from_dlpack(t->dtype);
    if (!((dt && *dt == v.dtype) || (v.dtype == DType::Bool && accepts_as_bool(t->dtype))))
      fail(KF_ERR_DTYPE_MISMATCH, "kf_execute_segment: ", what, " ", k, " (value ", id,
           "): expected ", dtype_name(v.dtype), ", got ", describe_dlpack(t->dtype));
    if (v.rank > 0 && t->shape == nullptr)
      fail(KF_ERR_INVALID_ARGUMENT, "kf_execute_segment: ", what, " ", k, ": shape is NULL");
    std::optional<DeviceKind> kind = device_kind(t->device);
    bool cpu = kind == DeviceKind::CPU;
    bool on_device = kind && (c.device.kind == DeviceKind::CPU ? cpu : (!cpu || v.is_scalar));
    if (!on_device)
      fail(KF_ERR_DEVICE_MISMATCH, "kf_execute_segment: ", what, " ", k, " (value ", id,
           ") is not on the fusion's device");
  };
  for (size_t k = 0; k < num_inputs; ++k) check(inputs[k], seg.task.inputs[k], "input", k);
  for (size_t k = 0; k < num_outputs; ++k) check(outputs[k], seg.task.outputs[k], "output", k);
  backend_for(c.device.kind).run_segment(c, s, index, inputs, outputs, options);
}

}  // namespace kf
