// The kernels a row plan is compiled into besides its main kernel
// (RowKernels): which exist is a property of the plan, decided here once
// rather than by the emitter; the runtime takes one per call
// (core/runtime/cuda/launch.h) among those planned.
#include <algorithm>

#include "core/schedule/schedulers.h"

namespace kf {

RowKernels plan_row_kernels(const RowParams& p, const Tuning& tuning) {
  RowKernels k;
  // (The main kernel of a plan writing outputs across its rows streams any
  // row at any alignment itself: RowParams::across.)
  if (!p.across.empty()) return k;
  const bool vectors = p.vectors.width > 0;
  const int row_items = p.vectors.width * p.vectors_per_thread;
  // A register path exists with a vector plan; rows it cannot hold take
  // the long-row kernel.
  k.long_rows = vectors;
  // With a long-row kernel the main kernel's register path and its
  // streaming fallback are twins, as a column kernel's are. Not for
  // inner-outer kernels: alone, their register path ran 2.5% slower
  // (layernorm backward, docs/perf-log.md session 14), and they compile in
  // under 200 ms with both.
  k.scalar_twin = vectors && !p.has_outer();
  // Not for inner-outer kernels, whose grid assumes the main kernel's
  // register budget.
  if (row_items > 0 && !p.stream_rows && !p.has_outer()) k.tight_registers = tuning.row_tight_registers;
  // For rows the main kernel cannot hold that the long-row kernel would
  // stream rather than stage (float32 rows of 32768: 2.17 -> 1.43 ms for
  // softmax; where the row is staged it won or lost by the case:
  // docs/perf-log.md, session 15).
  if (k.scalar_twin && !p.staged.empty() && !p.stream_rows && 2 * row_items <= tuning.row_wide_items)
    k.wide_vectors_per_thread = 2 * p.vectors_per_thread;
  // Staged rows shared by a cluster's blocks (sm_90; cluster_max from the
  // row scheduler); the cluster kernel has no outer reductions.
  k.cluster = p.cluster_max > 1 && vectors && !p.staged.empty() && !p.has_outer() && !p.stream_rows;
  // Rows of any length and start (an odd width), which fail the vector
  // checks of the kernels above: held in registers, or as long rows.
  k.long_edges = k.long_rows && p.edge_vectors.width > 0;
  k.edges = k.long_edges && !p.stream_rows;
  // Several rows per block, for rows that leave the main kernel a block of
  // one warp, most of it idle. Streamed plans too: a log-sum-exp over rows
  // of 128 half floats took a 1024-thread block per row of 16 vectors,
  // 0.09x torch.compile (seed 1631654200 c0109, session 31).
  if (k.scalar_twin) {
    k.short_rows_block = std::max(tuning.row_short_block / 32 * 32, 32);
    k.short_rows_min_blocks = tuning.row_short_min_blocks;
  }
  // Rows split over blocks, also without a vector plan (an input at an odd
  // offset or in another memory order): one block reading a whole float32
  // tensor of 724 MB took 282 ms (docs/perf-log.md, session 28).
  if (!p.has_outer()) {
    k.split_block = std::max(tuning.split_row_block / 32 * 32, 32);
    // A reduction over every dim (an amax or a loss over the whole tensor)
    // has one row: one row per finishing block, so that all its threads
    // share the splits instead of 8 of 256 (13 us for 4096 splits).
    const bool one_row = std::all_of(p.rows.reduced.begin(), p.rows.reduced.end(), [](bool r) { return r; });
    k.split_col_threads = one_row ? 1 : ColumnParams{}.col_threads;
  }
  return k;
}

}  // namespace kf
