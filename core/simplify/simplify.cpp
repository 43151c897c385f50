// The simplify stage (simplify.h): one forward pass over the exprs. Each
// expr is either copied or replaced by the exprs of a rewrite, and patterns
// look at the producers in the new list, so rewrites compose in one pass
// (reciprocal(pow(x, 0.5)) becomes rsqrt(x)).
#include "core/simplify/simplify.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "core/ir/type_promotion.h"
#include "core/util/debug_log.h"
#include "core/util/env_switch.h"

namespace kf {

namespace {

bool log_simplify() { return debug_topic("simplify"); }

// `v` as a value of dtype t holds it (round to nearest even, as the CPU
// reference converts operands); nullopt outside the range that matters here.
std::optional<double> rounded_to(DType t, double v) {
  if (!std::isfinite(v) || std::fabs(v) > 1e9) return std::nullopt;
  switch (t) {
    case DType::F64: return v;
    case DType::F32: return static_cast<double>(static_cast<float>(v));
    case DType::F16: return static_cast<double>(half_to_float(double_to_half(v)));
    case DType::BF16: return static_cast<double>(bf16_to_float(double_to_bf16(v)));
    case DType::F8E4M3: return static_cast<double>(e4m3fn_to_float(double_to_e4m3fn(v)));
    case DType::F8E5M2: return static_cast<double>(e5m2_to_float(double_to_e5m2(v)));
    case DType::I64:
    case DType::I32: return std::trunc(v);  // float -> int truncates
    case DType::I8:
    case DType::U8: {  // truncates, then wraps to 8 bits
      const auto i = static_cast<int64_t>(std::trunc(v));
      return t == DType::I8 ? static_cast<double>(static_cast<int8_t>(static_cast<uint8_t>(i)))
                            : static_cast<double>(static_cast<uint8_t>(i));
    }
    case DType::Bool: return v != 0 ? 1.0 : 0.0;
  }
  return std::nullopt;
}

// Products of half types compute in float32 and are rounded once at the end
// (as torch computes pow(x, 3) and pow(x, -2) for them): an intermediate
// kept in float16 would add a rounding of 2^-11.
DType wide(DType t) { return is_narrow_float(t) ? DType::F32 : t; }

struct Type {
  DType dtype;
  int rank;
  bool is_scalar;
  bool operator==(const Type& o) const {
    return dtype == o.dtype && rank == o.rank && is_scalar == o.is_scalar;
  }
};

class Simplifier {
 public:
  explicit Simplifier(Fusion& f) : f_(f), producer_(f.values.size(), -1) {}

  size_t run() {
    std::vector<Expr> defined = std::move(f_.exprs);
    out_.reserve(defined.size());
    for (const Expr& e : defined) {
      if (rewrite(e)) {
        ++rewrites_;
        if (log_simplify()) log(e);
        continue;
      }
      for (int64_t o : e.outputs) producer_[static_cast<size_t>(o)] = static_cast<int64_t>(out_.size());
      out_.push_back(e);
    }
    f_.exprs = std::move(out_);
    for (Value& v : f_.values) v.producer = -1;
    for (size_t i = 0; i < f_.exprs.size(); ++i)
      for (int64_t o : f_.exprs[i].outputs) f_.values[static_cast<size_t>(o)].producer = static_cast<int64_t>(i);
    return rewrites_;
  }

 private:
  // ---- the rules --------------------------------------------------------

  // Emits the replacement of `e` (its last expr computes e.outputs[0]) and
  // returns true, or emits nothing and returns false.
  bool rewrite(const Expr& e) {
    if (e.outputs.size() != 1) return false;
    begin();
    bool done = false;
    switch (e.op) {
      case Op::POW: done = pow_rule(e); break;
      case Op::RECIPROCAL: done = reciprocal_of_sqrt(e.inputs[0], e.outputs[0]); break;
      // by_one first: div_by_sqrt may emit before it fails.
      case Op::DIV: done = by_one(e, false) || div_by_sqrt(e); break;
      case Op::MUL: done = by_one(e, true); break;
      case Op::CAST: done = cast_of_exact_cast(e); break;
      default: break;
    }
    if (!done) rollback();
    return done;
  }

  bool pow_rule(const Expr& e) {
    const int64_t target = e.outputs[0];
    const int64_t x = e.inputs[0];
    const Type t = type_of(target);
    // The result has x's shape: the exponent neither broadcasts x nor is
    // broadcast by it.
    if (!(type_of(x).rank == t.rank && type_of(x).is_scalar == t.is_scalar)) return false;
    if (!keeps_shape(e.inputs[1], t)) return false;
    const std::optional<double> c = known_value(e.inputs[1], t.dtype);  // in pow's compute dtype
    if (!c) return false;
    if (is_float(t.dtype)) {
      if (*c == 1) return emit_to(target, Op::CAST, {x}, {static_cast<int64_t>(t.dtype)});
      if (*c == 2) {
        const int64_t b = as_dtype(x, t.dtype);
        return emit_to(target, Op::MUL, {b, b});
      }
      if (*c == 0.5) return emit_to(target, Op::SQRT, {as_dtype(x, t.dtype)});
      if (*c == -0.5) return emit_to(target, Op::RSQRT, {as_dtype(x, t.dtype)});
      if (*c == -1) {
        const int64_t b = as_dtype(x, t.dtype);
        return reciprocal_of_sqrt(b, target) || emit_to(target, Op::RECIPROCAL, {b});
      }
      if (*c == 3 || *c == -2) {
        // x as pow sees it (converted to T), then widened exactly.
        const DType w = wide(t.dtype);
        const int64_t b = as_dtype(as_dtype(x, t.dtype), w);
        const int64_t square = emit(Op::MUL, {b, b});
        const Op last = *c == 3 ? Op::MUL : Op::RECIPROCAL;
        const std::vector<int64_t> args = *c == 3 ? std::vector<int64_t>{square, b} : std::vector<int64_t>{square};
        if (w == t.dtype) return emit_to(target, last, args);
        return emit_to(target, Op::CAST, {emit(last, args)}, {static_cast<int64_t>(t.dtype)});
      }
      return false;
    }
    if (is_integer(t.dtype)) {  // exact: wrapping products, as pow computes them
      if (*c == 1) return emit_to(target, Op::CAST, {x}, {static_cast<int64_t>(t.dtype)});
      const int64_t b = as_dtype(x, t.dtype);
      if (*c == 2) return emit_to(target, Op::MUL, {b, b});
      if (*c == 3) return emit_to(target, Op::MUL, {emit(Op::MUL, {b, b}), b});
    }
    return false;
  }

  // reciprocal(s) with s = sqrt(x): rsqrt(x), computed into `target`.
  bool reciprocal_of_sqrt(int64_t s, int64_t target) {
    const Expr* p = producer(s);
    if (p == nullptr || p->op != Op::SQRT) return false;
    return emit_to(target, Op::RSQRT, {p->inputs[0]});
  }

  // div(a, sqrt(x)): rsqrt(x) when a is 1, else mul(a, rsqrt(x)).
  bool div_by_sqrt(const Expr& e) {
    const int64_t target = e.outputs[0];
    const Expr* p = producer(e.inputs[1]);
    if (p == nullptr || p->op != Op::SQRT) return false;
    const int64_t x = p->inputs[0];
    const int64_t a = e.inputs[0];
    const Type t = type_of(target);
    if (keeps_shape(a, t)) {
      const std::optional<double> one = known_value(a, t.dtype);
      if (one && *one == 1 && emit_to(target, Op::RSQRT, {x})) return true;
    }
    const int64_t r = emit(Op::RSQRT, {x});
    return emit_to(target, Op::MUL, {a, r});
  }

  // mul(x, 1), mul(1, x) (commutes) or div(x, 1), with the 1 exactly 1 in
  // its own dtype and not broadcasting x: cast(x) to the result dtype.
  // Exact: a product or quotient by 1 is its operand, rounded once to the
  // result dtype as the cast rounds it.
  bool by_one(const Expr& e, bool commutes) {
    const int64_t target = e.outputs[0];
    const Type t = type_of(target);
    for (int k = commutes ? 0 : 1; k < 2; ++k) {
      const int64_t one = e.inputs[static_cast<size_t>(k)], x = e.inputs[static_cast<size_t>(1 - k)];
      if (keeps_shape(one, t) && exactly_one(one) && emit_to(target, Op::CAST, {x}, {static_cast<int64_t>(t.dtype)}))
        return true;
    }
    return false;
  }

  // cast(cast(x) to W) to T, where W holds every value of x's dtype
  // exactly: cast(x) to T (the inner cast loses nothing, so the outer one
  // sees x's own value). A round trip such as bfloat16 -> float32 ->
  // bfloat16 becomes a cast to x's own dtype.
  bool cast_of_exact_cast(const Expr& e) {
    const Expr* p = producer(e.inputs[0]);
    if (p == nullptr || p->op != Op::CAST) return false;
    const int64_t x = p->inputs[0];
    if (!holds_exactly(f_.value(x).dtype, f_.value(e.inputs[0]).dtype)) return false;
    return emit_to(e.outputs[0], Op::CAST, {x}, e.attrs);
  }

  // Whether dtype `to` represents every value of dtype `from` (NaN and the
  // infinities included where `from` has them).
  static bool holds_exactly(DType from, DType to) {
    if (from == to || from == DType::Bool) return true;
    switch (from) {
      case DType::U8:
      case DType::I8: return to == DType::I32 || to == DType::I64 || to == DType::F16 || to == DType::BF16 ||
                             to == DType::F32 || to == DType::F64;
      case DType::I32: return to == DType::I64 || to == DType::F64;
      case DType::F8E4M3:
      case DType::F8E5M2: return to == DType::F16 || to == DType::BF16 || to == DType::F32 || to == DType::F64;
      case DType::F16:
      case DType::BF16: return to == DType::F32 || to == DType::F64;
      case DType::F32: return to == DType::F64;
      default: return false;  // int64, float64
    }
  }

  // A constant, or a full of a constant, whose value is exactly 1 in its
  // own dtype (so every compute dtype sees 1).
  bool exactly_one(int64_t id) const { return known_value(id, f_.value(id).dtype) == std::optional<double>(1.0); }

  // ---- what is known of a value when the fusion is defined -------------

  // The value of a constant, or of a full of a constant, as an operand of
  // compute dtype t sees it (the CPU reference converts each operand to the
  // compute dtype; a constant is first held in its own dtype).
  std::optional<double> known_value(int64_t id, DType t) const {
    const Value& v = f_.value(id);
    std::optional<double> raw;
    if (v.kind == ValueKind::Constant) {
      raw = constant_value(v);
    } else if (const Expr* p = producer(id); p != nullptr && p->op == Op::FULL) {
      const Value& fill = f_.value(p->inputs.back());
      if (fill.kind != ValueKind::Constant) return std::nullopt;  // a scalar input: a run-time value
      raw = constant_value(fill);
      if (raw) raw = rounded_to(v.dtype, *raw);  // full converts the fill to its dtype
    }
    if (!raw) return std::nullopt;
    if (!is_float(t) && *raw != std::trunc(*raw)) return std::nullopt;
    return rounded_to(t, *raw);
  }

  static std::optional<double> constant_value(const Value& c) {
    if (!is_float(c.dtype)) return static_cast<double>(c.i64);
    return rounded_to(c.dtype, c.f64);
  }

  // Whether operand `id` of a pointwise op whose result has type t leaves
  // the other operand's shape alone: a scalar, or a full whose every extent
  // is the constant 1 and whose rank is at most t's.
  bool keeps_shape(int64_t id, const Type& t) const {
    const Value& v = f_.value(id);
    if (v.is_scalar) return true;
    const Expr* p = producer(id);
    if (p == nullptr || p->op != Op::FULL || v.rank > t.rank || t.is_scalar) return false;
    for (size_t i = 0; i + 1 < p->inputs.size(); ++i) {
      const Value& extent = f_.value(p->inputs[i]);
      if (extent.kind != ValueKind::Constant || extent.i64 != 1) return false;
    }
    return true;
  }

  // ---- emitting ---------------------------------------------------------

  const Expr* producer(int64_t id) const {
    const int64_t p = producer_[static_cast<size_t>(id)];
    return p < 0 ? nullptr : &out_[static_cast<size_t>(p)];
  }

  Type type_of(int64_t id) const {
    const Value& v = f_.value(id);
    return {v.dtype, v.rank, v.is_scalar};
  }

  // The type rules (core/define/op_rules.cpp) of the ops rewrites emit.
  Type infer(Op op, const std::vector<int64_t>& args, const std::vector<int64_t>& attrs) const {
    Type t{DType::F32, 0, true};
    for (int64_t a : args)
      if (!f_.value(a).is_scalar) {
        t.is_scalar = false;
        t.rank = std::max(t.rank, f_.value(a).rank);
      }
    switch (op) {
      case Op::CAST: t.dtype = static_cast<DType>(attrs.at(0)); break;
      case Op::MUL: t.dtype = result_type(f_, args); break;
      default: {  // sqrt, rsqrt, reciprocal: ToFloat
        const DType in = f_.value(args.at(0)).dtype;
        t.dtype = is_float(in) ? in : DType::F32;
      }
    }
    return t;
  }

  void begin() {
    saved_exprs_ = out_.size();
    saved_values_ = f_.values.size();
  }
  void rollback() {
    out_.resize(saved_exprs_);
    f_.values.resize(saved_values_);
    producer_.resize(saved_values_);
  }

  // A new intermediate value computed by op(args).
  int64_t emit(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs = {}) {
    const Type t = infer(op, args, attrs);
    const int64_t id = f_.add_computed(t.dtype, t.rank, t.is_scalar);
    producer_.push_back(static_cast<int64_t>(out_.size()));
    out_.push_back(Expr{op, std::move(args), {id}, std::move(attrs)});
    return id;
  }

  // The defined value `target` computed by op(args); false (nothing
  // emitted) unless op(args) has exactly target's dtype and shape.
  bool emit_to(int64_t target, Op op, std::vector<int64_t> args, std::vector<int64_t> attrs = {}) {
    if (!(infer(op, args, attrs) == type_of(target))) return false;
    producer_[static_cast<size_t>(target)] = static_cast<int64_t>(out_.size());
    out_.push_back(Expr{op, std::move(args), {target}, std::move(attrs)});
    return true;
  }

  // x, or cast(x) to t.
  int64_t as_dtype(int64_t x, DType t) {
    if (f_.value(x).dtype == t) return x;
    return emit(Op::CAST, {x}, {static_cast<int64_t>(t)});
  }

  // ---- KFUSE_DEBUG=simplify ---------------------------------------------

  std::string name(int64_t id) const {
    static constexpr char kKind[] = {'t', 's', 'c', 'v'};
    return kKind[static_cast<int>(f_.value(id).kind)] + std::to_string(id);
  }
  std::string describe(const Expr& e) const {
    std::string s = name(e.outputs[0]) + " = " + std::string(op_name(e.op)) + "(";
    for (size_t i = 0; i < e.inputs.size(); ++i) s += (i ? ", " : "") + name(e.inputs[i]);
    s += ")";
    if (e.op == Op::CAST) s += " {dtype=" + std::string(dtype_name(static_cast<DType>(e.attrs[0]))) + "}";
    return s;
  }
  void log(const Expr& defined) const {
    std::string line = "kfuse[simplify] " + describe(defined) + " ->";
    for (size_t i = saved_exprs_; i < out_.size(); ++i) line += (i > saved_exprs_ ? "; " : " ") + describe(out_[i]);
    line += "\n";
    std::fputs(line.c_str(), stderr);
  }

  Fusion& f_;
  std::vector<Expr> out_;
  std::vector<int64_t> producer_;  // per value id: its expr in out_, -1 if none (yet)
  size_t saved_exprs_ = 0, saved_values_ = 0;
  size_t rewrites_ = 0;
};

}  // namespace

size_t simplify(Fusion& fusion) { return Simplifier(fusion).run(); }

bool simplify_enabled() {
  static const bool on = env_switch("KFUSE_SIMPLIFY", true);
  return on;
}

}  // namespace kf
