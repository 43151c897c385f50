// What code generation produces for one segment: a complete CUDA C++
// translation unit with one extern "C" kernel, the layout of its single
// parameter, and the rule that gives its launch configuration from the
// sizes of one call. Sources depend only on the ConcreteFusion, the Task
// and its KernelSchedule (never on sizes within the concretization class),
// so a plan is generated and compiled once per segment.
//
// Kernel parameter convention: the kernel takes one struct by value,
//   struct KfArgs { long long a[N]; };   extern "C" __global__ void NAME(KfArgs args)
// and slot k holds args[k] as described by ArgSlot: a data pointer (device
// address of element 0, byte_offset applied), an extent or a stride (in
// elements) of a value of the task, or a scalar input's value (float
// scalars as the bits of a double, integer/bool scalars as int64).
// Extent slots may name any value of the task (inputs, intermediates,
// outputs: task_sizes gives them all); Data and Stride slots name task
// inputs and outputs. Extents of size class 0/1 are never asked for.
//
// Compiling: the source is plain CUDA C++ for NVRTC with no includes
// (half/bfloat16 via inline PTX); compile with --gpu-architecture=sm_80 or
// newer and -std=c++17; never --use_fast_math (uniform/normal must match
// the CPU bit for bit, and PyTorch's accuracy is the contract). The kernel
// is __launch_bounds__(launch.block): launch exactly launch.block threads
// (PerRow kernels need a multiple of 32, at most 1024). Grid size only
// affects speed: every kernel grid-strides over its elements or rows, so
// any grid.x >= 1 is correct. Kernels use static shared memory, except
// PerRow kernels with a staged path (row_stage_bytes > 0), which read
// dynamic shared memory when the launch gives them enough for the row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/segment/segmentation.h"
#include "core/ir/task.h"

namespace kf {

struct ArgSlot {
  // Divisor: the extent's fastdiv_word (below), for kf_fastdiv in the kernel.
  enum class Kind : uint8_t { Data, Extent, Stride, Scalar, Divisor };
  Kind kind;
  int64_t value;  // value id (a task input or output for Data/Stride)
  int dim = 0;    // Extent/Stride/Divisor: dimension
};

// A condition on one launch's argument words (the slots' values as
// fill_arguments writes them) that the host evaluates: whether a kernel's
// 16-byte vector path may run (KernelPlan::scalar_twins).
struct ArgCheck {
  enum class Kind : uint8_t {
    Multiple,       // (sum of the words + offset) % modulus == 0: a pointer's alignment, a stride's or an extent's multiple
    SliceMultiple,  // kf_slice_start(words[0], offset) % modulus == 0: a slice's start (prelude.cpp)
    Equal,          // words[0] == words[1], or == offset when there is one word
    Congruent,      // (words[0] - words[1]) % modulus == 0: two strides alike up to the vector width
  };
  Kind kind = Kind::Multiple;
  std::vector<int> words;
  int64_t offset = 0;
  int64_t modulus = 1;
  bool operator==(const ArgCheck&) const = default;
};

// Whether `check` holds for argument words `args`.
bool holds(const ArgCheck& check, const int64_t* args);

// Division of 0 <= n < 2^31 by an extent 1 <= d < 2^31 with a multiply-high
// and a shift (Granlund and Montgomery, "Division by invariant integers
// using multiplication", PLDI 1994): s = ceil(log2 d), m = floor(2^32 (2^s
// - d) / d) + 1 < 2^32, n / d = (umulhi(n, m) + n) >> s (the sum stays
// below 2^32). The word packs m (low half) and s (high half); the host
// computes it once per launch, as computing it per thread cost more than
// the divisions it saved (docs/perf-log.md, session 7).
inline uint64_t fastdiv_word(int64_t d) {
  if (d < 1) return 0;  // no index is divided by an empty extent
  uint64_t s = 0;
  while (s < 31 && (uint64_t{1} << s) < static_cast<uint64_t>(d)) ++s;
  const uint64_t m = (uint64_t{1} << 32) * ((uint64_t{1} << s) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(d) + 1;
  return (s << 32) | (m & 0xffffffffu);
}

// n / d from d's word, as the kernel's kf_fastdiv_div computes it (the
// host's mirror, for the tests that replay kernels' index math).
inline uint32_t fastdiv_divide(uint64_t word, uint32_t n) {
  const uint32_t m = static_cast<uint32_t>(word), s = static_cast<uint32_t>(word >> 32);
  const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(n) * m) >> 32);
  return (hi + n) >> s;
}

struct LaunchRule {
  enum class Kind : uint8_t {
    // grid.x = ceil(numel(domain) / (block * items_per_thread)), capped at
    // max_blocks (grid-stride loop). items_per_thread is the vector width
    // of the kernel's 16-byte path (1 when it has none).
    Elementwise,
    // grid.x = number of rows = product of the domain's kept dims (capped,
    // grid-stride loop). With outer_accumulators > 0 (inner-outer), grid.x
    // is at most threads_per_sm / block blocks per multiprocessor (at least
    // one), and no more than its registers let reside, each block writes one
    // row of partials per outer reduction (grid.x * row length * 8 bytes
    // each) and `finish_name` combines them, one thread per element of a
    // row: the scratch and split words as for ColumnReduce.
    PerRow,
    // Column reduction (the reduced dims are outer, the innermost dim is
    // kept): two kernels of one source, launched in order on one stream.
    // `name`: grid (ceil(cols / tile_cols), splits), each block reduces a
    // slab of reduced rows for tile_cols columns into float/double/int64
    // partials in a scratch buffer (splits * cols * 8 bytes per
    // accumulator); `finish_name`: one thread per column combines the
    // splits in order (deterministic) and writes the outputs. The kernels
    // take two extra argument words after the slots: the scratch pointer
    // and the number of splits (KfArgs::scratch and KfArgs::splits).
    // Reductions in several phases, or a normalization, add the kernels of
    // KernelPlan::later (the scratch also holds result_words arrays of
    // cols words). A call with few reduced rows launches short_name
    // instead, alone (short_rows below).
    ColumnReduce,
    // Rows split over blocks (emit_split_row): grid (rows, splits), then
    // the kernels of KernelPlan::later as for ColumnReduce, with the rows
    // as columns. Launched instead of a PerRow plan when
    // prefer_split_rows (launch.h) says so.
    SplitRows,
    // Scatter: the kernels named in KernelPlan::scatter, in order
    // (core/runtime/cuda/step_launch.cpp). Extra argument words:
    // KfArgs::scratch, padded (the sorted path's key count, a power of
    // two >= 2048), sort_k and sort_j (the bitonic step). The sorted
    // path's scratch: keys, positions, then two partials per chunk of
    // kSortedChunk positions and slice element (step_launch.h).
    Scatter,
    // Scan: ScanParams' kernel; grid.x = one block per line (at most
    // max_blocks, grid-stride) or one thread per line (scan_block_per_line
    // false); the domain's reduced_dims mark the scanned dim.
    Scan,
  };
  Kind kind = Kind::Elementwise;
  int64_t domain_value = -1;        // value whose sizes define the iteration domain
  // Elementwise with several loops: each loop's domain value (the first is
  // domain_value); the grid is made for the one with the most elements
  // (launch_domain, core/runtime/cuda/launch.h).
  std::vector<int64_t> loop_domains;
  std::vector<bool> reduced_dims;   // PerRow: dims of the domain that are reduced (the row)
  int block = 256;
  int items_per_thread = 1;
  int shared_bytes = 0;
  int64_t max_blocks = 65535LL * 32;
  // The plan's grid targets (kernel_schedule.h): Elementwise with
  // grid.waves > 0, at most that many waves of resident blocks, each
  // thread looping; the partials and epilogue grids of ColumnReduce and
  // SplitRows; when a PerRow call is split (prefer_split_rows).
  GridTargets grid;
  // PerRow: when > 0, the elements each thread holds in registers; the
  // block is then chosen per call: ceil(row length / row_items) threads
  // rounded up to a warp, at most `block` (the kernel reads blockDim.x).
  int row_items = 0;
  // PerRow: when > 0, the kernel can stage a row that does not fit its
  // registers in dynamic shared memory, this many bytes per row element;
  // the launch gives it row length * row_stage_bytes when that is within
  // the kernel's limit (else 0, and the kernel streams from memory).
  int row_stage_bytes = 0;
  // PerRow: elements a staged row may take beyond its length (each row is
  // rounded up to 16 bytes; the Edges kernel's rows also start at their shift).
  int row_stage_pad = 0;
  // PerRow, the inner-outer Edges kernel: its column partials in dynamic
  // shared memory, this many bytes per row element for row length +
  // row_stage_pad elements (launch_dims; edge_partials_fit).
  int row_partial_bytes = 0;
  // PerRow: when > 1, the plan has a cluster row kernel
  // (KernelPlan::cluster_name) of up to this many blocks per row.
  int cluster_max = 0;
  int cluster_block = 256;  // its threads per block (at most `block`)
  // PerRow with cluster_max > 1: rows that one block could stage in half
  // the shared memory take the cluster kernel as well
  // (RowParams::cluster_stageable).
  bool cluster_stageable = false;
  // PerRow with row_items > 0: every row takes the LongRows kernel, short
  // rows (takes_short_rows) the short-row kernel (RowParams::stream_rows).
  bool stream_rows = false;
  // PerRow with row_items > 0: the register budget per thread of
  // KernelPlan::tight_name (0: no such kernel).
  int tight_registers = 0;
  // PerRow with row_items > 0: the elements each thread of
  // KernelPlan::wide_name holds (0: no such kernel).
  int wide_row_items = 0;
  // PerRow with row_items > 0: the threads per block of
  // KernelPlan::short_rows_name (0: no such kernel), which launches
  // blockDim.x threads per row (a power of two up to 32) and
  // short_row_block / blockDim.x rows per block (short_row_dims).
  int short_row_block = 0;
  // PerRow: when > 0, the main kernel writes outputs across its rows
  // (RowParams::across): a warp per row, this many rows per block
  // (blockDim.y), whatever the row's length.
  int across_rows = 0;
  // Elementwise, a tiled kernel over groups of dims (TiledParams::group_a):
  // the groups' inner dims, and the tile's side. A call whose every such
  // dim fills more than half a tile takes KernelPlan::ungrouped_name
  // (takes_ungrouped_tiles).
  std::vector<int> tile_group_dims;
  int tile = 0;
  // Elementwise with in-place windows (PointwiseLoop::window): per such
  // loop, its domain value, its window's dims and the fewest positions one
  // block iteration spans (block x the smaller of its vector and scalar
  // steps). A call whose window is longer (windows_fit, launch.h) runs the
  // kernel over copies of window_inputs (the task inputs those loops
  // update in place), made before it and released behind it.
  struct Window {
    int64_t domain_value = -1;
    std::vector<int> dims;
    int64_t span = 0;
  };
  std::vector<Window> windows;
  std::vector<int64_t> window_inputs;
  bool scan_block_per_line = false;  // Scan
  // Scan, a thread per line, when > 0: the single-pass kernel's elements
  // per warp (ScanParams::pass_rows); items_per_thread is then the lines
  // each lane owns, and scan_acc_bytes the size of its accumulator.
  int scan_pass_rows = 0;
  int scan_acc_bytes = 0;
  // ColumnReduce.
  int tile_cols = 0;
  // ColumnReduce with a one-kernel twin (KernelPlan::short_name): calls
  // with at most short_rows reduced rows (or columns enough to fill the
  // device: GridTargets::short_columns_blocks) launch it alone, grid
  // ceil(cols / short_tile_cols) of `block` threads, no scratch
  // (takes_short_columns, launch.h).
  int short_rows = 0;
  int short_tile_cols = 0;
  int accumulators = 0;  // words per split and column (the most of any phase)
  int result_words = 0;  // per column, kept for later kernels
  // PerRow, inner-outer.
  int outer_accumulators = 0;
  int threads_per_sm = 0;
  int finish_block = 256;
  int finish_cols = 32;  // columns per finishing block (its other threads split the partials)
  int extra_args = 0;  // words after the slots (scratch pointer, splits)
};

struct KernelPlan {
  std::string name;
  std::string source;  // every kernel of the plan in one text (what explain prints)
  // What NVRTC compiles: one unit per kernel (the prelude, the argument
  // struct and that kernel), so a segment's kernels compile as separate
  // programs in parallel and none waits for another's optimizer
  // (docs/perf-log.md, session 7: first call).
  struct Unit {
    std::string kernel;
    std::string source;
  };
  std::vector<Unit> units;
  // Index in `units` of the unit that defines `kernel` (KF_ERR_INTERNAL if none).
  size_t unit_of(const std::string& kernel) const;
  std::vector<ArgSlot> args;
  LaunchRule launch;
  std::string finish_name;  // ColumnReduce and inner-outer PerRow: the second kernel
  // PerRow with a vector plan: the kernel for rows longer than `name` holds
  // in registers (LaunchDims::long_rows says which to launch).
  std::string long_row_name;
  // PerRow with a vector plan: the main kernel's register path again under
  // launch.tight_registers (the main kernel has the 64 registers a
  // 1024-thread block allows), for the calls whose block fits more often on
  // a multiprocessor with fewer (takes_tight_registers).
  std::string tight_name;
  // PerRow with a vector plan and a staged long-row path: the register path
  // at launch.wide_row_items per thread, for rows too long for `name` that
  // the long-row kernel would stream (takes_wide_rows).
  std::string wide_name;
  // PerRow with RowParams::edge_vectors: the register path (edges_name)
  // and the long-row kernel (long_edges_name) again for rows of any length
  // and start (their aligned middle in vectors, head and tail per
  // element), for calls that fail the vector checks and pass `edge_checks`
  // (KernelVariant::Edges, LongEdges). The long one's staged rows take
  // edge_row_pad elements more than the row (LaunchRule::row_stage_pad).
  // In an inner-outer plan the register one keeps its column partials in
  // shared memory, edge_partial_bytes per row element
  // (LaunchRule::row_partial_bytes).
  std::string edges_name;
  std::string long_edges_name;
  // PerRow (LaunchRule::cluster_max): the long-row kernel with each row
  // shared by the blocks of a thread-block cluster, launched with clusters
  // of cluster_blocks (launch.h) blocks.
  std::string cluster_name;
  // ColumnReduce (LaunchRule::short_rows): the column reduction in one
  // kernel, each thread looping over all the rows of its columns and
  // storing their outputs; its scalar twin in scalar_twins.
  std::string short_name;
  // PerRow with a register path (no outer reductions): the
  // register path with several rows per block, for rows that need at most
  // a warp at row_items per thread (takes_short_rows). It reads the vectors
  // the main kernel reads: the same vector_checks.
  std::string short_rows_name;
  // Elementwise, tiled over groups of dims: the same tiles over single
  // dims (no unravelling), for calls whose groups' inner dims fill tiles
  // alone (LaunchRule::tile_group_dims).
  std::string ungrouped_name;
  std::vector<ArgCheck> edge_checks;
  int edge_row_pad = 0;
  int edge_partial_bytes = 0;
  // ColumnReduce: the kernels after name and finish_name, in launch order:
  // a (partials, finish) pair per later phase, on the first kernel's grid
  // and the finishing grid, then the epilogue, on the epilogue grid (its
  // blocks split the reduced rows gridDim.y ways).
  struct LaterKernel {
    enum class Grid : uint8_t { Partials, Finish, Epilogue };
    std::string name;
    Grid grid = Grid::Partials;
  };
  std::vector<LaterKernel> later;
  // ColumnReduce and PerRow's main kernel: kernels with a 16-byte vector
  // path, each with a scalar twin for the calls whose tensors do not allow
  // it (alignment, strides, sizes). A call launches the twins when any of
  // vector_checks fails; they are compiled the first time a call needs them
  // (the fallback is a third to a half of such a kernel's compile time:
  // docs/perf-log.md, session 14).
  struct ScalarTwin {
    std::string kernel, scalar;
  };
  std::vector<ScalarTwin> scalar_twins;
  std::vector<ArgCheck> vector_checks;
  // The scalar twin of `kernel`, or `kernel` when it has none.
  const std::string& scalar_of(const std::string& kernel) const;
  // PerRow: the split-row kernels (0 or 1 plan of kind SplitRows), in a
  // source of their own, compiled the first time a call needs them.
  std::vector<KernelPlan> split_rows;
  // Scatter: which kernels the plan has (empty: none) and the values the
  // launch sizes them by. `name` is the copy of the input.
  // The sorted path's chunk: runs of equal keys are combined in pieces of
  // at most this many positions (emit_scatter.cpp).
  static constexpr int kScatterSortedChunk = 128;
  struct ScatterKernels {
    int64_t index = -1, output = -1;
    int64_t self = -1;  // the tensor scattered into (the expr's first input)
    size_t dim = 0;
    size_t index_dim = 0;  // slices: the index's dim holding a slice's position (ScatterParams)
    bool slices = false, counts = false;  // counts: int per result element in scratch (atomic mean)
    // > 0: both paths compiled; calls whose slices are narrower, or whose
    // updates average more per slice of the result, take the atomic one
    int sorted_min_width = 0;
    int sorted_max_run = 0;
    int lanes = 1;  // sorted path: slice elements per thread
    int update_unroll = 1;  // atomic path: updates per thread and step (ScatterParams)
    std::string clear, update, mean;       // atomic path
    std::string keys, sort_block, sort_global, apply, combine;  // sorted path
  };
  ScatterKernels scatter;
  SchedulerKind scheduler = SchedulerKind::Pointwise;
};

// Emits the kernel(s) of `task` exactly as `schedule` says (codegen makes
// no decision of its own; core/schedule/registry.h chooses schedules).
// The schedule must have been proposed for this task and concrete fusion.
KernelPlan emit_kernel(const ConcreteFusion& c, const Task& task, const KernelSchedule& schedule);

// The kernel of a generated segment (emit_kernel of its task and stored
// schedule). Throws kf::Error(KF_ERR_UNSUPPORTED, reason) for a segment
// that has no schedule.
KernelPlan emit_segment_kernel(const ConcreteFusion& c, const Segment& segment);

}  // namespace kf
