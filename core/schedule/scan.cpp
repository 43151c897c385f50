// The scan scheduler: one cumsum, cumprod or cummax and the producers of
// its operand that its kernel computes inline (grouping.cpp:
// inline_producers). A block per line when the scanned dim is the
// innermost of the result's memory order (the line is contiguous), else a
// thread per line.
#include <algorithm>
#include <bit>

#include "core/schedule/schedulers.h"
#include "core/schedule/single_head.h"
#include "core/schedule/vector_plan.h"

namespace kf {

std::optional<ScanParams> schedule_scan(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                        std::string* why) {
  const Fusion& f = *c.fusion;
  const std::optional<int64_t> head = single_head_expr(c, task, OpCategory::Scan, "scan", why);
  if (!head) return std::nullopt;
  const int64_t scan = *head;
  const Expr& e = f.exprs[static_cast<size_t>(scan)];
  ScanParams p;
  p.expr = scan;
  p.items = std::clamp(tuning.scan_items, 1, 32);
  const std::vector<size_t> order = loop_order(c, e.outputs[0]);
  p.block_per_line = !order.empty() && order.back() == ScanAttrs(e).index();
  for (size_t d : order)
    if (d != ScanAttrs(e).index()) p.line_dims.push_back(d);
  if (p.block_per_line) {
    p.vectors = plan_vectors(c, task, {e.outputs[0]}, e.outputs[0], ScanAttrs(e).index());
    if (p.vectors.width < 2 || p.vectors.outputs.empty()) p.vectors = VectorPlan{};
    p.vector_steps = std::clamp(tuning.scan_vector_steps, 1, 8);
  } else {
    p.line_steps = std::clamp(tuning.scan_line_steps, 1, 32);
    p.pass_rows = std::clamp(tuning.scan_pass_rows, 0, 32);
    if (p.pass_rows > 0 && !p.line_dims.empty()) {
      p.vectors = plan_vectors(c, task, {e.outputs[0]}, e.outputs[0], p.line_dims.back());
      if (p.vectors.width < 2 || p.vectors.outputs.empty()) p.vectors = VectorPlan{};
      // Each thread holds pass_rows x width accumulators: at most 128
      // registers' worth (int64 and double take two each).
      const DType out = f.value(e.outputs[0]).dtype;
      const int words = is_float(out) && out != DType::F64 ? 1 : 2;
      p.pass_rows = std::clamp(128 / (std::max(p.vectors.width, 1) * words), 1, p.pass_rows);
      p.block = std::bit_floor(static_cast<unsigned>(std::clamp(tuning.scan_pass_block, 128, 1024)));
    }
  }
  return p;
}

}  // namespace kf
