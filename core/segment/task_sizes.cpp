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
    case DType::Bool: return *reinterpret_cast<const uint8_t*>(p) != 0;
  }
  return 0;
}

std::vector<Sizes> task_sizes(const Fusion& fusion, const Task& task, const DLTensor* const* inputs) {
  std::vector<Sizes> sizes(fusion.values.size());
  std::vector<double> scalars(fusion.values.size(), 0);
  for (size_t k = 0; k < task.inputs.size(); ++k) {
    const Value& v = fusion.value(task.inputs[k]);
    const DLTensor& t = *inputs[k];
    sizes[static_cast<size_t>(v.id)].assign(t.shape, t.shape + t.ndim);
    if (v.is_scalar) scalars[static_cast<size_t>(v.id)] = read_scalar(t, v.dtype);
  }
  SizeContext ctx;
  ctx.sizes_of = [&](int64_t id) -> const Sizes& { return sizes[static_cast<size_t>(id)]; };
  ctx.scalar_of = [&](int64_t id) -> double {
    const Value& v = fusion.value(id);
    if (v.kind == ValueKind::Constant) return is_float(v.dtype) ? v.f64 : static_cast<double>(v.i64);
    return scalars[static_cast<size_t>(id)];
  };
  for (int64_t ei : task.exprs) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    auto outs = infer_expr_sizes(fusion, e, ctx);
    for (size_t k = 0; k < e.outputs.size(); ++k) sizes[static_cast<size_t>(e.outputs[k])] = std::move(outs[k]);
  }
  return sizes;
}

}  // namespace kf
