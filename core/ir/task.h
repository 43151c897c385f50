// A Task is a view of part of one Fusion: a set of its exprs (in a valid
// run order) with the values it reads from outside and the values it hands
// out. The whole fusion is the root Task, a segment is a Task, and a
// recognized pattern inside a segment is a child Task (so far: a library
// segment's matmul pattern, core/segment/matmul_pattern.h, which a backend
// may run as one library call). Nothing here copies IR: schedulers and
// codegen analyse a Task against its Fusion.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

struct Task {
  std::vector<int64_t> exprs;    // expr indices, in run order
  std::vector<int64_t> inputs;   // value ids read from outside (constants excluded)
  std::vector<int64_t> outputs;  // value ids used outside or fusion outputs
  std::vector<Task> children;    // recognized patterns nested in this task
};

// Builds a Task from a set of exprs: inputs are the non-constant values
// they read but do not produce; outputs the values they produce for which
// used_outside(id) holds (fusion outputs, values read outside the set) and
// that an output or a live expr outside the set needs
// (Fusion::needed_outside: dead exprs never run).
// Costs O(size of the set), not of the fusion: segmentation builds many.
Task make_task(const Fusion& fusion, std::vector<int64_t> exprs,
               const std::function<bool(int64_t)>& used_outside);

// The root task: every expr of the fusion.
Task root_task(const Fusion& fusion);

}  // namespace kf
