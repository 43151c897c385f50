/* The simplify stage seen through the public API on the CPU backend: rmsnorm
 * written as frameworks write it (pow(x, 2), sqrt, reciprocal) keeps the
 * value ids of its definition (segment boundaries, kf_value_shape,
 * kf_fusion_value), prints and parses as written, runs as x*x and rsqrt
 * (kf_segment_to_text), and computes what the definition says: against a
 * double-precision reference and against the same fusion with the exponent
 * given at run time (a scalar input, which the stage leaves as pow). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

enum { ROWS = 4, COLS = 6 };

/* Value ids: x 0, w 1, two 2, eps 3, sq 4, ms 5, me 6, s 7, r 8, n 9, y 10. */
static const char* kRmsnorm =
    "input x: tensor<float32, 2>\n"
    "input w: tensor<float32, 1>\n"
    "const two: float32 = 2\n"
    "const eps: float32 = 1e-6\n"
    "sq = pow(x, two)\n"
    "ms = mean(sq) {axes=[1], keepdim=true}\n"
    "me = add(ms, eps)\n"
    "s = sqrt(me)\n"
    "r = reciprocal(s)\n"
    "n = mul(x, r)\n"
    "y = mul(n, w)\n"
    "output y\n";

/* The same with the exponent a scalar input (input 2): a run-time value. */
static const char* kRmsnormRuntimeExponent =
    "input x: tensor<float32, 2>\n"
    "input w: tensor<float32, 1>\n"
    "input p: scalar<float64>\n"
    "const eps: float32 = 1e-6\n"
    "sq = pow(x, p)\n"
    "ms = mean(sq) {axes=[1], keepdim=true}\n"
    "me = add(ms, eps)\n"
    "s = sqrt(me)\n"
    "r = reciprocal(s)\n"
    "n = mul(x, r)\n"
    "y = mul(n, w)\n"
    "output y\n";

static float g_x[ROWS * COLS], g_w[COLS];
static int64_t g_xs[2] = {ROWS, COLS}, g_ws[1] = {COLS};

static void fill_inputs(void) {
  for (int i = 0; i < ROWS * COLS; ++i) g_x[i] = (float)(sin(i * 1.3) * 4.0 - 1.0); /* negatives too */
  for (int j = 0; j < COLS; ++j) g_x[2 * COLS + j] = 0.0f;                          /* a zero row: rsqrt(eps) */
  g_x[3 * COLS] = -0.0f;
  for (int j = 0; j < COLS; ++j) g_w[j] = 0.5f + (float)j;
}

static char* segment_text(kf_fusion f, const DLTensor* const* in, size_t n, int64_t* outputs, size_t* num_outputs) {
  kf_concrete c;
  kf_segmentation s;
  KF_CHECK(kf_concretize(f, in, n, &c));
  KF_CHECK(kf_segment(c, &s));
  size_t count = 0;
  KF_CHECK(kf_segmentation_count(s, &count));
  assert_int_equal(count, 1);
  kf_segment_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  KF_CHECK(kf_segmentation_get(s, 0, &info));
  *num_outputs = info.num_outputs;
  for (size_t k = 0; k < info.num_outputs && k < 4; ++k) outputs[k] = info.outputs[k];
  char* text;
  KF_CHECK(kf_segment_to_text(s, 0, &text));
  kf_segmentation_release(s);
  kf_concrete_release(c);
  return text;
}

static void test_rmsnorm_as_written(void** state) {
  (void)state;
  fill_inputs();
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kRmsnorm, &f));
  DLTensor xt = kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL);
  DLTensor wt = kf_test_tensor(g_w, kf_test_f32(), 1, g_ws, NULL);
  const DLTensor* in[2] = {&xt, &wt};

  /* The text is the definition as written, and reads back to this fusion. */
  char* text;
  KF_CHECK(kf_fusion_to_text(f, &text));
  assert_non_null(strstr(text, "v4 = pow(t0, c2)"));
  assert_non_null(strstr(text, "v8 = reciprocal(v7)"));
  kf_fusion again;
  KF_CHECK(kf_fusion_from_text(text, &again));
  assert_ptr_equal(f, again);
  kf_fusion_release(again);
  kf_string_free(text);

  /* One segment: the output is value 10 as defined, and only it (the sqrt
   * left without readers does not make value 6 an output). It runs x*x and
   * rsqrt; kfuse explain shows the same text. */
  int64_t outs[4];
  size_t num_outs = 0;
  char* seg = segment_text(f, in, 2, outs, &num_outs);
  assert_int_equal(num_outs, 1);
  assert_int_equal(outs[0], 10);
  if (strstr(seg, "mul(t0, t0)") == NULL || strstr(seg, "rsqrt(") == NULL || strstr(seg, "pow(") != NULL ||
      strstr(seg, " = sqrt(") != NULL || strstr(seg, "reciprocal(") != NULL)
    fail_msg("segment text:\n%s", seg);
  kf_string_free(seg);

  /* Defined values keep their ids, dtypes and shapes, the unread sqrt too. */
  kf_value_info vi;
  memset(&vi, 0, sizeof vi);
  vi.struct_size = sizeof vi;
  KF_CHECK(kf_fusion_value(f, 7, &vi));
  assert_int_equal(vi.rank, 2);
  assert_int_equal(vi.dtype, KF_FLOAT32);
  int64_t shape[2] = {0, 0};
  KF_CHECK(kf_value_shape(f, in, 2, 7, shape, 2));
  assert_int_equal(shape[0], ROWS);
  assert_int_equal(shape[1], 1);
  KF_CHECK(kf_output_shape(f, in, 2, 0, shape, 2));
  assert_int_equal(shape[0], ROWS);
  assert_int_equal(shape[1], COLS);

  /* Values: a double-precision reference, within float32 rounding. */
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  const float* y = (const float*)out->dl_tensor.data;
  for (int i = 0; i < ROWS; ++i) {
    double ss = 0;
    for (int j = 0; j < COLS; ++j) ss += (double)g_x[i * COLS + j] * g_x[i * COLS + j];
    const double r = 1.0 / sqrt(ss / COLS + (double)1e-6f);
    for (int j = 0; j < COLS; ++j) {
      const double want = (double)g_x[i * COLS + j] * r * g_w[j];
      const double got = y[i * COLS + j];
      if (!(fabs(got - want) <= 4e-7 * (fabs(want) + 1e-30)))
        fail_msg("rmsnorm [%d, %d]: got %.9g, want %.9g", i, j, got, want);
    }
  }
  /* -0 * r * w keeps its sign, as the definition computes it. */
  assert_true(signbit(y[3 * COLS]));

  /* The exponent as a run-time scalar: pow stays, the results agree. */
  kf_fusion g;
  KF_CHECK(kf_fusion_from_text(kRmsnormRuntimeExponent, &g));
  double p = 2.0;
  DLTensor pt = kf_test_tensor(&p, kf_test_f64(), 0, NULL, NULL);
  const DLTensor* in3[3] = {&xt, &wt, &pt};
  seg = segment_text(g, in3, 3, outs, &num_outs);
  if (strstr(seg, "pow(") == NULL) fail_msg("the run-time exponent's pow is gone:\n%s", seg);
  kf_string_free(seg);
  DLManagedTensor* out2;
  KF_CHECK(kf_execute(g, in3, 3, &out2, 1, NULL));
  const float* y2 = (const float*)out2->dl_tensor.data;
  for (int i = 0; i < ROWS * COLS; ++i)
    if (y[i] != y2[i]) fail_msg("element %d: constant exponent %.9g, run-time exponent %.9g", i, y[i], y2[i]);
  out2->deleter(out2);
  out->deleter(out);
  kf_fusion_release(g);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rmsnorm_as_written),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
