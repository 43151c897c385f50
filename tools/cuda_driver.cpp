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
using CUstream = void*;
using CUevent = void*;
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
  CUresult (*device_get_attribute)(int*, int, CUdevice);
  CUresult (*stream_create)(CUstream*, unsigned);
  CUresult (*stream_destroy)(CUstream);
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*event_create)(CUevent*, unsigned);
  CUresult (*event_destroy)(CUevent);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_elapsed_time)(float*, CUevent, CUevent);
  CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
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
            resolve(library, &a.get_error_name, "cuGetErrorName") &&
            resolve(library, &a.device_get_attribute, "cuDeviceGetAttribute") &&
            resolve(library, &a.stream_create, "cuStreamCreate") &&
            resolve(library, &a.stream_destroy, "cuStreamDestroy", "cuStreamDestroy_v2") &&
            resolve(library, &a.stream_synchronize, "cuStreamSynchronize") &&
            resolve(library, &a.event_create, "cuEventCreate") &&
            resolve(library, &a.event_destroy, "cuEventDestroy", "cuEventDestroy_v2") &&
            resolve(library, &a.event_record, "cuEventRecord") &&
            resolve(library, &a.event_elapsed_time, "cuEventElapsedTime", "cuEventElapsedTime_v2") &&
            resolve(library, &a.memcpy_dtod_async, "cuMemcpyDtoDAsync", "cuMemcpyDtoDAsync_v2") &&
            resolve(library, &a.memset_d8_async, "cuMemsetD8Async");
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

namespace {
CUdeviceptr device_address(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
}  // namespace

int CudaDriver::attribute(int attribute) {
  int value = 0;
  check(api_->device_get_attribute(&value, attribute, device_), "cuDeviceGetAttribute");
  return value;
}

void* CudaDriver::create_stream() {
  CUstream s = nullptr;
  check(api_->stream_create(&s, 0), "cuStreamCreate");
  return s;
}

void CudaDriver::destroy_stream(void* stream) {
  if (stream != nullptr) api_->stream_destroy(stream);
}

void CudaDriver::synchronize_stream(void* stream) {
  check(api_->stream_synchronize(stream), "cuStreamSynchronize");
}

void* CudaDriver::create_event() {
  CUevent e = nullptr;
  check(api_->event_create(&e, 0), "cuEventCreate");  // CU_EVENT_DEFAULT: timing on
  return e;
}

void CudaDriver::destroy_event(void* event) {
  if (event != nullptr) api_->event_destroy(event);
}

void CudaDriver::record_event(void* event, void* stream) {
  check(api_->event_record(event, stream), "cuEventRecord");
}

float CudaDriver::elapsed_ms(void* start, void* end) {
  float ms = 0;
  check(api_->event_elapsed_time(&ms, start, end), "cuEventElapsedTime");
  return ms;
}

void CudaDriver::copy_async(void* dst, const void* src, size_t bytes, void* stream) {
  check(api_->memcpy_dtod_async(device_address(dst), device_address(src), bytes, stream),
        "cuMemcpyDtoDAsync");
}

void CudaDriver::fill_async(void* dst, unsigned char byte, size_t bytes, void* stream) {
  check(api_->memset_d8_async(device_address(dst), byte, bytes, stream), "cuMemsetD8Async");
}

}  // namespace kfcli
