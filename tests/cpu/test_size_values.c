/* Extents as values (size(x, dim), kf_size) on the CPU backend: in
 * arithmetic, as shape arguments (directly and through add/mul), the
 * concretization key no more specific than the sizes classes, and the
 * errors for a bad dim, a rank-0 argument and a shape argument that is not
 * known when the inputs are bound. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static kf_fusion from_text(const char* text) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

/* z = x * (size(x, 0) + size(w, -1)) + w, built through kf_size. */
static void test_size_in_arithmetic(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, w, n, k, nk, y, z;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT32, &w));
  KF_CHECK(kf_size(b, x, 0, &n));
  KF_CHECK(kf_size(b, w, -1, &k));
  KF_CHECK(kf_binary(b, KF_OP_ADD, n, k, &nk));
  KF_CHECK(kf_binary(b, KF_OP_MUL, x, nk, &y));
  KF_CHECK(kf_binary(b, KF_OP_ADD, y, w, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);

  float xs[15], ws[5];
  for (int i = 0; i < 15; ++i) xs[i] = (float)i - 7;
  for (int i = 0; i < 5; ++i) ws[i] = 0.25f * (float)i;
  int64_t rows = 3, shape_x[2] = {3, 5}, shape_w[1] = {5};
  DLTensor xt = kf_test_tensor(xs, kf_test_f32(), 2, shape_x, NULL);
  DLTensor wt = kf_test_tensor(ws, kf_test_f32(), 1, shape_w, NULL);
  const DLTensor* in[2] = {&xt, &wt};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  const float* zs = (const float*)out->dl_tensor.data;
  for (int i = 0; i < 15; ++i) assert_float_equal(zs[i], xs[i] * (float)(rows + 5) + ws[i % 5], 0);
  out->deleter(out);

  /* The value is read per call: 2 rows give another factor, and the
   * concretization is the same one (the same sizes classes). */
  kf_concrete c1, c2;
  KF_CHECK(kf_concretize(f, in, 2, &c1));
  shape_x[0] = 2;
  KF_CHECK(kf_concretize(f, in, 2, &c2));
  assert_ptr_equal(c1, c2);
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  zs = (const float*)out->dl_tensor.data;
  for (int i = 0; i < 10; ++i) assert_float_equal(zs[i], xs[i] * (float)(2 + 5) + ws[i % 5], 0);
  out->deleter(out);
  kf_concrete_release(c1);
  kf_concrete_release(c2);
  kf_fusion_release(f);
}

/* reshape(x, [size0 * size1, size2]) and full([size(x, 2)], 2): the
 * shapes follow each call's sizes. */
static const char* kFlatten =
    "input x: tensor<float32, 3>\n"
    "a = size(x) {dim=0}\n"
    "b = size(x) {dim=1}\n"
    "c = size(x) {dim=-1}\n"
    "ab = mul(a, b)\n"
    "r = reshape(x, [ab, c])\n"
    "const two: float32 = 2\n"
    "t = full([c], two) {dtype=float32}\n"
    "y = mul(r, t)\n"
    "output y\n";

static void test_size_as_shape(void** state) {
  (void)state;
  kf_fusion f = from_text(kFlatten);
  float xs[2 * 3 * 4];
  for (int i = 0; i < 24; ++i) xs[i] = (float)i;
  int64_t shape[3] = {2, 3, 4};
  DLTensor xt = kf_test_tensor(xs, kf_test_f32(), 3, shape, NULL);
  const DLTensor* in[1] = {&xt};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.ndim, 2);
  assert_int_equal(out->dl_tensor.shape[0], 6);
  assert_int_equal(out->dl_tensor.shape[1], 4);
  const float* ys = (const float*)out->dl_tensor.data;
  for (int i = 0; i < 24; ++i) assert_float_equal(ys[i], 2.0f * xs[i], 0);
  out->deleter(out);

  kf_concrete c1, c2;
  KF_CHECK(kf_concretize(f, in, 1, &c1));
  int64_t other[3] = {3, 2, 4};  /* same classes, other values: same concretization */
  xt.shape = other;
  KF_CHECK(kf_concretize(f, in, 1, &c2));
  assert_ptr_equal(c1, c2);
  int64_t shape_out[2];
  KF_CHECK(kf_output_shape(f, in, 1, 0, shape_out, 2));
  assert_int_equal(shape_out[0], 6);
  assert_int_equal(shape_out[1], 4);
  kf_concrete_release(c1);
  kf_concrete_release(c2);
  kf_fusion_release(f);
}

static void test_size_errors(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, s, n, q, r;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_scalar(b, KF_INT64, &s));
  KF_EXPECT_ERROR(kf_size(b, x, 2, &n), KF_ERR_INVALID_ARGUMENT, "dim 2 is out of range for rank 2");
  KF_EXPECT_ERROR(kf_size(b, s, 0, &n), KF_ERR_INVALID_ARGUMENT, "size");
  KF_CHECK(kf_size(b, x, 1, &n));
  /* A division is not shape arithmetic: its value is a float. */
  KF_CHECK(kf_binary(b, KF_OP_DIV, n, n, &q));
  int64_t shape[1] = {q};
  KF_EXPECT_ERROR(kf_reshape(b, x, shape, 1, &r), KF_ERR_INVALID_ARGUMENT, "reshape: argument 1 (shape");
  /* A value computed from a tensor's data is not known at bind time. */
  int64_t sum, shape2[2];
  KF_CHECK(kf_cast(b, x, KF_INT64, &sum));
  KF_CHECK(kf_reduce(b, KF_OP_SUM, sum, NULL, 0, 0, &sum));
  shape2[0] = sum;
  shape2[1] = n;
  KF_EXPECT_ERROR(kf_reshape(b, x, shape2, 2, &r), KF_ERR_INVALID_ARGUMENT, "expected an integer constant, scalar input or extent");
  kf_builder_destroy(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_in_arithmetic),
      cmocka_unit_test(test_size_as_shape),
      cmocka_unit_test(test_size_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
