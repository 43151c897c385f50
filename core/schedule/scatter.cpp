// The scatter scheduler: a task holding one scatter or index_reduce and
// the producers of its operands that its kernels compute inline
// (grouping.cpp: scatter_producers). The sorted path runs where the atomic one
// would make the result depend on thread order and the definition asks
// for determinism: float sum, prod and mean (rounding depends on the
// order), and reduce none with duplicate indices (which update lands).
// Integer reductions and amax/amin give the same result in any order, so
// they keep the atomic path even when deterministic is asked for. Float
// amax/amin and prod over slices take the sorted path for speed, for
// wide slices and short runs (ScatterParams::sorted_min_width).
#include "core/schedule/access_map.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/single_head.h"

#include <set>

namespace kf {

namespace {

// Whether a scatter's index is the same at every index of the dims but
// `dim` (so each update is a slice, as in index_reduce, of the index's
// extents there). Found on the IR: every task input the index reads
// is read at an index map that uses no domain dim but `dim`, through ops
// whose value at an index depends on their operands at mapped indices
// only (a shape op, an elementwise op, a gather; not iota or random
// creation, not a reduction, not a slice's or pad's offset index). A cat
// or pad also picks its operand (or the pad value) by the index along its
// dim, which the maps of size-1 operands do not show: that index must be
// `dim`'s or constant.
bool index_selects_slices(const ConcreteFusion& c, const Task& task, const Expr& e) {
  const Fusion& f = *c.fusion;
  const int64_t index = e.inputs[1], out = e.outputs[0];
  const int dim = static_cast<int>(ScatterAttrs(e).index());
  if (c.size_classes[static_cast<size_t>(out)].size() < 2) return false;  // (slices of one element: nothing gained)
  std::set<int64_t> produced;
  for (int64_t ei : task.exprs)
    for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) produced.insert(o);
  const AccessMap reads = trace_accesses(c, task, {{index, identity_map(c, index)}});
  const auto only_dim = [&](const std::vector<IndexMap>& maps, size_t d) {
    for (const IndexMap& m : maps)
      if (m[d] != kZeroIndex && m[d] != dim) return false;
    return true;
  };
  for (const auto& [v, maps] : reads.reads) {
    if (produced.contains(v)) {
      const Expr& p = f.exprs[static_cast<size_t>(f.value(v).producer)];
      if (p.op == Op::CAT && !only_dim(maps, DimAttr(p).index())) return false;
      if (p.op == Op::PAD)
        for (size_t d = 0; d < c.size_classes[static_cast<size_t>(v)].size(); ++d)
          if (PadAttrs(p).pads_dim(d) && !only_dim(maps, d)) return false;
      switch (op_info(p.op).category) {
        case OpCategory::Unary:
        case OpCategory::Binary:
        case OpCategory::Ternary:
        case OpCategory::Cast:
        case OpCategory::Hint:
        case OpCategory::Shape:
        case OpCategory::Indexing: break;
        case OpCategory::Creation:
          if (p.op == Op::FULL) break;
          return false;
        default: return false;
      }
      continue;
    }
    for (const IndexMap& m : maps)
      for (int i : m)
        if (i != kZeroIndex && i != dim) return false;
  }
  return true;
}

// Whether the atomic path would apply an update by a compare-and-swap loop
// on a float (amax, amin and prod; sums have hardware atomics).
bool float_swap_loop(ScatterReduce r, DType t) {
  return is_float(t) && (r == ScatterReduce::Amax || r == ScatterReduce::Amin || r == ScatterReduce::Prod);
}

}  // namespace

std::optional<ScatterParams> schedule_scatter(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                              std::string* why) {
  const Fusion& f = *c.fusion;
  const std::optional<int64_t> head = single_head_expr(c, task, OpCategory::Scatter, "scatter", why);
  if (!head) return std::nullopt;
  const int64_t scatter = *head;
  const Expr& e = f.exprs[static_cast<size_t>(scatter)];
  const ScatterAttrs a(e);
  ScatterParams p;
  p.expr = scatter;
  p.slices = ScatterAttrs::slices(e) || index_selects_slices(c, task, e);
  p.index_dim = ScatterAttrs::slices(e) ? 0 : static_cast<int>(a.index());
  p.reduce = a.reduce;
  p.include_self = a.include_self;
  const bool order_matters =
      a.reduce == ScatterReduce::None ||
      (is_float(f.value(e.outputs[0]).dtype) &&
       (a.reduce == ScatterReduce::Sum || a.reduce == ScatterReduce::Prod || a.reduce == ScatterReduce::Mean));
  p.sorted = a.deterministic && order_matters;
  // (amax/amin select: the sorted path gives the atomic path's bits; prod
  // is combined in float64 and rounded once)
  if (!p.sorted && p.slices && tuning.scatter_sorted_min_width > 0 && float_swap_loop(a.reduce, f.value(e.outputs[0]).dtype)) {
    p.sorted = true;
    p.sorted_min_width = tuning.scatter_sorted_min_width;
    p.sorted_max_run = tuning.scatter_sorted_max_run;
  }
  p.lanes = p.slices ? tuning.scatter_lanes : 1;
  // (a scatter's updates run per index element on the atomic path even
  // where its index selects slices: emit_scatter.cpp atomic_view)
  p.update_unroll = p.slices && e.op != Op::SCATTER ? tuning.scatter_update_unroll : 1;
  p.unroll = p.slices ? tuning.scatter_unroll : 8;
  return p;
}

}  // namespace kf
