/* scatter and index_reduce (and the helpers scatter_add, index_add,
 * index_put) on the CPU backend against expectations written out by hand:
 * duplicate indices (sums in order, plain scatter keeps the last), every
 * reduction with and without the input's own value, integer mean as floor
 * division, broadcast values of index_put, a strided input, and the
 * errors (an index out of range, dtypes, ranks, sizes, bad reduce codes and
 * flags). The GPU's atomic and sorted paths are compared with this backend
 * by test_gpu_differential's test_scatter. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static kf_fusion from_text(const char* text) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

/* Runs f on three inputs; returns the output (caller deletes). */
static DLManagedTensor* run3(kf_fusion f, DLTensor* a, DLTensor* b, DLTensor* c) {
  const DLTensor* ins[3] = {a, b, c};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, ins, 3, &out, 1, NULL));
  return out;
}

static void expect_i32(DLManagedTensor* out, const int32_t* want, size_t n) {
  const int32_t* got = (const int32_t*)out->dl_tensor.data;
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i]) fail_msg("element %zu: got %d, expected %d", i, got[i], want[i]);
  out->deleter(out);
}

static const char* scatter_text(const char* dtype, const char* attrs) {
  static char text[512];
  snprintf(text, sizeof text,
           "input x: tensor<%s, 2>\ninput i: tensor<int64, 2>\ninput s: tensor<%s, 2>\n"
           "y = scatter(x, i, s) {%s}\noutput y\n",
           dtype, dtype, attrs);
  return text;
}

/* x [2, 4], index [2, 3] along dim 1 with duplicates, src [2, 3]. */
static float X[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
static int64_t I[2][3] = {{1, 1, 3}, {0, 2, 0}};
static float S[2][3] = {{5, 6, 7}, {-1, 8, 4}};

static void scatter_f32(const char* attrs, const float want[8]) {
  int64_t sx[2] = {2, 4}, si[2] = {2, 3};
  DLTensor x = kf_test_tensor(X, kf_test_f32(), 2, sx, NULL);
  DLTensor i = kf_test_tensor(I, kf_test_i64(), 2, si, NULL);
  DLTensor s = kf_test_tensor(S, kf_test_f32(), 2, si, NULL);
  kf_fusion f = from_text(scatter_text("float32", attrs));
  kf_test_expect_f32(run3(f, &x, &i, &s), want, 8);
  kf_fusion_release(f);
}

static void test_scatter_reductions(void** state) {
  (void)state;
  /* Row 0 receives 5 and 6 at column 1, 7 at 3; row 1 receives -1 and 4 at 0, 8 at 2. */
  scatter_f32("dim=1", (const float[]){1, 6, 3, 7, 4, 20, 8, 40});  /* the last duplicate */
  scatter_f32("dim=1, reduce=sum", (const float[]){1, 13, 3, 11, 13, 20, 38, 40});
  scatter_f32("dim=1, reduce=sum, include_self=false", (const float[]){1, 11, 3, 7, 3, 20, 8, 40});
  scatter_f32("dim=1, reduce=prod", (const float[]){1, 60, 3, 28, -40, 20, 240, 40});
  scatter_f32("dim=1, reduce=mean", (const float[]){1, 13.0f / 3, 3, 5.5f, 13.0f / 3, 20, 19, 40});
  scatter_f32("dim=1, reduce=mean, include_self=false", (const float[]){1, 5.5f, 3, 7, 1.5f, 20, 8, 40});
  scatter_f32("dim=1, reduce=amax", (const float[]){1, 6, 3, 7, 10, 20, 30, 40});
  scatter_f32("dim=1, reduce=amin, include_self=false", (const float[]){1, 5, 3, 7, -1, 20, 8, 40});
  scatter_f32("dim=1, reduce=sum, deterministic=true", (const float[]){1, 13, 3, 11, 13, 20, 38, 40});
}

static void test_scatter_int_mean_floors(void** state) {
  (void)state;
  int32_t x[1][3] = {{-7, 2, 9}};
  int64_t i[1][3] = {{0, 0, 2}};
  int32_t s[1][3] = {{2, 0, 0}};
  int64_t sh[2] = {1, 3};
  DLTensor tx = kf_test_tensor(x, kf_test_i32(), 2, sh, NULL);
  DLTensor ti = kf_test_tensor(i, kf_test_i64(), 2, sh, NULL);
  DLTensor ts = kf_test_tensor(s, kf_test_i32(), 2, sh, NULL);
  kf_fusion f = from_text(scatter_text("int32", "dim=1, reduce=mean"));
  /* (-7 + 2 + 0) / 3 = -5/3 -> -2 (floor); (9 + 0) / 2 = 4 */
  expect_i32(run3(f, &tx, &ti, &ts), (const int32_t[]){-2, 2, 4}, 3);
  kf_fusion_release(f);
}

/* index_add along dim 0 (embedding backward): rows 0 and 2 of src both go to row 1. */
static void test_index_add_rows(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, idx, src, y;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 1, KF_INT32, &idx));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &src));
  KF_CHECK(kf_index_add(b, x, 0, idx, src, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  float xv[3][2] = {{0, 0}, {1, 1}, {2, 2}};
  int32_t iv[3] = {1, 0, 1};
  float sv[3][2] = {{1, 2}, {3, 4}, {5, 6}};
  int64_t sx[2] = {3, 2}, si[1] = {3};
  DLTensor tx = kf_test_tensor(xv, kf_test_f32(), 2, sx, NULL);
  DLTensor ti = kf_test_tensor(iv, kf_test_i32(), 1, si, NULL);
  DLTensor ts = kf_test_tensor(sv, kf_test_f32(), 2, sx, NULL);
  kf_test_expect_f32(run3(f, &tx, &ti, &ts), (const float[]){3, 4, 7, 9, 2, 2}, 6);
  /* An index out of range is an error naming the index and the dim. */
  iv[2] = 3;
  const DLTensor* ins[3] = {&tx, &ti, &ts};
  DLManagedTensor* out;
  KF_EXPECT_ERROR(kf_execute(f, ins, 3, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT, "index 3");
  iv[2] = -1;
  KF_EXPECT_ERROR(kf_execute(f, ins, 3, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT, "out of range [0, 3)");
  kf_fusion_release(f);
}

/* index_put on dim 0 with values broadcast from rank 1; a transposed input. */
static void test_index_put_broadcast(void** state) {
  (void)state;
  for (int accumulate = 0; accumulate < 2; ++accumulate) {
    kf_builder b;
    KF_CHECK(kf_builder_create(&b));
    int64_t x, idx, v, y;
    KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
    KF_CHECK(kf_define_tensor(b, 1, KF_INT64, &idx));
    KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT32, &v));
    KF_CHECK(kf_index_put(b, x, idx, v, accumulate, 0, &y));
    KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
    kf_fusion f;
    KF_CHECK(kf_builder_finalize(b, &f));
    kf_builder_destroy(b);
    /* x is [3, 2] stored column-major: element (r, c) at c * 3 + r. */
    float xv[6] = {0, 1, 2, 10, 11, 12};
    int64_t sx[2] = {3, 2}, st[2] = {1, 3}, iv[2] = {2, 2}, si[1] = {2}, sv[1] = {2};
    float vv[2] = {100, 200};
    DLTensor tx = kf_test_tensor(xv, kf_test_f32(), 2, sx, st);
    DLTensor ti = kf_test_tensor(iv, kf_test_i64(), 1, si, NULL);
    DLTensor tv = kf_test_tensor(vv, kf_test_f32(), 1, sv, NULL);
    DLManagedTensor* out = run3(f, &tx, &ti, &tv);
    /* Row 2 receives (100, 200) twice. */
    const float* got = (const float*)out->dl_tensor.data;
    const int64_t* s = out->dl_tensor.strides;
    const float want_row2[2] = {accumulate ? 202.0f : 100.0f, accumulate ? 412.0f : 200.0f};
    for (int c = 0; c < 2; ++c) {
      const float g = got[2 * (s ? s[0] : 2) + c * (s ? s[1] : 1)];
      if (g != want_row2[c]) fail_msg("accumulate=%d, column %d: got %g, expected %g", accumulate, c, (double)g, (double)want_row2[c]);
      const float g0 = got[0 * (s ? s[0] : 2) + c * (s ? s[1] : 1)];
      if (g0 != xv[c * 3]) fail_msg("row 0 changed");
    }
    out->deleter(out);
    kf_fusion_release(f);
  }
}

static void test_definition_errors(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, i1, i2, s, sb, bx, out;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 1, KF_INT64, &i1));
  KF_CHECK(kf_define_tensor(b, 2, KF_INT64, &i2));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &s));
  KF_CHECK(kf_define_tensor(b, 2, KF_BFLOAT16, &sb));
  KF_CHECK(kf_define_tensor(b, 2, KF_BOOL, &bx));
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, i2, sb, KF_SCATTER_SUM, 0, &out), KF_ERR_DTYPE_MISMATCH, "src");
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, s, s, KF_SCATTER_SUM, 0, &out), KF_ERR_DTYPE_MISMATCH, "index");
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, i1, s, KF_SCATTER_SUM, 0, &out), KF_ERR_SHAPE_MISMATCH, "expected rank 2");
  KF_EXPECT_ERROR(kf_index_add(b, x, 0, i2, s, &out), KF_ERR_SHAPE_MISMATCH, "expected rank 1");
  KF_EXPECT_ERROR(kf_scatter(b, x, 2, i2, s, KF_SCATTER_SUM, 0, &out), KF_ERR_INVALID_ARGUMENT, "dim");
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, i2, s, (kf_scatter_reduce)9, 0, &out), KF_ERR_INVALID_ARGUMENT, "kf_scatter_reduce");
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, i2, s, KF_SCATTER_SUM, 8, &out), KF_ERR_INVALID_ARGUMENT, "flags");
  KF_EXPECT_ERROR(kf_scatter_add(b, bx, 1, i2, bx, &out), KF_ERR_DTYPE_MISMATCH, "bool");
  KF_CHECK(kf_scatter(b, bx, 1, i2, bx, KF_SCATTER_AMAX, 0, &out));  /* any */
  kf_builder_destroy(b);
  /* Sizes are checked when the fusion meets its inputs. */
  kf_fusion f = from_text(scatter_text("float32", "dim=1, reduce=sum"));
  float xv[4] = {0}, sv[4] = {0};
  int64_t iv[4] = {0};
  int64_t sx[2] = {2, 2}, si[2] = {2, 2}, ss[2] = {1, 2}, sbig[2] = {3, 2};
  DLTensor tx = kf_test_tensor(xv, kf_test_f32(), 2, sx, NULL);
  DLTensor ti = kf_test_tensor(iv, kf_test_i64(), 2, si, NULL);
  DLTensor ts = kf_test_tensor(sv, kf_test_f32(), 2, ss, NULL);
  const DLTensor* ins[3] = {&tx, &ti, &ts};
  DLManagedTensor* o;
  KF_EXPECT_ERROR(kf_execute(f, ins, 3, &o, 1, NULL), KF_ERR_SHAPE_MISMATCH, "exceeds src size");
  DLTensor tib = kf_test_tensor(iv, kf_test_i64(), 2, sbig, NULL);
  DLTensor tsb = kf_test_tensor(sv, kf_test_f32(), 2, sbig, NULL);
  ins[1] = &tib;
  ins[2] = &tsb;
  KF_EXPECT_ERROR(kf_execute(f, ins, 3, &o, 1, NULL), KF_ERR_SHAPE_MISMATCH, "exceeds input size");
  kf_fusion_release(f);
  kf_fusion bad;
  KF_EXPECT_ERROR(kf_fusion_from_text(scatter_text("float32", "dim=1, reduce=median"), &bad), KF_ERR_PARSE, "median");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scatter_reductions),
      cmocka_unit_test(test_scatter_int_mean_floors),
      cmocka_unit_test(test_index_add_rows),
      cmocka_unit_test(test_index_put_broadcast),
      cmocka_unit_test(test_definition_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
