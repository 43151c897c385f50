// C handle <-> core object conversions shared by the c_api files.
#pragma once

#include <memory>

#include "c_api/api_guard.h"
#include "core/concretize/concrete_fusion.h"
#include "core/ir/fusion.h"
#include "core/segment/segmentation.h"

// A segmentation handle keeps its fusion and concrete fusion (which owns the
// segmentation) alive.
struct kf_segmentation_s {
  std::shared_ptr<const kf::Fusion> fusion;
  std::shared_ptr<kf::ConcreteFusion> concrete;
  std::shared_ptr<const kf::Segmentation> segmentation;
};

namespace kf::capi {

inline Fusion* fusion_of(kf_fusion f, const char* fn) {
  return static_cast<Fusion*>(require(f, fn, "fusion"));
}
inline ConcreteFusion* concrete_of(kf_concrete c, const char* fn) {
  return static_cast<ConcreteFusion*>(require(c, fn, "concrete"));
}
inline kf_segmentation_s* segmentation_of(kf_segmentation s, const char* fn) {
  return require(s, fn, "segmentation");
}

}  // namespace kf::capi
