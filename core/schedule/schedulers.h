// The schedulers, one file each: each takes a task the registry has
// already classified (pointwise or with reductions) and either returns its
// parameters or nullopt with the reason in `why` (optional). The registry
// (registry.h) tries them in order.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/kernel_schedule.h"
#include "core/schedule/tuning.h"
#include "core/ir/task.h"

namespace kf {

// Tuning's grid targets as a plan's (waves 0: the pointwise scheduler sets
// it where a kernel has several loops).
inline GridTargets grid_targets(const Tuning& t) {
  GridTargets g = t.grid;
  g.waves = 0;
  return g;
}

// pointwise.cpp: the task's outputs grouped by provably equal sizes.
std::vector<std::vector<int64_t>> pointwise_loops(const ConcreteFusion& c, const Task& task);
// pointwise.cpp: the dims of `dom` in its produced memory order, outermost
// first (logical order where none is known).
std::vector<size_t> loop_order(const ConcreteFusion& c, int64_t dom);
// pointwise.cpp: grid-stride loops in the outputs' memory order, 16-byte
// vectors along their innermost dim.
PointwiseParams schedule_pointwise(const ConcreteFusion& c, const Task& task, const Tuning& tuning);
// transpose.cpp: one loop some of whose inputs are contiguous along
// another dim than the outputs' innermost (read through a permute, or
// passed in another layout).
std::optional<TiledParams> schedule_tiled(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                          std::string* why);
// transpose.cpp: whether the outputs of one of the task's loops
// (pointwise_loops), with the exprs they need, would take tiles as a task
// of their own while the whole task has several loops (which tiles never
// take): the pointwise scheduler then declines, so that the segmenter
// keeps that loop in a segment of its own.
bool a_loop_takes_tiles(const ConcreteFusion& c, const Task& task, const Tuning& tuning);
// column_reduction.cpp: one phase of plain reductions, the innermost dim
// kept, no domain-shaped output reading a reduction result.
std::optional<ColumnParams> schedule_column(const ConcreteFusion& c, const Task& task, const RowDomain& rows,
                                            const Tuning& tuning,
                                            std::string* why);
// inner_outer.cpp: row reductions plus column reductions over exactly the
// rows' kept dims (norm backward).
std::optional<RowParams> schedule_inner_outer(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                              std::string* why);
// scatter.cpp: a task of exactly one scatter or index_reduce.
std::optional<ScatterParams> schedule_scatter(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                              std::string* why);
// scan.cpp: a task of exactly one cumsum, cumprod or cummax and the
// producers its kernel computes inline.
std::optional<ScanParams> schedule_scan(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                        std::string* why);
// row_reduction.cpp: any rows (one block per row).
RowParams schedule_row(const ConcreteFusion& c, const Task& task, const RowDomain& rows, const Tuning& tuning);
// row_kernels.cpp: the kernels a finished row plan is compiled into
// besides its main one (RowParams::kernels; every other field set).
RowKernels plan_row_kernels(const RowParams& p, const Tuning& tuning);

}  // namespace kf
