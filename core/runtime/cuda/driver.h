// The CUDA driver, loaded with dlopen("libcuda.so.1") on first use (kfuse
// never links libcuda, so libkfuse loads on machines without a GPU). The
// entry points come from cuGetProcAddress at the CUDA_VERSION of the
// headers we compile against, with legacy default-stream semantics, so a
// NULL stream is the legacy default stream.
//
// driver() throws kf::Error(KF_ERR_NO_DEVICE) when the library is missing,
// is the toolkit's stub, or finds no device; the outcome of the first
// attempt is remembered, so later calls fail fast with the same message.
#pragma once

#include <cuda.h>

#include <string>

namespace kf::cuda {

// X(name): every driver function kfuse calls. The member is `name` with
// a trailing underscore and has the type of the header's prototype (which
// follows the header's _v2 renames).
#define KF_CUDA_DRIVER_FUNCTIONS(X)                                              \
  X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetAttribute) \
  X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) X(cuCtxGetCurrent)              \
  X(cuModuleLoadData) X(cuModuleGetFunction) X(cuFuncSetAttribute) X(cuFuncGetAttribute) \
  X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemAlloc) X(cuMemFree) \
  X(cuMemPoolCreate) X(cuMemPoolSetAttribute) X(cuMemAllocFromPoolAsync)          \
  X(cuMemcpyAsync) X(cuMemcpyHtoDAsync) X(cuMemsetD32Async) X(cuStreamSynchronize)  \
  X(cuGetErrorName) X(cuGetErrorString)

struct Driver {
#define KF_CUDA_DRIVER_MEMBER(name) decltype(&::name) name##_ = nullptr;
  KF_CUDA_DRIVER_FUNCTIONS(KF_CUDA_DRIVER_MEMBER)
#undef KF_CUDA_DRIVER_MEMBER
  int version = 0;       // cuDriverGetVersion: 13000 for CUDA 13.0
  int device_count = 0;  // > 0
};

// The loaded and initialized driver (thread-safe).
const Driver& driver();

// Whether driver() would succeed, without throwing.
bool driver_available(std::string* why = nullptr);

// "name: CUDA_ERROR_X (text)" for messages.
std::string describe_result(const char* function, CUresult r);

// Throws KF_ERR_BACKEND (KF_ERR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY)
// naming the function, the error's name and its text.
void check(CUresult r, const char* function);

// Facts about one device, read once.
struct DeviceInfo {
  CUdevice device = 0;
  CUcontext context = nullptr;  // the retained primary context
  int sm = 0;                   // compute capability as 10 * major + minor
  int multiprocessors = 0;
  int max_grid_x = 0;
  int max_shared_optin = 0;     // bytes of dynamic shared memory a block may opt into
  bool memory_pools = false;    // cuMemAllocAsync works
  // kfuse's own memory pool on the device (memory_pools only), which keeps
  // freed memory for later calls, as torch's caching allocator does: the
  // default pool returns it to the driver at every synchronization, and
  // mapping GB-sized outputs again cost about 10 ms a call (GPT-2's
  // cross-entropy, H200, perf-log session 37). KFUSE_POOL_RELEASE_THRESHOLD
  // (bytes) sets how much freed memory it keeps past a synchronization
  // (default: all of it).
  CUmemoryPool pool = nullptr;
};

// Retains the device's primary context once (thread-safe). Throws
// KF_ERR_NO_DEVICE for an id the driver does not know.
const DeviceInfo& device_info(int device);

// Makes the device's primary context current for a scope and restores the
// caller's context after, so kfuse never changes what the caller sees.
class ScopedContext {
 public:
  explicit ScopedContext(int device);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const DeviceInfo& info() const { return info_; }

 private:
  const DeviceInfo& info_;
  CUcontext previous_ = nullptr;
};

}  // namespace kf::cuda
