// Scheduler constants that can be varied without rebuilding: tests pass
// their own Tuning, and the process default reads KFUSE_TUNE_* once
// (docs/PERF.md uses them to measure the heuristics on a GPU). Not part of
// the API.
#pragma once

namespace kf {

struct Tuning {
  // 16-byte vectors each thread of a pointwise loop loads per step.
  int pointwise_unroll = 2;
  // 16-byte vectors per thread of a row held in registers. Measured on an
  // H200 (docs/PERF.md): 2 (more threads per row) and 6 or 8 (register
  // spills under the 64-register cap of 1024-thread blocks) are slower.
  int row_vectors = 4;
  // The same for inner-outer kernels, which also hold one partial per
  // outer reduction and element (registers again).
  int inner_outer_vectors = 2;
  // Resident blocks per multiprocessor of an inner-outer kernel: the grid,
  // so the number of partial rows the finishing kernel reads.
  int inner_outer_blocks_per_sm = 4;
};

// The process default: the fields above, overridden by
// KFUSE_TUNE_POINTWISE_UNROLL, KFUSE_TUNE_ROW_VECTORS,
// KFUSE_TUNE_INNER_OUTER_VECTORS and KFUSE_TUNE_INNER_OUTER_BLOCKS
// (positive integers) when set. Read on first use.
const Tuning& default_tuning();

}  // namespace kf
