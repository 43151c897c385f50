#include "core/schedule/tuning.h"

#include <cstdlib>

namespace kf {

namespace {

// The variable's value where it is a number >= least, else the fallback.
int from_env(const char* name, int fallback, int least = 1) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return *end == '\0' && n >= least && n <= 1 << 20 ? static_cast<int>(n) : fallback;
}

}  // namespace

const Tuning& default_tuning() {
  static const Tuning t = [] {
    Tuning d;
    d.pointwise_unroll = from_env("KFUSE_TUNE_POINTWISE_UNROLL", d.pointwise_unroll);
    d.pointwise_min_blocks = from_env("KFUSE_TUNE_POINTWISE_MIN_BLOCKS", d.pointwise_min_blocks);
    d.row_vectors = from_env("KFUSE_TUNE_ROW_VECTORS", d.row_vectors);
    d.row_stream_single_pass = from_env("KFUSE_TUNE_ROW_STREAM_SINGLE_PASS", d.row_stream_single_pass, 0);
    d.inner_outer_vectors = from_env("KFUSE_TUNE_INNER_OUTER_VECTORS", d.inner_outer_vectors);
    d.inner_outer_threads_per_sm = from_env("KFUSE_TUNE_INNER_OUTER_THREADS", d.inner_outer_threads_per_sm);
    d.scatter_lanes = from_env("KFUSE_TUNE_SCATTER_LANES", d.scatter_lanes);
    d.scatter_unroll = from_env("KFUSE_TUNE_SCATTER_UNROLL", d.scatter_unroll);
    d.scatter_sorted_min_width = from_env("KFUSE_TUNE_SCATTER_SORTED_MIN_WIDTH", d.scatter_sorted_min_width, 0);
    d.scatter_sorted_max_run = from_env("KFUSE_TUNE_SCATTER_SORTED_MAX_RUN", d.scatter_sorted_max_run);
    d.scan_items = from_env("KFUSE_TUNE_SCAN_ITEMS", d.scan_items);
    d.scan_vector_steps = from_env("KFUSE_TUNE_SCAN_VECTOR_STEPS", d.scan_vector_steps);
    d.scan_line_steps = from_env("KFUSE_TUNE_SCAN_LINE_STEPS", d.scan_line_steps);
    d.scan_pass_rows = from_env("KFUSE_TUNE_SCAN_PASS_ROWS", d.scan_pass_rows, 0);
    d.scan_pass_block = from_env("KFUSE_TUNE_SCAN_PASS_BLOCK", d.scan_pass_block);
    d.split_epilogue_reversed = from_env("KFUSE_TUNE_SPLIT_EPILOGUE_REVERSED", d.split_epilogue_reversed);
    d.row_cluster_max = from_env("KFUSE_TUNE_ROW_CLUSTER_MAX", d.row_cluster_max, 0);
    d.row_cluster_block = from_env("KFUSE_TUNE_ROW_CLUSTER_BLOCK", d.row_cluster_block, 32);
    d.row_cluster_stageable = from_env("KFUSE_TUNE_ROW_CLUSTER_STAGEABLE", d.row_cluster_stageable, 0);
    d.column_epilogue_blocks = from_env("KFUSE_TUNE_COLUMN_EPILOGUE_BLOCKS", d.column_epilogue_blocks);
    d.column_scalar_rows = from_env("KFUSE_TUNE_COLUMN_SCALAR_ROWS", d.column_scalar_rows);
    d.column_any_rows = from_env("KFUSE_TUNE_COLUMN_ANY_ROWS", d.column_any_rows, 0);
    d.tiled_block = from_env("KFUSE_TUNE_TILED_BLOCK", d.tiled_block);
    d.tiled_order = from_env("KFUSE_TUNE_TILED_ORDER", d.tiled_order);
    d.pointwise_vector_rule = from_env("KFUSE_TUNE_POINTWISE_VECTOR_RULE", d.pointwise_vector_rule);
    return d;
  }();
  return t;
}

}  // namespace kf
