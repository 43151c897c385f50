// Segmentation of a concrete fusion into Segments (Tasks) that run one after
// another. This first version cuts only at segment_set: every expr gets a
// stage (the number of segment_set edges on its longest path from the
// inputs) and each stage is one segment. Segments are numbered in run order.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/scheduler_kind.h"
#include "core/segment/task.h"

namespace kf {

struct Segment {
  Task task;
  SchedulerKind scheduler = SchedulerKind::Pointwise;
  // task.inputs, then the input extents (negative ids) its sizes depend on.
  std::vector<int64_t> api_inputs;
  // Intermediates (outputs of earlier segments, not fusion outputs) whose
  // last reader is this segment.
  std::vector<int64_t> dead_after;
};

// Owned by its ConcreteFusion (which it points back to without owning it).
class Segmentation {
 public:
  const ConcreteFusion* concrete = nullptr;
  std::vector<Segment> segments;
};

// The segmentation cached with `c` (built on first use, thread-safe).
std::shared_ptr<const Segmentation> segmentation_of(const std::shared_ptr<ConcreteFusion>& c);

// Builds the segmentation (no caching).
std::shared_ptr<Segmentation> segment_fusion(const ConcreteFusion& c);

}  // namespace kf
