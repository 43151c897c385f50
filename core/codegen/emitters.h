// The kernel families' emitters, one file each. Each writes the body of
// its kernel(s) into a KernelWriter exactly as the schedule says;
// kernel_source.cpp wraps the bodies into a translation unit.
#pragma once

#include "core/codegen/kernel_writer.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

void emit_pointwise(KernelWriter& w, const Task& task, const PointwiseParams& p);  // emit_pointwise.cpp
void emit_tiled(KernelWriter& w, const TiledParams& p);                           // emit_tiled.cpp
// Row kernels come in two: Main holds the row in registers (or streams it
// when the vector conditions fail); with a vector plan, LongRows runs rows
// longer than the registers hold (staged in shared memory, or streamed in
// 16-byte steps). Two kernels, so that the long-row paths' registers do
// not lower the main kernel's occupancy or make it spill.
enum class RowKernel { Main, LongRows };
void emit_row(KernelWriter& w, const Task& task, const RowParams& p, RowKernel which);  // emit_row.cpp
bool has_long_row_kernel(const RowParams& p);
// Bytes of dynamic shared memory per row element of the staged path (0:
// the kernel has none): LaunchRule::row_stage_bytes.
int row_stage_bytes(const Fusion& f, const RowParams& p);
// emit_column.cpp: kernel 1 (partials) and kernel 2 (finish); both read
// args.scratch and args.splits.
void emit_column_partials(KernelWriter& w, const ColumnParams& p);
void emit_column_finish(KernelWriter& w, const ColumnParams& p);

}  // namespace kf
