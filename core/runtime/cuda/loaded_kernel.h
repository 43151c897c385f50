// A generated segment's kernels as loaded on its device, and when each is
// compiled. A plan's kernels come in variants, and each call takes one by
// its sizes (kernel_variant): the main kernels, the long-row kernel of a
// row plan (rows too long for its registers) or its split-row plan (few
// rows, each too long for one block). A variant is compiled and loaded the
// first time a call takes it: the first run of a segmentation compiles,
// for all its segments at once on the compile pool, the variant each
// segment takes in that run, and nothing else (docs/perf-log.md, session 14:
// the first call waited for the long-row kernel it did not launch).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/concretize/shape_inference.h"
#include "core/ir/task.h"
#include "core/pipeline/plan.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/launch.h"
#include "core/runtime/cuda/segment_kernels.h"

namespace kf {

enum class KernelVariant : uint8_t {
  Main,       // plan.name, with finish_name and later
  LongRows,   // PerRow: plan.long_row_name, with finish_name
  Scalar,     // Main with the scalar twins of its kernels (plan.scalar_twins)
  SplitRows,  // PerRow: plan.split_rows[0] (its Main variant)
  Tight,      // PerRow: plan.tight_name (takes_tight_registers)
  Wide,       // PerRow: plan.wide_name (takes_wide_rows)
  Edges,      // PerRow: plan.edges_name (edge_kernel_fits, rows the registers hold)
  LongEdges,  // PerRow: plan.long_edges_name (edge_kernel_fits, longer rows)
  Cluster,    // PerRow: plan.cluster_name (cluster_blocks > 0 on an sm_90 device)
  ShortRows,  // PerRow: plan.short_rows_name (takes_short_rows)
  ShortRowsScalar,  // PerRow: its scalar twin, for short rows that fail the vector checks
  Ungrouped,  // Elementwise, tiled over groups: plan.ungrouped_name (takes_ungrouped_tiles)
  // Scatter with both paths (ScatterKernels::sorted_min_width): plan.name
  // with the atomic path's later kernels, for calls that do not take the
  // sorted one (Main then loads the sorted path's only), so a first call
  // compiles one path.
  ScatterAtomic,
  // ColumnReduce with few reduced rows (takes_short_columns):
  // plan.short_name alone, or its scalar twin for calls that fail the
  // vector checks.
  ShortColumns,
  ShortColumnsScalar,
};

// The blocks per row of a call that takes `plan`'s cluster row kernel on
// `device` (sm_90 or newer), or 0.
int cluster_blocks_on(const KernelPlan& plan, std::span<const int64_t> domain, const cuda::DeviceInfo& device);

// The variant a call with `sizes` launches on `device`,
// before its argument words are known: Main, Tight and ShortRows stand for themselves
// or Scalar, Edges or LongEdges (vector_checks_fail decides with the words), Wide for itself
// or LongRows, and Tight for Main where the tight kernel spills
// (LoadedKernel::tight_spills).
KernelVariant kernel_variant(const KernelPlan& plan, const ValueSizes& sizes, const cuda::DeviceInfo& device);
// Whether a call with argument words `args` fails a vector check of a plan
// that has kernels for such calls (scalar twins, Edges kernels).
bool vector_checks_fail(const KernelPlan& plan, const int64_t* args);
// Whether a call with argument words `args` that fails the vector checks
// takes an Edges kernel: the plan has them and their checks hold.
bool edge_kernel_fits(const KernelPlan& plan, const int64_t* args);
// The Edges kernel that stands for vector variant `v` (Main: the register
// path, unless its column partials would not fit the device's shared
// memory; ShortRows: the register path, or its own scalar twin where the
// plan has no Edges kernel; Tight, Wide, LongRows: the long-row one).
KernelVariant edges_variant(const KernelPlan& plan, KernelVariant v, const ValueSizes& sizes,
                            const cuda::DeviceInfo& device);
// The variant of a plan with scalar twins that stands for vector variant
// `v` when the call fails the vector checks: ShortColumns' and ShortRows'
// own twins for them, else Scalar (Main's twins).
KernelVariant scalar_variant(KernelVariant v);
// Whether variant `v` runs vectors that a call's tensors may fail (Main,
// Tight, Wide, LongRows, Cluster, ShortColumns, ShortRows).
bool is_vector_variant(KernelVariant v);
// The variant a call launches for kernel_variant's `v` once its argument
// words `args` are known: `v` where the vector checks hold (or the plan
// has no kernels for calls that fail them: an inner-outer plan runs its
// kernels' own fallback paths); else the Edges kernel where its own checks
// hold (edges_variant), else the scalar twins (scalar_variant); Wide
// gives way to the long-row kernel, and LongRows and Cluster stay (their
// own scalar paths run).
KernelVariant call_variant(const KernelPlan& plan, KernelVariant v, const ValueSizes& sizes,
                           const cuda::DeviceInfo& device, const int64_t* args);

// The most local memory per thread (spills) with which a tight kernel is
// still launched. Measured (H100, docs/perf-log.md session 15): softmax's at
// 48 registers keeps 32 bytes and runs 1.4x faster where its block fits
// twice; dropout + residual + layernorm's keeps about 200 and runs 2x slower.
constexpr int kTightSpillBytes = 64;

struct LoadedKernel {
  KernelPlan plan;
  std::vector<cuda::SlotSource> sources;
  int device = 0;
  // Set when a variant that launches them is loaded; read only after
  // variant() has returned for that variant.
  CUfunction function = nullptr;  // Main
  CUfunction long_row = nullptr;  // LongRows
  CUfunction finish = nullptr;    // ColumnReduce and inner-outer PerRow: the finishing kernel
  // ColumnReduce, SplitRows, Scatter, Scan: plan.later's kernels, by index
  // (a scatter with both paths: null for the path not loaded)
  std::vector<CUfunction> later;
  CUfunction scalar = nullptr;    // Scalar: the twin of `function`
  CUfunction tight = nullptr;     // Tight
  CUfunction wide = nullptr;      // Wide
  LaunchRule wide_launch;         // Wide: plan.launch with its row items
  CUfunction edges = nullptr;       // Edges
  LaunchRule edges_launch;          // Edges: plan.launch with its column partials (plan.edge_partial_bytes)
  cuda::KernelLimits edges_limits;  // Edges: opted in to the shared memory its partials take
  CUfunction long_edges = nullptr;  // LongEdges
  LaunchRule long_edges_launch;     // LongEdges: plan.launch, every row long, stages padded
  cuda::KernelLimits long_edges_limits;  // LongEdges: for its block and stage
  // Tight: ptxas kept more than kTightSpillBytes per thread in local
  // memory for it; the call launches Main instead.
  bool tight_spills = false;
  std::vector<CUfunction> scalar_later;  // Scalar: plan.later's kernels or their twins
  cuda::KernelLimits limits;       // Main, Elementwise or inner-outer: for its waves
  cuda::KernelLimits long_limits;  // LongRows: for its block and stage
  CUfunction short_columns = nullptr;  // Short
  CUfunction short_scalar = nullptr;   // ShortScalar
  CUfunction cluster = nullptr;       // Cluster
  CUfunction short_rows = nullptr;    // ShortRows
  CUfunction short_rows_scalar = nullptr;  // ShortRowsScalar
  CUfunction ungrouped = nullptr;     // Ungrouped
  cuda::KernelLimits ungrouped_limits;  // Ungrouped: for its waves
  cuda::KernelLimits cluster_limits;  // Cluster: for its block and stage
  std::unique_ptr<LoadedKernel> split;  // PerRow with plan.split_rows: that plan
  int64_t product = -1;  // a matmul pattern's epilogue: the product, an input of `task`
  Task task;             // a matmul pattern's epilogue: what the kernel computes

  // The kernel to launch for variant `v` (*split for SplitRows), compiled
  // (on the compile pool) and loaded on first need. Thread-safe; after the
  // first time, one atomic load.
  const LoadedKernel& variant(KernelVariant v) const;

  // The kernel names variant `v` of this plan launches (SplitRows: none of
  // this plan's; see `split`).
  std::vector<std::string> kernels_of(KernelVariant v) const;
  // Loads variant `v` (not SplitRows) from `units`, compiled for
  // kernels_of(v) (images absent for kernels loaded already); marks it loaded.
  void load(KernelVariant v, const cuda::CompiledUnits& units);

 private:
  mutable std::mutex mutex_;               // held while a variant loads
  mutable std::atomic<bool> loaded_[14]{};  // Main, LongRows, Scalar, Tight, Wide, Edges, LongEdges, Cluster, ScatterAtomic,
                                            // Short, ShortScalar, ShortRows, Ungrouped
};

// The kernel of generated segment `index`. The first call of a
// segmentation makes every segment's plan and compiles and loads the
// variant each takes with `sizes` (a segment whose sizes
// `sizes` does not carry, as in kf_execute_segment, takes that of empty
// sizes: its main kernels).
const LoadedKernel& loaded_segment(const Plan& p, size_t index, const ValueSizes& sizes);

// What loaded_segment does on a segmentation's first call, for every
// segment at once (kf_fusion_prepare); and whether every generated
// segment's kernel is loaded (kf_fusion_is_ready).
void load_segments(const Plan& p, const ValueSizes& sizes);
bool segments_loaded(const Plan& p);

// The kernel of a matmul pattern's epilogue (bias, casts, activation),
// for a library segment that cuBLASLt cannot run as one call: generated
// and loaded on first use, kept in the segment's slot.
const LoadedKernel& loaded_pattern_kernel(const Plan& plan, size_t index);

}  // namespace kf
