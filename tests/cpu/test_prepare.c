/* kf_fusion_is_ready and kf_fusion_prepare on CPU tensors (the plan is all
 * there is to prepare) and on kDLCUDA tensors without a GPU (never ready,
 * prepare refused with NO_DEVICE): readiness follows the shape class and
 * the caller's output layouts, is set by a call or by prepare, and bad
 * arguments get the call's statuses. On a GPU: tests/gpu/test_gpu_segments.c. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "test_util.h"

static const char* const kText =
    "input x: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
    "s = add(x, y)\nm = max(s) {axes=[1], keepdim=true}\nz = sub(s, m)\noutput z\n";

static int ready(kf_fusion f, const DLTensor* const* in, DLTensor* const* out, size_t n_out) {
  int r = -1;
  KF_CHECK(kf_fusion_is_ready(f, in, 2, out, n_out, &r));
  assert_true(r == 0 || r == 1);
  return r;
}

static void test_cpu_readiness(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kText, &f));
  float xs[6 * 8], ys[6 * 8], zs[6 * 8];
  for (int i = 0; i < 48; ++i) xs[i] = ys[i] = (float)i;
  int64_t shape[2] = {6, 8}, row[2] = {1, 8}, col_major[2] = {1, 6};
  DLTensor x = kf_test_tensor(xs, kf_test_f32(), 2, shape, NULL), y = kf_test_tensor(ys, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[2] = {&x, &y};
  /* A new fusion: nothing cached. Prepare builds the plan; a call then finds it. */
  assert_int_equal(ready(f, in, NULL, 0), 0);
  KF_CHECK(kf_fusion_prepare(f, in, 2, NULL, 0));
  assert_int_equal(ready(f, in, NULL, 0), 1);
  /* Another shape class (a dim of size 1) is not ready; a call makes it so. */
  DLTensor x1 = kf_test_tensor(xs, kf_test_f32(), 2, row, NULL), y1 = kf_test_tensor(ys, kf_test_f32(), 2, row, NULL);
  const DLTensor* in1[2] = {&x1, &y1};
  assert_int_equal(ready(f, in1, NULL, 0), 0);
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in1, 2, &out, 1, NULL));
  out->deleter(out);
  assert_int_equal(ready(f, in1, NULL, 0), 1);
  /* Same class, other sizes: the same plan. */
  int64_t other[2] = {3, 5};
  DLTensor x3 = kf_test_tensor(xs, kf_test_f32(), 2, other, NULL), y3 = kf_test_tensor(ys, kf_test_f32(), 2, other, NULL);
  const DLTensor* in3[2] = {&x3, &y3};
  assert_int_equal(ready(f, in3, NULL, 0), 1);
  /* The caller's outputs: row-major ones match kfuse's layout (its plan);
   * a column-major one joins the key: not ready until prepared with it. */
  DLTensor z = kf_test_tensor(zs, kf_test_f32(), 2, shape, NULL);
  DLTensor* outs[1] = {&z};
  assert_int_equal(ready(f, in, outs, 1), 1);
  DLTensor zt = kf_test_tensor(zs, kf_test_f32(), 2, shape, col_major);
  DLTensor* outs_t[1] = {&zt};
  assert_int_equal(ready(f, in, outs_t, 1), 0);
  KF_CHECK(kf_fusion_prepare(f, in, 2, outs_t, 1));
  assert_int_equal(ready(f, in, outs_t, 1), 1);
  KF_CHECK(kf_execute_into(f, in, 2, outs_t, 1, NULL));
  assert_float_equal(zs[0], 0.0f - 14.0f, 0); /* z[0][0] = 0 - max(row 0 of 2x) */
  kf_fusion_release(f);
}

static void test_arguments(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kText, &f));
  float xs[6 * 8] = {0}, zs[6 * 8];
  int64_t shape[2] = {6, 8}, wrong[2] = {6, 9};
  DLTensor x = kf_test_tensor(xs, kf_test_f32(), 2, shape, NULL), y = kf_test_tensor(xs, kf_test_f32(), 2, wrong, NULL);
  const DLTensor* in[2] = {&x, &x};
  const DLTensor* bad[2] = {&x, &y};
  int r = 7;
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, in, 2, NULL, 0, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_fusion_is_ready: argument 'ready' is NULL");
  KF_EXPECT_ERROR(kf_fusion_is_ready(NULL, in, 2, NULL, 0, &r), KF_ERR_INVALID_ARGUMENT, "kf_fusion_is_ready");
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, NULL, 2, NULL, 0, &r), KF_ERR_INVALID_ARGUMENT,
                  "kf_fusion_is_ready: argument 'inputs' is NULL");
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, in, 1, NULL, 0, &r), KF_ERR_INVALID_ARGUMENT, "input");
  assert_int_equal(r, 0); /* written before any check that can fail */
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, bad, 2, NULL, 0, &r), KF_ERR_SHAPE_MISMATCH, "");
  KF_EXPECT_ERROR(kf_fusion_prepare(f, bad, 2, NULL, 0), KF_ERR_SHAPE_MISMATCH, "");
  KF_EXPECT_ERROR(kf_fusion_prepare(NULL, in, 2, NULL, 0), KF_ERR_INVALID_ARGUMENT, "kf_fusion_prepare");
  /* Outputs: their count, and (once the plan exists) their shape. */
  DLTensor z = kf_test_tensor(zs, kf_test_f32(), 2, shape, NULL), zw = kf_test_tensor(zs, kf_test_f32(), 2, wrong, NULL);
  DLTensor* outs[2] = {&z, &z};
  DLTensor* outs_w[1] = {&zw};
  KF_EXPECT_ERROR(kf_fusion_prepare(f, in, 2, outs, 2), KF_ERR_INVALID_ARGUMENT, "expected 1 outputs, got 2");
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, in, 2, outs, 2, &r), KF_ERR_INVALID_ARGUMENT, "expected 1 outputs, got 2");
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, in, 2, NULL, 1, &r), KF_ERR_INVALID_ARGUMENT, "argument 'outputs' is NULL");
  KF_CHECK(kf_fusion_prepare(f, in, 2, NULL, 0));
  KF_EXPECT_ERROR(kf_fusion_is_ready(f, in, 2, outs_w, 1, &r), KF_ERR_SHAPE_MISMATCH, "output 0");
  KF_EXPECT_ERROR(kf_fusion_prepare(f, in, 2, outs_w, 1), KF_ERR_SHAPE_MISMATCH, "output 0");
  kf_fusion_release(f);
}

/* kDLCUDA tensors where no GPU can run them (CI): concretization reads no
 * data, so host memory stands in; never ready, and prepare says why. */
static void test_cuda_without_a_device(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kText, &f));
  float xs[6 * 8] = {0};
  int64_t shape[2] = {6, 8};
  DLTensor x = kf_test_tensor(xs, kf_test_f32(), 2, shape, NULL);
  x.device.device_type = kDLCUDA;
  const DLTensor* in[2] = {&x, &x};
  const kf_status s = kf_fusion_prepare(f, in, 2, NULL, 0);
  if (s == KF_OK) { /* a GPU after all: then the call is ready */
    assert_int_equal(ready(f, in, NULL, 0), 1);
  } else {
    assert_int_equal(s, KF_ERR_NO_DEVICE);
    assert_int_equal(ready(f, in, NULL, 0), 0);
    /* The plan itself (kf_concretize) is no compile: still not ready. */
    kf_concrete c;
    KF_CHECK(kf_concretize(f, in, 2, &c));
    assert_int_equal(ready(f, in, NULL, 0), 0);
    kf_concrete_release(c);
  }
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_readiness),
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_cuda_without_a_device),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
