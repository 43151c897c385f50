// The segmenter's question to the schedulers: can one GPU kernel run this
// group, and with which schedule? Library ops (matmul, linear) run as
// library segments: alone, or as a matmul pattern whose epilogue (bias add,
// activation) a generated kernel must also be able to run, for when
// cuBLASLt has no algorithm for it.
#include "core/schedule/registry.h"
#include "core/segment/matmul_pattern.h"
#include "core/segment/segmentation.h"

namespace kf {

SegmentSchedule schedule_segment(const ConcreteFusion& c, const Task& task, const Tuning& tuning, std::string* why) {
  SegmentSchedule s;
  for (int64_t ei : task.exprs)
    if (op_info(c.fusion->exprs[static_cast<size_t>(ei)].op).category == OpCategory::Communication) {
      s.accepted = task.exprs.size() == 1;  // a communicator runs it, alone
      if (!s.accepted && why != nullptr) *why = "a communication op with other ops";
      return s;
    }
  for (int64_t ei : task.exprs)
    if (op_info(c.fusion->exprs[static_cast<size_t>(ei)].op).category == OpCategory::Library) {
      if (task.exprs.size() == 1) {
        s.accepted = true;
        return s;
      }
      const std::optional<MatmulPattern> p = describe_matmul_pattern(c, task);
      if (!p) {
        if (why != nullptr) *why = "a library op with other ops that form no matmul pattern";
        return s;
      }
      ScheduleProposal epilogue = propose_schedule(c, matmul_epilogue_task(*c.fusion, task, *p), tuning);
      if (why != nullptr) *why = epilogue.why;
      s.accepted = epilogue.schedule.has_value();
      s.schedule = std::move(epilogue.schedule);
      return s;
    }
  ScheduleProposal proposal = propose_schedule(c, task, tuning);
  if (why != nullptr) *why = proposal.why;
  s.accepted = proposal.schedule.has_value();
  s.schedule = std::move(proposal.schedule);
  return s;
}

}  // namespace kf
