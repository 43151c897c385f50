// Unary, binary, ternary ops and cast on the CPU (PyTorch semantics; see
// docs/semantics.md). Operands broadcast right-aligned and are converted to
// the op's compute dtype first (e.g. a float scalar compared with a float16
// tensor is rounded to float16). Floats are then computed in double and
// rounded once to the output dtype; integers and bools are computed exactly
// in int64 and wrap to the output width on store.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/ir/type_promotion.h"
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double round_to(DType t, double x) {
  // (the common compute dtypes without a trip through memory: this runs
  // for every operand of every element)
  if (t == DType::F64) return x;
  if (t == DType::F32) return static_cast<float>(x);
  std::byte buf[8];
  store_f64(t, buf, x);
  return load_f64(t, buf);
}

// load_f64 and store_f64 with float32 and float64 inline: the CPU
// reference's per-element cost is mostly these calls (perf, a layernorm
// backward of 3000 x 4096 float32).
inline double load_as_f64(DType t, const std::byte* p) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t == DType::F64) {
    double v;
    std::memcpy(&v, p, 8);
    return v;
  }
  return load_f64(t, p);
}

inline void store_from_f64(DType t, std::byte* p, double v) {
  if (t == DType::F32) {
    const float f = static_cast<float>(v);
    std::memcpy(p, &f, 4);
  } else if (t == DType::F64) {
    std::memcpy(p, &v, 8);
  } else {
    store_f64(t, p, v);
  }
}

// torch's sign is (0 < x) - (x < 0): sign(NaN) = 0 and sign(-0.0) = +0.
double sign_of(double x) { return static_cast<double>((0 < x) - (x < 0)); }

double unary_float(Op op, double x) {
  switch (op) {
    case Op::NEG: return -x;
    case Op::ABS: return std::fabs(x);
    case Op::EXP: return std::exp(x);
    case Op::EXP2: return std::exp2(x);
    case Op::EXPM1: return std::expm1(x);
    case Op::LOG: return std::log(x);
    case Op::LOG2: return std::log2(x);
    case Op::LOG10: return std::log10(x);
    case Op::LOG1P: return std::log1p(x);
    case Op::SQRT: return std::sqrt(x);
    case Op::RSQRT: return 1.0 / std::sqrt(x);
    case Op::RECIPROCAL: return 1.0 / x;
    case Op::SIN: return std::sin(x);
    case Op::COS: return std::cos(x);
    case Op::TAN: return std::tan(x);
    case Op::ASIN: return std::asin(x);
    case Op::ACOS: return std::acos(x);
    case Op::ATAN: return std::atan(x);
    case Op::SINH: return std::sinh(x);
    case Op::COSH: return std::cosh(x);
    case Op::TANH: return std::tanh(x);
    case Op::ASINH: return std::asinh(x);
    case Op::ACOSH: return std::acosh(x);
    case Op::ATANH: return std::atanh(x);
    case Op::SIGMOID: return 1.0 / (1.0 + std::exp(-x));
    case Op::RELU: return std::isnan(x) ? x : (x > 0 ? x : 0.0);
    case Op::GELU: return x * 0.5 * (1.0 + std::erf(x * M_SQRT1_2));
    case Op::GELU_TANH: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    case Op::SILU: return x / (1.0 + std::exp(-x));
    case Op::ERF: return std::erf(x);
    case Op::ERFC: return std::erfc(x);
    case Op::FLOOR: return std::floor(x);
    case Op::CEIL: return std::ceil(x);
    case Op::ROUND: return std::nearbyint(x);  // half to even (default rounding mode)
    case Op::TRUNC: return std::trunc(x);
    case Op::SIGN: return sign_of(x);
    case Op::ISNAN: return std::isnan(x);
    case Op::ISINF: return std::isinf(x);
    case Op::ISFINITE: return std::isfinite(x);
    case Op::LOGICAL_NOT: return x == 0;
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(op), " has no float kernel");
  }
}

// torch's remainder: fmod, moved to the divisor's sign.
double remainder_float(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((b < 0) != (m < 0))) m += b;
  return m;
}

// torch.maximum/minimum: NaN wins; otherwise std::max/std::min (which keep
// the first operand on ties, e.g. maximum(-0.0, 0.0) = -0.0).
double maximum_float(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return a < b ? b : a;
}
double minimum_float(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return b < a ? b : a;
}

double binary_float(Op op, double a, double b) {
  switch (op) {
    case Op::ADD: return a + b;
    case Op::SUB: return a - b;
    case Op::MUL: return a * b;
    case Op::DIV: return a / b;
    case Op::FMOD: return std::fmod(a, b);
    case Op::REMAINDER: return remainder_float(a, b);
    case Op::POW: return std::pow(a, b);
    case Op::ATAN2: return std::atan2(a, b);
    case Op::MAXIMUM: return maximum_float(a, b);
    case Op::MINIMUM: return minimum_float(a, b);
    case Op::EQ: return a == b;
    case Op::NE: return a != b;
    case Op::LT: return a < b;
    case Op::LE: return a <= b;
    case Op::GT: return a > b;
    case Op::GE: return a >= b;
    case Op::LOGICAL_AND: return (a != 0) && (b != 0);
    case Op::LOGICAL_OR: return (a != 0) || (b != 0);
    case Op::LOGICAL_XOR: return (a != 0) != (b != 0);
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(op), " has no float kernel");
  }
}

// torch's lerp switches formulas at |w| = 0.5 for accuracy near the ends.
double lerp(double a, double b, double w) {
  return std::fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w);
}

double ternary_float(Op op, double a, double b, double c) {
  switch (op) {
    case Op::WHERE: return a != 0 ? b : c;
    case Op::CLAMP:
      if (std::isnan(a) || std::isnan(b) || std::isnan(c)) return kNaN;
      return minimum_float(maximum_float(a, b), c);
    case Op::LERP: return lerp(a, b, c);
    case Op::FMA: return std::fma(a, b, c);
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(op), " has no float kernel");
  }
}

// Integer arithmetic wraps: compute on uint64 bits, store_i64 narrows.
int64_t wrap(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t bits(int64_t v) { return static_cast<uint64_t>(v); }

int64_t unary_int(Op op, int64_t x, DType t) {
  switch (op) {
    case Op::NEG: return wrap(0 - bits(x));
    case Op::ABS: return x < 0 ? wrap(0 - bits(x)) : x;
    case Op::RELU: return x > 0 ? x : 0;
    case Op::FLOOR:
    case Op::CEIL:
    case Op::ROUND:
    case Op::TRUNC: return x;
    case Op::SIGN: return (0 < x) - (x < 0);
    case Op::ISNAN:
    case Op::ISINF: return 0;
    case Op::ISFINITE: return 1;
    case Op::LOGICAL_NOT: return x == 0;
    case Op::BITWISE_NOT: return is_bool(t) ? x == 0 : ~x;
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(op), " has no integer kernel");
  }
}

struct IntContext {
  Op op;
  int64_t value_id;  // the output, for messages
  DType dtype;       // compute dtype
};

void check_divisor(const IntContext& c, int64_t b) {
  if (b == 0)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(c.op), " (value ", c.value_id,
         "): integer division by zero");
}

int64_t fmod_int(const IntContext& c, int64_t a, int64_t b) {
  check_divisor(c, b);
  return b == -1 ? 0 : a % b;  // INT64_MIN % -1 traps in C++
}

int64_t remainder_int(const IntContext& c, int64_t a, int64_t b) {
  int64_t r = fmod_int(c, a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

int64_t pow_int(const IntContext& c, int64_t base, int64_t exp) {
  if (exp < 0)
    fail(KF_ERR_INVALID_ARGUMENT, "pow (value ", c.value_id, "): integer base to the negative ",
         "integer power ", exp, " is not allowed (as in torch)");
  uint64_t result = 1, b = bits(base);
  for (uint64_t e = bits(exp); e != 0; e >>= 1) {
    if (e & 1) result *= b;
    b *= b;
  }
  return wrap(result);
}

// torch: a shift by a negative amount or >= the bit width gives 0 (left) or
// the sign fill (right).
int64_t shift_int(const IntContext& c, int64_t a, int64_t b) {
  const int64_t width = dtype_size(c.dtype) * 8;
  const bool out_of_range = b < 0 || b >= width;
  if (c.op == Op::SHIFT_LEFT) return out_of_range ? 0 : wrap(bits(a) << b);
  return a >> (out_of_range ? 63 : b);  // a is sign-extended to 64 bits
}

int64_t binary_int(const IntContext& c, int64_t a, int64_t b) {
  switch (c.op) {
    case Op::ADD: return wrap(bits(a) + bits(b));
    case Op::SUB: return wrap(bits(a) - bits(b));
    case Op::MUL: return wrap(bits(a) * bits(b));
    case Op::FMOD: return fmod_int(c, a, b);
    case Op::REMAINDER: return remainder_int(c, a, b);
    case Op::POW: return pow_int(c, a, b);
    case Op::MAXIMUM: return a < b ? b : a;
    case Op::MINIMUM: return b < a ? b : a;
    case Op::EQ: return a == b;
    case Op::NE: return a != b;
    case Op::LT: return a < b;
    case Op::LE: return a <= b;
    case Op::GT: return a > b;
    case Op::GE: return a >= b;
    case Op::LOGICAL_AND: return (a != 0) && (b != 0);
    case Op::LOGICAL_OR: return (a != 0) || (b != 0);
    case Op::LOGICAL_XOR: return (a != 0) != (b != 0);
    case Op::BITWISE_AND: return a & b;
    case Op::BITWISE_OR: return a | b;
    case Op::BITWISE_XOR: return a ^ b;
    case Op::SHIFT_LEFT:
    case Op::SHIFT_RIGHT: return shift_int(c, a, b);
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(c.op), " has no integer kernel");
  }
}

int64_t ternary_int(Op op, int64_t a, int64_t b, int64_t c) {
  switch (op) {
    case Op::WHERE: return a != 0 ? b : c;
    case Op::CLAMP: {
      const int64_t lo = a < b ? b : a;
      return c < lo ? c : lo;
    }
    case Op::FMA: return wrap(bits(a) * bits(b) + bits(c));
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(op), " has no integer kernel");
  }
}

// One pointwise op over its operands, already broadcast to the sizes it is
// computed at: computes any element into its output dtype's bytes.
struct Pointwise {
  Op op;
  DType compute;  // compute dtype
  DType out;      // output dtype
  int64_t out_id; // for messages
  std::vector<TensorView> in;

  void element(const int64_t* idx, std::byte* dst) const {
    ElementBuffer buf[3];
    const std::byte* p[3] = {nullptr, nullptr, nullptr};
    for (size_t k = 0; k < in.size(); ++k) p[k] = in[k].read(idx, buf[k]);
    compute_into(p, dst);
  }

  // The element at row-major offset `off` of operands that all lie
  // row-major over the op's sizes (dense()): no multi-index needed.
  void element_dense(int64_t off, std::byte* dst) const {
    ElementBuffer buf[3];
    const std::byte* p[3] = {nullptr, nullptr, nullptr};
    for (size_t k = 0; k < in.size(); ++k) p[k] = in[k].element(off, buf[k]);
    compute_into(p, dst);
  }

  // Whether every operand's strides are the row-major ones of `sizes`.
  bool dense(const Sizes& sizes) const {
    const std::vector<int64_t> row_major = compact_strides(sizes);
    for (const TensorView& t : in)
      for (size_t d = 0; d < sizes.size(); ++d)
        if (sizes[d] > 1 && t.strides[d] != row_major[d]) return false;
    return true;
  }

  // One copy of the arithmetic for every walk (element, element_dense): a
  // NaN's sign and payload follow the instructions' operand order, which
  // two inlined copies could each choose (docs/semantics.md).
  [[gnu::noinline]] void compute_into(const std::byte* const* p, std::byte* dst) const {
    if (op == Op::CAST) {
      if (!is_float(in[0].dtype) && !is_float(out)) store_i64(out, dst, load_i64(in[0].dtype, p[0]));
      else store_from_f64(out, dst, load_as_f64(in[0].dtype, p[0]));
    } else if (is_float(compute)) {
      double x[3] = {0, 0, 0};
      for (size_t k = 0; k < in.size(); ++k) x[k] = round_to(compute, load_as_f64(in[k].dtype, p[k]));
      double r;
      switch (in.size()) {
        case 1: r = unary_float(op, x[0]); break;
        case 2: r = binary_float(op, x[0], x[1]); break;
        default: r = ternary_float(op, x[0], x[1], x[2]); break;
      }
      store_from_f64(out, dst, r);
    } else {
      int64_t x[3] = {0, 0, 0};
      for (size_t k = 0; k < in.size(); ++k) x[k] = load_i64(in[k].dtype, p[k]);
      int64_t r;
      switch (in.size()) {
        case 1: r = unary_int(op, x[0], compute); break;
        case 2: r = binary_int({op, out_id, compute}, x[0], x[1]); break;
        default: r = ternary_int(op, x[0], x[1], x[2]); break;
      }
      store_i64(out, dst, r);
    }
  }

  // Integer division and powers can raise an error: they run when the op
  // runs, never later as some other op reads them.
  bool can_fail() const {
    return !is_float(compute) && (op == Op::FMOD || op == Op::REMAINDER || op == Op::POW);
  }
};

// A deferred pointwise result: each element computed when read.
class PointwiseSource final : public Source {
 public:
  PointwiseSource(Pointwise p, Sizes sizes, int depth)
      : Source(p.out, std::move(sizes), depth), p_(std::move(p)), dense_(p_.dense(this->sizes)) {}
  void load(int64_t offset, std::byte* out) const override {
    if (dense_) {  // (no division per dim for every element read)
      p_.element_dense(offset, out);
      return;
    }
    int64_t idx[kMaxRank];
    unravel(offset, sizes, idx);
    p_.element(idx, out);
  }

 private:
  Pointwise p_;
  bool dense_;
};

}  // namespace

void eval_pointwise(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const int64_t out_id = e.outputs[0];
  Pointwise p{e.op, compute_dtype(fusion, e), fusion.value(out_id).dtype, out_id, {}};
  // Along a dim where every operand is broadcast (stride 0) every line
  // computes the same elements: the result is computed at size 1 there and
  // broadcast (a broadcast stays as small as its source).
  Sizes distinct = sizes;
  for (int64_t id : e.inputs) p.in.push_back(broadcast_to(env.get(id), sizes));
  for (size_t d = 0; d < sizes.size(); ++d) {
    bool constant = true;
    for (const TensorView& t : p.in) constant = constant && t.strides[d] == 0;
    if (constant && sizes[d] > 1) distinct[d] = 1;
  }
  for (TensorView& t : p.in) t.sizes = distinct;
  const uint64_t bytes = static_cast<uint64_t>(numel(distinct)) * static_cast<uint64_t>(dtype_size(p.out));
  int depth = 1;  // a read's recursion (stack) stays bounded: Source::kMaxDepth
  for (const TensorView& t : p.in) depth = std::max(depth, t.depth() + 1);
  TensorView out;
  if (!distinct.empty() && !p.can_fail() && depth <= Source::kMaxDepth && env.defers(out_id, bytes)) {
    out.dtype = p.out;
    out.sizes = distinct;
    out.strides = compact_strides(distinct);
    out.source = std::make_shared<PointwiseSource>(std::move(p), distinct, depth);
  } else {
    out = allocate(p.out, distinct);  // (row-major)
    if (p.dense(distinct)) {  // element k of every operand is element k of the output: no multi-index
      const int64_t n = numel(distinct), size = dtype_size(p.out);
      for (int64_t k = 0; k < n; ++k) p.element_dense(k, out.data + k * size);
    } else {
      for_each_index(distinct, [&](const int64_t* idx) { p.element(idx, out.at(idx)); });
    }
  }
  env.set(out_id, broadcast_to(out, sizes));
}

}  // namespace kf::cpu
