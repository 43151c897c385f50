/* Driver helpers for the GPU tests (C): libcuda is loaded with dlopen, as
 * kfuse does, so the tests build and run (skipped) on machines without a
 * GPU. Include after <cmocka.h>. The few driver types are declared here:
 * the tests do not see the CUDA headers. The helpers are static inline, so
 * a test that uses none of them builds without warnings. */
#ifndef KFUSE_TESTS_GPU_UTIL_H
#define KFUSE_TESTS_GPU_UTIL_H

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int gpu_result;                  /* CUresult */
typedef unsigned long long gpu_deviceptr; /* CUdeviceptr */
typedef void* gpu_stream;                /* CUstream */
typedef void* gpu_context;               /* CUcontext */

typedef struct gpu_api {
  gpu_result (*init)(unsigned);
  gpu_result (*device_count)(int*);
  gpu_result (*device_get)(int*, int);
  gpu_result (*primary_retain)(gpu_context*, int);
  gpu_result (*ctx_set_current)(gpu_context);
  gpu_result (*mem_alloc)(gpu_deviceptr*, size_t);
  gpu_result (*mem_free)(gpu_deviceptr);
  gpu_result (*htod)(gpu_deviceptr, const void*, size_t);
  gpu_result (*dtoh)(void*, gpu_deviceptr, size_t);
  gpu_result (*stream_create)(gpu_stream*, unsigned);
  gpu_result (*stream_destroy)(gpu_stream);
  gpu_result (*stream_sync)(gpu_stream);
  gpu_result (*ctx_sync)(void);
} gpu_api;

static gpu_api gpu;

/* 1 when a CUDA device is usable (its primary context is then current). */
static int gpu_open(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return 0;
#define GPU_SYM(field, name) *(void**)&gpu.field = dlsym(lib, name); if (!gpu.field) return 0;
  GPU_SYM(init, "cuInit")
  GPU_SYM(device_count, "cuDeviceGetCount")
  GPU_SYM(device_get, "cuDeviceGet")
  GPU_SYM(primary_retain, "cuDevicePrimaryCtxRetain")
  GPU_SYM(ctx_set_current, "cuCtxSetCurrent")
  GPU_SYM(mem_alloc, "cuMemAlloc_v2")
  GPU_SYM(mem_free, "cuMemFree_v2")
  GPU_SYM(htod, "cuMemcpyHtoD_v2")
  GPU_SYM(dtoh, "cuMemcpyDtoH_v2")
  GPU_SYM(stream_create, "cuStreamCreate")
  GPU_SYM(stream_destroy, "cuStreamDestroy_v2")
  GPU_SYM(stream_sync, "cuStreamSynchronize")
  GPU_SYM(ctx_sync, "cuCtxSynchronize")
#undef GPU_SYM
  int count = 0, dev = 0;
  gpu_context ctx = NULL;
  if (gpu.init(0) != 0 || gpu.device_count(&count) != 0 || count < 1) return 0;
  if (gpu.device_get(&dev, 0) != 0 || gpu.primary_retain(&ctx, dev) != 0) return 0;
  return gpu.ctx_set_current(ctx) == 0;
}

#define GPU_CHECK(call)                                                         \
  do {                                                                          \
    gpu_result gpu_check_r_ = (call);                                           \
    if (gpu_check_r_ != 0) fail_msg("%s failed with CUresult %d", #call, gpu_check_r_); \
  } while (0)

static inline void* gpu_alloc(size_t bytes) {
  gpu_deviceptr p = 0;
  GPU_CHECK(gpu.mem_alloc(&p, bytes ? bytes : 1));
  return (void*)(uintptr_t)p;
}
static inline void gpu_free(void* p) { if (p) GPU_CHECK(gpu.mem_free((gpu_deviceptr)(uintptr_t)p)); }
static inline void gpu_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) GPU_CHECK(gpu.htod((gpu_deviceptr)(uintptr_t)dst, src, bytes));
}
/* Synchronous with respect to the legacy default stream; callers that used
 * another stream synchronize it first. */
static inline void gpu_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) GPU_CHECK(gpu.dtoh(dst, (gpu_deviceptr)(uintptr_t)src, bytes));
}

/* Exits 77 (skipped) from main when there is no device. */
#define GPU_REQUIRE_DEVICE()                                                    \
  do {                                                                          \
    if (!gpu_open()) {                                                          \
      fprintf(stderr, "no CUDA device: skipping\n");                           \
      return 77;                                                                \
    }                                                                           \
  } while (0)

#endif
