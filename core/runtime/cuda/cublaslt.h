// cuBLASLt, loaded with dlopen on first use (where: dynlib.h); kfuse never
// links it, so libkfuse still loads where it is missing and only library
// segments fail (KF_ERR_BACKEND). It runs the GEMM layout plans of
// core/runtime/gemm_layout.h: one handle per device, the heuristic's choice
// cached per problem, calls enqueued on the caller's stream.
//
// Precision follows the CPU backend (torch.matmul, F.linear): fp32, fp16
// and bf16 compute and accumulate in fp32 (CUBLAS_COMPUTE_32F: no TF32),
// fp64 in fp64; the epilogue adds the bias and applies the activation
// before the one rounding, where the CPU rounds after every op
// (docs/semantics.md). See docs/cuda-runtime.md, "Library segments".
#pragma once

#include <string>

#include "core/ir/dtype.h"
#include "core/runtime/backend.h"
#include "core/runtime/exec_options.h"
#include "core/runtime/gemm_layout.h"
#include "core/segment/matmul_pattern.h"

namespace kf::cuda {

// Carries out `plan` (plan_gemm(in)) for the tensors of `in`, elements of
// `dtype` (float32, float16, bfloat16 or float64), with `activation` in the
// epilogue, on options.stream. Returns false, having written nothing to the
// output, when the plan is Unfused or cuBLASLt has no algorithm for the
// activation's epilogue. The caller has made `device`'s context current;
// `backend` (the CUDA backend) provides stream-ordered scratch memory and
// strided copies.
bool cublaslt_gemm(const GemmPlan& plan, const GemmInputs& in, DType dtype, Activation activation,
                   Backend& backend, int device, const ExecOptions& options);

// Whether cuBLASLt can be loaded (and, if not, why), without throwing.
bool cublaslt_available(std::string* why = nullptr);

}  // namespace kf::cuda
