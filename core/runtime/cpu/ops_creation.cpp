// full, iota, uniform and normal on the CPU. Random ops follow the Philox
// scheme specified in philox.h, element by element in row-major order.
#include "core/runtime/cpu/eval.h"
#include "core/runtime/cpu/philox.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

double scalar_f64(const TensorView& s) { return load_f64(s.dtype, s.data); }
int64_t scalar_i64(const TensorView& s) { return load_i64(s.dtype, s.data); }

// torch.arange: start + i * step, exact (wrapping) when the dtype and both
// scalars are integers, else in double rounded once to the dtype.
void iota(const TensorView& start, const TensorView& step, const TensorView& out) {
  const int size = dtype_size(out.dtype);
  const bool exact = is_integer(out.dtype) && !is_float(start.dtype) && !is_float(step.dtype);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::byte* p = out.data + i * size;
    if (exact) {
      const uint64_t v = static_cast<uint64_t>(scalar_i64(start)) +
                         static_cast<uint64_t>(i) * static_cast<uint64_t>(scalar_i64(step));
      store_i64(out.dtype, p, static_cast<int64_t>(v));
    } else {
      store_f64(out.dtype, p, scalar_f64(start) + static_cast<double>(i) * scalar_f64(step));
    }
  }
}

// a, b: (low, high) or (mean, std).
void random(Op op, double a, double b, uint64_t seed, uint64_t offset, const TensorView& out) {
  const int size = dtype_size(out.dtype);
  const bool f64 = out.dtype == DType::F64;
  const float af = static_cast<float>(a), bf = static_cast<float>(b);
  for (int64_t i = 0; i < out.numel(); ++i) {
    const PhiloxWords w = philox_element(seed, offset, static_cast<uint64_t>(i));
    double v;
    if (op == Op::UNIFORM) v = f64 ? uniform_f64(w, a, b) : uniform_f32(w, af, bf);
    else v = f64 ? normal_f64(w, a, b) : normal_f32(w, af, bf);
    store_f64(out.dtype, out.data + i * size, v);
  }
}

}  // namespace

void eval_creation(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  TensorView out = allocate(fusion.value(e.outputs[0]).dtype, sizes);
  auto arg = [&](size_t i) -> const TensorView& { return env.get(e.inputs[i]); };
  const size_t n = e.inputs.size();
  switch (e.op) {
    case Op::FULL: copy_into(broadcast_to(arg(n - 1), sizes), out); break;
    case Op::IOTA: iota(arg(1), arg(2), out); break;
    case Op::UNIFORM:
    case Op::NORMAL:
      random(e.op, scalar_f64(arg(n - 4)), scalar_f64(arg(n - 3)),
             static_cast<uint64_t>(scalar_i64(arg(n - 2))),
             static_cast<uint64_t>(scalar_i64(arg(n - 1))), out);
      break;
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(e.op), " is not a creation op");
  }
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
