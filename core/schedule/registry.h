// The scheduler registry: proposes the schedule of a task, or says why no
// scheduler takes it. Segmentation asks it about candidate groups and keeps
// the schedule of each final segment; codegen emits from that schedule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/schedule/tuning.h"
#include "core/ir/task.h"

namespace kf {

// A scheduler that did not take a task, and why.
struct Declined {
  std::string_view family;  // as family_of names its schedules
  std::string why;
  bool operator==(const Declined&) const = default;
};

struct ScheduleProposal {
  std::optional<KernelSchedule> schedule;
  std::string why;  // when no scheduler takes the task
  // With `reasons`: the schedulers asked before the one that took the task
  // (or all asked, when none did), in order.
  std::vector<Declined> declined;
};

// Asks the schedulers for the task's kind, in priority order (registry.cpp,
// kSchedulers): a scan's or a scatter's own scheduler; for tasks without
// reductions the tiled then the pointwise scheduler; for tasks with
// reductions all over one domain the column then the row scheduler,
// otherwise the inner-outer scheduler (row and column reductions of one
// domain). Library ops (matmul), communication and empty tasks are never
// scheduled here. `reasons`: fill `declined` (its strings cost time that
// segmentation, which asks about many candidate groups, does not spend).
ScheduleProposal propose_schedule(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                  bool reasons = false);

}  // namespace kf
