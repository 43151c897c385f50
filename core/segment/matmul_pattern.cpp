#include "core/segment/matmul_pattern.h"

#include <algorithm>
#include <array>

namespace kf {

namespace {

struct Walk {
  std::vector<int64_t> exprs;  // sorted
  MatmulPattern pattern;
};

// Follows the pattern from library expr `expr`; reader(v) is the only expr
// that reads v (or -1).
template <class Reader>
Walk walk(const ConcreteFusion& c, int64_t expr, const Reader& reader) {
  const Fusion& f = *c.fusion;
  const Expr& lib = f.exprs[static_cast<size_t>(expr)];
  Walk alone;
  alone.exprs = {expr};
  MatmulPattern& p = alone.pattern;
  p.product_expr = expr;
  p.product = p.result = lib.outputs[0];
  if (lib.op == Op::LINEAR && lib.inputs.size() == 3) p.bias = lib.inputs[2];
  const DType t = f.value(p.product).dtype;
  const int b_rank = f.value(lib.inputs[1]).rank;
  const bool has_n = lib.op == Op::MATMUL ? b_rank >= 2 : b_rank == 2;
  if (!is_float(t)) return alone;

  Walk w = alone;
  int64_t v = p.product;
  auto next = [&]() -> const Expr* {
    const int64_t e = reader(v);
    return e < 0 ? nullptr : &f.exprs[static_cast<size_t>(e)];
  };
  auto take = [&](const Expr* e) {
    w.exprs.push_back(static_cast<int64_t>(e - f.exprs.data()));
    v = e->outputs[0];
  };
  auto cast_to = [&](const Expr* e, DType to) {
    return e && e->op == Op::CAST && f.value(e->outputs[0]).dtype == to;
  };
  const bool cast_up = (t == DType::F16 || t == DType::BF16) && cast_to(next(), DType::F32);
  if (cast_up) take(next());
  bool absorbed = false;
  if (const Expr* add = next(); add && add->op == Op::ADD && p.bias < 0 && has_n) {
    const int64_t other = add->inputs[0] == v ? add->inputs[1] : add->inputs[0];
    // After the cast up, the bias is a cast of a vector in the product's
    // dtype, read by this add only (so the cast joins the pattern).
    int64_t bias = other, bias_cast = -1;
    if (cast_up) {
      const int64_t producer = f.value(other).producer;
      if (producer >= 0 && cast_to(&f.exprs[static_cast<size_t>(producer)], DType::F32) &&
          reader(other) == add - f.exprs.data()) {
        bias_cast = producer;
        bias = f.exprs[static_cast<size_t>(producer)].inputs[0];
      }
    }
    const Value& b = f.value(bias);
    // Broadcast over the rows only: as long as N, or one element.
    const SizeClass n = c.size_classes[static_cast<size_t>(v)].back();
    auto along_n = [&] {
      const SizeClass bn = c.size_classes[static_cast<size_t>(bias)][0];
      return bn == n || bn == SizeClass::One;
    };
    const bool ok = other != v && (!cast_up || bias_cast >= 0) && !b.is_scalar && b.rank == 1 &&
                    b.dtype == t && along_n();
    if (ok) {
      if (bias_cast >= 0) w.exprs.push_back(bias_cast);
      take(add);
      w.pattern.bias = bias;
      w.pattern.bias_added = true;
      absorbed = true;
    }
  }
  if (const Expr* act = next(); act && (act->op == Op::RELU || act->op == Op::GELU_TANH)) {
    take(act);
    w.pattern.activation = act->op == Op::RELU ? Activation::Relu : Activation::GeluTanh;
    absorbed = true;
  }
  if (cast_up) {
    if (!cast_to(next(), t)) return alone;
    take(next());
  }
  if (!absorbed) return alone;
  w.pattern.result = v;
  std::sort(w.exprs.begin(), w.exprs.end());
  return w;
}

}  // namespace

std::vector<int64_t> match_matmul_pattern(const ConcreteFusion& c, int64_t expr,
                                          const SoleReaders& sole_readers) {
  auto reader = [&](int64_t v) { return sole_readers[static_cast<size_t>(v)]; };
  return walk(c, expr, reader).exprs;
}

std::optional<MatmulPattern> describe_matmul_pattern(const ConcreteFusion& c, const Task& task) {
  const Fusion& f = *c.fusion;
  int64_t lib = -1;
  for (int64_t e : task.exprs)
    if (op_info(f.exprs[static_cast<size_t>(e)].op).category == OpCategory::Library) {
      if (lib >= 0) return std::nullopt;
      lib = e;
    }
  if (lib < 0 || task.outputs.size() != 1) return std::nullopt;
  // Readers inside the task; a value the task hands out has none here.
  auto reader = [&](int64_t v) {
    if (v == task.outputs[0]) return int64_t{-1};
    int64_t found = -1;
    for (int64_t e : task.exprs)
      for (int64_t in : f.exprs[static_cast<size_t>(e)].inputs) {
        if (in != v) continue;
        if (found >= 0) return int64_t{-1};
        found = e;
      }
    return found;
  };
  Walk w = walk(c, lib, reader);
  if (w.exprs != task.exprs || w.pattern.result != task.outputs[0]) return std::nullopt;
  return w.pattern;
}

Task matmul_epilogue_task(const Fusion& fusion, const Task& pattern, const MatmulPattern& p) {
  std::vector<int64_t> exprs;
  for (int64_t e : pattern.exprs)
    if (e != p.product_expr) exprs.push_back(e);
  return make_task(fusion, std::move(exprs), [&](int64_t id) { return id == p.result; });
}

std::string_view matmul_pattern_name(const Fusion& fusion, const MatmulPattern& p) {
  static constexpr std::array<std::string_view, 12> names = {
      "matmul",        "matmul+relu",        "matmul+gelu_tanh",
      "matmul+bias",   "matmul+bias+relu",   "matmul+bias+gelu_tanh",
      "linear",        "linear+relu",        "linear+gelu_tanh",
      "linear+bias",   "linear+bias+relu",   "linear+bias+gelu_tanh"};
  const bool linear = fusion.exprs[static_cast<size_t>(p.product_expr)].op == Op::LINEAR;
  const size_t index = (linear ? 6 : 0) + (p.bias >= 0 ? 3 : 0) + static_cast<size_t>(p.activation);
  return names[index];
}

}  // namespace kf
