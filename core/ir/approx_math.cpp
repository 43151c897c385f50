#include "core/ir/approx_math.h"

#include <algorithm>
#include <limits>

#include "core/ir/type_promotion.h"
#include "core/util/env_switch.h"

namespace kf {

namespace {

constexpr double kNone = std::numeric_limits<double>::infinity();  // no bound

// The largest error a stored output of dtype t may carry before its
// rounding: a quarter of its smallest relative step (2^-(mantissa bits)).
double output_budget(DType t) {
  switch (t) {
    case DType::BF16: return 0x1p-10;
    case DType::F16: return 0x1p-13;
    case DType::F8E4M3: return 0x1p-5;
    case DType::F8E5M2: return 0x1p-4;
    default: return 0;  // wide floats, integers, bool: exact only
  }
}

bool live(const Fusion& f, size_t expr) { return f.live.size() != f.exprs.size() || f.live[expr]; }

bool candidate(const Fusion& f, const Expr& e) {
  const bool op = e.op == Op::EXP || e.op == Op::SIGMOID || e.op == Op::SILU || e.op == Op::DIV;
  return op && compute_dtype(f, e) == DType::F32;
}

double own_error(Op op) {
  switch (op) {
    case Op::EXP: return kExpError;
    case Op::SIGMOID:
    case Op::SILU: return kSigmoidError;
    default: return kDivError;
  }
}

// Sign facts from the graph: which values are >= 0 or <= 0 wherever they
// are defined (NaN aside).
struct Signs {
  std::vector<bool> nonneg, nonpos;
};

Signs signs_of(const Fusion& f) {
  Signs s{std::vector<bool>(f.values.size(), false), std::vector<bool>(f.values.size(), false)};
  for (const Value& v : f.values)
    if (v.kind == ValueKind::Constant) {
      const double x = is_float(v.dtype) ? v.f64 : static_cast<double>(v.i64);
      s.nonneg[static_cast<size_t>(v.id)] = x >= 0;
      s.nonpos[static_cast<size_t>(v.id)] = x <= 0;
    }
  auto pos = [&](int64_t id) { return s.nonneg[static_cast<size_t>(id)]; };
  auto neg = [&](int64_t id) { return s.nonpos[static_cast<size_t>(id)]; };
  for (const Expr& e : f.exprs) {
    if (e.outputs.empty() || e.inputs.empty()) continue;
    const int64_t a = e.inputs[0], b = e.inputs.size() > 1 ? e.inputs[1] : a;
    bool p = false, n = false;
    switch (op_info(e.op).category) {
      case OpCategory::Shape:
      case OpCategory::Hint:
      case OpCategory::Cast: p = pos(a); n = neg(a); break;
      case OpCategory::Reduction:
        if (e.op == Op::SUM || e.op == Op::MEAN || e.op == Op::MAX || e.op == Op::MIN) {
          p = pos(a);
          n = neg(a);
        }
        if (e.op == Op::VAR) p = true;
        break;
      default:
        switch (e.op) {
          case Op::EXP:
          case Op::EXP2:
          case Op::SIGMOID:
          case Op::ABS:
          case Op::SQRT:
          case Op::RSQRT:
          case Op::RELU: p = true; break;
          case Op::NEG: p = neg(a); n = pos(a); break;
          case Op::RECIPROCAL: p = pos(a); n = neg(a); break;
          case Op::MUL:
          case Op::DIV:
            p = a == b || (pos(a) && pos(b)) || (neg(a) && neg(b));
            n = (pos(a) && neg(b)) || (neg(a) && pos(b));
            break;
          case Op::ADD: p = pos(a) && pos(b); n = neg(a) && neg(b); break;
          case Op::SUB: p = pos(a) && neg(b); n = neg(a) && pos(b); break;
          case Op::MAXIMUM: p = pos(a) || pos(b); n = neg(a) && neg(b); break;
          case Op::MINIMUM: p = pos(a) && pos(b); n = neg(a) || neg(b); break;
          case Op::WHERE: {
            const int64_t c = e.inputs.size() > 2 ? e.inputs[2] : b;
            p = pos(b) && pos(c);
            n = neg(b) && neg(c);
            break;
          }
          default: break;
        }
    }
    for (int64_t o : e.outputs) {
      s.nonneg[static_cast<size_t>(o)] = p;
      s.nonpos[static_cast<size_t>(o)] = n;
    }
  }
  return s;
}

// The relative error bound of e's output given its inputs' (err) and
// whether e takes its fast form.
double propagate(const Fusion& f, const Expr& e, const std::vector<double>& err, const Signs& s, bool fast) {
  double most = 0, total = 0;
  for (int64_t in : e.inputs) {
    most = std::max(most, err[static_cast<size_t>(in)]);
    total += err[static_cast<size_t>(in)];
  }
  if (fast) return e.op == Op::DIV ? total + kDivError : (most > 0 ? kNone : own_error(e.op));
  if (most == 0) return 0;
  const int64_t a = e.inputs[0], b = e.inputs.size() > 1 ? e.inputs[1] : a;
  auto same_sign = [&](int64_t x, int64_t y) {
    return (s.nonneg[static_cast<size_t>(x)] && s.nonneg[static_cast<size_t>(y)]) ||
           (s.nonpos[static_cast<size_t>(x)] && s.nonpos[static_cast<size_t>(y)]);
  };
  auto exact = [&](int64_t x) { return err[static_cast<size_t>(x)] == 0; };
  switch (op_info(e.op).category) {
    case OpCategory::Shape:
    case OpCategory::Hint: return most;
    case OpCategory::Cast: {
      const DType from = f.value(a).dtype, to = f.value(e.outputs[0]).dtype;
      return is_float(from) && is_float(to) ? most : kNone;  // (into a narrow float: see holds)
    }
    case OpCategory::Reduction:
      if (e.op == Op::MAX || e.op == Op::MIN) return most;
      if (e.op == Op::SUM || e.op == Op::MEAN) return same_sign(a, a) ? most : kNone;
      return kNone;
    case OpCategory::Indexing: return exact(b) ? most : kNone;  // (the index exact)
    case OpCategory::Query: return 0;                             // (reads the shape only)
    default: break;
  }
  switch (e.op) {
    case Op::NEG:
    case Op::ABS:
    case Op::RELU:
    case Op::MAXIMUM:
    case Op::MINIMUM: return most;
    case Op::CLAMP: return exact(e.inputs[1]) && exact(e.inputs[2]) ? most : kNone;
    case Op::WHERE: return exact(a) ? most : kNone;
    case Op::MUL:
    case Op::DIV:
    case Op::RECIPROCAL:
    case Op::SQRT:
    case Op::RSQRT: return total;
    case Op::ADD: return same_sign(a, b) ? most : kNone;
    case Op::SUB:
      return (s.nonneg[static_cast<size_t>(a)] && s.nonpos[static_cast<size_t>(b)]) ||
                     (s.nonpos[static_cast<size_t>(a)] && s.nonneg[static_cast<size_t>(b)])
                 ? most
                 : kNone;
    default: return kNone;
  }
}

// Whether the fast forms in `fast` keep every output within its budget.
bool holds(const Fusion& f, const std::vector<bool>& fast, const Signs& s) {
  std::vector<double> err(f.values.size(), 0.0);    // as used by later ops
  std::vector<double> stored(f.values.size(), 0.0);  // before a narrow rounding
  for (size_t i = 0; i < f.exprs.size(); ++i) {
    if (!live(f, i)) continue;
    const Expr& e = f.exprs[i];
    const double x = propagate(f, e, err, s, fast[i]);
    for (int64_t o : e.outputs) {
      // A narrow float carrying an error is within the bound before its
      // rounding (what a store checks), unbounded after it.
      stored[static_cast<size_t>(o)] = x;
      err[static_cast<size_t>(o)] = is_narrow_float(f.value(o).dtype) && x > 0 ? kNone : x;
    }
  }
  for (const Output& out : f.outputs) {
    const size_t v = static_cast<size_t>(out.value);
    if (stored[v] > output_budget(f.value(out.value).dtype)) return false;
  }
  return true;
}

}  // namespace

std::vector<bool> approximate_exprs(const Fusion& f) {
  if (!approx_math_enabled()) return {};
  std::vector<bool> fast(f.exprs.size(), false);
  std::vector<size_t> chosen;
  const Signs s = signs_of(f);
  // Each candidate alone, then all that hold alone together; when their
  // errors add past a budget, the last ones go until the rest hold.
  for (size_t i = 0; i < f.exprs.size(); ++i) {
    if (!live(f, i) || !candidate(f, f.exprs[i])) continue;
    fast[i] = true;
    if (holds(f, fast, s)) chosen.push_back(i);
    fast[i] = false;
  }
  for (size_t i : chosen) fast[i] = true;
  while (!chosen.empty() && !holds(f, fast, s)) {
    fast[chosen.back()] = false;
    chosen.pop_back();
  }
  return fast;
}

bool approx_math_enabled() {
  static const bool on = env_switch("KFUSE_APPROX_MATH", true);
  return on;
}

}  // namespace kf
