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
// it writes. Three families qualify: the pointwise kernel of one loop (each
// thread loads every operand of its elements before it stores any of them),
// the tiled kernel (a tile's reads precede the barrier before its stores,
// or are in the storing thread; an input that a phase-1 output overwrites
// qualifies only where phase 2 reads it from its tile alone:
// tiles_overwritten_in_phase_1), and the row
// kernels without outer reductions or reshaped outputs (every
// phase reads the row before a barrier; the last pass reads and writes each
// element in one thread). An input qualifies when every read of it is at
// the identity index of the kernel's domain, so it is read at exactly the
// elements the writing thread stores. Inputs read at another index (a
// flip, a permute, a broadcast, a slice) and every input of the other
// families (column and scan kernels: their blocks read elements
// other threads write) are left out. A scatter's kernels read the tensor
// they scatter into only where they write it (in_place.cpp): it qualifies.
std::vector<int64_t> inputs_read_where_written(const ConcreteFusion& c, const Task& task,
                                               const KernelSchedule& schedule);

// The tiled inputs (values) that an output of phase 1 (outputs_a) updates
// in place: the kernel fills every tile, then a barrier, then stores
// phase 1's outputs, so no thread's fill reads an element another thread
// already overwrote.
std::vector<int64_t> tiles_overwritten_in_phase_1(const ConcreteFusion& c, const TiledParams& t);

}  // namespace kf
