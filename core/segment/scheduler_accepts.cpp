// The segmenter's question to the schedulers.
#include "core/segment/segmentation.h"

namespace kf {

bool scheduler_accepts(const ConcreteFusion& c, const Task& task) {
  (void)c;
  // Until the GPU schedulers answer, every group is accepted: segments are
  // the top-down groups (segment_set stages, library ops alone).
  for (int64_t ei : task.exprs)
    if (op_info(c.fusion->exprs[static_cast<size_t>(ei)].op).category == OpCategory::Library)
      return task.exprs.size() == 1;
  return true;
}

}  // namespace kf
