// The schedule stage's product: for one Task, which kernel family runs it
// and every parameter of that kernel, as data. Codegen (core/codegen/emit.h)
// emits exactly what a schedule says and decides nothing; the registry
// (registry.h) chooses the schedule; `describe` prints it for `kfuse
// explain` and the golden tests.
//
// Index maps: a kernel iterates a domain (the sizes of one value) and reads
// other values at indices derived from the domain's. An IndexMap gives, per
// dim of a value, the domain dim whose index it reads, kZeroIndex (a size-1
// dim, read at 0) or kOpaqueIndex (a computed index: slice offsets,
// reshapes, gathers).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "core/ir/op_attrs.h"
#include "core/schedule/grid_targets.h"
#include "core/schedule/scheduler_kind.h"

namespace kf {

constexpr int kZeroIndex = -1;
constexpr int kOpaqueIndex = -2;
using IndexMap = std::vector<int>;

// Shifted reads (only in maps traced with `shifts`, trace_accesses): a dim
// read at domain dim d's index plus an offset, inside a bound the kernel
// tests (a cat's operand along the cat dim, first included; a pad's input
// along a padded dim). Encoded below kShiftedIndex with the offset's
// alignment: the largest power of two dividing it, capped at 16 (16 too
// for offsets known at run time only, a cat's bounds, which the vector
// path checks per call). Every test of `m >= 0` takes it for opaque.
constexpr int kShiftedIndex = -16;
constexpr int shifted_index(int d, int align) {
  int log2 = 0;
  while ((1 << log2) < align && log2 < 4) ++log2;
  return kShiftedIndex - 8 * d - log2;
}
constexpr bool is_shifted(int m) { return m <= kShiftedIndex; }
constexpr int shifted_dim(int m) { return (kShiftedIndex - m) / 8; }
constexpr int shifted_align(int m) { return 1 << ((kShiftedIndex - m) % 8); }
// The domain dim an entry reads, plain or shifted; -1 for none.
constexpr int read_dim(int m) { return m >= 0 ? m : is_shifted(m) ? shifted_dim(m) : -1; }

// 16-byte vectors along one domain dim: lane l of a group reads element
// base + l along `dim`. Inputs listed here are loaded as whole vectors
// where the kernel reads them at the lane's index; outputs listed here are
// stored as whole vectors. Strides and alignment are checked at run time
// (a scalar path runs otherwise). width 0: no vector path.
struct VectorPlan {
  int width = 0;    // elements per vector
  size_t dim = 0;   // the domain dim the lanes run along
  std::map<int64_t, IndexMap> inputs;  // input -> its dims' domain dims (kZeroIndex: broadcast)
  std::vector<int64_t> outputs;
  // Inputs of `inputs` loaded at any element alignment (kf_vload_any:
  // the aligned 16-byte chunks around a vector, shifted into its lanes)
  // rather than checked aligned at run time: a row kernel's weight
  // broadcast over its rows at an odd storage offset (plan_vectors'
  // `rows`), which its alignment would otherwise leave to one load per
  // element, or send every tensor of the kernel to its Edges or scalar twin.
  std::vector<int64_t> any_aligned;
  bool operator==(const VectorPlan&) const = default;
};

// Pointwise: grid-stride loops, one per group of outputs of provably equal
// sizes; each loop runs over the sizes of its first output, its linear
// index unravelled over `order` (dims outermost first: the outputs' memory
// order, so that consecutive threads write consecutive elements whatever
// the layout).
struct PointwiseLoop {
  std::vector<int64_t> outputs;
  std::vector<size_t> order;
  VectorPlan vectors;  // along order.back()
  // The scalar twin's flat vectors (16-byte vectors of consecutive
  // positions, which may cross rows, for calls that fail the vector
  // checks: an odd width): `vectors` without the inputs that skip a dim
  // of class >1 (inputs_reading); the others are read per lane. They
  // start past a head of positions where the first of them is aligned.
  // Where every tensor is misaligned (`vectors` empty: drop_misaligned),
  // the plan at any alignment, run by the loop's one kernel
  // (Tuning::pointwise_flat_head).
  VectorPlan flat;
  // The scalar loop's loads (plan_element_loads: one-element vectors of
  // the inputs read at the loop's position, any layout), made for
  // PointwiseParams::scalar_unroll positions per thread before any is used.
  VectorPlan elements;
  int unroll = 2;      // vectors per thread and step
  // In-place windows (0: none): the loop's last `window` dims in `order`
  // hold every read of an input that one of its outputs updates in place
  // off the element it writes (a rotary embedding's other half, along the
  // head dim). Each block iteration then covers whole windows, computes
  // all its values, waits at a barrier and only then stores, so no read
  // sees another thread's store (emit_pointwise window_loop); no flat
  // vectors. A call whose window is longer than an iteration reads a copy
  // of those inputs instead (LaunchRule::windows, the launch).
  int window = 0;
  bool operator==(const PointwiseLoop&) const = default;
};
struct PointwiseParams {
  std::vector<PointwiseLoop> loops;
  int unroll = 2;  // 16-byte vectors of the widest dtype per thread and step
  // Positions per thread and step of the scalar loops (odd widths,
  // misaligned or strided tensors): 1 loads one position's inputs at a time.
  int scalar_unroll = 1;
  int block = 256;
  // Blocks per multiprocessor the vector kernel is compiled for
  // (__launch_bounds__'s second argument; 0: the compiler's choice).
  int min_blocks = 0;
  // waves > 0 for kernels of several loops (outputs of different
  // domains), whose threads each pay every loop's set-up (arguments,
  // vector conditions, divisors) even where a small domain gives them no
  // step; one-step grids stay faster for single loops (docs/perf-log.md,
  // session 7).
  GridTargets grid;
  // Tuning::pointwise_in_place_windows: the run plan may write into the
  // inputs of a kernel of several loops too, where one loop alone reads
  // and updates each (in_place.h); the loops then carry their windows.
  bool in_place_loops = false;
  bool operator==(const PointwiseParams&) const = default;
};

// Tiled: one pointwise loop over outputs of equal sizes, in tiles of two
// domain dims (a, b) through shared memory: inputs that are contiguous
// along a are read with threads along a, the outputs computed with threads
// along b (their fast dim). Any two dims of any rank; the others are outer.
// A tile holds a task input, or a value computed from one input alone that
// reads it through a slice or a reshape (filled by evaluating it).
struct TiledInput {
  int64_t value = -1;
  IndexMap dims;  // per dim of the value: its domain dim (kZeroIndex: size 1)
  // Bytes of one tile element. A task input of 1 or 2 bytes is held as
  // stored (converted when phase 2 reads it): its tile takes a quarter or
  // half of a register-typed one, so a third input fits beside two
  // (element_bytes below 4); anything else as its register type (4 or 8).
  int element_bytes = 4;
  // A tile row's elements: the tile's, padded so that a row is an odd
  // number of 4-byte words (a column's elements fall in distinct banks).
  int pitch(int tile) const { return tile + (element_bytes < 4 ? 4 / element_bytes : 1); }
  int bytes(int tile) const { return tile * pitch(tile) * element_bytes; }
  bool operator==(const TiledInput&) const = default;
};
struct TiledParams {
  std::vector<int64_t> outputs;
  size_t dim_a = 0, dim_b = 0;
  // The tiles run over two groups of dims, A = {dim_a} + group_a and B =
  // {dim_b} + group_b, each indexed by one linear index unravelled at run
  // time (inner dim fastest): a dim of extent 2-8 innermost (a batch dim)
  // then fills a 64-wide tile with the next dim's elements instead of
  // leaving it mostly empty. group_a / group_b: at most one further dim,
  // the next memory dim of class Many of the tiled input / the outputs
  // that is not in the other group (empty: the dim alone, today's kernel).
  std::vector<size_t> group_a, group_b;
  // Whether domain dim d is one the tiles run over (a, b or a group's).
  bool tiles_dim(size_t d) const {
    return d == dim_a || d == dim_b || std::find(group_a.begin(), group_a.end(), d) != group_a.end() ||
           std::find(group_b.begin(), group_b.end(), d) != group_b.end();
  }
  int tile = 64;  // tile x tile elements
  int block = 256;
  // Order of the tiles over the blocks: 3 along dim b first (blocks in
  // flight cover whole rows of the outputs), 2 along dim a first, 1
  // diagonal (they differ in both coordinates). Tuning::tiled_order.
  int order = 3;
  std::vector<TiledInput> inputs;
  // Outputs stored with dim a innermost (the caller's layouts differ: a
  // result beside a transposed copy of an input): written in phase 1,
  // threads along a, from the inputs directly; phase 2 writes the others.
  std::vector<int64_t> outputs_a;
  // Outputs stored with dim a innermost that read an input contiguous
  // along b (so phase 1 cannot write them): phase 2 computes them into a
  // shared-memory tile of their own, and phase 3 writes it with threads
  // along a (a caller's transposed output beside row-major ones, an
  // optimizer's state in another order than its parameter).
  std::vector<int64_t> outputs_staged;
  // The outputs phase 2 writes to memory: those in neither list above.
  std::vector<int64_t> outputs_b() const {
    std::vector<int64_t> b;
    for (int64_t o : outputs)
      if (std::find(outputs_a.begin(), outputs_a.end(), o) == outputs_a.end() &&
          std::find(outputs_staged.begin(), outputs_staged.end(), o) == outputs_staged.end())
        b.push_back(o);
    return b;
  }
  VectorPlan vectors;  // phase 2, along dim_b (tiled inputs come from shared memory)
  // Phase 2's scalar path walks the tile in the outputs' memory order
  // (group B's inner dim, then dim a, then B's further dim) where B's
  // inner extent is a power of two below the tile: the outputs store
  // dim b innermost and dim a next (a caller's batch of a few stored
  // innermost), and lanes along B alone wrote runs of that extent only
  // (Tuning::tiled_walk_b_with_a; docs/perf-log.md session 48 §3).
  bool walk_b_with_a = false;
  // The vector path's condition leaves out the tile's fill, which it does
  // as the scalar path does (the input's widest vectors, chosen at run
  // time: tile_fill), where one input is tiled: a transposed input at an
  // odd sequence length (4098: its columns start off a 16-byte boundary,
  // which a dense tensor's key does not record) failed the one condition
  // for both phases, and phase 2 ran one element a thread though its
  // tensors allow vectors (Tuning::tiled_vectors_without_fill;
  // docs/perf-log.md session 48 §5). With several tiled inputs the fill
  // keeps all their loads in flight before any store (tile_fill_vectors).
  bool vectors_without_fill = false;
  bool operator==(const TiledParams&) const = default;
};

// The rows of a reduction: every reduction of the task reduces the same
// dims of one domain. Reductions run in phases (a reduction reading
// another's result runs in a later phase); domain-shaped outputs are
// written at every domain index, row-shaped ones once per row.
struct RowDomain {
  int64_t domain = -1;
  std::vector<bool> reduced;                 // per domain dim
  std::vector<std::vector<int64_t>> phases;  // reduction expr indices per phase
  std::vector<int64_t> domain_outputs;
  std::vector<int64_t> row_outputs;
  bool normalizes = false;  // some domain output reads a reduction result
  // Domain outputs that reshape a domain-shaped value (group norm's
  // [B, G, C/G, HW] result returned as [B, C, HW]): output -> that value.
  // The kernel computes the value at each domain index and stores it at
  // the reshaped index (KernelWriter::views).
  std::map<int64_t, int64_t> views;
  // The domain dims in memory order, outermost first (row_domain.h,
  // memory_order): dims of class 0/1 first, then the reference input's
  // layout. The kernels walk a row's elements and the columns in this
  // order, so that consecutive threads touch consecutive addresses; the
  // innermost dim decides row (reduced) or column (kept) and carries the
  // vectors. Empty: the logical order.
  std::vector<size_t> order;
  // The reduced (true) or kept (false) dims, in `order` (outermost first).
  std::vector<size_t> dims_in_order(bool reduced_dims) const;
  bool operator==(const RowDomain&) const = default;
};

// Row: one block per row. With a vector plan (the innermost dim is reduced
// and of class >1) the row is held in registers, vectors_per_thread
// vectors per thread, the block sized per call to the row (at most
// `block`). A row longer than that is staged in shared memory: the
// `staged` inputs (read once per row, no reuse across rows) are copied in
// with 16-byte loads, and every phase reads them from there (and, with
// stage_outer, the inner-outer partials are kept there too), when the
// row's bytes fit the device's shared memory (without outer reductions:
// twice over, launch_dims). Rows failing the run-time
// vector checks, or too long for both, are re-read from memory in every
// phase.
//
// Inner-outer (the norm backward pattern): the task also has reductions
// over the kept dims (`outer`: same domain, reduced = the rows' kept dims,
// one phase, its results task outputs only). The grid is bounded (about
// outer_threads_per_sm threads per multiprocessor, each block grid-striding
// over rows) and accumulates the outer reductions for
// its columns across them (in registers on the cached path) into its own
// row of partials (args.scratch); a second kernel combines the blocks'
// partials per column in order (deterministic) and writes the outer
// results. No full-size intermediate goes through memory.
// The kernels a row plan is compiled into besides its main kernel, each
// taken per call by a rule of core/runtime/cuda/launch.h. Decided with the
// plan (plan_row_kernels, row_kernels.cpp) so that codegen emits exactly
// these; the suffixes name them in KernelPlan (kernel_source.cpp).
struct RowKernels {
  // The main kernel's register path alone, its streaming path a scalar
  // twin ("_scalar") compiled only for calls that fail the vector checks.
  bool scalar_twin = false;
  // Rows longer than the registers hold, staged or streamed ("_long").
  bool long_rows = false;
  // > 0: the register path again under this many registers per thread
  // ("_tight"; takes_tight_registers).
  int tight_registers = 0;
  // > 0: the register path at this many vectors per thread ("_wide";
  // takes_wide_rows).
  int wide_vectors_per_thread = 0;
  // Rows shared by the blocks of a cluster ("_cluster"; cluster_blocks).
  bool cluster = false;
  // Rows of any start (edge_vectors): held in registers ("_edges") and
  // long ("_long_edges").
  bool edges = false, long_edges = false;
  // > 0: several short rows per block of this many threads, compiled for
  // short_rows_min_blocks blocks per multiprocessor ("_rows";
  // takes_short_rows).
  int short_rows_block = 0, short_rows_min_blocks = 0;
  // > 0: the split-row kernels (KernelPlan::split_rows; prefer_split_rows)
  // in blocks of this many threads, their finish split_col_threads rows
  // per block (ColumnParams::col_threads).
  int split_block = 0, split_col_threads = 0;
  bool operator==(const RowKernels&) const = default;
};

struct RowParams {
  RowDomain rows;
  VectorPlan vectors;  // along the innermost dim in memory (rows.order.back())
  int vectors_per_thread = 4;
  int block = 256;
  std::vector<int64_t> staged;  // inputs staged in shared memory (empty: no staged path)
  bool stage_outer = false;     // the outer partials in shared memory on the staged path
  RowDomain outer;  // outer.domain < 0: none
  int outer_threads_per_sm = 0;
  int finish_block = 256;
  // (max expr, sum expr) pairs the register path computes in one pass
  // (online_softmax.h); the other paths keep rows.phases.
  std::vector<std::pair<int64_t, int64_t>> online;
  // One pass over the row (online pairs leave one phase) and no output per
  // element (cross-entropy's loss, a log-sum-exp): nothing is worth
  // holding, so every row takes the LongRows kernel, streamed in 16-byte
  // steps by blocks sized for residency (a register-cached row keeps one
  // 1024-thread block per multiprocessor, idle at each row's barriers).
  bool stream_rows = false;
  // The vector plan of the Edges kernel (RowKernel::Edges; width 0: none):
  // rows whose start is not a multiple of the width (an odd row length,
  // a 50257-word vocabulary) read and write their aligned middle in
  // vectors and their head and tail one element at a time. The middle is
  // aligned for the outputs (each row of every one must start at the same
  // remainder, checked at run time); every input loads its vectors at its
  // own shift (kf_vload_any: a padded x beside a contiguous residual, a
  // weight). Single reduced innermost dim only.
  VectorPlan edge_vectors;
  // Split rows (emit_split_row): the epilogue's blocks take the rows'
  // slabs from the last to the first, so that it first reads what the
  // partials kernel read last (still in L2 where the data is a little
  // larger than the L2; group norm 0.123 -> 0.116 ms on an H100).
  bool split_epilogue_reversed = true;
  // The most blocks of a thread-block cluster that share a row in the
  // cluster row kernel (RowKernel::Cluster; sm_90 and newer; 0: no such
  // kernel): rows too long for one block's shared memory, or too few to
  // fill the device one block each, staged in parts, one per block, and
  // read once (Tuning::row_cluster_max).
  int cluster_max = 0;
  // Threads per block of the cluster row kernel (at most `block`): small
  // blocks hold more of the part per thread (fewer threads share each
  // row's fixed cost: its reductions, its loops' set-up) and several fit a
  // multiprocessor (Tuning::row_cluster_block).
  int cluster_block = 256;
  // Rows that one block could stage take the cluster kernel too: an online
  // softmax pair with an output pass evaluates its exp twice per element
  // (the pair's phase, the output pass), and one block per row is then
  // issue-bound (ncu, docs/perf-log.md session 23: 62% SM, 54% DRAM with
  // 1024-thread blocks; parts of half the size keep twice the threads
  // resident). Tuning::row_cluster_stageable.
  bool cluster_stageable = false;
  // Outputs of the row's sizes whose memory runs across the rows (the
  // caller's layout puts a kept dim innermost: a layernorm into a [1, 0]
  // output). The main kernel then takes `across_rows` consecutive rows per
  // block, a warp each, streams every phase from memory, and writes these
  // outputs in column chunks through shared memory: each chunk's values of
  // all its rows into a tile, then the tile along the outputs' own fast dim
  // (emit_row_memory.cpp, across_chunks). It has no other kernel
  // (plan_row_kernels), and no register path, stage or outer reduction.
  std::vector<int64_t> across;
  int across_rows = 0;
  // The kernels besides the main one (set last: plan_row_kernels).
  RowKernels kernels;
  GridTargets grid;  // the split-row kernels' grids, and when rows are split
  bool has_outer() const { return outer.domain >= 0; }
  bool operator==(const RowParams&) const = default;
};

// Column (outer) reduction: the innermost dim is kept, the reduced rows are
// strided. Per phase, kernel 1: a block reduces a slab of rows for a tile
// of col_threads * vector-width columns (row_groups rows at a time), split
// over the rows (grid.y) into partials (Welford triples for a variance);
// kernel 2 (blocks of finish_block threads: col_threads columns, the other
// threads splitting the partials) combines the splits in a fixed order
// (deterministic) into the phase's results, kept per column for the later
// kernels, and the last one writes the row-shaped outputs. The
// domain-shaped outputs are written by phase 0's kernel 1 as it visits
// each element, or, when they read a result (a normalization over outer
// dims: softmax over dim 0, a channels-last batch norm), by an epilogue
// walking the domain like kernel 1. Each phase re-reads its inputs: a
// normalization costs (phases + 1) reads and one write.
struct ColumnParams {
  RowDomain rows;
  VectorPlan vectors;  // along the innermost dim in memory (kept: rows.order.back())
  // (max expr, sum expr) pairs of softmax's shape (online_softmax.h) in one
  // phase, rows.phases merged by online_phases: the sum of exp(x - max)
  // accumulates against the running max, rescaled as it rises, and the
  // pair's partials combine as one (kf_online). One pass over the input
  // less (softmax over dim 0: three reads become two). Normalizations
  // only: their domain outputs wait for the epilogue, so no kernel but
  // the epilogue reads the max before it is final.
  std::vector<std::pair<int64_t, int64_t>> online;
  int col_threads = 32;
  int row_groups = 8;
  int block = 256;
  int finish_block = 256;
  // Blocks per multiprocessor the epilogue's vector kernel keeps registers
  // for (__launch_bounds__(block, n); 0: the compiler's choice), set for
  // an epilogue that reads one vector input. The
  // epilogue only loads, computes and stores (no accumulators), so its
  // speed is the loads it keeps in flight per multiprocessor
  // (Tuning::column_epilogue_blocks, docs/perf-log.md session 18).
  int epilogue_blocks = 0;
  // Rows per step of the scalar twins (Tuning::column_scalar_rows).
  int scalar_rows = 4;
  // Rows per step of the scalar twins' vector path at any alignment (0:
  // none; Tuning::column_any_rows).
  int any_rows = 1;
  // The most reduced rows (product of the reduced extents) with which a
  // call takes the one-kernel twin (`_short`, short_twin()): every thread
  // owns its columns and loops over all their rows, finishes its
  // accumulators and stores the outputs itself (no partials, no finishing
  // kernel). 0: no twin (several phases, a normalization).
  // Tuning::column_short_rows; launch.cpp, takes_short_columns, decides.
  int short_rows = 0;
  int tile_cols() const { return col_threads * (vectors.width > 0 ? vectors.width : 4); }
  // The twin's geometry: the whole block along the columns, one row group.
  ColumnParams short_twin() const {
    ColumnParams t = *this;
    t.col_threads = block;
    t.row_groups = 1;
    return t;
  }
  GridTargets grid;  // the partials' and the epilogue's grids
  bool operator==(const ColumnParams&) const = default;
};

// Scatter (scatter, index_reduce; alone in its segment, scatter.cpp).
// Kernel 1 copies the input into the result. Then the atomic path: when
// include_self is off, a kernel sets every selected element to the
// reduction's identity; a kernel applies each update with an atomic
// read-modify-write (a plain store for reduce none); for mean, a kernel
// divides by per-element counts kept in scratch. Or the sorted path
// (deterministic float sum/prod/mean, and none: the last update wins): the
// updates' (target, position) keys are sorted (bitonic: 2048 keys per
// block in shared memory, global merge steps above), then one thread per
// sorted key and slice element combines the run of equal targets in src
// order in float64 (float amax/amin in float: they select) and stores
// once. The sorted path also serves float amax/amin and prod over slices
// for speed (their atomics are compare-and-swap loops, slowed by every
// collision; the sorted path writes each selected slice once): then the atomic kernels are compiled too, and a
// call takes them whose slices are narrower than sorted_min_width or whose
// updates average more than sorted_max_run per slice of the result (the
// sorted path's runs are serial work).
struct ScatterParams {
  int64_t expr = -1;
  // Each update is a whole slice along dim: index_reduce (a rank-1 index),
  // or a scatter whose index is the same along every other dim (a rank-1
  // index expanded, as graph libraries write it; the slice then has the
  // index's extents). The index's dim holding the slice's position:
  int index_dim = 0;
  bool slices = false;
  ScatterReduce reduce = ScatterReduce::None;
  bool include_self = true;
  bool sorted = false;
  // > 0: sorted for speed, not for determinism (above).
  int sorted_min_width = 0;
  int sorted_max_run = 0;
  int block = 256;
  // Sorted path: slice elements per thread (slices; elements: 1) and run
  // positions loaded per step.
  int lanes = 1;
  int unroll = 8;
  // Atomic path: updates per thread and step, each one's target and value
  // loaded before any is applied (Tuning::scatter_update_unroll for
  // index_reduce's slice updates; 1 for a scatter's element updates).
  int update_unroll = 1;
  bool operator==(const ScatterParams&) const = default;
};

// Scan (cumsum, cumprod, cummax; alone in its segment, scan.cpp). A line
// is the elements along the scanned dim at one index of the others. When
// the scanned dim is the innermost in memory, a block per line: each
// thread combines `items` consecutive elements, a block-wide scan of the
// threads' totals (warp shuffles, then one warp over the warps' totals)
// gives each its prefix, and a carry runs from chunk to chunk (the chunk
// staged in shared memory so that loads and stores are coalesced).
// Otherwise a thread per line segment walks it in order (neighbouring
// threads on neighbouring lines): the segments' totals, their prefixes per
// line, then the scan from each prefix (step_launch.h picks the segments
// so that the device fills).
struct ScanParams {
  int64_t expr = -1;
  std::vector<size_t> line_dims;  // the result's dims but the scanned one, memory order (outermost first)
  bool block_per_line = true;
  int block = 256;
  int items = 4;
  // Block per line: the line moved as vectors (each thread's
  // vector_steps x width consecutive elements, vector_steps loads and
  // stores) when the run-time conditions hold; else the chunks are staged
  // through shared memory.
  VectorPlan vectors;
  int vector_steps = 1;
  // Thread per line: elements of the line each thread loads before it
  // combines and stores any (loads in flight; the stores may alias the
  // input, so the compiler cannot hoist the next loads above them).
  int line_steps = 4;
  // Thread per line, when > 0: one kernel instead of three. Lanes own
  // `vectors.width` neighbouring lines (one 16-byte vector along the
  // innermost line dim when the run-time conditions hold, else element by
  // element), each warp `pass_rows` consecutive elements of them; the
  // warps of a block stacked along the scan make a row segment, whose
  // totals go to the next segment by a decoupled look-back through
  // scratch (emit_scan.cpp: emit_single_pass; docs/perf-log.md session 21:
  // not the default, slower than the three kernels on most shapes).
  int pass_rows = 0;
  bool operator==(const ScanParams&) const = default;
};

using KernelSchedule = std::variant<PointwiseParams, TiledParams, RowParams, ColumnParams, ScatterParams, ScanParams>;

// The scheduler kind the segment API reports (pointwise, reduction,
// normalization).
SchedulerKind kind_of(const KernelSchedule& s);
// The family's name: pointwise, tiled, row, column.
std::string_view family_of(const KernelSchedule& s);
// One line of `key=value` fields, stable (golden tests match it).
std::string describe(const KernelSchedule& s);

}  // namespace kf
