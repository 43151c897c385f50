/* Ahead-of-time bundles on a GPU (docs/cuda-runtime.md, "Bundles"): a
 * child process compiles a softmax's kernels into a bundle for this
 * device's architecture (NVRTC, no GPU); this process, which has never
 * loaded NVRTC, loads the bundle and runs the fusion: the results match
 * the CPU backend, and NVRTC is still not loaded afterwards (nothing was
 * compiled on the call's path). Also: a bundle for another architecture
 * is refused for this device. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu_util.h"
#include "test_util.h"

static const char* kSoftmax =
    "input x: tensor<float32, 2>\n"
    "m = max(x) {axes=[1], keepdim=true}\nd = sub(x, m)\ne = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\ny = div(e, s)\noutput y\n";
enum { ROWS = 64, COLS = 1000 };

static char g_dir[] = "/tmp/kfuse-gpu-bundle-XXXXXX";
static int g_sm;

static int nvrtc_loaded(void) {
  const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    void* h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL) {
      dlclose(h);
      return 1;
    }
  }
  return 0;
}

/* The child: the bundle of the softmax at [ROWS, COLS] for sm `g_sm`,
 * concretized for kDLCUDA tensors that host memory stands in for. */
static int write_bundle(const char* path) {
  kf_fusion f = NULL;
  kf_concrete c = NULL;
  kf_bundle b = NULL;
  static float x[ROWS * COLS];
  int64_t shape[2] = {ROWS, COLS};
  DLTensor t = kf_test_tensor(x, kf_test_f32(), 2, shape, NULL);
  t.device.device_type = kDLCUDA;
  const DLTensor* in[1] = {&t};
  if (kf_fusion_from_text(kSoftmax, &f) != KF_OK || kf_concretize(f, in, 1, &c) != KF_OK ||
      kf_bundle_create(g_sm, &b) != KF_OK || kf_bundle_add(b, c) != KF_OK || kf_bundle_save(b, path) != KF_OK) {
    fprintf(stderr, "child: %s\n", kf_last_error());
    return 1;
  }
  kf_bundle_destroy(b);
  kf_concrete_release(c);
  kf_fusion_release(f);
  return 0;
}

static void test_bundled_call_never_loads_nvrtc(void** state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof path, "%s/softmax.kfb", g_dir);
  fflush(NULL);
  const pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) _exit(write_bundle(path));
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_false(nvrtc_loaded());

  size_t kernels = 0;
  KF_CHECK(kf_bundle_load(path, 0, &kernels));
  assert_true(kernels >= 8); /* the row plan's variants, the split rows' */

  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kSoftmax, &f));
  static float host[ROWS * COLS], got[ROWS * COLS], want[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; ++i) host[i] = (float)((i * 37) % 101 - 50) / 16.0f;
  int64_t shape[2] = {ROWS, COLS};
  void* dev_x = gpu_alloc(sizeof host);
  void* dev_y = gpu_alloc(sizeof host);
  gpu_to_device(dev_x, host, sizeof host);
  DLTensor x = kf_test_tensor(dev_x, kf_test_f32(), 2, shape, NULL);
  x.device.device_type = kDLCUDA;
  DLTensor y = kf_test_tensor(dev_y, kf_test_f32(), 2, shape, NULL);
  y.device.device_type = kDLCUDA;
  const DLTensor* in[1] = {&x};
  DLTensor* out[1] = {&y};
  KF_CHECK(kf_execute_into(f, in, 1, out, 1, NULL));
  GPU_CHECK(gpu.ctx_sync());
  gpu_to_host(got, dev_y, sizeof got);
  assert_false(nvrtc_loaded()); /* every kernel came from the bundle */

  DLTensor hx = kf_test_tensor(host, kf_test_f32(), 2, shape, NULL);
  DLTensor hy = kf_test_tensor(want, kf_test_f32(), 2, shape, NULL);
  const DLTensor* hin[1] = {&hx};
  DLTensor* hout[1] = {&hy};
  KF_CHECK(kf_execute_into(f, hin, 1, hout, 1, NULL));
  for (int i = 0; i < ROWS * COLS; ++i)
    if (fabsf(got[i] - want[i]) > 1e-6f + 1e-5f * fabsf(want[i]))
      fail_msg("element %d: GPU %.9g, CPU %.9g", i, (double)got[i], (double)want[i]);
  gpu_free(dev_x);
  gpu_free(dev_y);
  kf_fusion_release(f);
}

static void test_other_architecture_refused(void** state) {
  (void)state;
  kf_bundle b;
  const int other = g_sm == 80 ? 86 : 80;
  KF_CHECK(kf_bundle_create(other, &b));
  char path[256];
  snprintf(path, sizeof path, "%s/other.kfb", g_dir);
  KF_CHECK(kf_bundle_save(b, path));
  kf_bundle_destroy(b);
  char needle[64];
  snprintf(needle, sizeof needle, "holds kernels for sm_%d; device 0 is sm_%d", other, g_sm);
  KF_EXPECT_ERROR(kf_bundle_load(path, 0, NULL), KF_ERR_DEVICE_MISMATCH, needle);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  if (mkdtemp(g_dir) == NULL) return 1;
  char cache[300];
  snprintf(cache, sizeof cache, "%s/cache", g_dir);
  setenv("KFUSE_CACHE_DIR", cache, 1); /* (no disk cache hit could hide a compile) */
  /* This device's architecture: the one empty bundle that loads for it. */
  for (int sm = 80; sm <= 127 && g_sm == 0; ++sm) {
    kf_bundle b;
    char path[256];
    snprintf(path, sizeof path, "%s/probe.kfb", g_dir);
    if (kf_bundle_create(sm, &b) != KF_OK) return 1;
    if (kf_bundle_save(b, path) != KF_OK) return 1;
    kf_bundle_destroy(b);
    if (kf_bundle_load(path, 0, NULL) == KF_OK) g_sm = sm;
  }
  if (g_sm == 0) {
    fprintf(stderr, "no architecture from sm_80 to sm_127 matches device 0: skipping\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bundled_call_never_loads_nvrtc),
      cmocka_unit_test(test_other_architecture_refused),
  };
  const int failed = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) return 1;
  return failed;
}
