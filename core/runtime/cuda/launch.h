// From a KernelPlan and the tensors of one call to what cuLaunchKernel
// takes: the argument block and the grid. Pure host code (tested without
// a GPU).
#pragma once

#include <cstdint>
#include <vector>

#include <dlpack/dlpack.h>

#include "core/codegen/kernel_plan.h"
#include "core/concretize/shape_inference.h"

namespace kf::cuda {

// Where each argument slot of a plan reads from, resolved once per segment.
struct SlotSource {
  enum class From : uint8_t { Input, Output, Sizes, Constant };
  From from = From::Sizes;
  size_t index = 0;      // Input/Output: position in task.inputs/outputs
  int64_t value = 0;     // Sizes: value id whose sizes are read
  int64_t constant = 0;  // Constant: the slot's value
};

std::vector<SlotSource> resolve_slots(const Fusion& f, const Task& task, const std::vector<ArgSlot>& slots);

// Fills args[k] for every slot (see kernel_plan.h for the encoding).
// sizes: this call's sizes of the segment's values. Throws
// KF_ERR_DEVICE_MISMATCH when a data slot points to pageable host memory.
void fill_arguments(const Fusion& f, const std::vector<ArgSlot>& slots,
                    const std::vector<SlotSource>& sources, const ValueSizes& sizes,
                    const DLTensor* const* inputs, DLTensor* const* outputs, int64_t* args);

struct LaunchDims {
  uint32_t grid = 0;  // 0: nothing to do (an empty domain)
  uint32_t block = 0;
  uint32_t block_y = 1;  // the short-row kernel: rows per block (short_row_dims)
  uint32_t shared_bytes = 0;
  // ColumnReduce: grid.y of the first kernel (the splits of the reduced
  // rows); inner-outer PerRow: 1. Both: the number of partials per column
  // (splits), the second kernel's grid, and the scratch they need.
  uint32_t grid_y = 1;
  // PerRow: rows longer than the main kernel holds in registers; launch
  // the plan's long_row_name kernel.
  bool long_rows = false;
  uint32_t splits = 0;
  // ColumnReduce with an epilogue: its grid.y (it writes, no partials, so
  // it splits the rows finer than the partials kernels).
  uint32_t epilogue_grid_y = 1;
  uint32_t finish_grid = 0;
  uint64_t scratch_bytes = 0;
  // ColumnReduce: the call takes the plan's one-kernel twin
  // (KernelPlan::short_name; takes_short_columns): grid of short tiles,
  // no splits, no scratch, nothing launched after it.
  bool short_columns = false;
};

// What launch_dims needs to know of the kernel as loaded (0: unknown).
struct KernelLimits {
  int64_t max_dynamic_shared = 0;  // dynamic shared memory it may use (staged row path)
  int registers = 0;               // per thread (of the long-row kernel; of the kernel when Elementwise or inner-outer)
};

// The sizes a launch is made for: rule.domain_value's, or among an
// Elementwise kernel's loops (LaunchRule::loop_domains) the one with the
// most elements. Every loop strides over the grid: a grid made for a
// [8192] loop ran a [8192, 50257] one on 4 blocks (GPT-2's cross-entropy:
// 28 ms, H200, perf-log session 37), and an empty first loop skipped the
// others.
std::span<const int64_t> launch_domain(const LaunchRule& rule, const ValueSizes& sizes);

// domain: this call's sizes of launch_domain; the device's grid limit
// and multiprocessor count. `cluster` > 1: a PerRow plan's cluster row
// kernel with that many blocks per row (cluster_blocks): each stages its
// part of the row, and the grid is a multiple of the cluster.
LaunchDims launch_dims(const LaunchRule& rule, std::span<const int64_t> domain, int max_grid_x, int multiprocessors,
                       const KernelLimits& limits = {}, int cluster = 0);

// The blocks per row (a power of two, at most rule.cluster_max) with which
// a PerRow call takes the plan's cluster row kernel (KernelPlan::
// cluster_name), or 0 where it should not: its rows are too long for the
// registers, and either too long to stage in half of `max_dynamic_shared`
// (one block per row would read them once per pass) or too few to give
// every multiprocessor two, or the rule asks for clusters wherever its rows
// are long (LaunchRule::cluster_stageable). The fewest blocks whose parts stage in a
// quarter of it (else half) and that give every multiprocessor a block.
int cluster_blocks(const LaunchRule& per_row, std::span<const int64_t> domain, int multiprocessors,
                   int64_t max_dynamic_shared);

// A staged part's elements: the most any block of a cluster of n takes
// (whole vectors of up to 16 elements).
inline int64_t cluster_part(int64_t row, int n) { return (row + n - 1) / n + 16; }

// Whether a PerRow plan's rows are too long for its registers this call
// (launch_dims sets LaunchDims::long_rows the same way).
bool takes_long_rows(const LaunchRule& per_row, std::span<const int64_t> domain);

// Whether a PerRow call's Edges kernel, with rule.row_partial_bytes of
// column partials per row element, fits `max_dynamic_shared` bytes.
bool edge_partials_fit(const LaunchRule& per_row, std::span<const int64_t> domain, int64_t max_dynamic_shared);

// Whether a PerRow call whose rows the registers hold is better launched
// with the plan's tight kernel (KernelPlan::tight_name): its budget lets at
// least 1.5x as many of this call's blocks reside on a multiprocessor as
// the main kernel's 64 registers do.
bool takes_tight_registers(const LaunchRule& per_row, std::span<const int64_t> domain);

// Whether a PerRow call takes the plan's short-row kernel
// (KernelPlan::short_rows_name): its rows need at most a warp of threads at
// row_items each, so that the main kernel would launch one warp per row.
bool takes_short_rows(const LaunchRule& per_row, std::span<const int64_t> domain);

// Whether an Elementwise call of a tiled kernel over groups of dims takes
// KernelPlan::ungrouped_name: each group's inner dim
// (LaunchRule::tile_group_dims) fills more than half a tile alone.
bool takes_ungrouped_tiles(const LaunchRule& rule, std::span<const int64_t> domain);

// The short-row kernel's launch: blockDim.x the threads per row (the
// fewest, a power of two, that hold it at row_items each), blockDim.y =
// short_row_block / blockDim.x rows per block, and blocks for every row
// (capped as launch_dims caps them; the kernel strides over the rest).
LaunchDims short_row_dims(const LaunchRule& per_row, std::span<const int64_t> domain, int max_grid_x);

// Whether a PerRow call is better launched with the plan's wide kernel
// (KernelPlan::wide_name): its rows are too long for the main kernel's
// registers, fit the wide kernel's, and are too long to stage in half of
// `max_dynamic_shared` (the device's opt-in limit), so the long-row kernel
// would stream them.
bool takes_wide_rows(const LaunchRule& per_row, std::span<const int64_t> domain, int64_t max_dynamic_shared);

// Whether every in-place window of an Elementwise plan (LaunchRule::windows)
// fits one block iteration for these sizes; where one does not, the kernel
// reads copies of rule.window_inputs.
bool windows_fit(const LaunchRule& rule, const ValueSizes& sizes);

// Whether a ColumnReduce call runs as the plan's one-kernel twin
// (KernelPlan::short_name): the plan has one and the call's reduced rows
// are at most rule.short_rows (none too: the twin writes the identities),
// or its columns alone fill the device (GridTargets::short_columns_blocks).
bool takes_short_columns(const LaunchRule& column, std::span<const int64_t> domain);

// Whether a PerRow plan's split-row kernels (KernelPlan::split_rows)
// should run this call instead: rows too long for the block's registers
// (or, without a register plan, longer than 16 elements per thread) and
// fewer than two per multiprocessor, so one block per row would leave the
// device mostly idle (docs/perf-log.md: group norm; a whole-tensor mean).
bool prefer_split_rows(const LaunchRule& per_row, std::span<const int64_t> domain, int multiprocessors);

}  // namespace kf::cuda
