// Segmentation of a concrete fusion into Segments (Tasks) that run one after
// another, numbered in run order: grouping.h gives the algorithm (top-down
// cuts at segment_set and library ops, then bottom-up merging of what the
// GPU schedulers accept). The same segmentation serves every backend, so a
// CPU run shows what a GPU run would do.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/schedule/tuning.h"
#include "core/segment/run_plan.h"
#include "core/ir/task.h"

namespace kf {

struct Segment {
  // A library segment that holds a matmul pattern has that pattern as its
  // one child (task.children[0]): the segment's outputs are the pattern's.
  Task task;
  SchedulerKind scheduler = SchedulerKind::Pointwise;
  // The kernel's schedule, chosen once here: for a generated segment its
  // kernel; for a library segment holding a matmul pattern the epilogue's
  // kernel (run when cuBLASLt cannot run the pattern as one call); none
  // for other library and no-op segments.
  std::optional<KernelSchedule> schedule;
  std::string unscheduled_why;  // why a segment that needs a kernel has no schedule
  // task.inputs, then the input extents (negative ids) its sizes depend on.
  std::vector<int64_t> api_inputs;
  // Intermediates (outputs of earlier segments, not fusion outputs) whose
  // last reader is this segment.
  std::vector<int64_t> dead_after;
  // Task inputs its kernel reads only where it writes (core/schedule/in_place.h):
  // an output of this segment that updates one in place is written into it.
  std::vector<int64_t> in_place_inputs;
};

// The segment stage's product. Points to the ConcreteFusion it was made
// from without owning it (a Plan, core/pipeline, owns both).
struct Segmentation {
  const ConcreteFusion* concrete = nullptr;
  std::vector<Segment> segments;
  RunPlan run_plan;
};

// The schedule of `task` as one segment: a generated kernel's, or for a
// matmul pattern (a library op with its epilogue) the epilogue kernel's.
// Accepted with no schedule: a library op alone. Rejected: nullopt outside,
// with the reason in `why` (optional).
struct SegmentSchedule {
  bool accepted = false;
  std::optional<KernelSchedule> schedule;
};
SegmentSchedule schedule_segment(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                 std::string* why = nullptr);

// The segment stage: segments with their schedules and the run plan (no
// caching: the pipeline caches its product).
Segmentation segment_fusion(const ConcreteFusion& c, const Tuning& tuning = default_tuning());

}  // namespace kf
