/* cumsum, cumprod and cummax on the CPU backend against expectations
 * written out by hand: inclusive and exclusive, both dims of a rank-2
 * tensor, int32 promoted to int64 (as torch), wrapping int64 products,
 * NaN through cummax, bool cumsum counting, and the definition errors. The
 * GPU's two kernels (a block per line, a thread per line) are compared
 * with this backend by test_gpu_differential's test_scans. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static DLManagedTensor* run1(const char* text, DLTensor* x) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const DLTensor* ins[1] = {x};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, ins, 1, &out, 1, NULL));
  kf_fusion_release(f);
  return out;
}

static void expect_i64(DLManagedTensor* out, const int64_t* want, size_t n) {
  assert_int_equal(out->dl_tensor.dtype.code, kDLInt);
  assert_int_equal(out->dl_tensor.dtype.bits, 64);
  const int64_t* got = (const int64_t*)out->dl_tensor.data;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) fail_msg("element %zu: got %lld, expected %lld", i, (long long)got[i], (long long)want[i]);
  out->deleter(out);
}

static void test_float_scans(void** state) {
  (void)state;
  float x[2][3] = {{1, 2, 3}, {4, NAN, -1}};
  int64_t s[2] = {2, 3};
  DLTensor t = kf_test_tensor(x, kf_test_f32(), 2, s, NULL);
  const char* head = "input x: tensor<float32, 2>\n";
  char text[256];
  snprintf(text, sizeof text, "%sy = cumsum(x) {dim=1}\noutput y\n", head);
  kf_test_expect_f32(run1(text, &t), (const float[]){1, 3, 6, 4, NAN, NAN}, 6);
  snprintf(text, sizeof text, "%sy = cumsum(x) {dim=0, exclusive=true}\noutput y\n", head);
  kf_test_expect_f32(run1(text, &t), (const float[]){0, 0, 0, 1, 2, 3}, 6);
  snprintf(text, sizeof text, "%sy = cumprod(x) {dim=-1, exclusive=true}\noutput y\n", head);
  kf_test_expect_f32(run1(text, &t), (const float[]){1, 1, 2, 1, 4, NAN}, 6);
  snprintf(text, sizeof text, "%sy = cummax(x) {dim=1}\noutput y\n", head);
  kf_test_expect_f32(run1(text, &t), (const float[]){1, 2, 3, 4, NAN, NAN}, 6);
  snprintf(text, sizeof text, "%sy = cummax(x) {dim=0, exclusive=true}\noutput y\n", head);
  kf_test_expect_f32(run1(text, &t), (const float[]){-INFINITY, -INFINITY, -INFINITY, 1, 2, 3}, 6);
}

static void test_integer_scans(void** state) {
  (void)state;
  int32_t x[4] = {3, -5, 7, 2};
  int64_t s[1] = {4};
  DLTensor t = kf_test_tensor(x, kf_test_i32(), 1, s, NULL);
  expect_i64(run1("input x: tensor<int32, 1>\ny = cumsum(x) {dim=0}\noutput y\n", &t), (const int64_t[]){3, -2, 5, 7}, 4);
  expect_i64(run1("input x: tensor<int32, 1>\ny = cumprod(x) {dim=0}\noutput y\n", &t), (const int64_t[]){3, -15, -105, -210}, 4);
  /* cummax keeps int32; exclusive starts from INT32_MIN */
  DLManagedTensor* m = run1("input x: tensor<int32, 1>\ny = cummax(x) {dim=0, exclusive=true}\noutput y\n", &t);
  assert_int_equal(m->dl_tensor.dtype.bits, 32);
  const int32_t* g = (const int32_t*)m->dl_tensor.data;
  assert_int_equal(g[0], INT32_MIN);
  assert_int_equal(g[1], 3);
  assert_int_equal(g[2], 3);
  assert_int_equal(g[3], 7);
  m->deleter(m);
  /* int64 products wrap */
  int64_t big[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 3};
  DLTensor tb = kf_test_tensor(big, kf_test_i64(), 1, (int64_t[]){3}, NULL);
  expect_i64(run1("input x: tensor<int64, 1>\ny = cumprod(x) {dim=0}\noutput y\n", &tb),
             (const int64_t[]){INT64_C(1) << 40, 0, 0}, 3);
  /* bool cumsum counts */
  uint8_t flags[5] = {1, 0, 1, 1, 0};
  DLTensor tf = kf_test_tensor(flags, kf_test_bool(), 1, (int64_t[]){5}, NULL);
  expect_i64(run1("input x: tensor<bool, 1>\ny = cumsum(x) {dim=0}\noutput y\n", &tf), (const int64_t[]){1, 1, 2, 3, 3}, 5);
}

static void test_scan_errors(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, s, out;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_scalar(b, KF_FLOAT32, &s));
  KF_EXPECT_ERROR(kf_scan(b, KF_OP_CUMSUM, x, 2, 0, &out), KF_ERR_INVALID_ARGUMENT, "dim");
  KF_EXPECT_ERROR(kf_scan(b, KF_OP_SUM, x, 0, 0, &out), KF_ERR_INVALID_ARGUMENT, "not a scan");
  KF_EXPECT_ERROR(kf_scan(b, KF_OP_CUMSUM, s, 0, 0, &out), KF_ERR_INVALID_ARGUMENT, "tensor");
  KF_CHECK(kf_scan(b, KF_OP_CUMMAX, x, -1, 1, &out));
  kf_builder_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_float_scans),
      cmocka_unit_test(test_integer_scans),
      cmocka_unit_test(test_scan_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
