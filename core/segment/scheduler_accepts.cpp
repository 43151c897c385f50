// The segmenter's question to the schedulers: can one GPU kernel run this
// group? Library ops (matmul, linear) run alone, as library segments.
#include "core/schedule/row_schedule.h"
#include "core/segment/segmentation.h"

namespace kf {

bool scheduler_accepts(const ConcreteFusion& c, const Task& task) {
  for (int64_t ei : task.exprs)
    if (op_info(c.fusion->exprs[static_cast<size_t>(ei)].op).category == OpCategory::Library)
      return task.exprs.size() == 1;
  RowSchedule schedule;
  return schedule_row(c, task, &schedule, nullptr);
}

}  // namespace kf
