#include "core/ir/type_promotion.h"

#include <optional>

#include "core/ir/op_table.h"

namespace kf {

namespace {

// Scalars take part with their category's default dtype, as Python numbers
// do: float -> float32... unless every operand is a scalar (then their own).
DType wrapped_dtype(DType t) {
  if (is_float(t)) return DType::F32;
  if (is_integer(t)) return DType::I64;
  return DType::Bool;
}

std::optional<DType> combine_categories(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_float(*higher)) return higher;
  if (is_bool(*higher) || dtype_category(*lower) > dtype_category(*higher))
    return promote_types(*higher, *lower);
  return higher;
}

void update(std::optional<DType>& state, DType t) {
  state = state ? promote_types(*state, t) : t;
}

}  // namespace

DType result_type(const Fusion& fusion, std::span<const int64_t> operands) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  bool all_scalars = true;
  for (int64_t id : operands) {
    const Value& v = fusion.value(id);
    if (!v.is_scalar) all_scalars = false;
  }
  for (int64_t id : operands) {
    const Value& v = fusion.value(id);
    if (all_scalars) {
      update(dim_result, v.dtype);
    } else if (v.is_scalar) {
      update(wrapped_result, wrapped_dtype(v.dtype));
    } else if (v.rank == 0) {
      update(zero_result, v.dtype);
    } else {
      update(dim_result, v.dtype);
    }
  }
  return *combine_categories(dim_result, combine_categories(zero_result, wrapped_result));
}

DType compute_dtype(const Fusion& f, const Expr& e) {
  switch (op_info(e.op).type_rule) {
    case TypeRule::Compare: return result_type(f, e.inputs);
    case TypeRule::ToBool: return f.value(e.inputs[0]).dtype;
    default: return f.value(e.outputs[0]).dtype;
  }
}

}  // namespace kf
