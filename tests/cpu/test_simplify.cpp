// The simplify stage (core/simplify): which exprs it rewrites and into what,
// that value ids, records and the text form stay those of the definition,
// that the rewritten exprs pass the builder's type rules, and that the CPU
// reference gives the same results as the unsimplified definition, exactly
// or within the bounds docs/semantics.md states, edge values included
// (negative, signed zeros, subnormals, overflow, inf, NaN, integer wrap).
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/define/builder.h"
#include "core/runtime/cpu/eval.h"
#include "core/simplify/simplify.h"
#include "core/text/text_printer.h"
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
#include <memory>
#include <string>
#include <vector>

using namespace kf;
using namespace kf::cpu;

namespace {

// The definition as built (what KFUSE_SIMPLIFY=0 runs) and simplified (what
// the definition cache hands out), both finished.
struct Both {
  std::shared_ptr<Fusion> plain, simple;
  size_t rewrites = 0;
};

Both both(const Builder& b) {
  Both r;
  r.plain = std::make_shared<Fusion>(b.draft());
  r.plain->finish();
  r.simple = std::make_shared<Fusion>(b.draft());
  r.rewrites = simplify(*r.simple);
  r.simple->finish();
  return r;
}

// The ops of the live exprs, in run order: "cast mul".
std::string live_ops(const Fusion& f) {
  std::string s;
  for (size_t i = 0; i < f.exprs.size(); ++i) {
    if (!f.live[i]) continue;
    if (!s.empty()) s += ' ';
    s += op_name(f.exprs[i].op);
  }
  return s;
}

void expect_ops(const Fusion& f, const char* want, const char* what) {
  const std::string got = live_ops(f);
  if (got != want) fail_msg("%s: live ops '%s', expected '%s'", what, got.c_str(), want);
}

// What the C API sees stays: every defined value (kind, dtype, shape), the
// inputs, outputs and records, and the text; new values come after them.
// Every expr passes the builder's type rules with the types the stage gave.
void expect_invariants(const Both& p, const char* what) {
  const Fusion& a = *p.plain;
  const Fusion& s = *p.simple;
  assert_true(s.values.size() >= a.values.size());
  for (size_t id = 0; id < a.values.size(); ++id) {
    const Value& x = a.values[id];
    const Value& y = s.values[id];
    if (x.kind != y.kind || x.dtype != y.dtype || x.rank != y.rank || x.is_scalar != y.is_scalar)
      fail_msg("%s: value %zu changed", what, id);
  }
  for (size_t id = a.values.size(); id < s.values.size(); ++id)
    assert_int_equal(static_cast<int>(s.values[id].kind), static_cast<int>(ValueKind::Computed));
  assert_true(a.inputs == s.inputs);
  assert_int_equal(a.outputs.size(), s.outputs.size());
  for (size_t k = 0; k < a.outputs.size(); ++k) assert_int_equal(a.outputs[k].value, s.outputs[k].value);
  assert_true(a.records == s.records);
  assert_string_equal(print_fusion(a).c_str(), print_fusion(s).c_str());
  // Each computed value has exactly one producer, before its readers.
  std::vector<int> produced(s.values.size(), 0);
  for (size_t i = 0; i < s.exprs.size(); ++i) {
    for (int64_t in : s.exprs[i].inputs) {
      const Value& v = s.value(in);
      if (v.kind == ValueKind::Computed && !(v.producer >= 0 && static_cast<size_t>(v.producer) < i))
        fail_msg("%s: value %lld read before it is computed", what, static_cast<long long>(in));
    }
    for (int64_t o : s.exprs[i].outputs) {
      ++produced[static_cast<size_t>(o)];
      assert_int_equal(s.value(o).producer, static_cast<int64_t>(i));
    }
  }
  for (const Value& v : s.values)
    if (v.kind == ValueKind::Computed && produced[static_cast<size_t>(v.id)] != 1)
      fail_msg("%s: value %lld has %d producers", what, static_cast<long long>(v.id), produced[static_cast<size_t>(v.id)]);
  // The builder's type rules agree with the types of the rewritten exprs.
  Builder r;
  std::vector<int64_t> id(s.values.size(), -1);
  for (const Value& v : s.values) {
    if (v.kind == ValueKind::TensorInput) id[static_cast<size_t>(v.id)] = r.tensor_input(v.rank, v.dtype);
    if (v.kind == ValueKind::ScalarInput) id[static_cast<size_t>(v.id)] = r.scalar_input(v.dtype);
    if (v.kind == ValueKind::Constant)
      id[static_cast<size_t>(v.id)] = is_float(v.dtype) ? r.constant_f64(v.f64, v.dtype) : r.constant_i64(v.i64, v.dtype);
  }
  for (const Expr& e : s.exprs) {
    std::vector<int64_t> args;
    for (int64_t in : e.inputs) args.push_back(id[static_cast<size_t>(in)]);
    std::vector<int64_t> outs = r.op(e.op, args, e.attrs);
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& want = s.value(e.outputs[k]);
      const Value& got = r.draft().value(outs[k]);
      if (got.dtype != want.dtype || got.rank != want.rank || got.is_scalar != want.is_scalar)
        fail_msg("%s: %s gives %s rank %d, the stage said %s rank %d", what, std::string(op_name(e.op)).c_str(),
                 std::string(dtype_name(got.dtype)).c_str(), got.rank, std::string(dtype_name(want.dtype)).c_str(),
                 want.rank);
      id[static_cast<size_t>(e.outputs[k])] = outs[k];
    }
  }
}

// ---- numerics -------------------------------------------------------------

double ulp_of(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-52;
    case DType::F32: return 0x1p-23;
    case DType::F16: return 0x1p-10;
    case DType::BF16: return 0x1p-7;
    default: return 0;
  }
}

// Smallest positive normal number of a float dtype.
double min_normal(DType t) {
  switch (t) {
    case DType::F64: return 0x1p-1022;
    case DType::F32:
    case DType::BF16: return 0x1p-126;
    case DType::F16: return 0x1p-14;
    default: return 0;
  }
}

enum class Match {
  Exact,  // bit for bit (NaN as NaN, signed zeros distinct)
  Ulps,   // within `ulps` ulps of the output dtype, or min_normal absolute
};

// Where the rewrite legitimately differs from the definition: torch's
// pow(tensor, scalar) semantics (sqrt/rsqrt at -0 and -inf).
struct Exception {
  double x;
  double plain, simple;
};

bool is(double a, double b) { return same(a, b); }

// Runs y = f(inputs) on both fusions and compares output 0 element by element.
void compare(const Both& p, const Inputs& inputs, Match m, double ulps, const std::vector<Exception>& exceptions,
             const std::vector<double>& xs, const char* what) {
  const int64_t out = p.plain->outputs[0].value;
  const std::vector<double> a = values(run(*p.plain, inputs).get(out));
  const std::vector<double> s = values(run(*p.simple, inputs).get(out));
  assert_int_equal(a.size(), s.size());
  const DType t = p.plain->value(out).dtype;
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = xs.empty() ? 0 : xs[i % xs.size()];
    bool excepted = false;
    for (const Exception& e : exceptions)
      if (is(e.x, x)) {
        if (!is(a[i], e.plain) || !is(s[i], e.simple))
          fail_msg("%s: x = %g: plain %.17g simplified %.17g, documented %.17g and %.17g", what, x, a[i], s[i], e.plain,
                   e.simple);
        excepted = true;
      }
    if (excepted || is(a[i], s[i])) continue;
    bool ok = false;
    if (m == Match::Ulps && std::isfinite(a[i]) && std::isfinite(s[i]))
      ok = std::fabs(a[i] - s[i]) <= ulps * ulp_of(t) * std::fabs(a[i]) || std::fabs(a[i] - s[i]) <= min_normal(t);
    if (!ok) fail_msg("%s: element %zu (x = %.9g): definition %.17g, simplified %.17g", what, i, x, a[i], s[i]);
  }
}

const std::vector<double> kEdges = {-3, -2.5, -1, -0.0, 0.0, 0.5, 1, 1.5, 2, 3.25, 7, 1e-3, 1e-20, -1e-20,
                                    1e20, -1e20, 1e-40, 1e-310, 3e38, -3e38, 1e200,
                                    std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN()};

const DType kFloats[] = {DType::F64, DType::F32, DType::F16, DType::BF16};

// y = pow(x, c) with a float64 constant exponent, x a rank-1 tensor of dtype t.
Both pow_const(DType t, double c) {
  Builder b;
  const int64_t x = b.tensor_input(1, t);
  const int64_t e = b.constant_f64(c, DType::F64);
  b.output(b.op(Op::POW, {x, e}, {})[0], {}, -1);
  return both(b);
}

// ---- pow with a constant exponent ------------------------------------------

void test_pow_float_structure(void**) {
  struct Case {
    double c;
    const char* ops;       // float32/float64
    const char* ops_half;  // float16/bfloat16
  } cases[] = {
      {1, "cast", "cast"},
      {2, "mul", "mul"},
      {3, "mul mul", "cast mul mul cast"},
      {0.5, "sqrt", "sqrt"},
      {-0.5, "rsqrt", "rsqrt"},
      {-1, "reciprocal", "reciprocal"},
      {-2, "mul reciprocal", "cast mul reciprocal cast"},
      {2.5, "pow", "pow"},
      {0, "pow", "pow"},
      {4, "pow", "pow"},
      {-3, "pow", "pow"},
  };
  for (DType t : kFloats)
    for (const Case& c : cases) {
      const Both p = pow_const(t, c.c);
      const std::string what = "pow(" + std::string(dtype_name(t)) + ", " + std::to_string(c.c) + ")";
      const bool half = t == DType::F16 || t == DType::BF16;
      expect_ops(*p.simple, half ? c.ops_half : c.ops, what.c_str());
      assert_int_equal(p.rewrites, std::string(c.ops) == "pow" ? 0 : 1);
      expect_invariants(p, what.c_str());
    }
}

// pow(x, c) against the definition, every float dtype, edge values.
void test_pow_float_values(void**) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : kFloats) {
    const Inputs in = {{0, tensor(t, {static_cast<int64_t>(kEdges.size())}, kEdges)}};
    std::vector<double> xs = values(in[0].second);  // as held in t
    const std::string name(dtype_name(t));
    // Exact below float64: one rounding of the same real number (x*x of a
    // float32 is exact in double). In float64, within libm's pow (< 1 ulp).
    const Match exact = t == DType::F64 ? Match::Ulps : Match::Exact;
    compare(pow_const(t, 1), in, Match::Exact, 0, {}, xs, ("pow 1 " + name).c_str());
    compare(pow_const(t, 2), in, exact, 1, {}, xs, ("pow 2 " + name).c_str());
    compare(pow_const(t, -1), in, Match::Ulps, 1, {}, xs, ("pow -1 " + name).c_str());
    // torch's pow(tensor, 0.5) is sqrt: -0 -> -0 (pow: +0), -inf -> NaN (pow: +inf).
    compare(pow_const(t, 0.5), in, exact, 1, {{-0.0, 0.0, -0.0}, {-inf, inf, nan}}, xs,
            ("pow 0.5 " + name).c_str());
    // rsqrt: -0 -> -inf (pow: +inf), -inf -> NaN (pow: +0).
    compare(pow_const(t, -0.5), in, Match::Ulps, 2, {{-0.0, inf, -inf}, {-inf, 0.0, nan}}, xs,
            ("pow -0.5 " + name).c_str());
    // Two roundings in float32/float64 (torch's x*x*x and 1/(x*x)); in
    // float32 for half types, then one rounding. Where x*x overflows or
    // underflows, 1/(x*x) differs from pow by less than min_normal.
    compare(pow_const(t, 3), in, Match::Ulps, 2, {}, xs, ("pow 3 " + name).c_str());
    compare(pow_const(t, -2), in, Match::Ulps, 2, {}, xs, ("pow -2 " + name).c_str());
  }
}

// The float32 case of the issue, precisely: x*x is the same bits as pow,
// negative x included.
void test_pow_square_negative(void**) {
  const Both p = pow_const(DType::F32, 2);
  const Inputs in = {{0, tensor(DType::F32, {4}, {-3, -0.5, -1e-30, -1e30})}};
  expect_values(run(*p.simple, in).get(p.simple->outputs[0].value), {9, 0.25, 0.0, kInf}, "pow(-x, 2)");
  compare(p, in, Match::Exact, 0, {}, {}, "pow(-x, 2) vs definition");
}

// Integer pow keeps exact wrapping semantics: 1, 2, 3 only.
void test_pow_integer(void**) {
  const int64_t big = 3037000500;  // big * big overflows int64
  const std::vector<double> i64s = {-3, -1, 0, 1, 7, 46341, 2147483647, -2147483648.0, static_cast<double>(big),
                                    -static_cast<double>(big)};
  for (DType t : {DType::I64, DType::I32}) {
    for (int64_t c : {1, 2, 3}) {
      Builder b;
      const int64_t x = b.tensor_input(1, t);
      b.output(b.op(Op::POW, {x, b.constant_i64(c, DType::I64)}, {})[0], {}, -1);
      const Both p = both(b);
      expect_ops(*p.simple, c == 1 ? "cast" : c == 2 ? "mul" : "mul mul", "integer pow");
      expect_invariants(p, "integer pow");
      std::vector<double> vals = i64s;
      if (t == DType::I32) vals.resize(8);
      TensorView v = allocate(t, {static_cast<int64_t>(vals.size())});
      for (size_t i = 0; i < vals.size(); ++i) store_i64(t, v.data + i * dtype_size(t), static_cast<int64_t>(vals[i]));
      compare(p, {{0, v}}, Match::Exact, 0, {}, {}, "integer pow values");
    }
    // A negative exponent stays pow (the CPU reference raises, as torch).
    Builder b;
    const int64_t x = b.tensor_input(1, t);
    b.output(b.op(Op::POW, {x, b.constant_i64(-1, DType::I64)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "pow", "integer pow -1");
  }
}

// An integer base with a float exponent computes in float32: cast first.
void test_pow_integer_base_float_exponent(void**) {
  for (double c : {2.0, 0.5, -1.0, 3.0}) {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::I32);
    b.output(b.op(Op::POW, {x, b.constant_f64(c, DType::F64)}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, c == 2 ? "cast mul" : c == 0.5 ? "cast sqrt" : c == -1 ? "cast reciprocal" : "cast mul mul",
               "int base");
    expect_invariants(p, "int base");
    TensorView v = allocate(DType::I32, {6});
    const int32_t xs[] = {-4, 0, 1, 3, 16777217, 46341};
    std::memcpy(v.data, xs, sizeof xs);
    compare(p, {{0, v}}, c == 3 || c == -1 ? Match::Ulps : Match::Exact, 2, {}, {}, "int base values");
  }
}

// An int32 base with a float16 exponent tensor (rank 0) computes in
// float16: the base is rounded to float16 first (2049 -> 2048), then
// widened to float32 for the products.
void test_pow_half_result_other_base(void**) {
  for (double c : {3.0, -2.0}) {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::I32);
    const int64_t e = b.op(Op::FULL, {b.constant_f64(c, DType::F64)}, {static_cast<int64_t>(DType::F16)})[0];
    b.output(b.op(Op::POW, {x, e}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, c == 3 ? "cast cast mul mul cast" : "cast cast mul reciprocal cast", "int32 ^ f16");
    expect_invariants(p, "int32 ^ f16");
    TensorView v = allocate(DType::I32, {5});
    const int32_t xs[] = {3, -7, 40, 2049, 0};
    std::memcpy(v.data, xs, sizeof xs);
    compare(p, {{0, v}}, Match::Ulps, 1, {}, {}, "int32 ^ f16 values");
  }
}

// Only exponents known when the fusion is defined: constants, and full of a
// constant that leaves x's shape alone. Scalar inputs are run-time values.
void test_pow_which_exponents(void**) {
  {  // a scalar input: stays
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    b.output(b.op(Op::POW, {x, b.scalar_input(DType::F64)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "pow", "scalar input exponent");
  }
  {  // a tensor exponent: stays
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    b.output(b.op(Op::POW, {x, b.tensor_input(2, DType::F32)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "pow", "tensor exponent");
  }
  {  // full([], 2): rank 0, rewritten
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t two = b.op(Op::FULL, {b.constant_f64(2, DType::F64)}, {static_cast<int64_t>(DType::F32)})[0];
    b.output(b.op(Op::POW, {x, two}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "mul", "full([]) exponent");
    expect_invariants(p, "full([]) exponent");
    compare(p, {{0, tensor(DType::F32, {2, 3}, {-2, -1, 0, 1, 2, 3})}}, Match::Exact, 0, {}, {}, "full([]) values");
  }
  {  // full([1, 1], 0.5): every extent the constant 1, rewritten
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t one = b.constant_i64(1, DType::I64);
    const int64_t h = b.op(Op::FULL, {one, one, b.constant_f64(0.5, DType::F32)}, {static_cast<int64_t>(DType::F32)})[0];
    b.output(b.op(Op::POW, {x, h}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "sqrt", "full([1, 1]) exponent");
    expect_invariants(p, "full([1, 1]) exponent");
  }
  {  // full([n], 2) with n a scalar input: may broadcast x, stays
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    const int64_t n = b.scalar_input(DType::I64);
    const int64_t two = b.op(Op::FULL, {n, b.constant_f64(2, DType::F64)}, {static_cast<int64_t>(DType::F32)})[0];
    b.output(b.op(Op::POW, {x, two}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "full pow", "full([n]) exponent");
  }
  {  // full([], 2) with a scalar base: the result is a tensor, x a scalar; stays
    Builder b;
    const int64_t x = b.scalar_input(DType::F32);
    const int64_t two = b.op(Op::FULL, {b.constant_f64(2, DType::F64)}, {static_cast<int64_t>(DType::F32)})[0];
    b.output(b.op(Op::POW, {x, two}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "full pow", "scalar base, full exponent");
  }
  {  // full([], 2.5) in an int32 full: truncated to 2 (full converts), rewritten
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    const int64_t two = b.op(Op::FULL, {b.constant_f64(2.5, DType::F64)}, {static_cast<int64_t>(DType::I32)})[0];
    b.output(b.op(Op::POW, {x, two}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "mul", "int full exponent");
    compare(p, {{0, tensor(DType::F32, {3}, {-1.5, 0, 4})}}, Match::Exact, 0, {}, {}, "int full values");
  }
  {  // 2 + 2^-30 as a float32 constant is 2 in float32: rewritten
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    b.output(b.op(Op::POW, {x, b.constant_f64(2 + 0x1p-30, DType::F32)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "mul", "float32 constant near 2");
  }
  {  // ... but not as a float64 constant on a float64 tensor
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F64);
    b.output(b.op(Op::POW, {x, b.constant_f64(2 + 0x1p-30, DType::F64)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "pow", "float64 constant near 2");
  }
}

// ---- reciprocal and division of sqrt ---------------------------------------

const std::vector<double> kPositiveEdges = {0.0, -0.0, 1e-45, 1e-40, 1e-30, 0.25, 2, 3, 4, 10, 1e30, 3e38,
                                            std::numeric_limits<double>::infinity(), -1,
                                            -std::numeric_limits<double>::infinity(),
                                            std::numeric_limits<double>::quiet_NaN()};

void test_rsqrt(void**) {
  for (DType t : kFloats) {
    const Inputs in = {{0, tensor(t, {static_cast<int64_t>(kPositiveEdges.size())}, kPositiveEdges)}};
    {  // reciprocal(sqrt(x)): one rounding instead of two
      Builder b;
      const int64_t x = b.tensor_input(1, t);
      b.output(b.op(Op::RECIPROCAL, {b.op(Op::SQRT, {x}, {})[0]}, {})[0], {}, -1);
      const Both p = both(b);
      expect_ops(*p.simple, "rsqrt", "reciprocal(sqrt)");
      expect_invariants(p, "reciprocal(sqrt)");
      compare(p, in, Match::Ulps, 2, {}, {}, "reciprocal(sqrt) values");
    }
    {  // div(1, sqrt(x))
      Builder b;
      const int64_t x = b.tensor_input(1, t);
      const int64_t s = b.op(Op::SQRT, {x}, {})[0];
      b.output(b.op(Op::DIV, {b.constant_i64(1, DType::I64), s}, {})[0], {}, -1);
      const Both p = both(b);
      expect_ops(*p.simple, "rsqrt", "div(1, sqrt)");
      expect_invariants(p, "div(1, sqrt)");
      compare(p, in, Match::Ulps, 2, {}, {}, "div(1, sqrt) values");
    }
    {  // reciprocal(pow(x, 0.5)): the rewrites compose
      Builder b;
      const int64_t x = b.tensor_input(1, t);
      const int64_t s = b.op(Op::POW, {x, b.constant_f64(0.5, DType::F64)}, {})[0];
      b.output(b.op(Op::RECIPROCAL, {s}, {})[0], {}, -1);
      const Both p = both(b);
      expect_ops(*p.simple, "rsqrt", "reciprocal(pow(x, 0.5))");
      assert_int_equal(p.rewrites, 2);
    }
  }
}

// div(a, sqrt(x)) -> mul(a, rsqrt(x)): two roundings either way.
void test_div_by_sqrt(void**) {
  const std::vector<double> as = {1, -1, 0, -0.0, 3, 1e-45, 1e-38, 3e38, -7.5, 1e30,
                                  std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()};
  for (DType t : kFloats) {
    Builder b;
    const int64_t a = b.tensor_input(2, t);
    const int64_t x = b.tensor_input(2, t);
    const int64_t s = b.op(Op::SQRT, {x}, {})[0];
    b.output(b.op(Op::DIV, {a, s}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "rsqrt mul", "div(a, sqrt(x))");
    expect_invariants(p, "div(a, sqrt(x))");
    // Every a against every x.
    const int64_t na = static_cast<int64_t>(as.size()), nx = static_cast<int64_t>(kPositiveEdges.size());
    std::vector<double> av, xv;
    for (double ai : as)
      for (double xi : kPositiveEdges) {
        av.push_back(ai);
        xv.push_back(xi);
      }
    compare(p, {{a, tensor(t, {na, nx}, av)}, {x, tensor(t, {na, nx}, xv)}}, Match::Ulps, 2, {}, {},
            ("div(a, sqrt(x)) " + std::string(dtype_name(t))).c_str());
  }
  {  // a sqrt that another expr also reads stays, and still feeds it
    Builder b;
    const int64_t a = b.tensor_input(1, DType::F32);
    const int64_t x = b.tensor_input(1, DType::F32);
    const int64_t s = b.op(Op::SQRT, {x}, {})[0];
    b.output(b.op(Op::DIV, {a, s}, {})[0], {}, -1);
    b.output(s, {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "sqrt rsqrt mul", "shared sqrt");
    expect_invariants(p, "shared sqrt");
  }
  {  // layernorm's (x - mean) / sqrt(var + eps) on rows
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    const std::vector<int64_t> vm = b.op(Op::VAR_MEAN, {x}, {1, 0, 1});
    const int64_t c = b.op(Op::SUB, {x, vm[1]}, {})[0];
    const int64_t ve = b.op(Op::ADD, {vm[0], b.constant_f64(1e-5, DType::F32)}, {})[0];
    b.output(b.op(Op::DIV, {c, b.op(Op::SQRT, {ve}, {})[0]}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "var_mean sub add rsqrt mul", "layernorm");
    expect_invariants(p, "layernorm");
    std::vector<double> xs;
    for (int i = 0; i < 24; ++i) xs.push_back(std::sin(i * 1.7) * 3 + (i % 5));
    compare(p, {{x, tensor(DType::F32, {4, 6}, xs)}}, Match::Ulps, 2, {}, {}, "layernorm values");
  }
}

// rmsnorm as frameworks write it: pow(x, 2), mean, add, sqrt, reciprocal.
void test_rmsnorm_as_written(void**) {
  Builder b;
  const int64_t x = b.tensor_input(2, DType::BF16);
  const int64_t w = b.tensor_input(1, DType::BF16);
  const int64_t xf = b.op(Op::CAST, {x}, {static_cast<int64_t>(DType::F32)})[0];
  const int64_t wf = b.op(Op::CAST, {w}, {static_cast<int64_t>(DType::F32)})[0];
  const int64_t sq = b.op(Op::POW, {xf, b.constant_f64(2, DType::F64)}, {})[0];
  const int64_t ms = b.op(Op::MEAN, {sq}, {1, 1})[0];
  const int64_t me = b.op(Op::ADD, {ms, b.constant_f64(1e-6, DType::F64)}, {})[0];
  const int64_t r = b.op(Op::RECIPROCAL, {b.op(Op::SQRT, {me}, {})[0]}, {})[0];
  const int64_t y = b.op(Op::CAST, {b.op(Op::MUL, {b.op(Op::MUL, {xf, r}, {})[0], wf}, {})[0]},
                         {static_cast<int64_t>(DType::BF16)})[0];
  b.output(y, {}, -1);
  const Both p = both(b);
  expect_ops(*p.simple, "cast cast mul mean add rsqrt mul mul cast", "rmsnorm");
  assert_int_equal(p.rewrites, 2);
  assert_int_equal(p.simple->values.size(), p.plain->values.size());  // no new values
  expect_invariants(p, "rmsnorm");
  std::vector<double> xs, ws;
  for (int i = 0; i < 3 * 64; ++i) xs.push_back(std::cos(i * 0.37) * (i % 7 - 3));
  for (int i = 0; i < 64; ++i) ws.push_back(1 + i / 64.0);
  xs[5] = 0;  // a zero row element, and a whole zero row (rsqrt(eps))
  for (int i = 128; i < 192; ++i) xs[static_cast<size_t>(i)] = 0;
  compare(p, {{x, tensor(DType::BF16, {3, 64}, xs)}, {w, tensor(DType::BF16, {64}, ws)}}, Match::Ulps, 1, {}, {},
          "rmsnorm values");
}

// ---- casts that lose nothing, products and quotients by 1 ----------------

const DType kAllDTypes[] = {DType::F64, DType::F32,    DType::F16,    DType::BF16, DType::I64, DType::I32,
                            DType::Bool, DType::F8E4M3, DType::F8E5M2, DType::I8,   DType::U8};

// Values held in dtype t: its edges (extremes, zeros, NaN and infinities
// where t has them, integers next to float precision limits).
TensorView edge_tensor(DType t) {
  std::vector<double> v;
  switch (t) {
    case DType::Bool: v = {0, 1, 1, 0}; break;
    case DType::U8: v = {0, 1, 7, 128, 255}; break;
    case DType::I8: v = {-128, -1, 0, 1, 127}; break;
    case DType::I32: v = {-2147483648.0, -16777217, -1, 0, 1, 257, 16777217, 2147483647}; break;
    case DType::I64: v = {-9223372036854775808.0, -9007199254740992.0, -1, 0, 1, 16777217, 0x1p62}; break;
    default: v = kEdges;
  }
  return tensor(t, {static_cast<int64_t>(v.size())}, v);
}

// Whether every value of `from` is a value of `to` (the stage's rule,
// restated here from the formats: precision and exponent range).
bool exact_in(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  const auto is_in = [&](std::initializer_list<DType> ts) {
    for (DType t : ts)
      if (t == to) return true;
    return false;
  };
  switch (from) {
    case DType::I8:
    case DType::U8: return is_in({DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64});
    case DType::I32: return is_in({DType::I64, DType::F64});
    case DType::F8E4M3:
    case DType::F8E5M2: return is_in({DType::F16, DType::BF16, DType::F32, DType::F64});
    case DType::F16:
    case DType::BF16: return is_in({DType::F32, DType::F64});
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

// cast(cast(x) to W) to T: one cast when W holds x exactly, with the same
// values as the two casts (every dtype triple, edge values).
void test_cast_of_exact_cast(void**) {
  for (DType from : kAllDTypes)
    for (DType mid : kAllDTypes)
      for (DType to : kAllDTypes) {
        Builder b;
        const int64_t x = b.tensor_input(1, from);
        const int64_t w = b.op(Op::CAST, {x}, {static_cast<int64_t>(mid)})[0];
        b.output(b.op(Op::CAST, {w}, {static_cast<int64_t>(to)})[0], {}, -1);
        const Both p = both(b);
        const std::string what = "cast " + std::string(dtype_name(from)) + " -> " + std::string(dtype_name(mid)) +
                                 " -> " + std::string(dtype_name(to));
        const bool exact = exact_in(from, mid);
        expect_ops(*p.simple, exact ? "cast" : "cast cast", what.c_str());
        assert_int_equal(p.rewrites, exact ? 1 : 0);
        expect_invariants(p, what.c_str());
        compare(p, {{x, edge_tensor(from)}}, Match::Exact, 0, {}, {}, what.c_str());
      }
}

// mul(x, 1), mul(1, x), div(x, 1): cast(x) to the result dtype when the 1
// is exactly 1 in its own dtype and broadcasts nothing.
void test_by_one(void**) {
  struct One {
    bool is_float;
    double f;
    DType dtype;
  };
  const One ones[] = {{true, 1.0, DType::F64}, {true, 1.0, DType::F32}, {false, 1, DType::I64},
                      {false, 1, DType::Bool}, {true, 1.0, DType::BF16}};
  for (DType t : kAllDTypes)
    for (const One& one : ones)
      for (int form = 0; form < 3; ++form) {  // mul(x, 1), mul(1, x), div(x, 1)
        if (t == DType::Bool && form == 2) continue;
        Builder b;
        const int64_t x = b.tensor_input(2, t);
        const int64_t c = one.is_float ? b.constant_f64(one.f, one.dtype) : b.constant_i64(1, one.dtype);
        const Op op = form == 2 ? Op::DIV : Op::MUL;
        b.output(b.op(op, form == 1 ? std::vector<int64_t>{c, x} : std::vector<int64_t>{x, c}, {})[0], {}, -1);
        const Both p = both(b);
        const std::string what = std::string(form == 2 ? "div(" : "mul(") + std::string(dtype_name(t)) + ", 1 as " +
                                 std::string(dtype_name(one.dtype)) + ")" + (form == 1 ? " reversed" : "");
        expect_ops(*p.simple, "cast", what.c_str());
        expect_invariants(p, what.c_str());
        TensorView e = edge_tensor(t);
        const int64_t n = e.sizes[0];
        std::vector<double> v = values(e);
        std::vector<double> two(v);
        two.insert(two.end(), v.begin(), v.end());
        compare(p, {{x, tensor(t, {2, n}, two)}}, Match::Exact, 0, {}, {}, what.c_str());
      }
  // 1.001 held as bfloat16 is 1 (the stage reads a constant in its own
  // dtype, as the CPU reference does).
  {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    b.output(b.op(Op::MUL, {x, b.constant_f64(1.001, DType::BF16)}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "cast", "mul by 1.001 as bfloat16");
    compare(p, {{x, edge_tensor(DType::F32)}}, Match::Exact, 0, {}, {}, "mul by 1.001 as bfloat16");
  }
  // A full of extent 1 whose dtype holds its fill as 1 (1.001 as bfloat16)
  // broadcasts nothing: rewritten.
  {
    Builder b;
    const int64_t x = b.tensor_input(2, DType::F32);
    const int64_t full = b.op(Op::FULL, {b.constant_i64(1, DType::I64), b.constant_f64(1.001, DType::F32)},
                              {static_cast<int64_t>(DType::BF16)})[0];
    b.output(b.op(Op::MUL, {full, x}, {})[0], {}, -1);
    const Both p = both(b);
    expect_ops(*p.simple, "cast", "mul by a full of 1 with extent 1");
    expect_invariants(p, "mul by a full of 1 with extent 1");
    std::vector<double> v = values(edge_tensor(DType::F32));
    const int64_t n = static_cast<int64_t>(v.size());
    compare(p, {{x, tensor(DType::F32, {1, n}, v)}}, Match::Exact, 0, {}, {}, "mul by a full of 1 with extent 1");
  }
  // Not rewritten: a constant that is not 1 in its dtype, a 1 that broadcasts x
  // (a full with an extent other than 1), a 1 that is a run-time scalar.
  {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::BF16);
    b.output(b.op(Op::MUL, {x, b.constant_f64(1.001, DType::F32)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "mul", "mul by 1.001");
  }
  {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    const int64_t full = b.op(Op::FULL, {b.constant_i64(4, DType::I64), b.constant_i64(1, DType::I64), b.constant_f64(1, DType::F32)},
                              {static_cast<int64_t>(DType::F32)})[0];
    b.output(b.op(Op::MUL, {x, full}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "full mul", "mul by a broadcasting full of 1");
  }
  {
    Builder b;
    const int64_t x = b.tensor_input(1, DType::F32);
    b.output(b.op(Op::MUL, {x, b.scalar_input(DType::F32)}, {})[0], {}, -1);
    expect_ops(*both(b).simple, "mul", "mul by a scalar input");
  }
}

// The definition cache hands out the simplified fusion (unless the process
// runs with KFUSE_SIMPLIFY=0), the same one for the same records.
void test_definition_cache_simplifies(void**) {
  Builder b;
  const int64_t x = b.tensor_input(1, DType::F32);
  b.output(b.op(Op::POW, {x, b.constant_f64(3, DType::F64)}, {})[0], {}, -1);
  std::shared_ptr<Fusion> f = b.finalize();
  if (simplify_enabled()) expect_ops(*f, "mul mul", "finalized");
  else expect_ops(*f, "pow", "finalized, KFUSE_SIMPLIFY=0");
  assert_ptr_equal(f.get(), b.finalize().get());
  assert_int_equal(f->outputs[0].value, 2);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pow_float_structure),     cmocka_unit_test(test_pow_float_values),
      cmocka_unit_test(test_pow_square_negative),     cmocka_unit_test(test_pow_integer),
      cmocka_unit_test(test_pow_integer_base_float_exponent), cmocka_unit_test(test_pow_half_result_other_base),
      cmocka_unit_test(test_pow_which_exponents),
      cmocka_unit_test(test_rsqrt),                   cmocka_unit_test(test_div_by_sqrt),
      cmocka_unit_test(test_rmsnorm_as_written),      cmocka_unit_test(test_definition_cache_simplifies),
      cmocka_unit_test(test_cast_of_exact_cast),      cmocka_unit_test(test_by_one),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
