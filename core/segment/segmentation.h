// Segmentation of a concrete fusion into Segments (Tasks) that run one after
// another, numbered in run order: grouping.h gives the algorithm (top-down
// cuts at segment_set and library ops, then bottom-up merging of what the
// GPU schedulers accept). The same segmentation serves every backend, so a
// CPU run shows what a GPU run would do.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/scheduler_kind.h"
#include "core/segment/run_plan.h"
#include "core/segment/task.h"

namespace kf {

// Where a backend keeps what it compiled for a segment (the CUDA backend:
// its loaded kernel). Filled once, under the segmentation's kernels_mutex;
// `ready` then points to the kernel, so later calls read it without
// locking.
struct KernelSlot {
  std::shared_ptr<const void> kernel;
  std::atomic<const void*> ready{nullptr};
};

struct Segment {
  // A library segment that holds a matmul pattern has that pattern as its
  // one child (task.children[0]): the segment's outputs are the pattern's.
  Task task;
  SchedulerKind scheduler = SchedulerKind::Pointwise;
  // task.inputs, then the input extents (negative ids) its sizes depend on.
  std::vector<int64_t> api_inputs;
  // Intermediates (outputs of earlier segments, not fusion outputs) whose
  // last reader is this segment.
  std::vector<int64_t> dead_after;
  std::shared_ptr<KernelSlot> kernel_slot = std::make_shared<KernelSlot>();
};

// Owned by its ConcreteFusion (which it points back to without owning it).
class Segmentation {
 public:
  const ConcreteFusion* concrete = nullptr;
  std::vector<Segment> segments;
  RunPlan run_plan;
  // Held by a backend while it fills kernel slots (all segments at once).
  mutable std::mutex kernels_mutex;
};

// The segmentation cached with `c` (built on first use, thread-safe).
std::shared_ptr<const Segmentation> segmentation_of(const std::shared_ptr<ConcreteFusion>& c);

// Whether the GPU schedulers take `task` as one segment (a library op is
// accepted alone, or as a matmul pattern whose epilogue a kernel can run).
bool scheduler_accepts(const ConcreteFusion& c, const Task& task);

// Builds the segmentation (no caching).
std::shared_ptr<Segmentation> segment_fusion(const ConcreteFusion& c);

}  // namespace kf
