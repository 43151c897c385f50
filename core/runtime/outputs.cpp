#include "core/runtime/outputs.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "core/runtime/compact_strides.h"
#include "core/runtime/backend.h"
#include "core/concretize/overlap.h"
#include "core/util/byte_count.h"
#include "core/util/dl_layout.h"
#include "core/util/error.h"

namespace kf {

namespace {

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

MemoryRegion check_output_tensor(const Value& v, std::span<const int64_t> sizes, const DLTensor* t, Device device,
                                 const TensorName& name) {
  if (t == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": tensor pointer is NULL");
  if (t->ndim != v.rank)
    fail(KF_ERR_SHAPE_MISMATCH, name, ": expected rank ", v.rank, ", got rank ", t->ndim);
  if (t->dtype.lanes != 1)
    fail(KF_ERR_UNSUPPORTED, name, ": DLPack lanes ", t->dtype.lanes, " are not supported");
  auto dt = from_dlpack(t->dtype);
  if (!((dt && *dt == v.dtype) || (v.dtype == DType::Bool && accepts_as_bool(t->dtype))))
    fail(KF_ERR_DTYPE_MISMATCH, name, ": expected ", dtype_name(v.dtype), ", got ",
         describe_dlpack(t->dtype));
  if (v.rank > 0 && t->shape == nullptr)
    fail(KF_ERR_INVALID_ARGUMENT, name, ": shape is NULL for rank ", v.rank);
  for (int d = 0; d < v.rank; ++d)
    if (t->shape[d] != sizes[static_cast<size_t>(d)])
      fail(KF_ERR_SHAPE_MISMATCH, name, ": expected size ", sizes[static_cast<size_t>(d)],
           " in dim ", d, ", got ", t->shape[d]);
  std::optional<DeviceKind> kind = device_kind(t->device);
  bool same = kind == device.kind && (device.kind == DeviceKind::CPU || t->device.device_id == device.id);
  if (!same)
    fail(KF_ERR_DEVICE_MISMATCH, name, ": expected a tensor on ",
         device.kind == DeviceKind::CPU ? "cpu" : "cuda", " where the inputs are");
  Extents strides(sizes.size(), 0);
  dl_strides(*t, strides.data());
  for (int64_t s : strides)
    if (s < 0) fail(KF_ERR_UNSUPPORTED, name, ": negative strides are not supported");
  const int64_t elem = dtype_size(v.dtype);
  // Reach in int64 (as for inputs), then in the address space.
  // (bad_dim first: an overflowing reach is never taken for an empty tensor)
  const ElementReach reach = element_reach(sizes, strides);
  if (reach.bad_dim >= 0)
    fail(KF_ERR_SHAPE_MISMATCH, name, ": strides reach beyond int64 offsets at dim ", reach.bad_dim);
  if (reach.max_offset < 0) return region_of(nullptr, sizes, strides, elem);  // empty: nothing is written
  if (t->data == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": data is NULL");
  uintptr_t start, end;
  if (!dl_address_checked(*t, &start) || !byte_end(start, reach.max_offset, elem, &end))
    fail(KF_ERR_INVALID_ARGUMENT, name, ": data pointer + byte_offset (", t->data, " + ", t->byte_offset,
         ") and the strides reach past the end of the address space");
  // Kernels store whole elements (vectors of them on the GPU): a split
  // element is never addressable.
  if (start % static_cast<uintptr_t>(elem) != 0)
    fail(KF_ERR_INVALID_ARGUMENT, name, ": data pointer + byte_offset (", t->data, " + ", t->byte_offset,
         ") is not aligned to ", elem, " bytes for ", dtype_name(v.dtype));
  int64_t span = 0;
  const int64_t d = self_overlap_dim(sizes, strides, &span);
  if (d >= 0)
    fail(KF_ERR_INVALID_ARGUMENT, name, ": strides make the tensor overlap itself (dim ", d, " has stride ",
         strides[static_cast<size_t>(d)], ", inner dims span ", span, " elements)");
  return region_of(start, end, sizes, strides, elem);
}

void check_output(const ConcreteFusion& c, const Binding& b, size_t index, const DLTensor* t,
                  std::vector<MemoryRegion>* regions) {
  const Fusion& f = *c.fusion;
  const Output& o = f.outputs[index];
  const TensorName name{nullptr, "output", index, o.value};
  const MemoryRegion out = check_output_tensor(f.value(o.value), b.sizes[o.value], t, c.device, name);
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    const Value& in = f.value(f.inputs[i]);
    const InputMeta& m = b.inputs[i];
    if (in.is_scalar || !may_overlap_input(out, m, dtype_size(in.dtype))) continue;
    // The input an output updates in place may be the output's own memory,
    // element for element; any other sharing would read written elements.
    if (static_cast<int64_t>(i) == o.alias_input) {
      if (!same_view(out, region_of(m.data, m.sizes, m.strides, dtype_size(in.dtype))))
        fail(KF_ERR_INVALID_ARGUMENT, name, ": memory overlaps input ", i,
             ", which it updates in place, but not element for element (pass the input's own view, or memory "
             "disjoint from it)");
      continue;
    }
    fail(KF_ERR_INVALID_ARGUMENT, name, ": memory overlaps input ", i, ", which it is not declared to alias");
  }
  check_disjoint_from(out, *regions, name);
  regions->push_back(out);
}

void check_disjoint_from(const MemoryRegion& out, std::span<const MemoryRegion> earlier, const TensorName& name) {
  for (size_t j = 0; j < earlier.size(); ++j)
    if (may_overlap(out, earlier[j]))
      fail(KF_ERR_INVALID_ARGUMENT, name, ": memory overlaps output ", j,
           " (outputs must not share memory: one would overwrite the other)");
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
    owned->strides = compact_strides(owned->shape, c.stride_orders[static_cast<size_t>(o.value)]);
    const TensorName name{nullptr, "output", index, o.value};
    const size_t bytes = allocation_bytes(numel(owned->shape), dtype_size(v.dtype), name);
    Backend& backend = backend_for(c.device.kind);
    try {
      owned->memory = backend.allocate(bytes, c.device.id, options);
    } catch (const Error& e) {
      if (e.status() != KF_ERR_OUT_OF_MEMORY) throw;
      fail(KF_ERR_OUT_OF_MEMORY, name, ": ", e.what());
    }
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
