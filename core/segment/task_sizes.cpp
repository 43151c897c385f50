#include "core/segment/task_sizes.h"

#include <cstring>

#include "core/util/error.h"

namespace kf {

double read_scalar(const DLTensor& t, DType dtype) {
  const std::byte* p = static_cast<const std::byte*>(t.data) + t.byte_offset;
  switch (dtype) {
    case DType::F64: { double x; std::memcpy(&x, p, 8); return x; }
    case DType::F32: { float x; std::memcpy(&x, p, 4); return x; }
    case DType::F16: { uint16_t x; std::memcpy(&x, p, 2); return half_to_float(x); }
    case DType::BF16: { uint16_t x; std::memcpy(&x, p, 2); return bf16_to_float(x); }
    case DType::I64: { int64_t x; std::memcpy(&x, p, 8); return static_cast<double>(x); }
    case DType::I32: { int32_t x; std::memcpy(&x, p, 4); return x; }
    case DType::I8: return *reinterpret_cast<const int8_t*>(p);
    case DType::U8: return *reinterpret_cast<const uint8_t*>(p);
    case DType::Bool: return *reinterpret_cast<const uint8_t*>(p) != 0;
    case DType::F8E4M3: return e4m3fn_to_float(*reinterpret_cast<const uint8_t*>(p));
    case DType::F8E5M2: return e5m2_to_float(*reinterpret_cast<const uint8_t*>(p));
  }
  return 0;
}

void task_sizes(const Fusion& fusion, const Task& task, const DLTensor* const* inputs, ValueSizes* sizes) {
  sizes->reset(fusion);
  for (size_t k = 0; k < task.inputs.size(); ++k) {
    const Value& v = fusion.value(task.inputs[k]);
    const DLTensor& t = *inputs[k];
    sizes->set(v.id, std::span<const int64_t>(t.shape, static_cast<size_t>(t.ndim)));
    if (v.is_scalar) sizes->set_scalar(v.id, read_scalar(t, v.dtype));
  }
  infer_sizes(fusion, task.exprs, *sizes);
}

}  // namespace kf
