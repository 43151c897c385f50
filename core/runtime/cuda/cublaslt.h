// Library segments (one matmul or linear) on the GPU through cuBLASLt.
// cuBLASLt is loaded with dlopen on first use (libcublasLt.so.13,
// libcublasLt.so, then both under $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64); kfuse never links it, so libkfuse still loads
// where it is missing and only library segments fail (KF_ERR_BACKEND).
//
// Semantics follow the CPU backend (torch.matmul, F.linear): fp32, fp16 and
// bf16 compute and accumulate in fp32 (CUBLAS_COMPUTE_32F: no TF32), fp64
// in fp64. See docs/cuda-runtime.md, "Library segments", for what is
// supported and what is rejected.
#pragma once

#include <cstddef>
#include <string>

#include <dlpack/dlpack.h>

#include "core/concretize/concrete_fusion.h"
#include "core/runtime/backend.h"
#include "core/runtime/exec_options.h"
#include "core/segment/segmentation.h"

namespace kf::cuda {

// Runs library segment `index` of `s` on the caller's stream. The caller
// has made the device's context current. `backend` (the CUDA backend)
// provides stream-ordered scratch memory and strided copies.
void run_library_segment(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, DLTensor* const* outputs,
                         const ExecOptions& options);

// Whether cuBLASLt can be loaded (and, if not, why), without throwing.
bool cublaslt_available(std::string* why = nullptr);

}  // namespace kf::cuda
