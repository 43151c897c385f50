// The scatter scheduler: a task holding one scatter or index_reduce (the
// segmenter keeps them alone). The sorted path runs where the atomic one
// would make the result depend on thread order and the definition asks
// for determinism: float sum, prod and mean (rounding depends on the
// order), and reduce none with duplicate indices (which update lands).
// Integer reductions and amax/amin give the same result in any order, so
// they keep the atomic path even when deterministic is asked for.
#include "core/schedule/schedulers.h"

namespace kf {

std::optional<ScatterParams> schedule_scatter(const ConcreteFusion& c, const Task& task, std::string* why) {
  const Fusion& f = *c.fusion;
  if (task.exprs.size() != 1) {
    if (why != nullptr) *why = "a scatter with other ops (its segment holds it alone)";
    return std::nullopt;
  }
  const Expr& e = f.exprs[static_cast<size_t>(task.exprs[0])];
  const ScatterAttrs a(e);
  ScatterParams p;
  p.expr = task.exprs[0];
  p.slices = ScatterAttrs::slices(e);
  p.reduce = a.reduce;
  p.include_self = a.include_self;
  const bool order_matters =
      a.reduce == ScatterReduce::None ||
      (is_float(f.value(e.outputs[0]).dtype) &&
       (a.reduce == ScatterReduce::Sum || a.reduce == ScatterReduce::Prod || a.reduce == ScatterReduce::Mean));
  p.sorted = a.deterministic && order_matters;
  return p;
}

}  // namespace kf
