#include "core/runtime/outputs.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/runtime/cpu/tensor_view.h"
#include "core/runtime/backend.h"
#include "core/util/error.h"

namespace kf {

namespace {

// "output 0 (value 5)", streamed only when a message is built.
struct OutputName {
  const Fusion& fusion;
  size_t index;
};
std::ostream& operator<<(std::ostream& os, const OutputName& n) {
  return os << "output " << n.index << " (value " << n.fusion.outputs[n.index].value << ")";
}

// [first, last) byte range a tensor touches.
std::pair<uintptr_t, uintptr_t> byte_range(const std::byte* data, std::span<const int64_t> sizes,
                                           std::span<const int64_t> strides, int elem) {
  int64_t hi = 0;
  for (size_t d = 0; d < sizes.size(); ++d) hi += (sizes[d] - 1) * strides[d];
  auto base = reinterpret_cast<uintptr_t>(data);
  return {base, base + static_cast<uintptr_t>(hi + 1) * static_cast<uintptr_t>(elem)};
}

struct OwnedTensor {
  DLManagedTensor managed{};
  Sizes shape;
  std::vector<int64_t> strides;
  void (*release)(OwnedTensor*) = nullptr;
  void* memory = nullptr;
  int device = 0;
  size_t bytes = 0;
  ExecOptions options;
  Backend* backend = nullptr;
};

void delete_owned(DLManagedTensor* m) {
  auto* t = static_cast<OwnedTensor*>(m->manager_ctx);
  if (t->release) t->release(t);
  delete t;
}

}  // namespace

// Whether no element is reached twice (sufficient test: sorted by stride,
// each dim's stride covers the dims inside it).
bool no_self_overlap(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t order[kMaxRank];
  size_t n = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] > 1) order[n++] = static_cast<int64_t>(d);
  }
  std::sort(order, order + n, [&](int64_t a, int64_t b) { return strides[static_cast<size_t>(a)] < strides[static_cast<size_t>(b)]; });
  int64_t span = 1;
  for (size_t k = 0; k < n; ++k) {
    const size_t d = static_cast<size_t>(order[k]);
    if (strides[d] < span) return false;
    span = strides[d] * sizes[d];
  }
  return true;
}

void check_no_self_overlap(std::span<const int64_t> sizes, std::span<const int64_t> strides,
                           const std::string& name) {
  std::vector<size_t> dims;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return;  // empty: nothing is written
    if (sizes[d] > 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(), [&](size_t a, size_t b) { return strides[a] < strides[b]; });
  int64_t span = 1;  // elements covered by the inner dims
  for (size_t d : dims) {
    if (strides[d] < span)
      fail(KF_ERR_INVALID_ARGUMENT, name, ": strides make the tensor overlap itself (dim ", d,
           " has stride ", strides[d], ", inner dims span ", span, " elements)");
    span = strides[d] * sizes[d];
  }
}

void check_output(const ConcreteFusion& c, const Binding& b, size_t index, const DLTensor* t) {
  const Fusion& f = *c.fusion;
  const Output& o = f.outputs[index];
  const Value& v = f.value(o.value);
  const OutputName name{f, index};
  if (t == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": tensor pointer is NULL");
  if (t->ndim != v.rank)
    fail(KF_ERR_SHAPE_MISMATCH, name, ": expected rank ", v.rank, ", got rank ", t->ndim);
  if (t->dtype.lanes != 1)
    fail(KF_ERR_UNSUPPORTED, name, ": DLPack lanes ", t->dtype.lanes, " are not supported");
  auto dt = from_dlpack(t->dtype);
  if (!((dt && *dt == v.dtype) || (v.dtype == DType::Bool && accepts_as_bool(t->dtype))))
    fail(KF_ERR_DTYPE_MISMATCH, name, ": expected ", dtype_name(v.dtype), ", got ",
         describe_dlpack(t->dtype));
  const std::span<const int64_t> sizes = b.sizes[o.value];
  if (v.rank > 0 && t->shape == nullptr)
    fail(KF_ERR_INVALID_ARGUMENT, name, ": shape is NULL for rank ", v.rank);
  for (int d = 0; d < v.rank; ++d)
    if (t->shape[d] != sizes[static_cast<size_t>(d)])
      fail(KF_ERR_SHAPE_MISMATCH, name, ": expected size ", sizes[static_cast<size_t>(d)],
           " in dim ", d, ", got ", t->shape[d]);
  std::optional<DeviceKind> kind = device_kind(t->device);
  bool same = kind == c.device.kind &&
              (c.device.kind == DeviceKind::CPU || t->device.device_id == c.device.id);
  if (!same)
    fail(KF_ERR_DEVICE_MISMATCH, name, ": expected a tensor on ",
         c.device.kind == DeviceKind::CPU ? "cpu" : "cuda", " where the inputs are");
  const Extents strides = t->strides ? Extents(t->strides, t->strides + v.rank)
                                     : cpu::compact_strides_inline(sizes);
  for (int64_t s : strides)
    if (s < 0) fail(KF_ERR_UNSUPPORTED, name, ": negative strides are not supported");
  const int64_t n = numel(sizes);
  if (n == 0) return;
  if (t->data == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": data is NULL");
  if (!no_self_overlap(sizes, strides)) check_no_self_overlap(sizes, strides, (std::ostringstream() << name).str());
  const auto* data = reinterpret_cast<const std::byte*>(reinterpret_cast<uintptr_t>(t->data) + t->byte_offset);
  auto out_range = byte_range(data, sizes, strides, dtype_size(v.dtype));
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Value& in = f.value(f.inputs[i]);
    const InputMeta& m = b.inputs[i];
    if (in.is_scalar || static_cast<int64_t>(i) == o.alias_input || numel(m.sizes) == 0) continue;
    auto in_range = byte_range(m.data, m.sizes, m.strides, dtype_size(in.dtype));
    if (out_range.first < in_range.second && in_range.first < out_range.second)
      fail(KF_ERR_INVALID_ARGUMENT, name, ": memory overlaps input ", i,
           ", which it is not declared to alias");
  }
}

DLManagedTensor* allocate_output(const ConcreteFusion& c, const Binding& b, size_t index,
                                 const DLTensor* const* inputs, const ExecOptions& options) {
  const Fusion& f = *c.fusion;
  const Output& o = f.outputs[index];
  const Value& v = f.value(o.value);
  auto owned = std::make_unique<OwnedTensor>();
  owned->shape.assign(b.sizes[o.value].begin(), b.sizes[o.value].end());
  DLTensor& t = owned->managed.dl_tensor;
  if (o.alias_input >= 0) {
    const InputMeta& m = b.inputs[static_cast<size_t>(o.alias_input)];
    owned->strides = m.strides.to_vector();
    t.data = inputs[o.alias_input]->data;
    t.byte_offset = inputs[o.alias_input]->byte_offset;
    t.device = inputs[o.alias_input]->device;
  } else {
    owned->strides = cpu::compact_strides(owned->shape, c.stride_orders[static_cast<size_t>(o.value)]);
    size_t bytes = static_cast<size_t>(std::max<int64_t>(numel(owned->shape), 1)) *
                   static_cast<size_t>(dtype_size(v.dtype));
    Backend& backend = backend_for(c.device.kind);
    owned->memory = backend.allocate(bytes, c.device.id, options);
    owned->bytes = bytes;
    owned->device = c.device.id;
    owned->options = options;
    owned->backend = &backend;
    owned->release = [](OwnedTensor* self) {
      self->backend->release(self->memory, self->bytes, self->device, self->options);
    };
    t.device = c.device.kind == DeviceKind::CPU ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, c.device.id};
    t.data = owned->memory;
    t.byte_offset = 0;
  }
  t.ndim = v.rank;
  t.dtype = to_dlpack(v.dtype);
  t.shape = owned->shape.data();
  t.strides = owned->strides.data();
  owned->managed.manager_ctx = owned.get();
  owned->managed.deleter = delete_owned;
  return &owned.release()->managed;
}

}  // namespace kf
