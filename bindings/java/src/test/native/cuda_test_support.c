/* Test-only JNI helpers for org.kfuse.CudaTestSupport: just enough of the
 * CUDA driver API, loaded with dlopen, to move test data to and from a GPU. */
#include <dlfcn.h>
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int*, int);
typedef int (*ctx_retain_fn)(void**, int);
typedef int (*ctx_set_fn)(void*);
typedef int (*sync_fn)(void);
typedef int (*alloc_fn)(uint64_t*, size_t);
typedef int (*free_fn)(uint64_t);
typedef int (*htod_fn)(uint64_t, const void*, size_t);
typedef int (*dtoh_fn)(void*, uint64_t, size_t);

static struct {
  int state; /* 0 unknown, 1 ready, -1 unavailable */
  void* ctx;
  ctx_set_fn set_current;
  sync_fn synchronize;
  alloc_fn alloc;
  free_fn free;
  htod_fn htod;
  dtoh_fn dtoh;
} cuda;

static int load(void) {
  if (cuda.state != 0) return cuda.state > 0;
  cuda.state = -1;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return 0;
  init_fn init = (init_fn)dlsym(lib, "cuInit");
  device_get_fn device_get = (device_get_fn)dlsym(lib, "cuDeviceGet");
  ctx_retain_fn retain = (ctx_retain_fn)dlsym(lib, "cuDevicePrimaryCtxRetain");
  cuda.set_current = (ctx_set_fn)dlsym(lib, "cuCtxSetCurrent");
  cuda.synchronize = (sync_fn)dlsym(lib, "cuCtxSynchronize");
  cuda.alloc = (alloc_fn)dlsym(lib, "cuMemAlloc_v2");
  cuda.free = (free_fn)dlsym(lib, "cuMemFree_v2");
  cuda.htod = (htod_fn)dlsym(lib, "cuMemcpyHtoD_v2");
  cuda.dtoh = (dtoh_fn)dlsym(lib, "cuMemcpyDtoH_v2");
  int device = 0;
  if (!init || !device_get || !retain || !cuda.set_current || !cuda.synchronize || !cuda.alloc ||
      !cuda.free || !cuda.htod || !cuda.dtoh || init(0) != 0 || device_get(&device, 0) != 0 ||
      retain(&cuda.ctx, device) != 0)
    return 0;
  cuda.state = 1;
  return 1;
}

JNIEXPORT jboolean JNICALL Java_org_kfuse_CudaTestSupport_available(JNIEnv* env, jclass cls) {
  (void)env, (void)cls;
  return load() ? JNI_TRUE : JNI_FALSE;
}

/* The primary context is the one kfuse uses. */
JNIEXPORT jlong JNICALL Java_org_kfuse_CudaTestSupport_upload(JNIEnv* env, jclass cls, jfloatArray data) {
  (void)cls;
  jsize n = (*env)->GetArrayLength(env, data);
  uint64_t ptr = 0;
  if (!load() || cuda.set_current(cuda.ctx) != 0 || cuda.alloc(&ptr, (size_t)n * 4 + 4) != 0) return 0;
  jfloat* host = (*env)->GetFloatArrayElements(env, data, NULL);
  int rc = cuda.htod(ptr, host, (size_t)n * 4);
  (*env)->ReleaseFloatArrayElements(env, data, host, JNI_ABORT);
  return rc == 0 ? (jlong)ptr : 0;
}

JNIEXPORT jfloatArray JNICALL Java_org_kfuse_CudaTestSupport_download(JNIEnv* env, jclass cls, jlong ptr, jint n) {
  (void)cls;
  jfloatArray out = (*env)->NewFloatArray(env, n);
  float* host = malloc((size_t)n * 4 + 4);
  if (out == NULL || host == NULL || cuda.set_current(cuda.ctx) != 0 || cuda.synchronize() != 0 ||
      cuda.dtoh(host, (uint64_t)ptr, (size_t)n * 4) != 0) {
    free(host);
    return NULL;
  }
  (*env)->SetFloatArrayRegion(env, out, 0, n, host);
  free(host);
  return out;
}

JNIEXPORT void JNICALL Java_org_kfuse_CudaTestSupport_free(JNIEnv* env, jclass cls, jlong ptr) {
  (void)env, (void)cls;
  if (load()) {
    cuda.set_current(cuda.ctx);
    cuda.free((uint64_t)ptr);
  }
}
