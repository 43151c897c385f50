// The scheduler registry: proposes the schedule of a task, or says why no
// scheduler takes it. Segmentation asks it about candidate groups and keeps
// the schedule of each final segment; codegen emits from that schedule.
#pragma once

#include <optional>
#include <string>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/schedule/tuning.h"
#include "core/ir/task.h"

namespace kf {

struct ScheduleProposal {
  std::optional<KernelSchedule> schedule;
  std::string why;  // when no scheduler takes the task
};

// Tries, in order: for tasks without reductions the tiled then the
// pointwise scheduler; for tasks with reductions all over one domain the
// column then the row scheduler, otherwise the inner-outer scheduler (row
// and column reductions of one domain). Library ops (matmul) and empty tasks are
// never scheduled here (library segments call cuBLASLt).
ScheduleProposal propose_schedule(const ConcreteFusion& c, const Task& task, const Tuning& tuning);

}  // namespace kf
