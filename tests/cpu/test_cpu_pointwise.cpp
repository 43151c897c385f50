// CPU reference: unary, binary, ternary ops and cast. Hand-derived cases pin
// PyTorch's semantics (rounding, signs of fmod/remainder, NaN handling,
// integer wrapping, shifts); sweeps run every pointwise op of ops.def on
// every dtype its type rule accepts against a double-precision reference
// written here; layout cases cover strided, transposed, broadcast (stride
// 0), size-0 and size-1 operands.
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/define/builder.h"
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {  // this cmocka's header has no C++ guard
#include <cmocka.h>
}

#include "cpu/cpu_eval_util.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace kf;
using namespace kf::cpu;

namespace {

const DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                            DType::I64, DType::I32, DType::Bool};

TensorView tensor_i64(DType t, const Sizes& sizes, const std::vector<int64_t>& vals) {
  TensorView v = allocate(t, sizes);
  for (size_t i = 0; i < vals.size(); ++i) store_i64(t, v.data + i * dtype_size(t), vals[i]);
  return v;
}

std::vector<int64_t> values_i64(const TensorView& t) {
  std::vector<int64_t> out;
  for_each_index(t.sizes, [&](const int64_t* idx) { out.push_back(load_i64(t.dtype, t.at(idx))); });
  return out;
}

double epsilon(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-52;
    case DType::F32: return 0x1p-23;
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    default: return 0;
  }
}

// Within `ulps` ulps of the dtype: the references below use other formulas
// than the backend (e.g. gelu through erfc), which differ in the last double
// bits and can move a rounding of the output dtype by one.
void expect_close(double got, double want, DType t, const std::string& what, double ulps = 2) {
  if (std::isnan(want) || std::isinf(want) || t == DType::Bool || !is_float(t)) {
    if (!same(got, want) && !(got == 0 && want == 0))
      fail_msg("%s: got %.17g, expected %.17g", what.c_str(), got, want);
    return;
  }
  const double tol = ulps * epsilon(t) * std::max(std::fabs(want), 0x1p-14);
  if (!(std::fabs(got - want) <= tol))
    fail_msg("%s: got %.17g, expected %.17g", what.c_str(), got, want);
}

// ---- hand-derived cases -------------------------------------------------

// One unary op on a float64 tensor of `x`.
std::vector<double> unary_f64(Op op, const std::vector<double>& x) {
  Builder b;
  int64_t a = b.tensor_input(1, DType::F64);
  int64_t y = b.op(op, {a}, {})[0];
  Env env = run(b.draft(), {{a, tensor(DType::F64, {static_cast<int64_t>(x.size())}, x)}});
  return values(env.get(y));
}

void test_unary_hand_cases(void** state) {
  (void)state;
  struct Case {
    Op op;
    std::vector<double> x, want;
  };
  const std::vector<Case> cases = {
      {Op::ROUND, {2.5, -0.5, 0.5, 1.5, -2.5, 3.7, -3.2}, {2, -0.0, 0, 2, -2, 4, -3}},
      {Op::FLOOR, {-0.5, 2.5, -3.0}, {-1, 2, -3}},
      {Op::CEIL, {-0.5, 2.1}, {-0.0, 3}},
      {Op::TRUNC, {-2.7, 2.7}, {-2, 2}},
      {Op::SIGN, {-3, 0, -0.0, 2, kNaN, -kInf}, {-1, 0, 0, 1, 0, -1}},  // torch: sign(NaN) = 0
      {Op::RELU, {-1, 0, 2, kNaN}, {0, 0, 2, kNaN}},
      {Op::ABS, {-0.0, -2}, {0, 2}},
      {Op::NEG, {0, 1}, {-0.0, -1}},
      {Op::RECIPROCAL, {0, -0.0, 4}, {kInf, -kInf, 0.25}},
      {Op::RSQRT, {4, 0, -1}, {0.5, kInf, kNaN}},
      {Op::SQRT, {-1, 9}, {kNaN, 3}},
      {Op::LOG, {0, -1, 1}, {-kInf, kNaN, 0}},
      {Op::EXP2, {3, -1}, {8, 0.5}},
      {Op::SIGMOID, {0, 1000, -1000}, {0.5, 1, 0}},
      {Op::GELU, {0, 1, -1}, {0, 0.8413447460685429, -0.15865525393145707}},
      {Op::GELU_TANH, {0, 1}, {0, 0.8411919906082768}},
      {Op::SILU, {0, 1}, {0, 0.7310585786300049}},
      {Op::ISNAN, {kNaN, kInf, 1}, {1, 0, 0}},
      {Op::ISINF, {kNaN, -kInf, 1}, {0, 1, 0}},
      {Op::ISFINITE, {kNaN, kInf, 1}, {0, 0, 1}},
      {Op::LOGICAL_NOT, {0, -0.0, kNaN, 2}, {1, 1, 0, 0}},
  };
  for (const Case& c : cases) {
    std::vector<double> got = unary_f64(c.op, c.x);
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(got[i], c.want[i], DType::F64, std::string(op_name(c.op)) + " case " + std::to_string(i));
  }
}

// One binary op on two rank-1 tensors.
TensorView binary(Op op, DType ta, const std::vector<double>& a, DType tb,
                  const std::vector<double>& bv) {
  Builder b;
  int64_t x = b.tensor_input(1, ta);
  int64_t y = b.tensor_input(1, tb);
  int64_t z = b.op(op, {x, y}, {})[0];
  Env env = run(b.draft(), {{x, tensor(ta, {static_cast<int64_t>(a.size())}, a)},
                            {y, tensor(tb, {static_cast<int64_t>(bv.size())}, bv)}});
  return env.get(z);
}

void test_binary_hand_cases(void** state) {
  (void)state;
  const DType F = DType::F64, I = DType::I64, I32 = DType::I32, B = DType::Bool;
  expect_values(binary(Op::FMOD, I, {-7, 7, -7, 7}, I, {3, -3, -3, 3}), {-1, 1, -1, 1}, "fmod int");
  expect_values(binary(Op::REMAINDER, I, {-7, 7, -7, 7}, I, {3, -3, -3, 3}), {2, -2, -1, 1},
                "remainder int");
  expect_values(binary(Op::FMOD, F, {-7.5, 7.5, -6}, F, {2, -2, 3}), {-1.5, 1.5, -0.0}, "fmod float");
  expect_values(binary(Op::REMAINDER, F, {-7.5, 7.5, 6, 1}, F, {2, -2, -3, kInf}),
                {0.5, -0.5, 0, 1}, "remainder float");
  expect_values(binary(Op::DIV, I, {7, -7, 1, 0}, I, {2, 2, 0, 0}), {3.5, -3.5, kInf, kNaN},
                "int div is true division");
  assert_int_equal(binary(Op::DIV, I, {7}, I, {2}).dtype, DType::F32);
  expect_values(binary(Op::ADD, I32, {2147483647, -2147483648.0}, I32, {1, -1}),
                {-2147483648.0, 2147483647}, "int32 add wraps");
  expect_values(binary(Op::MUL, I32, {65536}, I32, {65536}), {0}, "int32 mul wraps");
  expect_values(binary(Op::POW, I, {3, -2, 0, 5}, I, {4, 3, 0, 1}), {81, -8, 1, 5}, "int pow");
  expect_values(binary(Op::POW, I32, {2}, I32, {31}), {-2147483648.0}, "int32 pow wraps");
  expect_values(binary(Op::POW, F, {2, -8, 0}, F, {-1, 1.0 / 3, 0}), {0.5, kNaN, 1}, "float pow");
  expect_values(binary(Op::MAXIMUM, F, {1, kNaN, 3, -0.0}, F, {kNaN, 1, 2, 0}),
                {kNaN, kNaN, 3, -0.0}, "maximum");
  expect_values(binary(Op::MINIMUM, F, {1, kNaN, 3}, F, {kNaN, 1, 2}), {kNaN, kNaN, 2}, "minimum");
  expect_values(binary(Op::ATAN2, F, {1, 0, -0.0}, F, {1, -1, -1}),
                {M_PI / 4, M_PI, -M_PI}, "atan2");
  expect_values(binary(Op::EQ, F, {kNaN, 1}, F, {kNaN, 1}), {0, 1}, "eq NaN");
  expect_values(binary(Op::NE, F, {kNaN, 1}, F, {kNaN, 1}), {1, 0}, "ne NaN");
  expect_values(binary(Op::LT, I, {1, 2}, F, {1.5, 1.5}), {1, 0}, "lt int vs float");
  expect_values(binary(Op::LOGICAL_AND, F, {0.5, 0, kNaN}, I, {2, 1, 1}), {1, 0, 1}, "logical_and");
  expect_values(binary(Op::LOGICAL_XOR, F, {0.5, 0}, F, {0, 0}), {1, 0}, "logical_xor");
  expect_values(binary(Op::BITWISE_AND, B, {1, 1, 0}, B, {1, 0, 0}), {1, 0, 0}, "bool and");
  expect_values(binary(Op::BITWISE_XOR, B, {1, 1, 0}, B, {1, 0, 0}), {0, 1, 0}, "bool xor");
  expect_values(binary(Op::BITWISE_OR, I, {12, -1}, I, {3, 0}), {15, -1}, "bitwise or");
  expect_values(binary(Op::ADD, B, {1, 1, 0}, B, {1, 0, 0}), {1, 1, 0}, "bool add is or");
  expect_values(binary(Op::SHIFT_LEFT, I32, {1, 1, 1, 3, -1}, I32, {31, 32, -1, 2, 4}),
                {-2147483648.0, 0, 0, 12, -16}, "int32 shift_left");
  expect_values(binary(Op::SHIFT_RIGHT, I32, {-8, -8, 8, -8, 8}, I32, {1, 40, 40, -1, 3}),
                {-4, -1, 0, -1, 1}, "int32 shift_right");
  expect_values(binary(Op::SHIFT_LEFT, I, {1, 1}, I, {63, 64}),
                {-9223372036854775808.0, 0}, "int64 shift_left");
}

void test_integer_errors(void** state) {
  (void)state;
  const DType I = DType::I64;
  for (Op op : {Op::FMOD, Op::REMAINDER}) {
    try {
      binary(op, I, {1, 2}, I, {1, 0});
      fail_msg("%s by zero did not throw", op_name(op).data());
    } catch (const Error& e) {
      assert_int_equal(e.status(), KF_ERR_INVALID_ARGUMENT);
      assert_non_null(std::strstr(e.what(), op_name(op).data()));
      assert_non_null(std::strstr(e.what(), "value 2"));
      assert_non_null(std::strstr(e.what(), "division by zero"));
    }
  }
  try {
    binary(Op::POW, I, {2}, I, {-1});
    fail_msg("pow with a negative integer exponent did not throw");
  } catch (const Error& e) {
    assert_int_equal(e.status(), KF_ERR_INVALID_ARGUMENT);
    assert_non_null(std::strstr(e.what(), "pow (value 2)"));
    assert_non_null(std::strstr(e.what(), "-1"));
  }
}

TensorView ternary(Op op, DType t, const std::vector<double>& a, const std::vector<double>& bv,
                   const std::vector<double>& c, DType ta) {
  Builder b;
  const int64_t n = static_cast<int64_t>(a.size());
  int64_t x = b.tensor_input(1, ta);
  int64_t y = b.tensor_input(1, t);
  int64_t z = b.tensor_input(1, t);
  int64_t out = b.op(op, {x, y, z}, {})[0];
  Env env = run(b.draft(), {{x, tensor(ta, {n}, a)}, {y, tensor(t, {n}, bv)}, {z, tensor(t, {n}, c)}});
  return env.get(out);
}

void test_ternary_hand_cases(void** state) {
  (void)state;
  const DType F = DType::F64;
  expect_values(ternary(Op::WHERE, F, {1, 0, 1}, {1, 2, 3}, {-1, -2, -3}, DType::Bool), {1, -2, 3},
                "where");
  expect_values(ternary(Op::CLAMP, F, {-5, 5, 0.5, kNaN, 1, 1}, {0, 0, 0, 0, kNaN, 2},
                        {1, 1, 1, 1, 1, 0}, F),
                {0, 1, 0.5, kNaN, kNaN, 0}, "clamp (lo > hi gives hi)");
  expect_values(ternary(Op::CLAMP, DType::I32, {-5, 5, 3}, {0, 0, 4}, {1, 1, 2}, DType::I32),
                {0, 1, 2}, "clamp int");
  // lerp: a + w*(b-a) for |w| < 0.5, else b - (b-a)*(1-w).
  const double a = 0.1, bb = 0.7;
  expect_values(ternary(Op::LERP, F, {a, a, a}, {bb, bb, bb}, {0.25, 0.75, 1.0}, F),
                {a + 0.25 * (bb - a), bb - (bb - a) * (1 - 0.75), bb}, "lerp");
  expect_values(ternary(Op::FMA, F, {0x1p30 + 1}, {0x1p30 - 1}, {-0x1p60}, F), {-1},
                "fma rounds once");
  expect_values(ternary(Op::FMA, DType::I32, {65536, 3}, {65536, 4}, {5, 5}, DType::I32), {5, 17},
                "fma int wraps");
}

void test_cast(void** state) {
  (void)state;
  auto cast = [](DType from, const std::vector<double>& x, DType to) {
    Builder b;
    int64_t a = b.tensor_input(1, from);
    int64_t y = b.op(Op::CAST, {a}, {static_cast<int64_t>(to)})[0];
    return run(b.draft(), {{a, tensor(from, {static_cast<int64_t>(x.size())}, x)}}).get(y);
  };
  expect_values(cast(DType::F64, {-2.7, 2.7, -0.5}, DType::I32), {-2, 2, 0}, "float->int truncates");
  expect_values(cast(DType::F64, {0, -0.0, kNaN, 0.1}, DType::Bool), {0, 0, 1, 1}, "float->bool");
  expect_values(cast(DType::I64, {5, 0}, DType::Bool), {1, 0}, "int->bool");
  expect_values(cast(DType::Bool, {1, 0}, DType::F16), {1, 0}, "bool->half");
  // 1 + 2^-11 + 2^-30: via float it becomes the tie 1 + 2^-11 and rounds to
  // even (1); rounded once it goes up to 1 + 2^-10.
  expect_values(cast(DType::F64, {1 + 0x1p-11 + 0x1p-30}, DType::F16), {1 + 0x1p-10},
                "double->half rounds once");
  expect_values(cast(DType::F64, {1 + 0x1p-8 + 0x1p-30}, DType::BF16), {1 + 0x1p-7},
                "double->bf16 rounds once");
  expect_values(cast(DType::F64, {65519.99, 65520, 1e-8, 0x1p-25, 0x1p-25 + 0x1p-40}, DType::F16),
                {65504, kInf, 0, 0, 0x1p-24}, "half overflow/underflow");
  Builder b;
  int64_t a = b.tensor_input(1, DType::I64);
  int64_t y = b.op(Op::CAST, {a}, {static_cast<int64_t>(DType::I32)})[0];
  Env env = run(b.draft(), {{a, tensor_i64(DType::I64, {2}, {0x100000005LL, -1})}});
  assert_true(values_i64(env.get(y)) == (std::vector<int64_t>{5, -1}));
}

// Exhaustive over float bit patterns (strided sample): double_to_half and
// double_to_bf16 of a float equal the float conversions (one rounding).
void test_half_conversions(void** state) {
  (void)state;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 0x101) {
    float f;
    uint32_t u = static_cast<uint32_t>(bits);
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    assert_int_equal(double_to_half(f), float_to_half(f));
    assert_int_equal(double_to_bf16(f), float_to_bf16(f));
  }
  assert_int_equal(double_to_half(kNaN) & 0x7e00, 0x7e00);
  assert_int_equal(double_to_bf16(-kInf), 0xff80);
}

// ---- sweeps over every op and dtype --------------------------------------

std::vector<double> sample(DType t) {
  if (is_bool(t)) return {0, 1, 1, 0};
  if (is_integer(t)) return {-3, -1, 0, 1, 2, 7};
  return {-2.5, -1, -0.75, -0.0, 0.5, 1, 3, 0.25};
}

// The float semantics of each unary op, written independently of the backend.
double ref_unary(Op op, double x) {
  switch (op) {
    case Op::NEG: return -x;
    case Op::ABS: return x < 0 ? -x : (x == 0 ? 0.0 : x);
    case Op::EXP: return std::exp(x);
    case Op::EXP2: return std::pow(2.0, x);
    case Op::EXPM1: return std::expm1(x);
    case Op::LOG: return std::log(x);
    case Op::LOG2: return std::log(x) / std::log(2.0);
    case Op::LOG10: return std::log(x) / std::log(10.0);
    case Op::LOG1P: return std::log1p(x);
    case Op::SQRT: return std::sqrt(x);
    case Op::RSQRT: return 1 / std::sqrt(x);  // rsqrt(-0) = -inf
    case Op::RECIPROCAL: return 1 / x;
    case Op::SIN: return std::sin(x);
    case Op::COS: return std::cos(x);
    case Op::TAN: return std::sin(x) / std::cos(x);
    case Op::ASIN: return std::asin(x);
    case Op::ACOS: return std::acos(x);
    case Op::ATAN: return std::atan(x);
    case Op::SINH: return (std::exp(x) - std::exp(-x)) / 2;
    case Op::COSH: return (std::exp(x) + std::exp(-x)) / 2;
    case Op::TANH: return std::tanh(x);
    case Op::ASINH: return std::log(x + std::sqrt(x * x + 1));
    case Op::ACOSH: return std::log(x + std::sqrt(x * x - 1));
    case Op::ATANH: return 0.5 * std::log((1 + x) / (1 - x));
    case Op::SIGMOID: return 0.5 * (1 + std::tanh(x / 2));
    case Op::RELU: return x > 0 ? x : 0;
    case Op::GELU: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
    case Op::GELU_TANH:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * std::pow(x, 3))));
    case Op::SILU: return x * 0.5 * (1 + std::tanh(x / 2));
    case Op::ERF: return std::erf(x);
    case Op::ERFC: return std::erfc(x);
    case Op::FLOOR: return std::floor(x);
    case Op::CEIL: return std::ceil(x);
    case Op::ROUND: {
      double r = std::floor(x + 0.5);
      if (r - x == 0.5 && std::fmod(r, 2) != 0) r -= 1;  // ties to even
      return std::copysign(r, x);
    }
    case Op::TRUNC: return x < 0 ? std::ceil(x) : std::floor(x);
    case Op::SIGN: return x > 0 ? 1 : (x < 0 ? -1 : 0);
    case Op::ISNAN: return x != x;
    case Op::ISINF: return std::fabs(x) == kInf;
    case Op::ISFINITE: return std::fabs(x) < kInf;
    case Op::LOGICAL_NOT: return x == 0;
    default: fail_msg("no reference for %s", op_name(op).data()); return 0;
  }
}

// Integer semantics of the unary ops that accept ints.
double ref_unary_int(Op op, int64_t x, DType t) {
  switch (op) {
    case Op::BITWISE_NOT: return is_bool(t) ? !x : ~x;
    case Op::FLOOR:
    case Op::CEIL:
    case Op::ROUND:
    case Op::TRUNC: return static_cast<double>(x);
    case Op::ISNAN:
    case Op::ISINF: return 0;
    case Op::ISFINITE: return 1;
    default: return ref_unary(op, static_cast<double>(x));
  }
}

// Expected output dtype of a unary op under its type rule.
DType unary_out(Op op, DType in) {
  switch (op_info(op).type_rule) {
    case TypeRule::ToFloat: return is_float(in) ? in : DType::F32;
    case TypeRule::ToBool: return DType::Bool;
    default: return in;
  }
}

void test_unary_sweep(void** state) {
  (void)state;
  int evaluated = 0;
  for (int code = 0; code < static_cast<int>(Op::COUNT); ++code) {
    const Op op = static_cast<Op>(code);
    if (op_info(op).category != OpCategory::Unary) continue;
    for (DType t : kAllDTypes) {
      Builder b;
      int64_t a = b.tensor_input(2, t);
      int64_t y;
      try {
        y = b.op(op, {a}, {})[0];
      } catch (const Error&) {
        continue;  // the type rule rejects this dtype
      }
      const DType out_t = unary_out(op, t);
      assert_int_equal(b.draft().value(y).dtype, out_t);
      std::vector<double> x = sample(t);
      // A transposed [n/2, 2] view: strides (1, n/2).
      const int64_t n = static_cast<int64_t>(x.size());
      TensorView in = tensor(t, {2, n / 2}, x);
      in.sizes = {n / 2, 2};
      in.strides = {1, n / 2};
      TensorView got = run(b.draft(), {{a, in}}).get(y);
      assert_true(got.sizes == (Sizes{n / 2, 2}));
      for_each_index(got.sizes, [&](const int64_t* idx) {
        const double v = load_f64(t, in.at(idx));
        double want;
        if (is_float(t)) want = ref_unary(op, v);
        else if (is_float(out_t)) want = ref_unary(op, round_to(DType::F32, v));
        else want = ref_unary_int(op, static_cast<int64_t>(v), t);
        want = round_to(out_t, want);
        expect_close(load_f64(out_t, got.at(idx)), want, out_t,
                     std::string(op_name(op)) + " " + std::string(dtype_name(t)) + " x=" +
                         std::to_string(v),
                     out_t == DType::F64 ? 1024 : 2);
      });
      ++evaluated;
    }
  }
  assert_true(evaluated >= 40 * 4);  // every unary op on every float dtype at least
}

double ref_binary(Op op, double a, double b) {
  switch (op) {
    case Op::ADD: return a + b;
    case Op::SUB: return a - b;
    case Op::MUL: return a * b;
    case Op::DIV: return a / b;
    case Op::FMOD: return a - b * std::trunc(a / b);
    case Op::REMAINDER: return a - b * std::floor(a / b);
    case Op::POW: return std::pow(a, b);
    case Op::ATAN2: return std::atan2(a, b);
    case Op::MAXIMUM: return a != a || b != b ? kNaN : std::max(a, b);
    case Op::MINIMUM: return a != a || b != b ? kNaN : std::min(a, b);
    case Op::EQ: return a == b;
    case Op::NE: return a != b;
    case Op::LT: return a < b;
    case Op::LE: return a <= b;
    case Op::GT: return a > b;
    case Op::GE: return a >= b;
    case Op::LOGICAL_AND: return a != 0 && b != 0;
    case Op::LOGICAL_OR: return a != 0 || b != 0;
    case Op::LOGICAL_XOR: return (a != 0) != (b != 0);
    case Op::BITWISE_AND: return static_cast<double>(static_cast<int64_t>(a) & static_cast<int64_t>(b));
    case Op::BITWISE_OR: return static_cast<double>(static_cast<int64_t>(a) | static_cast<int64_t>(b));
    case Op::BITWISE_XOR: return static_cast<double>(static_cast<int64_t>(a) ^ static_cast<int64_t>(b));
    case Op::SHIFT_LEFT: return b < 0 || b >= 32 ? 0 : a * std::pow(2.0, b);
    case Op::SHIFT_RIGHT: return b < 0 || b >= 32 ? (a < 0 ? -1 : 0) : std::floor(a / std::pow(2.0, b));
    default: fail_msg("no reference for %s", op_name(op).data()); return 0;
  }
}

// Every binary op on every same-dtype pair its rule accepts, with the second
// operand broadcast along dim 0 (stride 0) and a float scalar operand case.
void test_binary_sweep(void** state) {
  (void)state;
  int evaluated = 0;
  for (int code = 0; code < static_cast<int>(Op::COUNT); ++code) {
    const Op op = static_cast<Op>(code);
    if (op_info(op).category != OpCategory::Binary) continue;
    for (DType t : kAllDTypes) {
      Builder b;
      int64_t x = b.tensor_input(2, t);
      int64_t y = b.tensor_input(1, t);
      int64_t z;
      try {
        z = b.op(op, {x, y}, {})[0];
      } catch (const Error&) {
        continue;
      }
      const DType out_t = b.draft().value(z).dtype;
      std::vector<double> xs = sample(t);
      const int64_t n = static_cast<int64_t>(xs.size());
      std::vector<double> ys(xs.rbegin(), xs.rend());
      ys.resize(static_cast<size_t>(n / 2));
      if (!is_bool(t))
        for (double& v : ys)
          if (v == 0 && !is_float(t)) v = 2;  // integer fmod/remainder by 0 throw
      if (op == Op::POW && is_integer(t))
        for (double& v : ys) v = std::fabs(v);
      TensorView in_x = tensor(t, {2, n / 2}, xs);
      TensorView in_y = tensor(t, {n / 2}, ys);
      TensorView got = run(b.draft(), {{x, in_x}, {y, in_y}}).get(z);
      const DType ct = is_float(out_t) ? out_t : t;
      for_each_index(got.sizes, [&](const int64_t* idx) {
        const double a = load_f64(t, in_x.at(idx)), c = load_f64(t, in_y.at(&idx[1]));
        double want = ref_binary(op, round_to(is_float(ct) ? ct : t, a), round_to(is_float(ct) ? ct : t, c));
        if (t == DType::I64 && op == Op::SHIFT_LEFT) want = c >= 64 ? 0 : a * std::pow(2.0, c);
        want = round_to(out_t, want);
        expect_close(load_f64(out_t, got.at(idx)), want, out_t,
                     std::string(op_name(op)) + " " + std::string(dtype_name(t)) + " a=" +
                         std::to_string(a) + " b=" + std::to_string(c));
      });
      ++evaluated;
    }
  }
  assert_true(evaluated >= 24 * 4);
}

// Every ternary op on every dtype its rule accepts (same dtype for all
// operands; where takes a bool condition), operands broadcast from rank 1.
void test_ternary_sweep(void** state) {
  (void)state;
  int evaluated = 0;
  for (Op op : {Op::WHERE, Op::CLAMP, Op::LERP, Op::FMA}) {
    for (DType t : kAllDTypes) {
      Builder b;
      const DType t0 = op == Op::WHERE ? DType::Bool : t;
      int64_t x = b.tensor_input(2, t0), y = b.tensor_input(1, t), z = b.tensor_input(2, t);
      int64_t out;
      try {
        out = b.op(op, {x, y, z}, {})[0];
      } catch (const Error&) {
        continue;
      }
      std::vector<double> xs = op == Op::WHERE ? std::vector<double>{1, 0, 0, 1} : sample(t);
      xs.resize(4);
      std::vector<double> ys = sample(t), zs = sample(t);
      ys.resize(2);
      zs = std::vector<double>(zs.rbegin(), zs.rend());
      zs.resize(4);
      TensorView tx = tensor(t0, {2, 2}, xs), ty = tensor(t, {2}, ys), tz = tensor(t, {2, 2}, zs);
      TensorView got = run(b.draft(), {{x, tx}, {y, ty}, {z, tz}}).get(out);
      for_each_index(got.sizes, [&](const int64_t* i) {
        const double a = load_f64(t0, tx.at(i)), c = load_f64(t, ty.at(&i[1])), d = load_f64(t, tz.at(i));
        double want;
        switch (op) {
          case Op::WHERE: want = a != 0 ? c : d; break;
          case Op::CLAMP: want = std::min(std::max(a, c), d); break;
          case Op::LERP: want = std::fabs(d) < 0.5 ? a + d * (c - a) : c - (c - a) * (1 - d); break;
          default: want = a * c + d; break;
        }
        expect_close(load_f64(t, got.at(i)), round_to(t, want), t,
                     std::string(op_name(op)) + " " + std::string(dtype_name(t)));
      });
      ++evaluated;
    }
  }
  assert_int_equal(evaluated, 7 + 6 + 4 + 6);
}

// Every cast pair: float -> int truncates, -> bool tests != 0, others round.
void test_cast_sweep(void** state) {
  (void)state;
  for (DType from : kAllDTypes)
    for (DType to : kAllDTypes) {
      Builder b;
      int64_t x = b.tensor_input(1, from);
      int64_t y = b.op(Op::CAST, {x}, {static_cast<int64_t>(to)})[0];
      std::vector<double> xs = sample(from);
      TensorView in = tensor(from, {static_cast<int64_t>(xs.size())}, xs);
      TensorView got = run(b.draft(), {{x, in}}).get(y);
      for (size_t i = 0; i < xs.size(); ++i) {
        const double v = load_f64(from, in.data + i * dtype_size(from));
        double want = is_bool(to) ? (v != 0) : is_float(to) ? round_to(to, v) : std::trunc(v);
        if (!is_float(to) && want == 0) want = 0;  // -0.0 -> 0
        assert_true(same(load_f64(to, got.data + i * dtype_size(to)), want));
      }
    }
}

// Mixed dtypes follow torch's promotion, including scalars (a float scalar
// compared with a float16 tensor is rounded to float16 first).
void test_promotion_and_scalars(void** state) {
  (void)state;
  {
    Builder b;
    int64_t x = b.tensor_input(1, DType::F16);
    int64_t c = b.constant_f64(0.1, DType::F64);
    int64_t eq = b.op(Op::EQ, {x, c}, {})[0];
    Env env = run(b.draft(), {{x, tensor(DType::F16, {1}, {0.1})}});
    expect_values(env.get(eq), {1}, "f16 tensor == 0.1 compares in f16");
  }
  {
    Builder b;
    int64_t x = b.tensor_input(1, DType::I32);
    int64_t c = b.constant_f64(0.5, DType::F64);
    int64_t s = b.op(Op::ADD, {x, c}, {})[0];
    assert_int_equal(b.draft().value(s).dtype, DType::F32);
    Env env = run(b.draft(), {{x, tensor(DType::I32, {2}, {1, 16777217})}});
    expect_values(env.get(s), {1.5, 16777216}, "int32 + 0.5 in float32");
  }
  {
    Builder b;  // all scalars: the output is a scalar
    int64_t s = b.scalar_input(DType::I64);
    int64_t c = b.constant_i64(3, DType::I64);
    int64_t m = b.op(Op::MUL, {s, c}, {})[0];
    assert_true(b.draft().value(m).is_scalar);
    Env env = run(b.draft(), {{s, tensor(DType::I64, {}, {-5})}});
    assert_int_equal(env.get(m).rank(), 0);
    expect_values(env.get(m), {-15}, "scalar mul");
  }
  {
    Builder b;  // ToFloat on int32 rounds the input to float32 first
    int64_t x = b.tensor_input(1, DType::I64);
    int64_t y = b.op(Op::SQRT, {x}, {})[0];
    Env env = run(b.draft(), {{x, tensor(DType::I64, {1}, {16777217})}});
    expect_values(env.get(y), {4096}, "sqrt of int64 in float32");
  }
  {
    Builder b;  // bf16 + f16 promotes to f32
    int64_t x = b.tensor_input(1, DType::BF16);
    int64_t y = b.tensor_input(1, DType::F16);
    int64_t z = b.op(Op::ADD, {x, y}, {})[0];
    assert_int_equal(b.draft().value(z).dtype, DType::F32);
    Env env = run(b.draft(), {{x, tensor(DType::BF16, {1}, {256})}, {y, tensor(DType::F16, {1}, {0.0009765625})}});
    expect_values(env.get(z), {256.0009765625}, "bf16 + f16 in f32");
  }
}

// Broadcast (stride 0), size-0, size-1 and sliced (strided) operands.
void test_layouts(void** state) {
  (void)state;
  Builder b;
  int64_t x = b.tensor_input(3, DType::F32);
  int64_t y = b.tensor_input(2, DType::F32);
  int64_t z = b.op(Op::SUB, {x, y}, {})[0];
  const Fusion& f = b.draft();
  // x: [2, 1, 3] compact; y: [4, 3] with row stride 6 (every other row of a [8, 3]).
  TensorView tx = tensor(DType::F32, {2, 1, 3}, {1, 2, 3, 4, 5, 6});
  std::vector<double> big(24);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) * 0.5;
  TensorView ty = tensor(DType::F32, {8, 3}, big);
  ty.sizes = {4, 3};
  ty.strides = {6, 1};
  TensorView got = run(f, {{x, tx}, {y, ty}}).get(z);
  assert_true(got.sizes == (Sizes{2, 4, 3}));
  for_each_index(got.sizes, [&](const int64_t* i) {
    const double want = (i[0] * 3 + i[2] + 1) - (i[1] * 6 + i[2]) * 0.5;
    assert_true(same(load_f64(DType::F32, got.at(i)), want));
  });
  // Size 0 broadcast against size 1.
  TensorView empty = allocate(DType::F32, {2, 0, 3});
  TensorView one = tensor(DType::F32, {1, 3}, {1, 2, 3});
  TensorView got0 = run(f, {{x, empty}, {y, one}}).get(z);
  assert_true(got0.sizes == (Sizes{2, 0, 3}));
  // A stride-0 input given directly (an expanded tensor).
  TensorView row = tensor(DType::F32, {1, 1, 3}, {1, 2, 3});
  row.sizes = {2, 5, 3};
  row.strides = {0, 0, 1};
  TensorView got1 = run(f, {{x, row}, {y, one}}).get(z);
  expect_values(got1, std::vector<double>(30, 0.0), "expanded minus itself");
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_hand_cases),  cmocka_unit_test(test_binary_hand_cases),
      cmocka_unit_test(test_integer_errors),    cmocka_unit_test(test_ternary_hand_cases),
      cmocka_unit_test(test_cast),              cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_unary_sweep),       cmocka_unit_test(test_binary_sweep),
      cmocka_unit_test(test_ternary_sweep),     cmocka_unit_test(test_cast_sweep),
      cmocka_unit_test(test_promotion_and_scalars), cmocka_unit_test(test_layouts),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
