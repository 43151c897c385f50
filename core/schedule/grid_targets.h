// What a plan asks of its grids, met per call by the launch
// (core/runtime/cuda/launch.cpp: launch_dims, prefer_split_rows) from the
// call's sizes. The defaults here are the measured ones; Tuning::grid
// carries them (KFUSE_TUNE_GRID_*) and the schedulers copy them into their
// params (grid_targets, schedulers.h).
#pragma once

namespace kf {

struct GridTargets {
  // Pointwise kernels of several loops: at most this many waves of
  // resident blocks, each thread looping (0: one step per thread; 4, 8, 16
  // and 32 measured on rope: 16 is as fast as 8, longer loops gain
  // nothing; docs/perf-log.md, session 7).
  int waves = 0;
  // Column reductions and split rows: about split_blocks partials blocks
  // (several waves on any current GPU), each reducing at least split_rows
  // rows of a column (16 per row group).
  int split_blocks = 1024;
  int split_rows = 128;
  // Their epilogues: about epilogue_blocks blocks (a short tail on any
  // current GPU), each writing at least epilogue_rows rows of a column (4
  // per row group).
  int epilogue_blocks = 4096;
  int epilogue_rows = 32;
  // Column reductions with a one-kernel twin (ColumnParams::short_rows)
  // take it at any row count where the columns alone give the split kernel
  // split_blocks tiles (it would run one split: its partials and finishing
  // kernel are pure overhead) and the twin at least this many blocks
  // (launch.cpp takes_short_columns; 0: by the row count alone).
  int short_columns_blocks = 512;
  // A row without a register plan is streamed by one block, and split over
  // blocks once each thread would load more than this many elements (a
  // block reads 4096 elements in a few microseconds; the split kernels
  // cost two launches more).
  int streamed_items = 16;
  bool operator==(const GridTargets&) const = default;
};

}  // namespace kf
