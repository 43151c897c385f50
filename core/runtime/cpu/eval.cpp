#include "core/runtime/cpu/eval.h"

#include "core/util/error.h"

namespace kf::cpu {

int64_t EnvSizes::shape_scalar(int64_t id) const {
  const Value& v = fusion_.value(id);
  if (v.kind == ValueKind::Constant) return v.i64;
  const TensorView& t = env_.get(id);
  return load_i64(t.dtype, t.data);
}

Sizes output_sizes(const Fusion& fusion, const Expr& e, const Env& env) {
  return infer_expr_sizes(fusion, e, EnvSizes(fusion, env)).to_vector();
}

TensorView constant_view(const Value& v) {
  TensorView t = allocate(v.dtype, {});
  if (is_float(v.dtype)) store_f64(v.dtype, t.data, v.f64);
  else store_i64(v.dtype, t.data, v.i64);
  return t;
}

namespace {

void dispatch(const Fusion& fusion, const Expr& e, Env& env) {
  switch (op_info(e.op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: eval_pointwise(fusion, e, env); return;
    case OpCategory::Reduction: eval_reduction(fusion, e, env); return;
    case OpCategory::Shape: eval_shape(fusion, e, env); return;
    case OpCategory::Indexing: eval_indexing(fusion, e, env); return;
    case OpCategory::Scatter: eval_scatter(fusion, e, env); return;
    case OpCategory::Scan: eval_scan(fusion, e, env); return;
    case OpCategory::Creation: eval_creation(fusion, e, env); return;
    case OpCategory::Library: eval_library(fusion, e, env); return;
    case OpCategory::Hint: env.set(e.outputs[0], env.get(e.inputs[0])); return;
    case OpCategory::Communication:  // the executor runs these segments (core/runtime/collective.h)
      fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(e.op), " reached the expression evaluator");
    case OpCategory::Query: {  // size: the extent, an int64 scalar
      TensorView out = allocate(DType::I64, {});
      store_i64(DType::I64, out.data, env.get(e.inputs[0]).sizes[static_cast<size_t>(e.attrs[0])]);
      env.set(e.outputs[0], std::move(out));
      return;
    }
  }
}

}  // namespace

void eval_expr(const Fusion& fusion, const Expr& e, Env& env) {
  for (int64_t id : e.inputs)
    if (!env.ready[static_cast<size_t>(id)])
      fail(KF_ERR_INTERNAL, "cpu backend: value ", id, " is not ready for ", op_name(e.op));
  try {
    dispatch(fusion, e, env);
  } catch (const Error& err) {
    if (err.status() != KF_ERR_OUT_OF_MEMORY) throw;
    fail(KF_ERR_OUT_OF_MEMORY, op_name(e.op), " (value ", e.outputs[0], "): ", err.what());
  }
}

}  // namespace kf::cpu
