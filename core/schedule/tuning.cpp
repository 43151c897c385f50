#include "core/schedule/tuning.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/util/env_switch.h"

namespace kf {

int tuning_value(const char* name, int fallback, int least, int most) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  // from_chars: decimal digits with an optional '-' only, and the whole
  // value (no spaces, no "4x", no overflow into a bound).
  const char* end = v + std::strlen(v);
  int n = 0;
  const auto [stop, error] = std::from_chars(v, end, n);
  if (error == std::errc() && stop == end && n >= least && n <= most) return n;
  warn_ignored_env(name, v, "an integer from " + std::to_string(least) + " to " + std::to_string(most),
                   std::to_string(fallback));
  return fallback;
}

const Tuning& default_tuning() {
  static const Tuning t = [] {
    Tuning d;
    // The ranges: tuning.h, above default_tuning.
    d.pointwise_unroll = tuning_value("KFUSE_TUNE_POINTWISE_UNROLL", d.pointwise_unroll, 1, 16);
    d.pointwise_shifted_loads_one_step = tuning_value("KFUSE_TUNE_POINTWISE_SHIFTED_LOADS_ONE_STEP",
                                                      d.pointwise_shifted_loads_one_step, 1, 1024);
    d.pointwise_vector_rule = tuning_value("KFUSE_TUNE_POINTWISE_VECTOR_RULE", d.pointwise_vector_rule, 1, 2);
    d.pointwise_min_blocks = tuning_value("KFUSE_TUNE_POINTWISE_MIN_BLOCKS", d.pointwise_min_blocks, 0, 32);
    d.pointwise_scalar_unroll = tuning_value("KFUSE_TUNE_POINTWISE_SCALAR_UNROLL", d.pointwise_scalar_unroll, 1, 16);
    d.pointwise_flat_head = tuning_value("KFUSE_TUNE_POINTWISE_FLAT_HEAD", d.pointwise_flat_head, 0, 1);
    d.pointwise_in_place_windows =
        tuning_value("KFUSE_TUNE_POINTWISE_IN_PLACE_WINDOWS", d.pointwise_in_place_windows, 0, 1);
    d.recompute_gathered = tuning_value("KFUSE_TUNE_RECOMPUTE_GATHERED", d.recompute_gathered, 0, 1);
    d.merge_sibling_reductions =
        tuning_value("KFUSE_TUNE_MERGE_SIBLING_REDUCTIONS", d.merge_sibling_reductions, 0, 1);
    d.column_online_statistics =
        tuning_value("KFUSE_TUNE_COLUMN_ONLINE_STATISTICS", d.column_online_statistics, 0, 1);
    d.row_vectors = tuning_value("KFUSE_TUNE_ROW_VECTORS", d.row_vectors, 1, 16);
    d.row_thread_bytes = tuning_value("KFUSE_TUNE_ROW_THREAD_BYTES", d.row_thread_bytes, 0, 1 << 20);
    d.row_unaligned_inputs = tuning_value("KFUSE_TUNE_ROW_UNALIGNED_INPUTS", d.row_unaligned_inputs, 0, 1);
    d.row_stream_single_pass = tuning_value("KFUSE_TUNE_ROW_STREAM_SINGLE_PASS", d.row_stream_single_pass, 0, 1);
    d.inner_outer_vectors = tuning_value("KFUSE_TUNE_INNER_OUTER_VECTORS", d.inner_outer_vectors, 1, 16);
    d.inner_outer_partials = tuning_value("KFUSE_TUNE_INNER_OUTER_PARTIALS", d.inner_outer_partials, 1, 1024);
    d.inner_outer_threads_per_sm =
        tuning_value("KFUSE_TUNE_INNER_OUTER_THREADS", d.inner_outer_threads_per_sm, 32, 16384);
    d.scatter_lanes = tuning_value("KFUSE_TUNE_SCATTER_LANES", d.scatter_lanes, 1, 16);
    d.scatter_unroll = tuning_value("KFUSE_TUNE_SCATTER_UNROLL", d.scatter_unroll, 1, 16);
    d.scatter_update_unroll = tuning_value("KFUSE_TUNE_SCATTER_UPDATE_UNROLL", d.scatter_update_unroll, 1, 8);
    d.scatter_sorted_min_width =
        tuning_value("KFUSE_TUNE_SCATTER_SORTED_MIN_WIDTH", d.scatter_sorted_min_width, 0, 1 << 30);
    d.scatter_sorted_max_run = tuning_value("KFUSE_TUNE_SCATTER_SORTED_MAX_RUN", d.scatter_sorted_max_run, 1, 65536);
    d.scan_items = tuning_value("KFUSE_TUNE_SCAN_ITEMS", d.scan_items, 1, 32);
    d.scan_vector_steps = tuning_value("KFUSE_TUNE_SCAN_VECTOR_STEPS", d.scan_vector_steps, 1, 8);
    d.scan_line_steps = tuning_value("KFUSE_TUNE_SCAN_LINE_STEPS", d.scan_line_steps, 1, 32);
    d.scan_pass_rows = tuning_value("KFUSE_TUNE_SCAN_PASS_ROWS", d.scan_pass_rows, 0, 32);
    d.scan_pass_block = tuning_value("KFUSE_TUNE_SCAN_PASS_BLOCK", d.scan_pass_block, 128, 1024);
    // (0 was refused before: the forward walk could not be chosen.)
    d.split_epilogue_reversed = tuning_value("KFUSE_TUNE_SPLIT_EPILOGUE_REVERSED", d.split_epilogue_reversed, 0, 1);
    d.row_cluster_max = tuning_value("KFUSE_TUNE_ROW_CLUSTER_MAX", d.row_cluster_max, 0, 8);
    d.row_cluster_block = tuning_value("KFUSE_TUNE_ROW_CLUSTER_BLOCK", d.row_cluster_block, 32, 1024);
    d.row_cluster_stageable = tuning_value("KFUSE_TUNE_ROW_CLUSTER_STAGEABLE", d.row_cluster_stageable, 0, 1);
    d.row_tight_registers = tuning_value("KFUSE_TUNE_ROW_TIGHT_REGISTERS", d.row_tight_registers, 0, 255);
    d.row_wide_items = tuning_value("KFUSE_TUNE_ROW_WIDE_ITEMS", d.row_wide_items, 0, 64);
    d.row_short_block = tuning_value("KFUSE_TUNE_ROW_SHORT_BLOCK", d.row_short_block, 32, 1024);
    d.row_short_min_blocks = tuning_value("KFUSE_TUNE_ROW_SHORT_MIN_BLOCKS", d.row_short_min_blocks, 1, 32);
    d.split_row_block = tuning_value("KFUSE_TUNE_SPLIT_ROW_BLOCK", d.split_row_block, 32, 1024);
    d.grid.waves = tuning_value("KFUSE_TUNE_GRID_WAVES", d.grid.waves, 1, 1024);
    d.grid.split_blocks = tuning_value("KFUSE_TUNE_GRID_SPLIT_BLOCKS", d.grid.split_blocks, 1, 1 << 20);
    d.grid.split_rows = tuning_value("KFUSE_TUNE_GRID_SPLIT_ROWS", d.grid.split_rows, 1, 1 << 20);
    d.grid.epilogue_blocks = tuning_value("KFUSE_TUNE_GRID_EPILOGUE_BLOCKS", d.grid.epilogue_blocks, 1, 1 << 20);
    d.grid.epilogue_rows = tuning_value("KFUSE_TUNE_GRID_EPILOGUE_ROWS", d.grid.epilogue_rows, 1, 1 << 20);
    d.grid.short_columns_blocks =
        tuning_value("KFUSE_TUNE_GRID_SHORT_COLUMNS_BLOCKS", d.grid.short_columns_blocks, 0, 1 << 20);
    d.grid.streamed_items = tuning_value("KFUSE_TUNE_GRID_STREAMED_ITEMS", d.grid.streamed_items, 1, 1 << 20);
    d.column_epilogue_blocks = tuning_value("KFUSE_TUNE_COLUMN_EPILOGUE_BLOCKS", d.column_epilogue_blocks, 1, 32);
    d.column_scalar_rows = tuning_value("KFUSE_TUNE_COLUMN_SCALAR_ROWS", d.column_scalar_rows, 1, 16);
    d.column_any_rows = tuning_value("KFUSE_TUNE_COLUMN_ANY_ROWS", d.column_any_rows, 0, 16);
    d.column_short_rows = tuning_value("KFUSE_TUNE_COLUMN_SHORT_ROWS", d.column_short_rows, 0, 1 << 20);
    d.tiled_block = tuning_value("KFUSE_TUNE_TILED_BLOCK", d.tiled_block, 256, 512);
    d.tiled_block_many_outputs =
        tuning_value("KFUSE_TUNE_TILED_BLOCK_MANY_OUTPUTS", d.tiled_block_many_outputs, 0, 64);
    d.tiled_order = tuning_value("KFUSE_TUNE_TILED_ORDER", d.tiled_order, 1, 3);
    d.tiled_b_from_inputs = tuning_value("KFUSE_TUNE_TILED_B_FROM_INPUTS", d.tiled_b_from_inputs, 0, 3);
    d.tiled_walk_b_with_a = tuning_value("KFUSE_TUNE_TILED_WALK_B_WITH_A", d.tiled_walk_b_with_a, 0, 1);
    d.tiled_vectors_without_fill =
        tuning_value("KFUSE_TUNE_TILED_VECTORS_WITHOUT_FILL", d.tiled_vectors_without_fill, 0, 1);
    return d;
  }();
  return t;
}

}  // namespace kf
