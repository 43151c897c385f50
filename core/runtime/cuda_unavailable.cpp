// The CUDA backend of a build without the CUDA toolkit headers (CMake's
// KFUSE_WITH_CUDA off): every use says so instead of failing obscurely.
#include "core/runtime/backend.h"
#include "core/util/error.h"

namespace kf {

Backend& cuda_backend() {
  fail(KF_ERR_NO_DEVICE,
       "kfuse was built without its CUDA backend (no CUDA toolkit headers at configure time): "
       "only kDLCPU tensors can run; rebuild with the toolkit (cuda.h, nvrtc.h, cublasLt.h) to run on a GPU");
}

}  // namespace kf
