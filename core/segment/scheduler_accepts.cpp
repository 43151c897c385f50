// The segmenter's question to the schedulers: can one GPU kernel run this
// group? Library ops (matmul, linear) run as library segments: alone, or as
// a matmul pattern whose epilogue (bias add, activation) a generated kernel
// must also be able to run, for when cuBLASLt has no algorithm for it.
#include "core/schedule/row_schedule.h"
#include "core/segment/matmul_pattern.h"
#include "core/segment/segmentation.h"

namespace kf {

bool scheduler_accepts(const ConcreteFusion& c, const Task& task) {
  RowSchedule schedule;
  for (int64_t ei : task.exprs)
    if (op_info(c.fusion->exprs[static_cast<size_t>(ei)].op).category == OpCategory::Library) {
      if (task.exprs.size() == 1) return true;
      const std::optional<MatmulPattern> p = describe_matmul_pattern(c, task);
      return p && schedule_row(c, matmul_epilogue_task(*c.fusion, task, *p), &schedule, nullptr);
    }
  return schedule_row(c, task, &schedule, nullptr);
}

}  // namespace kf
