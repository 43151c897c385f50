// Which task inputs a kernel may overwrite while it runs: those it reads
// only at the element it writes, in the thread that writes it, before it
// writes it. An output that updates such an input in place (alias_input)
// is then written straight into the input's memory; for any other input
// the run plan writes an intermediate and copies it at the end
// (core/segment/run_plan.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/ir/task.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

// Task inputs (ids) of `task` that a kernel of `schedule` reads only where
// it writes. Three families qualify: the pointwise kernel (each thread
// loads every operand of its elements before it stores any of them),
// the tiled kernel (a tile's reads precede the barrier before its stores,
// or are in the storing thread; an input that a phase-1 output overwrites
// qualifies only where phase 2 reads it from its tile alone:
// tiles_overwritten_in_phase_1), and the row
// kernels without outer reductions or reshaped outputs (every
// phase reads the row before a barrier; the last pass reads and writes each
// element in one thread). An input qualifies when every read of it is at
// the identity index of the kernel's domain, so it is read at exactly the
// elements the writing thread stores, or, in a pointwise loop with an
// in-place window (PointwiseLoop::window), inside the window of the
// element it stores. A pointwise kernel of several loops (each runs over
// its whole domain before the next) qualifies an input that one loop reads
// and whose in-place outputs are all in that loop, where the schedule
// says so (PointwiseParams::in_place_loops). Inputs read at another
// index (a flip, a permute, a broadcast, a slice) and every input of the other
// families (column and scan kernels: their blocks read elements
// other threads write) are left out. A scatter's kernels read the tensor
// they scatter into only where they write it (in_place.cpp): it qualifies.
std::vector<int64_t> inputs_read_where_written(const ConcreteFusion& c, const Task& task,
                                               const KernelSchedule& schedule);

// The in-place window a pointwise loop needs (PointwiseLoop::window): the
// fewest of its innermost dims in `loop.order` that hold every read of an
// input one of its outputs updates in place, off the element written
// there (a rotary embedding's other half: 1, the head dim); 0 where all
// such reads are at that element, -1 where one leaves every window (reads
// another row, or a dim that is not a suffix of the order).
int in_place_window(const ConcreteFusion& c, const Task& task, const PointwiseLoop& loop);

// The tiled inputs (values) that an output of phase 1 (outputs_a) updates
// in place: the kernel fills every tile, then a barrier, then stores
// phase 1's outputs, so no thread's fill reads an element another thread
// already overwrote.
std::vector<int64_t> tiles_overwritten_in_phase_1(const ConcreteFusion& c, const TiledParams& t);

}  // namespace kf
