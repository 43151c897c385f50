/* float8 through the public API on the CPU backend: per-tensor dynamic
 * quantization to e4m3fn (amax, scale = 448 / amax, cast) and back, with
 * the output's DLPack type DLPack 1.1's float8 code and every code the
 * nearest-even e4m3fn value of x * scale (found here by search over all
 * codes); and the promotion rule (a float8 dtype promotes with no other
 * floating dtype, as in PyTorch). tests/cpu/test_fp8.cpp checks the
 * conversions themselves. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "test_util.h"

static double e4m3_value(int c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const double v = e == 0 ? ldexp(m, -9) : ldexp(1.0 + m / 8.0, e - 7);
  return (c & 0x80) ? -v : v;
}

/* Nearest-even e4m3fn code of a finite |d| <= 448 (no NaN cases here). */
static int e4m3_nearest(double d) {
  int best = 0;
  const double a = fabs(d);
  for (int c = 0; c < 0x7f; ++c) {
    const double e = fabs(e4m3_value(c) - a), be = fabs(e4m3_value(best) - a);
    if (e < be || (e == be && (c & 1) == 0)) best = c;
  }
  return (signbit(d) ? 0x80 : 0) | best;
}

static const char* kQuantize =
    "input x: tensor<float32, 2>\n"
    "ax = abs(x)\n"
    "amax = max(ax) {axes=[0, 1], keepdim=true}\n"
    "const tiny: float32 = 1e-12\n"
    "am = maximum(amax, tiny)\n"
    "const fmax: float32 = 448\n"
    "scale = div(fmax, am)\n"
    "xs = mul(x, scale)\n"
    "y = cast(xs) {dtype=float8_e4m3fn}\n"
    "inv = div(am, fmax)\n"
    "output y\n"
    "output inv\n";
static const char* kDequantize =
    "input y: tensor<float8_e4m3fn, 2>\n"
    "input inv: tensor<float32, 2>\n"
    "yf = cast(y) {dtype=float32}\n"
    "x = mul(yf, inv)\n"
    "output x\n";

static void test_quantize_round_trip(void** state) {
  (void)state;
  enum { kRows = 7, kCols = 33, kN = kRows * kCols };
  float x[kN];
  for (int i = 0; i < kN; ++i) x[i] = (float)(sin(0.37 * i) * exp(0.02 * (i % 50)) * 3);
  int64_t shape[2] = {kRows, kCols};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[1] = {&xt};
  kf_fusion q, dq;
  KF_CHECK(kf_fusion_from_text(kQuantize, &q));
  KF_CHECK(kf_fusion_from_text(kDequantize, &dq));
  DLManagedTensor* out[2];
  KF_CHECK(kf_execute(q, in, 1, out, 2, NULL));
  const DLTensor* y = &out[0]->dl_tensor;
  assert_int_equal(y->dtype.code, KF_DLPACK_FLOAT8_E4M3FN_CODE);
  assert_int_equal(y->dtype.bits, 8);
  float amax = 0;
  for (int i = 0; i < kN; ++i) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
  const float scale = (float)(448.0 / (double)amax);
  const uint8_t* codes = (const uint8_t*)y->data;
  for (int i = 0; i < kN; ++i) {
    const float xs = (float)((double)x[i] * (double)scale);
    if (codes[i] != e4m3_nearest(xs)) fail_msg("x[%d] * scale = %g: code 0x%02x, expected 0x%02x", i, xs, codes[i], e4m3_nearest(xs));
    if (fabsf(x[i]) == amax) assert_int_equal(codes[i] & 0x7f, 0x7e); /* 448 */
  }
  const float inv = *(const float*)out[1]->dl_tensor.data;
  assert_true(inv == (float)((double)amax / 448.0));

  /* Dequantize: the float8 tensor as an input. */
  const DLTensor* back_in[2] = {&out[0]->dl_tensor, &out[1]->dl_tensor};
  DLManagedTensor* back;
  KF_CHECK(kf_execute(dq, back_in, 2, &back, 1, NULL));
  const float* xr = (const float*)back->dl_tensor.data;
  for (int i = 0; i < kN; ++i)
    if (fabsf(xr[i] - x[i]) > fabsf(x[i]) * 0.0625f + amax / 448.0f * 0.002f)
      fail_msg("x[%d] = %g came back as %g", i, x[i], xr[i]);
  back->deleter(back);
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  kf_fusion_release(q);
  kf_fusion_release(dq);
}

static void test_promotion_needs_a_cast(void** state) {
  (void)state;
  kf_fusion f;
  KF_EXPECT_ERROR(kf_fusion_from_text("input a: tensor<float8_e4m3fn, 1>\ninput b: tensor<bfloat16, 1>\n"
                                      "c = add(a, b)\noutput c\n", &f),
                  KF_ERR_DTYPE_MISMATCH, "cannot promote float8_e4m3fn with bfloat16");
  KF_EXPECT_ERROR(kf_fusion_from_text("input a: tensor<float8_e4m3fn, 1>\ninput b: tensor<float8_e5m2, 1>\n"
                                      "c = mul(a, b)\noutput c\n", &f),
                  KF_ERR_DTYPE_MISMATCH, "cast one operand first");
  /* With ints and float scalars: float8 (floats rank above ints; scalars
   * take part by category). */
  KF_CHECK(kf_fusion_from_text("input a: tensor<float8_e5m2, 1>\ninput i: tensor<int32, 1>\n"
                               "input s: scalar<float32>\nc = add(a, i)\nd = mul(c, s)\noutput d\n", &f));
  char* text;
  KF_CHECK(kf_fusion_to_text(f, &text));
  assert_non_null(strstr(text, "input t0: tensor<float8_e5m2, 1>"));
  kf_string_free(text);
  int64_t shape[1] = {3};
  uint8_t a[3] = {0x38, 0x3c, 0xbc}; /* e5m2: 0.5, 1, -1 */
  int32_t ints[3] = {1, 2, 3};
  float s = 2.0f;
  DLDataType e5m2 = {KF_DLPACK_FLOAT8_E5M2_CODE, 8, 1};
  DLTensor at = kf_test_tensor(a, e5m2, 1, shape, NULL);
  DLTensor it = kf_test_tensor(ints, kf_test_i32(), 1, shape, NULL);
  DLTensor st = kf_test_tensor(&s, kf_test_f32(), 0, NULL, NULL);
  const DLTensor* in[3] = {&at, &it, &st};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 3, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.dtype.code, KF_DLPACK_FLOAT8_E5M2_CODE);
  const uint8_t* d = (const uint8_t*)out->dl_tensor.data;
  /* (0.5 + 1) * 2 = 3 (0x42), (1 + 2) * 2 = 6 (0x46), (-1 + 3) * 2 = 4 (0x44) */
  assert_int_equal(d[0], 0x42);
  assert_int_equal(d[1], 0x46);
  assert_int_equal(d[2], 0x44);
  out->deleter(out);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_round_trip),
      cmocka_unit_test(test_promotion_needs_a_cast),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
