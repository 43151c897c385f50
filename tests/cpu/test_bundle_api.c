/* kf_bundle_*: the C API of ahead-of-time kernel bundles where no NVRTC
 * is needed (an empty bundle is written and read back; bad arguments and
 * bad files get their status and a message naming the function and the
 * argument). Bundles of compiled kernels: tests/nvrtc/test_bundle.cpp. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"

static char g_dir[] = "/tmp/kfuse-bundle-api-XXXXXX";

static void path_of(char* out, size_t n, const char* name) { snprintf(out, n, "%s/%s", g_dir, name); }

static void test_bundle_arguments(void** state) {
  (void)state;
  kf_bundle b = NULL;
  KF_EXPECT_ERROR(kf_bundle_create(90, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_create: argument 'out'");
  KF_EXPECT_ERROR(kf_bundle_count(NULL, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_count: argument 'bundle'");
  KF_EXPECT_ERROR(kf_bundle_add(NULL, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_add: argument 'bundle'");
  KF_EXPECT_ERROR(kf_bundle_save(NULL, "x"), KF_ERR_INVALID_ARGUMENT, "kf_bundle_save: argument 'bundle'");
  KF_EXPECT_ERROR(kf_bundle_load(NULL, -1, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_load: argument 'path'");
  kf_bundle_destroy(NULL); /* no-op */
#ifdef KFUSE_TEST_CUDA_BACKEND
  KF_EXPECT_ERROR(kf_bundle_create(75, &b), KF_ERR_INVALID_ARGUMENT,
                  "kf_bundle_create: sm: expected an architecture as 10 * major + minor from 80 (sm_80) to 127, got 75");
  assert_null(b);
  KF_CHECK(kf_bundle_create(89, &b));
  KF_EXPECT_ERROR(kf_bundle_count(b, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_count: argument 'out'");
  KF_EXPECT_ERROR(kf_bundle_add(b, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_add: argument 'concrete'");
  KF_EXPECT_ERROR(kf_bundle_save(b, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_save: argument 'path'");
  size_t n = 7;
  KF_CHECK(kf_bundle_count(b, &n));
  assert_int_equal(n, 0);

  /* Written and read back (no kernels: no NVRTC needed). */
  char path[256], missing[256], junk[256], cut[256];
  path_of(path, sizeof path, "empty.kfb");
  KF_CHECK(kf_bundle_save(b, path));
  n = 7;
  KF_CHECK(kf_bundle_load(path, -1, &n));
  assert_int_equal(n, 0);
  KF_CHECK(kf_bundle_load(path, -1, NULL));
  path_of(missing, sizeof missing, "missing.kfb");
  KF_EXPECT_ERROR(kf_bundle_load(missing, -1, NULL), KF_ERR_INVALID_ARGUMENT, "kf_bundle_load: path: cannot open");
  path_of(junk, sizeof junk, "junk.kfb");
  FILE* f = fopen(junk, "wb");
  assert_non_null(f);
  fputs("input x: tensor<float32, 2>\n", f);
  fclose(f);
  KF_EXPECT_ERROR(kf_bundle_load(junk, -1, NULL), KF_ERR_INVALID_ARGUMENT, "junk.kfb is not a kfuse bundle");
  /* Cut short by a byte: the checksum fails. */
  path_of(cut, sizeof cut, "cut.kfb");
  char bytes[4096];
  f = fopen(path, "rb");
  assert_non_null(f);
  const size_t size = fread(bytes, 1, sizeof bytes, f);
  fclose(f);
  f = fopen(cut, "wb");
  assert_non_null(f);
  fwrite(bytes, 1, size - 1, f);
  fclose(f);
  KF_EXPECT_ERROR(kf_bundle_load(cut, -1, NULL), KF_ERR_INVALID_ARGUMENT, "cut.kfb is damaged");
  /* Checked against a device: without one, or one of another
   * architecture (sm_89 is no GPU the project's machines have), an error
   * that says so. */
  const kf_status s = kf_bundle_load(path, 0, NULL);
  assert_true(s == KF_ERR_NO_DEVICE || s == KF_ERR_DEVICE_MISMATCH);
  if (s == KF_ERR_DEVICE_MISMATCH) assert_non_null(strstr(kf_last_error(), "holds kernels for sm_89; device 0 is sm_"));
  kf_bundle_destroy(b);
#else
  KF_EXPECT_ERROR(kf_bundle_create(90, &b), KF_ERR_UNSUPPORTED, "built without its CUDA backend");
  KF_EXPECT_ERROR(kf_bundle_load("x.kfb", -1, NULL), KF_ERR_UNSUPPORTED, "built without its CUDA backend");
#endif
}

int main(void) {
  if (mkdtemp(g_dir) == NULL) return 1;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_bundle_arguments)};
  const int failed = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) return 1;
  return failed;
}
