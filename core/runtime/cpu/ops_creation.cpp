// full, iota, uniform and normal on the CPU. Random ops follow the Philox
// scheme specified in philox.h, element by element in row-major order.
#include "core/runtime/cpu/eval.h"
#include "core/runtime/cpu/philox.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

double scalar_f64(const TensorView& s) { return load_f64(s.dtype, s.data); }
int64_t scalar_i64(const TensorView& s) { return load_i64(s.dtype, s.data); }

// Element i of iota, uniform or normal (each a function of i alone), in
// the output dtype's bytes.
struct Creation {
  Op op;
  DType dtype;
  // iota: start, step; uniform: low, high; normal: mean, std.
  double a = 0, b = 0;
  int64_t ia = 0, ib = 0;  // iota's integer start and step
  bool exact = false;      // iota in wrapping int64
  uint64_t seed = 0, offset = 0;

  void element(int64_t i, std::byte* p) const {
    if (op == Op::IOTA) {
      // torch.arange: start + i * step, exact (wrapping) when the dtype and
      // both scalars are integers, else in double rounded once to the dtype.
      if (exact) {
        const uint64_t v = static_cast<uint64_t>(ia) + static_cast<uint64_t>(i) * static_cast<uint64_t>(ib);
        store_i64(dtype, p, static_cast<int64_t>(v));
      } else {
        store_f64(dtype, p, a + static_cast<double>(i) * b);
      }
      return;
    }
    const bool f64 = dtype == DType::F64;
    const float af = static_cast<float>(a), bf = static_cast<float>(b);
    const PhiloxWords w = philox_element(seed, offset, static_cast<uint64_t>(i));
    double v;
    if (op == Op::UNIFORM) v = f64 ? uniform_f64(w, a, b) : uniform_f32(w, af, bf);
    else v = f64 ? normal_f64(w, a, b) : normal_f32(w, af, bf);
    store_f64(dtype, p, v);
  }
};

// A deferred iota or random result: element i computed when read.
class CreationSource final : public Source {
 public:
  CreationSource(Creation c, Sizes sizes) : Source(c.dtype, std::move(sizes), 1), c_(c) {}
  void load(int64_t offset, std::byte* out) const override { c_.element(offset, out); }

 private:
  Creation c_;
};

}  // namespace

void eval_creation(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const DType dtype = fusion.value(e.outputs[0]).dtype;
  auto arg = [&](size_t i) -> const TensorView& { return env.get(e.inputs[i]); };
  const size_t n = e.inputs.size();
  if (e.op == Op::FULL) {  // one element, broadcast
    TensorView value = allocate(dtype, {});
    copy_into(arg(n - 1), value);
    env.set(e.outputs[0], broadcast_to(value, sizes));
    return;
  }
  Creation c{e.op, dtype};
  switch (e.op) {
    case Op::IOTA:
      c.a = scalar_f64(arg(1));
      c.b = scalar_f64(arg(2));
      c.ia = scalar_i64(arg(1));
      c.ib = scalar_i64(arg(2));
      c.exact = is_integer(dtype) && !is_float(arg(1).dtype) && !is_float(arg(2).dtype);
      break;
    case Op::UNIFORM:
    case Op::NORMAL:
      c.a = scalar_f64(arg(n - 4));
      c.b = scalar_f64(arg(n - 3));
      c.seed = static_cast<uint64_t>(scalar_i64(arg(n - 2)));
      c.offset = static_cast<uint64_t>(scalar_i64(arg(n - 1)));
      break;
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(e.op), " is not a creation op");
  }
  const uint64_t bytes = static_cast<uint64_t>(numel(sizes)) * static_cast<uint64_t>(dtype_size(dtype));
  TensorView out;
  if (!sizes.empty() && env.defers(e.outputs[0], bytes)) {
    out.dtype = dtype;
    out.sizes = sizes;
    out.strides = compact_strides(sizes);
    out.source = std::make_shared<CreationSource>(c, sizes);
  } else {
    out = allocate(dtype, sizes);
    const int size = dtype_size(dtype);
    for (int64_t i = 0; i < out.numel(); ++i) c.element(i, out.data + i * size);
  }
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
