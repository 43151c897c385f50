/* int8 and uint8 storage on the CPU backend: arithmetic wraps at 8 bits
 * after each op (as torch), promotion with wider ints and floats, a Python
 * int scalar keeps the tensor's dtype, int8 with uint8 is refused (torch
 * gives int16), casts from float truncate then wrap, sum accumulates in
 * int64, max keeps the dtype, DLPack codes (kDLInt/kDLUInt, 8 bits), and
 * 8-bit ints still read as bool where a definition says bool. The GPU
 * kernels for these dtypes compile (nvrtc_test_codegen_ops); their values
 * are compared with these on a device by test_gpu_differential's
 * test_int8 group. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static DLDataType i8(void) { DLDataType t = {kDLInt, 8, 1}; return t; }
static DLDataType u8(void) { DLDataType t = {kDLUInt, 8, 1}; return t; }

static DLManagedTensor* run1(const char* text, const DLTensor* const* ins, size_t n) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, ins, n, &out, 1, NULL));
  kf_fusion_release(f);
  return out;
}

static void test_wrapping_arithmetic(void** state) {
  (void)state;
  int8_t a[4] = {100, -128, 127, -1};
  int8_t b[4] = {100, -1, 1, -1};
  int64_t s[1] = {4};
  DLTensor ta = kf_test_tensor(a, i8(), 1, s, NULL), tb = kf_test_tensor(b, i8(), 1, s, NULL);
  const DLTensor* ins[2] = {&ta, &tb};
  /* (a + b) * b - a, each op wrapped to int8. */
  DLManagedTensor* out = run1("input a: tensor<int8, 1>\ninput b: tensor<int8, 1>\n"
                              "s = add(a, b)\nm = mul(s, b)\nd = sub(m, a)\noutput d\n", ins, 2);
  assert_int_equal(out->dl_tensor.dtype.code, kDLInt);
  assert_int_equal(out->dl_tensor.dtype.bits, 8);
  const int8_t* d = (const int8_t*)out->dl_tensor.data;
  for (int i = 0; i < 4; ++i) {
    const int8_t sum = (int8_t)(uint8_t)(a[i] + b[i]);
    const int8_t prod = (int8_t)(uint8_t)(sum * b[i]);
    const int8_t want = (int8_t)(uint8_t)(prod - a[i]);
    assert_int_equal(d[i], want);
  }
  out->deleter(out);
  /* neg(-128) wraps to -128; a Python int keeps int8 and wraps. */
  out = run1("input a: tensor<int8, 1>\ninput b: tensor<int8, 1>\nn = neg(a)\nconst k: int64 = 1000\n"
             "y = add(n, k)\noutput y\n", ins, 2);
  d = (const int8_t*)out->dl_tensor.data;
  for (int i = 0; i < 4; ++i) assert_int_equal(d[i], (int8_t)(uint8_t)((int8_t)(uint8_t)(-a[i]) + 1000));
  out->deleter(out);
}

static void test_uint8_promotion_and_reductions(void** state) {
  (void)state;
  uint8_t a[3] = {200, 0, 255};
  int32_t w[3] = {100, -1, 1};
  int64_t s[1] = {3};
  DLTensor ta = kf_test_tensor(a, u8(), 1, s, NULL), tw = kf_test_tensor(w, kf_test_i32(), 1, s, NULL);
  const DLTensor* ins[2] = {&ta, &tw};
  DLManagedTensor* out = run1("input a: tensor<uint8, 1>\ninput w: tensor<int32, 1>\nconst one: int64 = 1\n"
                              "x = sub(a, one)\noutput x\n", ins, 2);
  assert_int_equal(out->dl_tensor.dtype.code, kDLUInt);
  const uint8_t* x = (const uint8_t*)out->dl_tensor.data;
  assert_int_equal(x[0], 199);
  assert_int_equal(x[1], 255); /* 0 - 1 wraps */
  assert_int_equal(x[2], 254);
  out->deleter(out);
  /* uint8 + int32 is int32: no wrap. */
  out = run1("input a: tensor<uint8, 1>\ninput w: tensor<int32, 1>\ny = add(a, w)\noutput y\n", ins, 2);
  assert_int_equal(out->dl_tensor.dtype.bits, 32);
  assert_int_equal(((const int32_t*)out->dl_tensor.data)[0], 300);
  assert_int_equal(((const int32_t*)out->dl_tensor.data)[2], 256);
  out->deleter(out);
  /* sum accumulates in int64; max keeps uint8; division is float32. */
  out = run1("input a: tensor<uint8, 1>\ninput w: tensor<int32, 1>\ny = sum(a) {axes=[0], keepdim=false}\noutput y\n",
             ins, 2);
  assert_int_equal(out->dl_tensor.dtype.bits, 64);
  assert_int_equal(((const int64_t*)out->dl_tensor.data)[0], 455);
  out->deleter(out);
  out = run1("input a: tensor<uint8, 1>\ninput w: tensor<int32, 1>\ny = max(a) {axes=[0], keepdim=false}\noutput y\n",
             ins, 2);
  assert_int_equal(out->dl_tensor.dtype.code, kDLUInt);
  assert_int_equal(((const uint8_t*)out->dl_tensor.data)[0], 255);
  out->deleter(out);
  out = run1("input a: tensor<uint8, 1>\ninput w: tensor<int32, 1>\nconst two: int64 = 2\ny = div(a, two)\noutput y\n",
             ins, 2);
  assert_int_equal(out->dl_tensor.dtype.code, kDLFloat);
  assert_true(((const float*)out->dl_tensor.data)[2] == 127.5f);
  out->deleter(out);
}

static void test_casts(void** state) {
  (void)state;
  float v[4] = {300.7f, -1.5f, 127.9f, -129.0f};
  int64_t s[1] = {4};
  DLTensor tv = kf_test_tensor(v, kf_test_f32(), 1, s, NULL);
  const DLTensor* ins[1] = {&tv};
  DLManagedTensor* out = run1("input v: tensor<float32, 1>\ny = cast(v) {dtype=int8}\noutput y\n", ins, 1);
  const int8_t* y = (const int8_t*)out->dl_tensor.data;
  assert_int_equal(y[0], 44);   /* 300 wraps */
  assert_int_equal(y[1], -1);
  assert_int_equal(y[2], 127);
  assert_int_equal(y[3], 127);  /* -129 wraps */
  out->deleter(out);
  out = run1("input v: tensor<float32, 1>\ny = cast(v) {dtype=uint8}\noutput y\n", ins, 1);
  const uint8_t* u = (const uint8_t*)out->dl_tensor.data;
  assert_int_equal(u[0], 44);
  assert_int_equal(u[1], 255);
  out->deleter(out);
}

static void test_errors_and_bool(void** state) {
  (void)state;
  kf_fusion f;
  KF_EXPECT_ERROR(kf_fusion_from_text("input a: tensor<int8, 1>\ninput b: tensor<uint8, 1>\ny = add(a, b)\noutput y\n",
                                      &f),
                  KF_ERR_DTYPE_MISMATCH, "int16");
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t c;
  KF_EXPECT_ERROR(kf_define_constant_i64(b, 300, KF_INT8, &c), KF_ERR_INVALID_ARGUMENT, "does not fit int8");
  KF_EXPECT_ERROR(kf_define_constant_i64(b, -1, KF_UINT8, &c), KF_ERR_INVALID_ARGUMENT, "does not fit uint8");
  kf_builder_destroy(b);
  /* An 8-bit uint tensor still reads as bool where the definition says bool. */
  uint8_t m[3] = {1, 0, 1};
  float x[3] = {1, 2, 3};
  int64_t s[1] = {3};
  DLTensor tm = kf_test_tensor(m, u8(), 1, s, NULL), tx = kf_test_tensor(x, kf_test_f32(), 1, s, NULL);
  const DLTensor* ins[2] = {&tm, &tx};
  DLManagedTensor* out = run1("input m: tensor<bool, 1>\ninput x: tensor<float32, 1>\nconst z: float32 = 0\n"
                              "y = where(m, x, z)\noutput y\n", ins, 2);
  const float* y = (const float*)out->dl_tensor.data;
  assert_true(y[0] == 1 && y[1] == 0 && y[2] == 3);
  out->deleter(out);
  assert_string_equal(kf_dtype_name(KF_INT8), "int8");
  assert_string_equal(kf_dtype_name(KF_UINT8), "uint8");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_wrapping_arithmetic),
      cmocka_unit_test(test_uint8_promotion_and_reductions),
      cmocka_unit_test(test_casts),
      cmocka_unit_test(test_errors_and_bool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
