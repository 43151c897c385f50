// The launch sequence of a scatter plan (LaunchRule::Kind::Scatter) for
// the sizes of one call: which kernel, on which grid, with which bitonic
// step, and the scratch it needs. Pure host code (tested without a GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/concretize/shape_inference.h"

namespace kf::cuda {

struct ScatterStep {
  const std::string* kernel = nullptr;  // a name in the plan
  uint32_t grid = 0, block = 0;
  int64_t sort_k = 0, sort_j = 0;  // the argument block's sort_k and sort_j words
};

struct ScatterLaunch {
  std::vector<ScatterStep> steps;  // in launch order; empty: nothing to do
  uint64_t scratch_bytes = 0;
  int64_t padded = 0;  // the sorted path's key count (a power of two >= 2048)
};

ScatterLaunch scatter_launch(const KernelPlan& plan, const ValueSizes& sizes, int multiprocessors, int max_grid_x);

}  // namespace kf::cuda
