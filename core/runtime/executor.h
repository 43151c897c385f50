// Runs a concrete fusion: segment after segment on the backend of its
// device, intermediates allocated through the backend and released after
// their last reader. Outputs are caller-provided (checked) tensors.
#pragma once

#include <dlpack/dlpack.h>

#include "core/concretize/concrete_fusion.h"
#include "core/runtime/exec_options.h"
#include "core/segment/segmentation.h"

namespace kf {

void execute(const ConcreteFusion& c, const Segmentation& s, const Binding& b,
             const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options);

// Runs one segment with tensors for its value inputs (task.inputs order) and
// outputs (task.outputs order); checks their ranks, dtypes and device.
void execute_segment(const ConcreteFusion& c, const Segmentation& s, size_t index,
                     const DLTensor* const* inputs, size_t num_inputs, DLTensor* const* outputs,
                     size_t num_outputs, const ExecOptions& options);

}  // namespace kf
