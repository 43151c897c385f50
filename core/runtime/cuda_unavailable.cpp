// The CUDA backend of a build without the CUDA toolkit headers (CMake's
// KFUSE_WITH_CUDA off): every use says so instead of failing obscurely.
#include "core/runtime/backend.h"
#include "core/runtime/kernel_bundle.h"
#include "core/util/error.h"

namespace kf {

Backend& cuda_backend() {
  fail(KF_ERR_NO_DEVICE,
       "kfuse was built without its CUDA backend (no CUDA toolkit headers at configure time): "
       "only kDLCPU tensors can run; rebuild with the toolkit (cuda.h, nvrtc.h, cublasLt.h) to run on a GPU");
}

namespace {
[[noreturn]] void no_bundles() {
  fail(KF_ERR_UNSUPPORTED,
       "kfuse was built without its CUDA backend (no CUDA toolkit headers at configure time): "
       "kernel bundles hold CUDA kernels; rebuild with the toolkit (cuda.h, nvrtc.h, cublasLt.h)");
}
}  // namespace

// A bundle cannot be made without the CUDA backend, so the others are
// never reached with one (each says why all the same).
std::shared_ptr<KernelBundle> make_kernel_bundle(int) { no_bundles(); }
void bundle_add_plan(KernelBundle&, const Plan&) { no_bundles(); }
size_t bundle_kernel_count(const KernelBundle&) { no_bundles(); }
int bundle_sm(const KernelBundle&) { no_bundles(); }
void save_kernel_bundle(const KernelBundle&, const std::string&) { no_bundles(); }
size_t load_kernel_bundle(const std::string&, int) { no_bundles(); }

}  // namespace kf
