// Runs a plan: segment after segment on the backend of its
// device, intermediates allocated through the backend and released after
// their last reader. Outputs are caller-provided (checked) tensors.
#pragma once

#include <dlpack/dlpack.h>

#include "core/pipeline/plan.h"
#include "core/runtime/exec_options.h"

namespace kf {

// `b` is the call's binding (of plan's class).
void execute(const Plan& plan, const Binding& b, const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options);

// Runs one segment with tensors for its value inputs (task.inputs order) and
// outputs (task.outputs order); checks them as kf_execute and
// kf_execute_into check a fusion's inputs and outputs.
// The sizes of output `output` of segment `index` for these value inputs
// (checked as execute_segment checks them).
void segment_output_shape(const Plan& plan, size_t index, const DLTensor* const* inputs, size_t num_inputs,
                          size_t output, int64_t* shape, size_t rank);

// Makes what the plan's first run with `b` would make before it launches
// (compiled and loaded kernels), without running anything (kf_fusion_prepare);
// and whether that is done (kf_fusion_is_ready).
void prepare(const Plan& plan, const Binding& b);
bool prepared(const Plan& plan);

void execute_segment(const Plan& plan, size_t index,
                     const DLTensor* const* inputs, size_t num_inputs, DLTensor* const* outputs,
                     size_t num_outputs, const ExecOptions& options);

}  // namespace kf
