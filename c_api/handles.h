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
