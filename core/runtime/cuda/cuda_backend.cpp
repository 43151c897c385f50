// The CUDA backend. Until code generation lands this backend only reports
// why it cannot run: no driver, or kernels not generated yet.
#include <dlfcn.h>

#include "core/runtime/backend.h"
#include "core/util/error.h"

namespace kf {

namespace {

[[noreturn]] void unavailable() {
  static void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr)
    fail(KF_ERR_NO_DEVICE, "no CUDA driver: libcuda.so.1 could not be loaded (kDLCUDA tensors need an NVIDIA driver)");
  fail(KF_ERR_UNSUPPORTED, "the CUDA backend cannot run fusions yet (code generation is not implemented)");
}

class CudaBackend final : public Backend {
 public:
  void* allocate(size_t, int, const ExecOptions&) override { unavailable(); }
  void release(void*, size_t, int, const ExecOptions&) override {}
  void run_segment(const ConcreteFusion&, const Segmentation&, size_t, const DLTensor* const*,
                   DLTensor* const*, const ExecOptions&) override {
    unavailable();
  }
  void copy(const DLTensor&, const DLTensor&, const ExecOptions&) override { unavailable(); }
};

}  // namespace

Backend& cuda_backend() {
  static CudaBackend backend;
  return backend;
}

}  // namespace kf
