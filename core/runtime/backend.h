// A backend runs segments on one kind of device. The executor is the same
// for every backend: it walks the segments in run order, binds each
// segment's inputs and outputs to DLTensors (fusion inputs, fusion outputs,
// or intermediates it allocates through the backend), and asks the backend
// to run the segment. kf_execute_segment calls run_segment directly.
#pragma once

#include <cstddef>

#include <dlpack/dlpack.h>

#include "core/pipeline/plan.h"
#include "core/runtime/exec_options.h"

namespace kf {

class Backend {
 public:
  virtual ~Backend() = default;
  // Memory for outputs and intermediates (stream-ordered on GPUs).
  virtual void* allocate(size_t bytes, int device, const ExecOptions& options) = 0;
  virtual void release(void* ptr, size_t bytes, int device, const ExecOptions& options) = 0;
  // Runs segment `index` of plan.segmentation. inputs: one tensor per task.inputs entry (0-dim CPU tensors for
  // scalars); outputs: one per task.outputs entry; sizes: this call's sizes
  // of (at least) every value of the segment. Shapes are checked by the
  // caller; the backend may assume they agree with the segment.
  virtual void run_segment(const Plan& plan, size_t index, const ValueSizes& sizes, const DLTensor* const* inputs,
                           DLTensor* const* outputs, const ExecOptions& options) = 0;
  // dst = src, same sizes and dtype, any strides.
  virtual void copy(const DLTensor& src, const DLTensor& dst, const ExecOptions& options) = 0;
  // Makes whatever the plan's first run with `sizes` would make before it
  // can launch (the CUDA backend: every segment's kernels, compiled and
  // loaded), without running anything; and whether that is done. The CPU
  // backend needs nothing.
  virtual void prepare(const Plan& /*plan*/, const ValueSizes& /*sizes*/) {}
  virtual bool prepared(const Plan& /*plan*/) const { return true; }
};

Backend& cpu_backend();
// Throws KF_ERR_NO_DEVICE when no CUDA driver or device is available.
Backend& cuda_backend();
Backend& backend_for(DeviceKind kind);

}  // namespace kf
