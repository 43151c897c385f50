// Scheduler constants that can be varied without rebuilding: tests pass
// their own Tuning, and the process default reads KFUSE_TUNE_* once
// (docs/perf-log.md uses them to measure the heuristics on a GPU). Not part of
// the API.
#pragma once

#include "core/schedule/grid_targets.h"

namespace kf {

struct Tuning {
  // 16-byte vectors each thread of a pointwise loop loads per step.
  int pointwise_unroll = 2;
  // Pointwise kernels one of whose loops loads its vector inputs at this
  // many more places per step than it has vector inputs (a tensor read
  // through slices and cats at several shifts: a rotary embedding's
  // halves, a fused gate_up read by both halves of its gradient) take one
  // step per iteration: each load is a vector register held to the end of
  // the step, and at two steps such kernels ran at 74-93 registers, a third
  // of the occupancy (H200, docs/perf-log.md session 36).
  int pointwise_shifted_loads_one_step = 2;
  // Which dtype sets a pointwise loop's vector width: 1, the narrowest
  // (16 bytes of it per vector; wider dtypes move several 16-byte vectors),
  // 2, the widest (every vector at most 16 bytes).
  int pointwise_vector_rule = 1;
  // Blocks per multiprocessor pointwise vector kernels are compiled for
  // (0: the compiler's choice). Measured on an H100 (docs/perf-log.md, session
  // 19): 8 helps gelu_bias and cross_entropy_bwd by 2%, and spills in rope
  // (+53%) and adamw_step (+100%); 6 no better anywhere but 1%.
  int pointwise_min_blocks = 0;
  // Positions each thread of a pointwise scalar loop loads per step, all
  // before any is computed (halved for the kernels that take one vector
  // step, pointwise_shifted_loads_one_step). At 1, one position's loads at
  // a time: a bfloat16 loop of a row broadcast beside an odd last dim ran
  // at 24% of DRAM bandwidth, its threads waiting on one load each (H200,
  // ncu, docs/perf-log.md session 41).
  int pointwise_scalar_unroll = 8;
  // 1: a pointwise loop whose tensors are all misaligned (a storage
  // offset; an in-place output shares its input's) keeps them in its flat
  // vectors, which start past a head of up to a vector's width where the
  // first is aligned, and run where the others are aligned there too
  // (schedule_pointwise, flat_vector_loop). 0: such a loop has no vectors.
  // H200 (perf-log.md session 50 §3), the 15 plans it changes on 11 seeds:
  // cross-entropy backwards in place at odd offsets 2.11x and 1.40x, a
  // chain in place 1.43x, eight unchanged, one 23 us plan 0.81x.
  int pointwise_flat_head = 1;
  // 1: pointwise loops that update an input in place and read it off the
  // written element within windows of their innermost dims (rotary
  // embeddings in place) write in place (PointwiseLoop::window) instead of
  // through an intermediate and a copy, and so do kernels of several loops
  // whose inputs one loop alone reads and updates (a rotary embedding of q
  // and k); 0: the run plan defers them. Loops with vectors and a window of
  // the innermost dim only (pointwise.cpp): 1.09-2.01x on the 30 such plans
  // of 12 corpus seeds on an H200 (docs/perf-log.md session 52 §1). On
  // (ctest entry gpu_test_gpu_in_place_deferred runs the GPU test without).
  int pointwise_in_place_windows = 1;
  // 1: a gather's data operand computed from the fusion's inputs by
  // pointwise ops in another segment is computed again in the gather's
  // (core/segment/recompute.h) rather than materialized; 0: materialized.
  // H200 (perf-log.md session 50 §4): cross-entropy forwards 1.18-2.72x.
  int recompute_gathered = 1;
  // 1: reduction segments that read one tensor and that no path of values
  // joins merge where a scheduler takes them as one kernel (grouping.h,
  // step 4: an argmax beside a max of the same logits); 0: they stay apart.
  // H200 (perf-log.md session 50 §5): 1.13-1.94x on all 21 plans it
  // changes on 11 seeds (argmaxes, norm backwards, batch norms).
  int merge_sibling_reductions = 1;
  // 1: column reductions without domain outputs (a log-sum-exp over
  // column-major logits: cross-entropy forward, whose gather no longer
  // keeps a domain output) take online softmax pairs too, one pass for
  // the max and the sum instead of two (normalizations always do).
  // Measured on an H200 against 0 (docs/perf-log.md session 51 §1), 14 of
  // the 31 plans it changes on 11 seeds: geomean 1.22x, 1.05-1.85x, two
  // cross-entropies with a tanh softcap 0.95x (compute-heavier: the
  // rescale's exp per step).
  int column_online_statistics = 1;
  // 16-byte vectors per thread of a row held in registers. Measured on an
  // H200 (docs/perf-log.md): 2 (more threads per row) and 6 or 8 (register
  // spills under the 64-register cap of 1024-thread blocks) are slower.
  int row_vectors = 4;
  // The bytes of its row inputs each thread of a row kernel loads at once
  // (width x vectors per thread x their dtype sizes) below which the
  // width past weights of a wider dtype is the rows' (a float32 weight
  // beside bfloat16 rows: 8 lanes, not 4), size_past_weights. 0: only
  // past weights that cannot start a vector. Measured on an H200
  // (docs/perf-log.md session 46): at 32 bytes a thread, a row kernel ran
  // at 57% of DRAM bandwidth, its loads in flight too few for the
  // occupancy its 1024-thread blocks allow (64 registers); at 64 bytes, 81%.
  int row_thread_bytes = 64;
  // 1: row inputs at an address aligned to less than half a vector (a
  // storage offset, an odd row stride) join the vector plan of a row where
  // nothing else moves as vectors, and the Edges kernels peel each row
  // (row_reduction.cpp add_unaligned_row_inputs: 1.5-9.8x on H200,
  // docs/perf-log.md session 48 §1); 0: the plain row kernel reads them
  // one element per thread step.
  int row_unaligned_inputs = 1;
  // Single-pass rows without an online pair (a plain row sum) stream
  // through the long-row kernel's block-stride loop instead of the
  // register kernel (1), or not (0). Online pairs always stream. Measured
  // on an H100 (docs/perf-log.md, session 25): inner_sum slower or equal on
  // 23 of 24 shapes (1.23-1.56x on rows of 1024, 1.00-1.05x on longer).
  int row_stream_single_pass = 0;
  // The same for inner-outer kernels, which also hold one partial per
  // outer reduction and element (registers again). With 1 vector a row of
  // 4096 takes a block of 1024 threads, one per SM at 48 registers: one
  // row in flight, DRAM at 42% (ncu, seed 2012453407 c0191). Measured on
  // an H200 (docs/perf-log.md, session 39), 4 against 1 vector: layernorm
  // and rmsnorm backward at 32768 and 4096 rows of 4095, 8192 and 12288,
  // bf16 and float32, 1.00-1.69x, except layernorm in bf16 at 8192: 0.74x
  // (2 vectors of 8 elements, as row_plan halves them for two live
  // values, times dw's and db's partials: 32 a thread); 8 corpus norm
  // backwards 1.02-1.34x. (On an H100, session 24: layernorm bf16 32768 x
  // 8192 1 vector 0.80 ms, 2 1.12, 4 5.1: spills.) inner_outer_partials:
  // where elements a thread holds times outer reductions pass it, 1 vector.
  int inner_outer_vectors = 4;
  int inner_outer_partials = 16;
  // Threads per multiprocessor of an inner-outer kernel's grid (its blocks
  // grid-stride over rows, so this sets how many partial rows the finishing
  // kernel reads). Measured as above: 2 blocks of 1024 threads per SM 0.80
  // ms, 4 0.89 ms, 8 1.04 ms. The launch asks for no more blocks than the
  // kernel's registers let reside (one wave: docs/perf-log.md, session 24).
  int inner_outer_threads_per_sm = 2048;
  // Scatter's sorted path (index_reduce): slice elements per thread, and
  // positions of a run loaded per step (docs/perf-log.md, session 9).
  int scatter_lanes = 4;
  int scatter_unroll = 4;
  // The atomic path's slice updates (index_reduce) per thread and step
  // (ScatterParams::update_unroll). Measured on an H200 (docs/perf-log.md,
  // session 44 §7): a GNN's index_add update kernels 1.16x and 1.82x, KV-cache writes
  // 1.18-1.28x; a scatter's element updates gained nothing and a
  // scatter-mean of 2M edges lost 0.80x, so they keep 1.
  int scatter_update_unroll = 4;
  // Float amax/amin and prod over slices take the sorted path from this
  // slice width up, where the updates per selected slice average at most
  // scatter_sorted_max_run (ScatterParams::sorted_min_width; 0: never for
  // speed). Measured on an H100 (docs/perf-log.md, session 25), bf16 amax of
  // M updates of width W into W targets, atomic / sorted ms: 32768 x 8192
  // 2.57 / 0.80, x 4096 1.19 / 0.45, x 1024 0.275 / 0.253, x 512 0.141 /
  // 0.30; 131072 x 2048 1.92 / 1.59, x 1024 (runs of 128) 0.95 / 1.46.
  // The sorted path's chunk of a run is one block's serial work.
  int scatter_sorted_min_width = 1024;
  int scatter_sorted_max_run = 64;
  // Scans, a block per line: consecutive elements each thread combines per
  // chunk (docs/perf-log.md, session 9).
  int scan_items = 4;
  // Lines scanned as vectors: vectors per thread and chunk (session 10).
  int scan_vector_steps = 2;
  // Scans, a thread per line: elements loaded before use (session 13).
  int scan_line_steps = 4;
  // Scans, a thread per line: 0, the three-kernel path (segment totals,
  // their prefixes, the scan again from the input); > 0, the single-pass
  // kernel (a decoupled look-back between row segments) with this many
  // rows per warp. Not the default: measured on an H200 (docs/perf-log.md,
  // session 21), cumsum down 32768 x 8192 float32 0.846 -> 0.730 ms, but
  // bfloat16 0.515 -> 0.541, 16384 x 4097 0.211 -> 0.374 and 1048576 x 64
  // 0.54 -> 8.1 (its warps wait at the block's barriers for the look-back).
  int scan_pass_rows = 0;
  // Threads per block of the single-pass scan (128, 256, 512 or 1024;
  // its warps stack along the scan in up to that many).
  int scan_pass_block = 256;
  // Split rows: the epilogue walks the slabs last to first (session 13).
  int split_epilogue_reversed = 1;
  // The most blocks of a thread-block cluster sharing one staged row
  // (RowParams::cluster_max; a power of two, 2 to 8; 0 or 1: no cluster
  // row kernel). Measured on an H100 (docs/perf-log.md, session 22): batch
  // norm 2.18 -> 1.70 ms, rows of 65536 1.24-1.41x faster, the rest of
  // the training suite unchanged.
  int row_cluster_max = 8;
  // Threads per block of the cluster row kernel (RowParams::cluster_block).
  int row_cluster_block = 256;
  // Rows with an online softmax pair and an output pass take the cluster
  // kernel even where one block could stage them (RowParams::
  // cluster_stageable; 0: only rows one block cannot stage, or too few).
  // Measured on an H100 (docs/perf-log.md, session 23): softmax over 2048 x
  // 16392 float32 0.127 -> 0.113 ms; layer and RMS norm rows lose 3-9%
  // that way, so they keep the one-block kernel.
  int row_cluster_stageable = 1;
  // The kernels a row plan gets besides its main one (RowKernels):
  // the tight kernel's register budget (0: none), where a block of 17-21
  // warps fits twice on a multiprocessor, not once (docs/perf-log.md,
  // session 15: softmax 32768 x 16392 bf16 1.18 -> 0.82 ms);
  int row_tight_registers = 48;
  // the wide kernel's most row elements per thread (0: none): at 64 a row
  // value held as floats (softmax's exp) spilled, bf16 softmax 1.2x slower
  // (session 15);
  int row_wide_items = 32;
  // the short-row kernel's threads per block, and the blocks per
  // multiprocessor it is compiled for (4 x 256 threads at 64 registers:
  // the main kernel's register budget for the same path; session 31);
  int row_short_block = 256;
  // Whether a row plan takes outputs laid out across its rows
  // (RowParams::across): 0 for the inner-outer scheduler's row plans,
  // whose kernels keep their outer reductions instead.
  int row_across_outputs = 1;
  int row_short_min_blocks = 4;
  // the split-row kernels' threads per block (session 13).
  int split_row_block = 256;
  // Grids, as targets the launch meets per call (GridTargets, with the
  // measured defaults and their reasons); waves here is the bound the
  // pointwise scheduler gives kernels of several loops.
  GridTargets grid = [] {
    GridTargets g;
    g.waves = 16;
    return g;
  }();
  // Threads of a tiled (transpose) kernel's block: 256 or 512. Measured on
  // an H100 (docs/perf-log.md, session 13): 512 no faster on transpose_add and
  // transpose3d_add, permute4d_scale 0.384 -> 0.431 ms.
  int tiled_block = 256;
  // Tiled kernels writing at least this many outputs take 512-thread
  // blocks (0: tiled_block for all). On an H200 (docs/perf-log.md session
  // 51 §4), 512 against 256 on 31 tiled plans of one seed: faster on the
  // in-place AdamW steps and gated backwards (3-4 outputs: 0.77-0.94 of
  // the time), slower on one-output transposes (up to 1.45x the time); at
  // 3, 8 of the 11 plans it picks are 6-23% faster, 3 within 0-6% slower.
  // Fitted to that seed alone: off until timed on others.
  int tiled_block_many_outputs = 0;
  // Tile order of tiled kernels (TiledParams::order): 3 along the outputs'
  // contiguous dim first, 2 along the tiled inputs' first, 1 diagonal.
  // Measured on an H100 (docs/perf-log.md, session 19): transpose_add 32768 x
  // 8192 bf16 0.562 / 0.580 / 0.593 ms, transpose3d_add 2.231 / 2.294 /
  // 2.349; 3 with groups of 2-16 tiles along a no better.
  int tiled_order = 3;
  // Whether a tiled plan's phase 2 may also run along a full-size input's
  // fast dim, every output then written through a staged tile: 0, never
  // (only along an output's); 1, where that moves fewer bytes across
  // memory; 2, also where both move none and it takes fewer tiles (one
  // staged output against a tile per transposed input). Measured on an
  // H200 against 0 (docs/perf-log.md session 47 §2): 2 (with the earlier
  // cost) on 32 plans, geomean 1.045, 0.64-2.60x, its losses where the
  // inputs' rows are odd (11007, 2049: the vector test fails at run time,
  // and the extent is not in the key); 1 on 31 plans, geomean 1.064,
  // 0.56-2.62x, 14 below 0.9 (rotary halves, KV-cache cats: the staged
  // kernel at 78 registers against 40, half the occupancy, ncu); a launch
  // bound did not lift those losses (session 49 §3).
  // 3, the default (session 50): as 1, but only where the outputs' plan
  // strains its tiles (a computed tile, or tiles of two full-size inputs:
  // transpose.cpp tiles_strained). Against 0 on the 11 plans it changes on
  // ten seeds (H200, perf-log.md session 50 §1): geomean 1.52x, gated
  // backwards 1.76-2.61x, partial rotations 1.31-2.34x, one at 0.93x, and
  // a reglu backward into a batch of 4 innermost (1414814702 c0141) 0.69x.
  int tiled_b_from_inputs = 3;
  // 1: TiledParams::walk_b_with_a where the outputs allow it. On: H200,
  // session 49 (perf-log.md §1), the 16 plans it changes on 9 seeds:
  // 1940430775 c0013 rope 2.02x, 1414814702 c0148 bias_tanh 1.56x,
  // 1657399774 c0114 modulate 1.34x, 12 at 0.99-1.02, and the geglu into a
  // batch of 4 innermost it was written for (1657399774 c0137) 0.89x.
  int tiled_walk_b_with_a = 1;
  // 1: TiledParams::vectors_without_fill in plans with phase-2 vectors and
  // one tiled input: a second vector branch for tiles the fill cannot
  // read in 16-byte vectors. On: H200, session 49 (perf-log.md §1):
  // odd-length transposes 1657399774 c0055, c0197 and 1414814702 c0001
  // 1.72x, 1.65x, 1.32x; aligned plans, whose first branch is unchanged
  // (same registers), 0.95-1.01x (a larger kernel).
  int tiled_vectors_without_fill = 1;
  // Column normalizations: blocks per multiprocessor the epilogue's vector
  // kernel is compiled for when it reads one vector input (its registers
  // then fit 3 x 256 threads without spills). Measured on an H100
  // (docs/perf-log.md, session 18): softmax_dim0 32768 x 8192 bf16 with fast
  // exp 0.643 -> 0.605 ms (its epilogue had 92 registers: 2 blocks);
  // softmax_bwd_dim0 (two inputs) 0.897 -> 0.904, so not there.
  // 1: the compiler's choice.
  int column_epilogue_blocks = 3;
  // Column kernels' scalar twins (odd widths, misaligned tensors): rows per
  // step, every lane's values of the step computed before the range tests.
  // No setting is best for every fusion (docs/perf-log.md, session 18: 4, 2, 1
  // give geometric means within 5% over eight 16384 x 4097 cases, single
  // cases 1.6x apart either way).
  int column_scalar_rows = 4;
  // Rows per step of the scalar twins' vector path at any alignment
  // (KernelWriter::any_left: each row's 16-byte chunks shifted into the
  // lanes' columns), and then of the twin's element path too; 0: no such
  // path, the element path alone at column_scalar_rows. Measured on an
  // H200 (docs/perf-log.md, session 20), eight 16384 x 4097 cases against the
  // element path by geometric mean: 1 row 1.27x (0.84-2.43x), 2 rows
  // 1.14x, 4 rows 0.92x (each vector holds two chunks until shifted: up
  // to 139 registers).
  int column_any_rows = 1;
  // Column reductions of one phase: calls with at most this many reduced
  // rows take the one-kernel twin (ColumnParams::short_rows; 0: never).
  // 32 = 8 row groups x kRowsInFlight rows: the rows one block of the
  // split kernel takes in one step. Up to there its row groups idle (a
  // MoE combine's 2-8 rows leave 6 of 8 groups without a row) and its
  // partials (8 bytes per accumulator and column, written and read back)
  // cost a quarter or more of a 2-byte input's traffic, plus a second
  // launch; the twin's thread then loops at most 8 steps of 4 rows, and
  // with one thread per 16 bytes of columns the device fills wherever the
  // work is worth a kernel (H200, ncu: MoE combine 16368 x 4 x 5120 ran at
  // 2.5-9% of the copy ceiling through the partials).
  int column_short_rows = 32;
};

// The process default: the fields above, each overridden by its variable
// when set, with the values it accepts (a range wide enough to measure
// around the default, and narrow enough that generating the kernels stays
// cheap: KFUSE_TUNE_ROW_VECTORS=16384 once took 7.8 s and 0.6 GB to
// generate one row kernel, 2^20 more than two minutes):
//   KFUSE_TUNE_POINTWISE_UNROLL         1..16
//   KFUSE_TUNE_POINTWISE_VECTOR_RULE    1..2
//   KFUSE_TUNE_POINTWISE_MIN_BLOCKS     0..32 (blocks per SM)
//   KFUSE_TUNE_ROW_VECTORS              1..16
//   KFUSE_TUNE_ROW_STREAM_SINGLE_PASS   0..1
//   KFUSE_TUNE_INNER_OUTER_VECTORS      1..16
//   KFUSE_TUNE_INNER_OUTER_THREADS      32..16384 (threads per SM)
//   KFUSE_TUNE_SCATTER_LANES            1..16
//   KFUSE_TUNE_SCATTER_UNROLL           1..16
//   KFUSE_TUNE_SCATTER_SORTED_MIN_WIDTH 0..2^30 (a slice width)
//   KFUSE_TUNE_SCATTER_SORTED_MAX_RUN   1..65536
//   KFUSE_TUNE_SCAN_ITEMS               1..32
//   KFUSE_TUNE_SCAN_VECTOR_STEPS        1..8
//   KFUSE_TUNE_SCAN_LINE_STEPS          1..32
//   KFUSE_TUNE_SCAN_PASS_ROWS           0..32
//   KFUSE_TUNE_SCAN_PASS_BLOCK          128..1024 (threads)
//   KFUSE_TUNE_SPLIT_EPILOGUE_REVERSED  0..1
//   KFUSE_TUNE_ROW_CLUSTER_MAX          0..8
//   KFUSE_TUNE_ROW_CLUSTER_BLOCK        32..1024 (threads)
//   KFUSE_TUNE_ROW_CLUSTER_STAGEABLE    0..1
//   KFUSE_TUNE_ROW_TIGHT_REGISTERS      0..255 (registers per thread)
//   KFUSE_TUNE_ROW_WIDE_ITEMS           0..64 (elements per thread)
//   KFUSE_TUNE_ROW_SHORT_BLOCK          32..1024 (threads)
//   KFUSE_TUNE_ROW_SHORT_MIN_BLOCKS     1..32 (blocks per SM)
//   KFUSE_TUNE_SPLIT_ROW_BLOCK          32..1024 (threads)
//   KFUSE_TUNE_TILED_BLOCK              256..512 (threads: 512, else 256)
//   KFUSE_TUNE_TILED_ORDER              1..3
//   KFUSE_TUNE_COLUMN_EPILOGUE_BLOCKS   1..32 (blocks per SM)
//   KFUSE_TUNE_COLUMN_SCALAR_ROWS       1..16
//   KFUSE_TUNE_COLUMN_ANY_ROWS          0..16
// Read on first use.
const Tuning& default_tuning();

// The integer in the environment variable `name` when it is one from
// `least` to `most`; else (unset or empty: silently) `fallback`. Any other
// value (not a decimal integer, out of range) also prints one warning line
// on stderr the first time, naming the variable, its value and the range
// (core/util/env_switch.h): a typo must not pass for a measurement.
int tuning_value(const char* name, int fallback, int least, int most);

}  // namespace kf
