// Library segments (one matmul or linear, or a matmul pattern: matmul or
// linear + bias + relu/gelu_tanh) on the GPU: the segment's tensors are
// checked, planned (core/runtime/gemm_layout.h) and run through cuBLASLt
// (cublaslt.h). See docs/cuda-runtime.md, "Library segments", for what is
// supported and what is rejected.
#pragma once

#include <cstddef>

#include <dlpack/dlpack.h>

#include "core/concretize/concrete_fusion.h"
#include "core/runtime/backend.h"
#include "core/runtime/exec_options.h"
#include "core/segment/segmentation.h"

namespace kf::cuda {

// Runs library segment `index` of `s` on the caller's stream: its matmul
// or linear and, when the segment holds a matmul pattern (its nested Task),
// the pattern's bias and activation in the same cuBLASLt call (epilogue).
// Returns false, having written no output, when cuBLASLt cannot apply that
// activation (no algorithm for the epilogue, a bias that must be filled
// into D, K = 0), or for any pattern when $KFUSE_EPILOGUE_FALLBACK is on:
// the caller then runs run_library_product into a temporary and the rest of
// the pattern as a generated kernel. The caller has made the device's
// context current. `backend` (the CUDA backend) provides stream-ordered
// scratch memory and strided copies.
bool run_library_segment(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, DLTensor* const* outputs,
                         const ExecOptions& options);

// Runs only the product of library segment `index` (its matmul or linear,
// with linear's own bias) into `product`, a tensor of its shape and dtype.
void run_library_product(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, const DLTensor& product,
                         const ExecOptions& options);

}  // namespace kf::cuda
