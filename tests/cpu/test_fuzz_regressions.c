/* Inputs found by the libFuzzer targets (fuzz/) that once hit undefined
 * behaviour in concretization or execution; each must now fail cleanly or
 * succeed. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static kf_fusion add_relu(void) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(
      "input x: tensor<float32, 2>\ninput b: tensor<float32, 2>\ns = add(x, b)\ny = relu(s)\noutput y\n", &f));
  return f;
}

/* A device type outside DLDeviceType (101) was read through the enum. */
static void test_device_type_outside_enum(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float data[4] = {0};
  int64_t shape[2] = {2, 2};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 2, shape, NULL);
  DLTensor b = x;
  int code = 101;
  memcpy(&x.device.device_type, &code, sizeof code);
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_EXPECT_ERROR(kf_concretize(f, in, 2, &c), KF_ERR_UNSUPPORTED, "device type 101");
  kf_fusion_release(f);
}

/* An empty tensor with a NULL data pointer and a byte_offset. */
static void test_null_data_with_offset(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  int64_t shape[2] = {0, 3};
  DLTensor x = kf_test_tensor(NULL, kf_test_f32(), 2, shape, NULL);
  x.byte_offset = 5;
  DLTensor b = x;
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 2, &c));
  kf_concrete_release(c);
  kf_fusion_release(f);
}

/* Strides whose products overflow int64 while checking contiguity. */
static void test_huge_strides(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float data[4] = {0};
  int64_t shape[2] = {1, 8}, strides[2] = {7, 2884274095081263733LL};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 2, shape, strides);
  DLTensor b = x;
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_EXPECT_ERROR(kf_concretize(f, in, 2, &c), KF_ERR_SHAPE_MISMATCH, "input 0");
  kf_fusion_release(f);
}

/* A zero-size dim next to huge ones: compact strides would overflow. */
static void test_empty_with_huge_dims(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float data[4] = {0};
  int64_t shape[2] = {0, 8099005396518532197LL};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 2, shape, NULL);
  DLTensor b = x;
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 2, &c));
  kf_concrete_release(c);
  kf_fusion_release(f);
}

/* Broadcasting [2^31, 1] against [1, 2^40]: the result's element count
 * overflows although each input's does not. */
static void test_broadcast_count_overflow(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float data[4] = {0};
  int64_t xs[2] = {INT64_C(1) << 31, 1}, bs[2] = {1, INT64_C(1) << 40}, zero[2] = {0, 0};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 2, xs, zero);
  DLTensor b = kf_test_tensor(data, kf_test_f32(), 2, bs, zero);
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_EXPECT_ERROR(kf_concretize(f, in, 2, &c), KF_ERR_SHAPE_MISMATCH, "element count overflows");
  kf_fusion_release(f);
}

/* An empty tensor whose other dims multiply past int64 ([0, 2^40, 2^40]):
 * the plan's output layout code was computed from compact strides that
 * overflowed (found by fuzz_concretize under UBSan). */
static void test_empty_with_dims_whose_product_overflows(void** state) {
  (void)state;
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 3>\ny = relu(x)\noutput y\n", &f));
  float data[4] = {0};
  int64_t shape[3] = {0, INT64_C(1) << 40, INT64_C(1) << 40};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 3, shape, NULL);
  const DLTensor* in[1] = {&x};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 1, &c));
  kf_concrete_release(c);
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.shape[0], 0);
  out->deleter(out);
  kf_fusion_release(f);
}

/* A reduction whose domain has no dim of size > 1 ([1, 0, 0] bf16, sum over
 * dims 0 and 2): the memory order's reference input then covers no dim,
 * and the check that it spans the domain passed with no innermost dim to
 * read (heap overflow, found by fuzz_concretize under ASan in CI). */
static void test_reduction_domain_without_dims(void** state) {
  (void)state;
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text(
      "input x: tensor<bfloat16, 3>\nm = sum(x) {axes=[0, 2], keepdim=true}\nd = sub(x, m)\noutput d\n", &f));
  uint16_t data[4] = {0};
  int64_t shape[3] = {1, 0, 0};
  DLDataType bf16 = {kDLBfloat, 16, 1};
  DLTensor x = kf_test_tensor(data, bf16, 3, shape, NULL);
  const DLTensor* in[1] = {&x};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 1, &c));
  kf_concrete_release(c);
  int64_t ones[3] = {1, 1, 1};
  x = kf_test_tensor(data, bf16, 3, ones, NULL);
  KF_CHECK(kf_concretize(f, in, 1, &c));
  kf_concrete_release(c);
  kf_fusion_release(f);
}

/* fuzz_execute: an empty tensor with huge dims ([2, 0, INT64_MAX]) is
 * valid, but the compact strides the CPU backend gave it (its output here)
 * overflowed int64 (UB); they now saturate as the input's do. So do the
 * strides its shape ops derive (unsqueeze, slice, reshape's layout test),
 * which overflowed on such tensors and on size-1 dims with huge strides. */
static void test_execute_empty_with_huge_dims(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 3>\ny = neg(x)\noutput y\n", &f));
  float data[1] = {0};
  int64_t shape[3] = {2, 0, INT64_MAX};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 3, shape, NULL);
  const DLTensor* in[1] = {&x};
  DLManagedTensor* y = NULL;
  KF_CHECK(kf_execute(f, in, 1, &y, 1, NULL));
  assert_int_equal(y->dl_tensor.shape[1], 0);
  assert_int_equal(y->dl_tensor.shape[2], INT64_MAX);
  y->deleter(y);
  kf_fusion_release(f);

  /* Views of [3, 0, INT64_MAX]: unsqueeze multiplies the (saturated) stride
   * of dim 0 by 3, slice the stride of dim 1 by its step. */
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 3>\nu = unsqueeze(x) {dim=0}\n"
                               "s = slice(u) {dim=1, start=0, stop=end, step=2}\ny = neg(s)\noutput y\n",
                               &f));
  int64_t empty[3] = {3, 0, INT64_MAX};
  x = kf_test_tensor(data, kf_test_f32(), 3, empty, NULL);
  KF_CHECK(kf_execute(f, in, 1, &y, 1, NULL));
  assert_int_equal(y->dl_tensor.shape[1], 2);
  y->deleter(y);
  /* One element whose size-1 dim 0 has stride INT64_MAX: slice's step 2
   * doubles it. */
  float one[1] = {1.5f};
  int64_t ones[3] = {1, 1, 1}, strides[3] = {INT64_MAX, 1, 1};
  x = kf_test_tensor(one, kf_test_f32(), 3, ones, strides);
  KF_CHECK(kf_execute(f, in, 1, &y, 1, NULL));
  assert_true(((float*)y->dl_tensor.data)[0] == -1.5f);
  y->deleter(y);
  kf_fusion_release(f);

  /* reshape's row-major test on [0, INT64_MAX, 2]. */
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 3>\nconst z: int64 = 0\nconst two: int64 = 2\n"
                               "const big: int64 = 9223372036854775807\nr = reshape(x, [two, z, big])\n"
                               "y = neg(r)\noutput y\n",
                               &f));
  int64_t wide[3] = {0, INT64_MAX, 2};
  x = kf_test_tensor(data, kf_test_f32(), 3, wide, NULL);
  KF_CHECK(kf_execute(f, in, 1, &y, 1, NULL));
  assert_int_equal(y->dl_tensor.shape[2], INT64_MAX);
  y->deleter(y);
  kf_fusion_release(f);
}

/* fuzz_execute: a tensor whose element offsets stay within kfuse's int64
 * limit (2^62) but whose bytes reach past the end of the address space.
 * (max_offset + 1) * element size was multiplied in uintptr_t and wrapped
 * to a few bytes, so the check that the address range does not wrap
 * passed: [1, 2] float32 with strides [1, 2^62] has its element [0, 1]
 * 2^64 bytes after the first, and [2^62] int64 elements (compact) span
 * 2^65 bytes. The CPU backend then computed the wrapped address. Inputs
 * (kf_concretize, kf_execute) and outputs (kf_execute_into) are checked. */
static void test_reach_wraps_address_space(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float data[4] = {0}, out[4] = {0};
  int64_t shape[2] = {1, 2}, wrap[2] = {1, INT64_C(1) << 62};
  DLTensor x = kf_test_tensor(data, kf_test_f32(), 2, shape, wrap);
  DLTensor b = kf_test_tensor(data, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[2] = {&x, &b};
  kf_concrete c;
  KF_EXPECT_ERROR(kf_concretize(f, in, 2, &c), KF_ERR_INVALID_ARGUMENT, "past the end of the address space");
  DLManagedTensor* y = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 2, &y, 1, NULL), KF_ERR_INVALID_ARGUMENT, "input 0");
  assert_null(y);

  /* The same strides on an output. */
  DLTensor ok = kf_test_tensor(data, kf_test_f32(), 2, shape, NULL);
  const DLTensor* good[2] = {&ok, &b};
  DLTensor o = kf_test_tensor(out, kf_test_f32(), 2, shape, wrap);
  DLTensor* outs[1] = {&o};
  KF_EXPECT_ERROR(kf_execute_into(f, good, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "past the end of the address space");
  kf_fusion_release(f);

  /* 2^62 compact int64 elements: within the element limit, 2^65 bytes. */
  kf_fusion g;
  KF_CHECK(kf_fusion_from_text("input x: tensor<int64, 1>\ny = neg(x)\noutput y\n", &g));
  int64_t n[1] = {INT64_C(1) << 62};
  int64_t words[1] = {0};
  DLTensor big = kf_test_tensor(words, kf_test_i64(), 1, n, NULL);
  const DLTensor* gin[1] = {&big};
  KF_EXPECT_ERROR(kf_concretize(g, gin, 1, &c), KF_ERR_INVALID_ARGUMENT, "past the end of the address space");
  kf_fusion_release(g);
}

/* fuzz_execute: empty tensors with NULL data and a byte_offset pass the
 * checks (nothing is addressed), and so does an empty output whose offset
 * wraps around the address space, but the CPU backend applied the offset
 * to the pointer (UB: an offset to a null pointer, a pointer overflow) when
 * it ran them: inputs of kf_execute and outputs of kf_execute_into. */
static void test_execute_empty_with_odd_offsets(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  int64_t shape[2] = {0, 3};
  DLTensor x = kf_test_tensor(NULL, kf_test_f32(), 2, shape, NULL);
  x.byte_offset = 5;
  DLTensor b = x;
  b.byte_offset = 4;
  const DLTensor* in[2] = {&x, &b};
  DLManagedTensor* y = NULL;
  KF_CHECK(kf_execute(f, in, 2, &y, 1, NULL));
  assert_int_equal(y->dl_tensor.shape[0], 0);
  y->deleter(y);
  DLTensor o = kf_test_tensor(NULL, kf_test_f32(), 2, shape, NULL);
  o.byte_offset = 1;
  DLTensor* outs[1] = {&o};
  KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
  float data[4] = {0};
  o.data = data;
  o.byte_offset = UINT64_MAX - 3;
  KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
  kf_fusion_release(f);
}

/* fuzz_execute: outputs may share memory with scalar inputs (they are
 * values, read when the call binds them), but the CPU backend read each
 * scalar from memory again in every segment: after the first segment wrote
 * output a1 over v (or n), the second read the output's elements instead,
 * giving b = 8 + 8 instead of 8 + 7, or sizing full([n]) 8 long against a
 * bound 3 (a shape error; with other bytes, allocations of gigabytes). */
static void test_output_over_scalar_input(void** state) {
  (void)state;
  static const char* const texts[2] = {
      "input n: scalar<int64>\ninput v: scalar<int64>\nconst one: int64 = 1\n"
      "a = full([n], v) {dtype=int64}\na1 = add(a, one)\noutput a1\ns = segment_set(a1)\n"
      "b = add(s, v)\noutput b\n",
      "input n: scalar<int64>\ninput v: scalar<int64>\nconst one: int64 = 1\n"
      "a = full([n], v) {dtype=int64}\na1 = add(a, one)\noutput a1\ns = segment_set(a1)\n"
      "f = full([n], v) {dtype=int64}\nb = add(f, s)\noutput b\n"};
  for (int k = 0; k < 2; ++k) {
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(texts[k], &f));
    int64_t mem[4] = {3, 7, 0, 0}, b_out[3] = {0};
    int64_t shape[1] = {3};
    DLTensor n = kf_test_tensor(&mem[0], kf_test_i64(), 0, NULL, NULL);
    DLTensor v = kf_test_tensor(&mem[1], kf_test_i64(), 0, NULL, NULL);
    const DLTensor* in[2] = {&n, &v};
    /* a1 over v (case 0) or over n (case 1); b elsewhere. */
    DLTensor a1 = kf_test_tensor(&mem[k == 0 ? 1 : 0], kf_test_i64(), 1, shape, NULL);
    DLTensor b = kf_test_tensor(b_out, kf_test_i64(), 1, shape, NULL);
    DLTensor* outs[2] = {&a1, &b};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 2, NULL));
    for (int i = 0; i < 3; ++i) {
      assert_int_equal(((int64_t*)a1.data)[i], 8);
      assert_int_equal(b_out[i], 15); /* 8 + 7 */
    }
    kf_fusion_release(f);
  }
}

/* fuzz_execute: a sum over a dim of size 0 with NULL data (valid: the
 * input is empty) has kept positions; the CPU backend formed a pointer to
 * each position's reduced elements, an offset to a null pointer (UB),
 * although it reads none of them. */
static void test_reduce_empty_null_input(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 2>\nm = sum(x) {axes=[0], keepdim=false}\n"
                               "v, u = var_mean(x) {axes=[0], keepdim=true}\noutput m\noutput u\n",
                               &f));
  int64_t shape[2] = {0, 2};
  DLTensor x = kf_test_tensor(NULL, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out[2] = {NULL, NULL};
  KF_CHECK(kf_execute(f, in, 1, out, 2, NULL));
  const float* m = (const float*)out[0]->dl_tensor.data;
  assert_true(m[0] == 0.0f && m[1] == 0.0f);
  const float* u = (const float*)out[1]->dl_tensor.data;
  assert_true(isnan(u[0]) && isnan(u[1])); /* mean of nothing */
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  kf_fusion_release(f);
}

/* fuzz_execute: a scan along an empty dim of [0, INT64_MAX] (an empty
 * tensor) visited each of its 2^63 - 1 lines to do nothing in each: a hang. */
static void test_scan_along_empty_dim(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text("input x: tensor<int32, 2>\nc = cumsum(x) {dim=0}\n"
                               "m = cummax(x) {dim=0, exclusive=true}\noutput c\noutput m\n",
                               &f));
  int64_t shape[2] = {0, INT64_MAX};
  DLTensor x = kf_test_tensor(NULL, kf_test_i32(), 2, shape, NULL);
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out[2] = {NULL, NULL};
  KF_CHECK(kf_execute(f, in, 1, out, 2, NULL));
  assert_int_equal(out[0]->dl_tensor.shape[1], INT64_MAX);
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_type_outside_enum),
      cmocka_unit_test(test_null_data_with_offset),
      cmocka_unit_test(test_huge_strides),
      cmocka_unit_test(test_empty_with_huge_dims),
      cmocka_unit_test(test_broadcast_count_overflow),
      cmocka_unit_test(test_empty_with_dims_whose_product_overflows),
      cmocka_unit_test(test_execute_empty_with_huge_dims),
      cmocka_unit_test(test_reach_wraps_address_space),
      cmocka_unit_test(test_execute_empty_with_odd_offsets),
      cmocka_unit_test(test_output_over_scalar_input),
      cmocka_unit_test(test_reduce_empty_null_input),
      cmocka_unit_test(test_scan_along_empty_dim),
      cmocka_unit_test(test_reduction_domain_without_dims),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
