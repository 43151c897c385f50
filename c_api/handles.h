// C handle <-> core object conversions shared by the c_api files.
#pragma once

#include <memory>

#include "c_api/api_guard.h"
#include "core/ir/fusion.h"
#include "core/pipeline/plan.h"

// A kf_concrete handle is a kf::Plan (the pipeline's product: the concrete
// fusion and its segmentation). A segmentation handle keeps its plan and
// the plan's fusion alive.
struct kf_segmentation_s {
  std::shared_ptr<const kf::Fusion> fusion;
  std::shared_ptr<const kf::Plan> plan;
  const kf::ConcreteFusion* concrete = nullptr;     // plan->concrete
  const kf::Segmentation* segmentation = nullptr;   // &plan->segmentation
};

namespace kf::capi {

// A release or destroy of a handle the caller does not hold (a second
// release, or a pointer that never was a handle): nothing is touched; the
// thread's kf_last_error() says so with KF_ERR_INVALID_ARGUMENT, and the
// first such call in the process also prints one line on stderr, since the
// release functions return no status for a caller to check.
void report_not_held(const char* function, const char* argument, const void* handle);

inline Fusion* fusion_of(kf_fusion f, const char* fn) {
  return static_cast<Fusion*>(require(f, fn, "fusion"));
}
inline Plan* plan_of(kf_concrete c, const char* fn) {
  return static_cast<Plan*>(require(c, fn, "concrete"));
}
inline kf_segmentation_s* segmentation_of(kf_segmentation s, const char* fn) {
  return require(s, fn, "segmentation");
}

}  // namespace kf::capi
