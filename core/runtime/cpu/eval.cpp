#include "core/runtime/cpu/eval.h"

#include "core/util/env_switch.h"
#include "core/util/error.h"

namespace kf::cpu {

uint64_t stream_bytes() {
  static const uint64_t bytes =
      env_bytes("KFUSE_CPU_STREAM_BYTES", 0, "67108864").value_or(uint64_t{64} << 20);
  return bytes;
}

int64_t EnvSizes::shape_scalar(int64_t id) const {
  const Value& v = fusion_.value(id);
  if (v.kind == ValueKind::Constant) return v.i64;
  const TensorView& t = env_.get(id);
  ElementBuffer buf;
  return load_i64(t.dtype, t.element(0, buf));
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

// Ops that read deferred operands element by element (ops_pointwise,
// ops_reduction, ops_shape: through TensorView::read and copy_into).
bool reads_deferred(OpCategory c) {
  switch (c) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast:
    case OpCategory::Reduction:
    case OpCategory::Shape:
    case OpCategory::Hint:
    case OpCategory::Query: return true;
    default: return false;
  }
}

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
    if (!reads_deferred(op_info(e.op).category))
      for (int64_t id : e.inputs)
        if (env.get(id).deferred()) env.set(id, materialize(env.get(id)));
    dispatch(fusion, e, env);
    // A view of a deferred value that more than one op reads (or a result).
    for (int64_t id : e.outputs)
      if (env.get(id).deferred() && !env.read_once(id)) env.set(id, materialize(env.get(id)));
  } catch (const Error& err) {
    if (err.status() != KF_ERR_OUT_OF_MEMORY) throw;
    fail(KF_ERR_OUT_OF_MEMORY, op_name(e.op), " (value ", e.outputs[0], "): ", err.what());
  }
  // Release what no later expr of the segment reads.
  for (int64_t id : e.inputs) {
    const size_t i = static_cast<size_t>(id);
    if (i < env.reads.size() && env.reads[i] > 0 && --env.reads[i] == 0) env.unset(id);
  }
}

}  // namespace kf::cpu
