// Package cudatest gives the tests just enough of the CUDA driver API,
// loaded with dlopen, to move data to and from a GPU. Test files cannot use
// cgo, hence this package.
package cudatest

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int*, int);
typedef int (*ctx_retain_fn)(void**, int);
typedef int (*ctx_set_fn)(void*);
typedef int (*sync_fn)(void);
typedef int (*alloc_fn)(uint64_t*, size_t);
typedef int (*free_fn)(uint64_t);
typedef int (*copy_to_fn)(uint64_t, const void*, size_t);
typedef int (*copy_from_fn)(void*, uint64_t, size_t);

static void* ctx;
static ctx_set_fn set_current;
static sync_fn synchronize;
static alloc_fn mem_alloc;
static free_fn mem_free;
static copy_to_fn htod;
static copy_from_fn dtoh;

// The primary context is the one kfuse uses.
static int cuda_load(void) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return 0;
  init_fn init = (init_fn)dlsym(lib, "cuInit");
  device_get_fn device_get = (device_get_fn)dlsym(lib, "cuDeviceGet");
  ctx_retain_fn retain = (ctx_retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
  set_current = (ctx_set_fn)dlsym(lib, "cuCtxSetCurrent");
  synchronize = (sync_fn)dlsym(lib, "cuCtxSynchronize");
  mem_alloc = (alloc_fn)dlsym(lib, "cuMemAlloc_v2");
  mem_free = (free_fn)dlsym(lib, "cuMemFree_v2");
  htod = (copy_to_fn)dlsym(lib, "cuMemcpyHtoD_v2");
  dtoh = (copy_from_fn)dlsym(lib, "cuMemcpyDtoH_v2");
  int device = 0;
  return init && device_get && retain && set_current && synchronize && mem_alloc && mem_free &&
         htod && dtoh && init(0) == 0 && device_get(&device, 0) == 0 && retain(&ctx, device) == 0;
}

static uint64_t cuda_upload(const void* host, size_t bytes) {
  uint64_t ptr = 0;
  if (set_current(ctx) != 0 || mem_alloc(&ptr, bytes + 4) != 0) return 0;
  return htod(ptr, host, bytes) == 0 ? ptr : 0;
}

static int cuda_download(void* host, uint64_t ptr, size_t bytes) {
  if (set_current(ctx) != 0 || synchronize() != 0) return -1;
  return dtoh(host, ptr, bytes);
}

static void cuda_free(uint64_t ptr) {
  set_current(ctx);
  mem_free(ptr);
}
*/
import "C"

import (
	"sync"
	"unsafe"
)

var (
	once    sync.Once
	present bool
)

// Present reports whether libcuda.so.1 loads and device 0 has a context.
func Present() bool {
	once.Do(func() { present = C.cuda_load() != 0 })
	return present
}

// Upload copies data to new device memory; 0 on failure.
func Upload(data []float32) uintptr {
	if len(data) == 0 {
		return 0
	}
	return uintptr(C.cuda_upload(unsafe.Pointer(&data[0]), C.size_t(4*len(data))))
}

// Download copies n floats from device memory.
func Download(ptr uintptr, n int) ([]float32, bool) {
	host := make([]float32, n)
	ok := C.cuda_download(unsafe.Pointer(&host[0]), C.uint64_t(ptr), C.size_t(4*n)) == 0
	return host, ok
}

// Free releases device memory.
func Free(ptr uintptr) { C.cuda_free(C.uint64_t(ptr)) }
