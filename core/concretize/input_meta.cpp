#include "core/concretize/input_meta.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/util/dl_layout.h"
#include "core/util/error.h"

namespace kf {

int device_type_code(const DLDevice& d) {
  int code;
  static_assert(sizeof(code) == sizeof(d.device_type));
  std::memcpy(&code, &d.device_type, sizeof code);
  return code;
}

std::optional<DeviceKind> device_kind(const DLDevice& d) {
  switch (device_type_code(d)) {
    case kDLCPU:
    case kDLCUDAHost: return DeviceKind::CPU;
    case kDLCUDA:
    case kDLCUDAManaged: return DeviceKind::CUDA;
    default: return std::nullopt;
  }
}

std::ostream& operator<<(std::ostream& os, const TensorName& n) {
  if (n.fn != nullptr) os << n.fn << ": ";
  return os << n.what << " " << n.index << " (value " << n.value << ")";
}

std::string input_name(const Fusion& fusion, size_t index) {
  return "input " + std::to_string(index) + " (value " + std::to_string(fusion.inputs[index]) + ")";
}

namespace {

Device device_of(const DLTensor* t, const TensorName& name) {
  std::optional<DeviceKind> kind = device_kind(t->device);
  if (!kind)
    fail(KF_ERR_UNSUPPORTED, name, ": device type ", device_type_code(t->device),
         " is not supported (expected kDLCPU, kDLCUDA, kDLCUDAHost or kDLCUDAManaged)");
  return {*kind, *kind == DeviceKind::CPU ? 0 : t->device.device_id};
}

void check_dtype(const Value& v, const DLTensor* t, const TensorName& name) {
  if (t->dtype.lanes != 1)
    fail(KF_ERR_UNSUPPORTED, name, ": DLPack lanes ", t->dtype.lanes,
         " (vector types) are not supported, expected 1");
  auto dt = from_dlpack(t->dtype);
  bool ok = (dt && *dt == v.dtype) || (v.dtype == DType::Bool && accepts_as_bool(t->dtype));
  if (!ok)
    fail(KF_ERR_DTYPE_MISMATCH, name, ": expected ", dtype_name(v.dtype), ", got ",
         describe_dlpack(t->dtype));
}

int alignment_of(uintptr_t address) {
  int a = 16;
  while (a > 1 && address % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

}  // namespace

void read_input(const Fusion& fusion, size_t index, const DLTensor* t, InputMeta* meta) {
  read_tensor(fusion.value(fusion.inputs[index]), t, TensorName{nullptr, "input", index, fusion.inputs[index]}, meta);
}

void read_tensor(const Value& v, const DLTensor* t, const TensorName& name, InputMeta* meta) {
  if (t == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": tensor pointer is NULL");
  InputMeta& m = *meta;
  m.device = device_of(t, name);
  m.max_offset = 0;
  m.count = 0;
  m.scalar = 0;
  m.scalar_i64 = 0;
  if (t->ndim != v.rank)
    fail(KF_ERR_SHAPE_MISMATCH, name, ": expected rank ", v.rank, ", got rank ", t->ndim);
  check_dtype(v, t, name);
  if (t->ndim > 0 && t->shape == nullptr)
    fail(KF_ERR_INVALID_ARGUMENT, name, ": shape is NULL for rank ", t->ndim);
  const size_t r = static_cast<size_t>(t->ndim);
  m.sizes.assign(t->shape, t->shape + r);
  for (size_t d = 0; d < r; ++d)
    if (m.sizes[d] < 0)
      fail(KF_ERR_SHAPE_MISMATCH, name, ": size of dim ", d, " is ", m.sizes[d],
           ", expected >= 0");
  const ElementCount elements = element_count(m.sizes);
  if (elements.bad_dim >= 0)
    fail(KF_ERR_SHAPE_MISMATCH, name, ": element count overflows int64 at dim ", elements.bad_dim);
  const int64_t count = elements.count;
  m.strides.resize(r);
  dl_strides(*t, m.strides.data());
  if (t->strides != nullptr)
    for (size_t d = 0; d < r; ++d)
      if (m.strides[d] < 0)
        fail(KF_ERR_UNSUPPORTED, name, ": stride of dim ", d, " is ", m.strides[d],
             "; negative strides are not supported");
  m.count = count;
  if (count > 0) {
    const ElementReach reach = element_reach(m.sizes, m.strides);
    if (reach.bad_dim >= 0)
      fail(KF_ERR_SHAPE_MISMATCH, name, ": strides reach beyond int64 offsets at dim ", reach.bad_dim);
    m.max_offset = reach.max_offset;
    if (t->data == nullptr)
      fail(KF_ERR_INVALID_ARGUMENT, name, ": data is NULL for ", count, " elements");
  }
  // Integer arithmetic: a NULL data pointer (allowed for empty tensors) must
  // not be offset as a pointer. The address range the tensor reaches must
  // not wrap around the address space.
  uintptr_t start, end;
  if (!dl_address_checked(*t, &start) || (count > 0 && !byte_end(start, m.max_offset, dtype_size(v.dtype), &end)))
    fail(KF_ERR_INVALID_ARGUMENT, name, ": data pointer + byte_offset (", t->data, " + ", t->byte_offset,
         ") and the strides reach past the end of the address space");
  m.data = reinterpret_cast<std::byte*>(start);
  m.alignment = alignment_of(reinterpret_cast<uintptr_t>(m.data));
  // Kernels and the CPU backend load whole elements (vectors of them on the
  // GPU, sized from m.alignment): a split element is never addressable.
  if (count > 0 && m.alignment < dtype_size(v.dtype))
    fail(KF_ERR_INVALID_ARGUMENT, name, ": data pointer + byte_offset (", t->data, " + ", t->byte_offset,
         ") is not aligned to ", dtype_size(v.dtype), " bytes for ", dtype_name(v.dtype));
  if (v.is_scalar) {
    if (m.device.kind != DeviceKind::CPU)
      fail(KF_ERR_DEVICE_MISMATCH, name, ": scalar inputs must be 0-dim CPU tensors");
    if (m.data == nullptr) fail(KF_ERR_INVALID_ARGUMENT, name, ": scalar data is NULL");
    const std::byte* p = m.data;
    switch (v.dtype) {
      case DType::F64: { double x; std::memcpy(&x, p, 8); m.scalar = x; break; }
      case DType::F32: { float x; std::memcpy(&x, p, 4); m.scalar = x; break; }
      case DType::F16: { uint16_t x; std::memcpy(&x, p, 2); m.scalar = half_to_float(x); break; }
      case DType::BF16: { uint16_t x; std::memcpy(&x, p, 2); m.scalar = bf16_to_float(x); break; }
      case DType::I64: { int64_t x; std::memcpy(&x, p, 8); m.scalar_i64 = x; m.scalar = static_cast<double>(x); break; }
      case DType::I32: { int32_t x; std::memcpy(&x, p, 4); m.scalar_i64 = x; m.scalar = x; break; }
      case DType::I8: m.scalar_i64 = *reinterpret_cast<const int8_t*>(p); m.scalar = static_cast<double>(m.scalar_i64); break;
      case DType::U8: m.scalar_i64 = *reinterpret_cast<const uint8_t*>(p); m.scalar = static_cast<double>(m.scalar_i64); break;
      case DType::Bool: { m.scalar_i64 = *reinterpret_cast<const uint8_t*>(p) != 0; m.scalar = static_cast<double>(m.scalar_i64); break; }
      case DType::F8E4M3: m.scalar = e4m3fn_to_float(*reinterpret_cast<const uint8_t*>(p)); break;
      case DType::F8E5M2: m.scalar = e5m2_to_float(*reinterpret_cast<const uint8_t*>(p)); break;
    }
  }
}

void read_inputs(const Fusion& fusion, const DLTensor* const* inputs, size_t num_inputs,
                 std::vector<InputMeta>* out, Device* device) {
  if (num_inputs != fusion.inputs.size())
    fail(KF_ERR_INVALID_ARGUMENT, "inputs: expected ", fusion.inputs.size(), " inputs, got ",
         num_inputs);
  if (num_inputs > 0 && inputs == nullptr)
    fail(KF_ERR_INVALID_ARGUMENT, "inputs: array is NULL for ", num_inputs, " inputs");
  std::vector<InputMeta>& metas = *out;
  metas.resize(num_inputs);
  bool have_device = false;
  size_t device_input = 0;
  Device dev;
  for (size_t i = 0; i < num_inputs; ++i) {
    read_input(fusion, i, inputs[i], &metas[i]);
    const InputMeta& m = metas[i];
    // 0-dim CPU tensors may accompany GPU tensors (they are passed by value).
    if (m.sizes.empty() && m.device.kind == DeviceKind::CPU) continue;
    if (!have_device) {
      dev = m.device;
      have_device = true;
      device_input = i;
    } else if (!(m.device == dev)) {
      fail(KF_ERR_DEVICE_MISMATCH, input_name(fusion, i), ": on ",
           m.device.kind == DeviceKind::CPU ? "cpu" : "cuda:", m.device.kind == DeviceKind::CPU ? "" : std::to_string(m.device.id),
           ", but ", input_name(fusion, device_input), " is on ",
           dev.kind == DeviceKind::CPU ? "cpu" : "cuda:", dev.kind == DeviceKind::CPU ? "" : std::to_string(dev.id));
    }
  }
  *device = dev;
}

}  // namespace kf
