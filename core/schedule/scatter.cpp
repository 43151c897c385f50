// The scatter scheduler: a task holding one scatter or index_reduce and
// the producers of its operands that its kernels compute inline
// (grouping.cpp: scatter_producers). The sorted path runs where the atomic one
// would make the result depend on thread order and the definition asks
// for determinism: float sum, prod and mean (rounding depends on the
// order), and reduce none with duplicate indices (which update lands).
// Integer reductions and amax/amin give the same result in any order, so
// they keep the atomic path even when deterministic is asked for.
#include "core/schedule/schedulers.h"
#include "core/schedule/single_head.h"

namespace kf {

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
  p.slices = ScatterAttrs::slices(e);
  p.reduce = a.reduce;
  p.include_self = a.include_self;
  const bool order_matters =
      a.reduce == ScatterReduce::None ||
      (is_float(f.value(e.outputs[0]).dtype) &&
       (a.reduce == ScatterReduce::Sum || a.reduce == ScatterReduce::Prod || a.reduce == ScatterReduce::Mean));
  p.sorted = a.deterministic && order_matters;
  p.lanes = p.slices ? tuning.scatter_lanes : 1;
  p.unroll = p.slices ? tuning.scatter_unroll : 8;
  return p;
}

}  // namespace kf
