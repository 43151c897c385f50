// Sizes of every value of a Task for one call, from the sizes of the tensors
// bound to its inputs (and the values of its scalar inputs). Used by
// backends that run a segment on its own (kf_execute_segment) and to fill
// kernel arguments.
#pragma once

#include <vector>

#include <dlpack/dlpack.h>

#include "core/concretize/shape_inference.h"
#include "core/ir/task.h"

namespace kf {

// inputs: one DLTensor per task.inputs entry (scalars: 0-dim CPU tensors).
// Writes the sizes of the task's values into `sizes` (values outside the
// task stay zero); reuses its storage.
void task_sizes(const Fusion& fusion, const Task& task, const DLTensor* const* inputs, ValueSizes* sizes);

// Value of a 0-dim CPU tensor holding a scalar of `dtype`, as double.
double read_scalar(const DLTensor& t, DType dtype);

}  // namespace kf
