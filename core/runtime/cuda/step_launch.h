// The launch sequences of multi-kernel plans whose steps depend on the
// sizes of the call: a scatter (LaunchRule::Kind::Scatter) and a
// thread-per-line scan in segments (Kind::Scan): which kernel, on which
// grid, with which words, and the scratch they need. Pure host code
// (tested without a GPU).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/concretize/shape_inference.h"

namespace kf::cuda {

struct LaunchStep {
  const std::string* kernel = nullptr;  // a name in the plan
  uint32_t grid = 0, block = 0;
  // The argument block's third and fourth extra words: a scatter's sort_k
  // and sort_j, a single-pass scan's row_warps (in sort_k).
  int64_t sort_k = 0, sort_j = 0;
};

struct StepLaunch {
  std::vector<LaunchStep> steps;  // in launch order; empty: nothing to do
  uint64_t scratch_bytes = 0;
  // The second extra argument word: a scatter's sorted key count (a power
  // of two >= 2048), a scan's number of segments per line.
  int64_t padded = 0;
  // Bytes at the start of the scratch to zero before the first step (a
  // single-pass scan's: all of it).
  uint64_t zero_bytes = 0;
};

// in_place: the result is the scattered tensor itself (same memory and
// strides: an in-place update such as an embedding gradient's index_add_
// or a KV-cache write), so the first kernel's copy is left out.
StepLaunch scatter_launch(const KernelPlan& plan, const ValueSizes& sizes, int multiprocessors, int max_grid_x,
                          bool in_place = false);
// Whether a scatter call with `sizes` takes the sorted path: the plan's
// only path, or (sorted for speed, ScatterKernels::sorted_min_width) its
// slices are wide enough and its runs short enough.
bool scatter_takes_sorted(const KernelPlan& plan, const ValueSizes& sizes);
// Each line cut into segments so that lines x segments threads fill the
// device (a few lines of many elements would otherwise leave it idle):
// the segments' totals, their prefixes per line, then the scan. The
// single-pass kernel (LaunchRule::scan_pass_rows > 0) takes row segments
// of row_warps x pass_rows elements (row_warps: the fewest warps, a power
// of two up to the block's, that cover the line), a block per segment and
// block of column groups, at most 32 blocks per multiprocessor (the
// blocks take tickets in a loop).
StepLaunch scan_launch(const KernelPlan& plan, const ValueSizes& sizes, int multiprocessors, int max_grid_x);

}  // namespace kf::cuda
