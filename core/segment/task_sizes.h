// Sizes of every value of a Task for one call, from the sizes of the tensors
// bound to its inputs (and the values of its scalar inputs). Used by
// backends that run a segment on its own (kf_execute_segment) and to fill
// kernel arguments.
#pragma once

#include <vector>

#include "core/concretize/input_meta.h"
#include "core/concretize/shape_inference.h"
#include "core/ir/task.h"

namespace kf {

// inputs: the checked metadata of one tensor per task.inputs entry
// (read_tensor; scalars: 0-dim CPU tensors, their values read). Writes the
// sizes of the task's values into `sizes` (values outside the task stay
// zero); reuses its storage.
void task_sizes(const Fusion& fusion, const Task& task, std::span<const InputMeta> inputs, ValueSizes* sizes);

}  // namespace kf
