/* argmax / argmin on the CPU backend against expectations written out by
 * hand: the first index of the extreme value on ties, NaN counting as both
 * the maximum and the minimum (torch's rule), keepdim, every axis of a
 * rank-3 tensor, int32, int64 and bool inputs, and the definition errors
 * (one axis, rank >= 1). The GPU runs the same decomposition
 * (core/simplify/decompose.h): test_gpu_differential's
 * test_arg_reductions compares the two. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static kf_fusion arg_fusion(const char* dtype, int rank, const char* op, int axis, int keepdim) {
  char text[512];
  snprintf(text, sizeof text, "input x: tensor<%s, %d>\ny = %s(x) {axes=[%d], keepdim=%s}\noutput y\n", dtype, rank,
           op, axis, keepdim ? "true" : "false");
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

static void expect_indices(kf_fusion f, DLTensor* x, const int64_t* want, size_t n, const int64_t* shape, int rank) {
  const DLTensor* ins[1] = {x};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, ins, 1, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.dtype.code, kDLInt);
  assert_int_equal(out->dl_tensor.dtype.bits, 64);
  assert_int_equal(out->dl_tensor.ndim, rank);
  for (int d = 0; d < rank; ++d) assert_int_equal(out->dl_tensor.shape[d], shape[d]);
  const int64_t* got = (const int64_t*)out->dl_tensor.data;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) fail_msg("element %zu: got %lld, expected %lld", i, (long long)got[i], (long long)want[i]);
  out->deleter(out);
}

static void test_ties_and_nan_float32(void** state) {
  (void)state;
  const float nan = NAN;
  float x[3][5] = {{1, 5, 5, 2, 0}, {nan, 1, nan, 3, 2}, {-1, -1, -1, -1, -1}};
  int64_t s[2] = {3, 5};
  DLTensor t = kf_test_tensor(x, kf_test_f32(), 2, s, NULL);
  kf_fusion f = arg_fusion("float32", 2, "argmax", 1, 0);
  const int64_t rows[1] = {3};
  expect_indices(f, &t, (const int64_t[]){1, 0, 0}, 3, rows, 1);
  kf_fusion_release(f);
  f = arg_fusion("float32", 2, "argmin", -1, 0);
  expect_indices(f, &t, (const int64_t[]){4, 0, 0}, 3, rows, 1);
  kf_fusion_release(f);
  /* Over rows, kept: columns 0 and 2 hold a NaN (row 1). */
  f = arg_fusion("float32", 2, "argmax", 0, 1);
  const int64_t kept[2] = {1, 5};
  expect_indices(f, &t, (const int64_t[]){1, 0, 1, 1, 1}, 5, kept, 2);
  kf_fusion_release(f);
  f = arg_fusion("float32", 2, "argmin", 0, 1);
  expect_indices(f, &t, (const int64_t[]){1, 2, 1, 2, 2}, 5, kept, 2);
  kf_fusion_release(f);
}

static void test_every_axis_of_rank3_int32(void** state) {
  (void)state;
  int32_t x[2][3][4];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) x[i][j][k] = (i * 7 + j * 5 + k * 3) % 6;
  int64_t s[3] = {2, 3, 4};
  DLTensor t = kf_test_tensor(x, kf_test_i32(), 3, s, NULL);
  for (int axis = 0; axis < 3; ++axis)
    for (int is_max = 0; is_max < 2; ++is_max) {
      int64_t want[12], shape[2];
      size_t n = 0;
      int k = 0;
      for (int d = 0; d < 3; ++d)
        if (d != axis) shape[k++] = s[d];
      /* The kept dims (p, q) in order; r runs along the axis. */
      const int p_dim = axis == 0 ? 1 : 0, q_dim = axis == 2 ? 1 : 2;
      for (int p = 0; p < s[p_dim]; ++p)
        for (int q = 0; q < s[q_dim]; ++q) {
          int64_t best = 0;
          int32_t bv = 0;
          for (int r = 0; r < s[axis]; ++r) {
            int idx[3];
            idx[axis] = r;
            idx[p_dim] = p;
            idx[q_dim] = q;
            const int32_t v = x[idx[0]][idx[1]][idx[2]];
            if (r == 0 || (is_max ? v > bv : v < bv)) {
              bv = v;
              best = r;
            }
          }
          want[n++] = best;
        }
      kf_fusion f = arg_fusion("int32", 3, is_max ? "argmax" : "argmin", axis, 0);
      expect_indices(f, &t, want, n, shape, 2);
      kf_fusion_release(f);
    }
}

static void test_int64_and_bool(void** state) {
  (void)state;
  int64_t x[6] = {3, -9, 7, 7, -9, 0};
  int64_t s[1] = {6}, none[1] = {0};
  DLTensor t = kf_test_tensor(x, kf_test_i64(), 1, s, NULL);
  kf_fusion f = arg_fusion("int64", 1, "argmax", 0, 0);
  expect_indices(f, &t, (const int64_t[]){2}, 1, none, 0);
  kf_fusion_release(f);
  f = arg_fusion("int64", 1, "argmin", 0, 1);
  const int64_t one[1] = {1};
  expect_indices(f, &t, (const int64_t[]){1}, 1, one, 1);
  kf_fusion_release(f);
  uint8_t b[5] = {0, 0, 1, 0, 1};
  int64_t sb[1] = {5};
  DLTensor tb = kf_test_tensor(b, kf_test_bool(), 1, sb, NULL);
  f = arg_fusion("bool", 1, "argmax", 0, 0);
  expect_indices(f, &tb, (const int64_t[]){2}, 1, none, 0);
  kf_fusion_release(f);
  f = arg_fusion("bool", 1, "argmin", 0, 0);
  expect_indices(f, &tb, (const int64_t[]){0}, 1, none, 0);
  kf_fusion_release(f);
}

static void test_definition_errors(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, s, y;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 0, KF_FLOAT32, &s));
  const int64_t two[2] = {0, 1};
  KF_EXPECT_ERROR(kf_reduce(b, KF_OP_ARGMAX, x, two, 2, 0, &y), KF_ERR_INVALID_ARGUMENT, "exactly one axis");
  KF_EXPECT_ERROR(kf_reduce(b, KF_OP_ARGMIN, x, NULL, 0, 0, &y), KF_ERR_INVALID_ARGUMENT, "exactly one axis");
  KF_EXPECT_ERROR(kf_reduce(b, KF_OP_ARGMAX, s, NULL, 0, 0, &y), KF_ERR_INVALID_ARGUMENT, "rank");
  const int64_t last[1] = {-1};
  KF_CHECK(kf_reduce(b, KF_OP_ARGMAX, x, last, 1, 0, &y));
  kf_value_info info = {sizeof info, 0, 0, KF_FLOAT32, 0};
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  KF_CHECK(kf_fusion_output(f, 0, &info));
  assert_int_equal(info.dtype, KF_INT64);
  assert_int_equal(info.rank, 1);
  char* text;
  KF_CHECK(kf_fusion_to_text(f, &text));
  assert_non_null(strstr(text, "argmax(t0) {axes=[1], keepdim=false}"));
  kf_string_free(text);
  kf_fusion_release(f);
  kf_builder_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ties_and_nan_float32),
      cmocka_unit_test(test_every_axis_of_rank3_int32),
      cmocka_unit_test(test_int64_and_bool),
      cmocka_unit_test(test_definition_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
