// The pipeline: everything kfuse works out for one class of calls, as one
// typed product. plan_for() runs the stages in order on the first call of
// a class and caches the Plan by the concretization key:
//
//   bind (done by the caller: sizes, layouts, key)   core/concretize/bind.cpp
//   1. concretize: size classes, layouts, extents    core/concretize
//   2. segment + schedule: segments, their typed     core/segment, core/schedule
//      schedules, the run plan
//
// Code generation and compilation are the CUDA backend's, on a plan's first
// run on a GPU (core/runtime/cuda); it keeps the loaded kernels in the
// plan's kernel slots. KFUSE_DEBUG=pipeline logs each plan as it is built.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/tuning.h"
#include "core/segment/segmentation.h"
#include "core/util/handle.h"

// The C API's kf_concrete handle is a Plan.
struct kf_concrete_s {};

namespace kf {

// A segment's kernel as the CUDA backend loaded it (defined in
// core/runtime/cuda/loaded_kernel.h; opaque to every other stage).
struct LoadedKernel;

// Where the CUDA backend keeps a segment's loaded kernel (the module itself
// lives in its kernel cache, core/runtime/cuda/kernel_cache.h). Filled once,
// under Plan::kernels_mutex; `ready` then points to the kernel, so a cached
// launch reads it with one atomic load, no lock and no lookup (a map owned
// by the backend and keyed by plan and segment would cost a hash and a lock
// per call, and hooks to forget evicted plans).
struct KernelSlot {
  std::shared_ptr<const LoadedKernel> kernel;
  std::atomic<const LoadedKernel*> ready{nullptr};
};

class Plan : public kf_concrete_s, public ExternallyHeld<Plan, kf_concrete_s> {
 public:
  std::shared_ptr<const ConcreteFusion> concrete;
  Segmentation segmentation;  // points into *concrete
  // One per segment; filled by the CUDA backend under kernels_mutex.
  std::unique_ptr<KernelSlot[]> kernels;
  mutable std::mutex kernels_mutex;

  const Fusion& fusion() const { return *concrete->fusion; }
  KernelSlot& kernel_slot(size_t segment) const { return kernels[segment]; }

 protected:
  // A caller's handle keeps the fusion (which owns the plan cache) alive.
  std::shared_ptr<const void> external_anchor() const override;
};

// The cached plan for binding.key (built from `binding` on a miss, with the
// default tuning). Thread-safe; a failed build caches nothing.
std::shared_ptr<Plan> plan_for(const Fusion& fusion, const Binding& binding);

// The cached plan for binding.key, or nullptr: never builds one (the
// plan's recency and the cache's statistics are left as they are).
std::shared_ptr<Plan> cached_plan(const Fusion& fusion, const Binding& binding);

// Runs the stages without caching (tests vary the tuning).
std::shared_ptr<Plan> build_plan(const Fusion& fusion, const Binding& binding, const Tuning& tuning);

struct PlanStats {
  uint64_t built = 0, hits = 0;
};
PlanStats plan_stats();
void set_plan_limit(size_t max_per_fusion);  // plans kept per fusion (LRU)
void reset_plan_stats();

}  // namespace kf
