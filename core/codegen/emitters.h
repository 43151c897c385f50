// The kernel families' emitters, one file each. Each writes the body of
// its kernel(s) into a KernelWriter exactly as the schedule says;
// kernel_source.cpp wraps the bodies into a translation unit.
#pragma once

#include "core/codegen/kernel_writer.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

void emit_pointwise(KernelWriter& w, const Task& task, const PointwiseParams& p,
                    std::vector<ArgCheck>* checks = nullptr);  // emit_pointwise.cpp
void emit_tiled(KernelWriter& w, const TiledParams& p);                           // emit_tiled.cpp
// Row kernels come in two: Main holds the row in registers (or streams it
// when the vector conditions fail); with a vector plan, LongRows runs rows
// longer than the registers hold (staged in shared memory, or streamed in
// 16-byte steps). Two kernels, so that the long-row paths' registers do
// not lower the main kernel's occupancy or make it spill.
// Edges and LongEdges (RowKernels::edges, long_edges) are Main's register path (w.paths
// Vector) and LongRows for rows of any length and start
// (RowParams::edge_vectors): launched for calls whose rows fail the vector
// checks (an odd length), where the others would run one element at a time.
// In inner-outer plans Edges keeps its column partials in shared memory.
// Cluster (RowKernels::cluster) is LongRows with each row shared by the
// blocks of a thread-block cluster (sm_90): each stages and reduces its
// part, the blocks' values combine over the cluster, so a row too long for
// one block's shared memory is still read once (docs/perf-log.md, session 22).
enum class RowKernel { Main, LongRows, Edges, LongEdges, Cluster, ShortRows };
// emit_row.cpp. Main with a vector plan: w.paths picks the register path,
// the streaming one or both; `checks` (when not null) receives the register
// path's conditions for the host. ShortRows: the register path alone
// (w.paths Vector) with several rows per block, blockDim.x threads per row
// and blockDim.y rows (RowKernels::short_rows_block).
void emit_row(KernelWriter& w, const Task& task, const RowParams& p, RowKernel which,
              std::vector<ArgCheck>* checks = nullptr);
// Bytes of dynamic shared memory per row element of the staged path (0:
// the kernel has none): LaunchRule::row_stage_bytes.
int row_stage_bytes(const Fusion& f, const RowParams& p);
// Bytes of dynamic shared memory per row element of the Edges kernel's
// column partials (inner-outer plans; 0: none): LaunchRule::row_partial_bytes.
int row_partial_bytes(const Fusion& f, const RowParams& p);
// emit_column.cpp: per phase, kernel 1 (partials) and kernel 2 (finish);
// then, when column_epilogue, the epilogue (emit_column_partials with
// phase = the number of phases). All read args.scratch and args.splits.
// w.paths picks the paths written; `checks` (when not null) receives the
// vector path's conditions for the host.
void emit_column_partials(KernelWriter& w, const ColumnParams& p, size_t phase = 0,
                          std::vector<ArgCheck>* checks = nullptr);
void emit_column_finish(KernelWriter& w, const ColumnParams& p, size_t phase = 0);
// The one-kernel twin of a plan with ColumnParams::short_rows: grid
// ceil(cols / short_twin().tile_cols()), every thread reducing all rows of
// its columns and writing the outputs; reads no scratch. w.paths and
// `checks` as for emit_column_partials (the same vector plan).
void emit_column_short(KernelWriter& w, const ColumnParams& p, std::vector<ArgCheck>* checks = nullptr);
// Whether the domain-shaped outputs wait for the results (a normalization:
// a kernel after the last phase writes them).
bool column_epilogue(const ColumnParams& p);
// emit_split_row.cpp: rows too long for one block and too few to fill the
// device, split over blocks: per phase, the partials kernel (grid: rows x
// splits) then emit_column_finish; the epilogue is the partials kernel
// with phase = the number of phases. LaunchDims::split_rows says when.
void emit_split_row(KernelWriter& w, const RowParams& p, size_t phase);
// The column finish for the rows of `p` (the same kernels serve both).
ColumnParams split_row_finish(const RowParams& p);

// emit_scatter.cpp: the kernels of a ScatterParams, one per function, in
// launch order (copy; atomic path: clear, update, mean; sorted path: keys,
// sort_block, sort_global, apply, combine); scatter_helpers goes before them.
void emit_scatter_copy(KernelWriter& w, const ScatterParams& p);
void emit_scatter_clear(KernelWriter& w, const ScatterParams& p);
void emit_scatter_update(KernelWriter& w, const ScatterParams& p);
void emit_scatter_mean(KernelWriter& w, const ScatterParams& p);
void emit_scatter_keys(KernelWriter& w, const ScatterParams& p);
void emit_scatter_sort_block(KernelWriter& w, const ScatterParams& p);
void emit_scatter_sort_global(KernelWriter& w, const ScatterParams& p);
void emit_scatter_apply(KernelWriter& w, const ScatterParams& p);
void emit_scatter_combine(KernelWriter& w, const ScatterParams& p);
std::string_view scatter_helpers();
// emit_scan.cpp: the scan kernel, and the helpers its unit needs (the
// combining functor and the block scan) to go before it.
void emit_scan(KernelWriter& w, const ScanParams& p);
void emit_scan_partials(KernelWriter& w, const ScanParams& p);
void emit_scan_carry(KernelWriter& w, const ScanParams& p);
std::string scan_helpers(const KernelWriter& w, const ScanParams& p);

}  // namespace kf
