#include "cuda_driver.h"

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>

namespace kfcli {

namespace {
// Driver types, spelled out so that the CLI needs no CUDA headers.
using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUdeviceptr = unsigned long long;
constexpr CUresult kSuccess = 0;
constexpr CUresult kStubLibrary = 34;  // CUDA_ERROR_STUB_LIBRARY
}  // namespace

struct CudaDriver::Api {
  CUresult (*init)(unsigned);
  CUresult (*device_get_count)(int*);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_name)(char*, int, CUdevice);
  CUresult (*primary_ctx_retain)(CUcontext*, CUdevice);
  CUresult (*primary_ctx_release)(CUdevice);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*ctx_synchronize)();
  CUresult (*get_error_name)(CUresult, const char**);
};

namespace {

// The versioned name first: cuda.h maps e.g. cuMemAlloc to cuMemAlloc_v2.
template <typename F>
bool resolve(void* library, F* slot, const char* name, const char* versioned = nullptr) {
  void* p = versioned ? dlsym(library, versioned) : nullptr;
  if (p == nullptr) p = dlsym(library, name);
  *slot = reinterpret_cast<F>(p);
  return p != nullptr;
}

}  // namespace

std::unique_ptr<CudaDriver> CudaDriver::open(std::string* why) {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    *why = "libcuda.so.1 could not be loaded (no NVIDIA driver)";
    return nullptr;
  }
  std::unique_ptr<CudaDriver> d(new CudaDriver());
  d->library_ = library;
  d->api_ = std::make_unique<Api>();
  Api& a = *d->api_;
  bool ok = resolve(library, &a.init, "cuInit") &&
            resolve(library, &a.device_get_count, "cuDeviceGetCount") &&
            resolve(library, &a.device_get, "cuDeviceGet") &&
            resolve(library, &a.device_get_name, "cuDeviceGetName") &&
            resolve(library, &a.primary_ctx_retain, "cuDevicePrimaryCtxRetain") &&
            resolve(library, &a.primary_ctx_release, "cuDevicePrimaryCtxRelease",
                    "cuDevicePrimaryCtxRelease_v2") &&
            resolve(library, &a.ctx_set_current, "cuCtxSetCurrent") &&
            resolve(library, &a.mem_alloc, "cuMemAlloc", "cuMemAlloc_v2") &&
            resolve(library, &a.mem_free, "cuMemFree", "cuMemFree_v2") &&
            resolve(library, &a.memcpy_htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2") &&
            resolve(library, &a.memcpy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2") &&
            resolve(library, &a.ctx_synchronize, "cuCtxSynchronize") &&
            resolve(library, &a.get_error_name, "cuGetErrorName");
  if (!ok) {
    *why = "libcuda.so.1 lacks a driver function the CLI needs";
    return nullptr;
  }
  CUresult r = a.init(0);
  if (r == kStubLibrary) {
    *why = "libcuda.so.1 is the stub library (no NVIDIA driver)";
    return nullptr;
  }
  int count = 0;
  if (r != kSuccess || a.device_get_count(&count) != kSuccess || count == 0) {
    *why = "the CUDA driver found no usable device (cuInit returned " + std::to_string(r) + ")";
    return nullptr;
  }
  CUcontext context = nullptr;
  if (a.device_get(&d->device_, 0) != kSuccess ||
      a.primary_ctx_retain(&context, d->device_) != kSuccess ||
      a.ctx_set_current(context) != kSuccess) {
    *why = "could not make device 0's primary context current";
    return nullptr;
  }
  d->context_ = context;
  char name[256] = {};
  if (a.device_get_name(name, sizeof name, d->device_) == kSuccess) d->name_ = name;
  return d;
}

CudaDriver::~CudaDriver() {
  // The library stays loaded: kfuse's CUDA backend may hold its own handle.
  if (context_ != nullptr) api_->primary_ctx_release(device_);
}

void CudaDriver::check(int result, const char* call) {
  if (result == kSuccess) return;
  const char* name = nullptr;
  if (api_->get_error_name(result, &name) != kSuccess || name == nullptr) name = "unknown error";
  throw std::runtime_error(std::string(call) + " failed: " + name + " (" + std::to_string(result) + ")");
}

void* CudaDriver::allocate(size_t bytes) {
  CUdeviceptr p = 0;
  check(api_->mem_alloc(&p, bytes == 0 ? 1 : bytes), "cuMemAlloc");
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void CudaDriver::release(void* ptr) {
  if (ptr != nullptr) api_->mem_free(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(ptr)));
}

void CudaDriver::to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(api_->memcpy_htod(static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(dst)), src, bytes),
        "cuMemcpyHtoD");
}

void CudaDriver::to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  check(api_->memcpy_dtoh(dst, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(src)), bytes),
        "cuMemcpyDtoH");
}

void CudaDriver::synchronize() { check(api_->ctx_synchronize(), "cuCtxSynchronize"); }

}  // namespace kfcli
