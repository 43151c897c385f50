// The scheduler that takes a Task. The CPU backend runs any Task; the kind
// names the GPU scheduler that will generate its kernel, and is what the
// segment API reports.
#pragma once

#include <string_view>

#include "core/ir/task.h"

namespace kf {

class ConcreteFusion;

// Communication: a collective (or a rank's block) run by the call's
// communicator (core/runtime/comm), no kernel.
// Scatter: a scatter or index_reduce op, alone (core/schedule/scatter.cpp).
// Scan: a cumsum, cumprod or cummax, alone (core/schedule/scan.cpp).
enum class SchedulerKind : uint8_t { Pointwise, Reduction, Normalization, Library, NoOp, Communication, Scatter, Scan };

std::string_view scheduler_name(SchedulerKind kind);

// Which scheduler a Task needs: library for matmul/linear, normalization
// when a reduction's result meets its own input's domain again (softmax,
// layernorm), reduction for other reductions, pointwise otherwise, no-op
// for a task with no exprs.
SchedulerKind classify_task(const Fusion& fusion, const Task& task);

}  // namespace kf
