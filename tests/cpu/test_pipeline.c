/* Concretize, segment and execute through the public API on the CPU
 * backend: concretization classes and layouts, caller-provided and aliased
 * outputs, segment_set segmentation with its id maps, and segment-by-segment
 * execution equal to a plain execute. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static void test_same_class_same_concrete(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  float x[64] = {0}, bias[8] = {0};
  int64_t xs[2] = {4, 8}, bs[1] = {8};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, NULL);
  DLTensor bt = kf_test_tensor(bias, kf_test_f32(), 1, bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  kf_concrete c1, c2, c3, c4;
  KF_CHECK(kf_concretize(f, in, 2, &c1));
  /* Other sizes in the same classes: the same concrete fusion. */
  int64_t xs2[2] = {2, 16}, bs2[1] = {16};
  xt.shape = xs2;
  bt.shape = bs2;
  KF_CHECK(kf_concretize(f, in, 2, &c2));
  assert_ptr_equal(c1, c2);
  /* A size-1 (broadcast) dim is another class. */
  int64_t xs3[2] = {1, 16};
  xt.shape = xs3;
  KF_CHECK(kf_concretize(f, in, 2, &c3));
  assert_ptr_not_equal(c1, c3);
  /* A transposed input is another class, and describe shows its order. */
  int64_t xs4[2] = {4, 8}, st4[2] = {1, 4}, bs4[1] = {8};
  xt.shape = xs4;
  xt.strides = st4;
  bt.shape = bs4;
  KF_CHECK(kf_concretize(f, in, 2, &c4));
  assert_ptr_not_equal(c1, c4);
  char* text;
  KF_CHECK(kf_concrete_describe(c4, &text));
  assert_non_null(strstr(text, "stride order [1, 0]"));
  kf_string_free(text);
  KF_CHECK(kf_concrete_describe(c3, &text));
  assert_non_null(strstr(text, "sizes [1, >1]"));
  kf_string_free(text);
  kf_concrete_release(c1);
  kf_concrete_release(c2);
  kf_concrete_release(c3);
  kf_concrete_release(c4);
  kf_fusion_release(f);
}

static void test_execute_values_and_transposed_layout(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  /* x is a transposed view: logical [3, 2], memory holds x^T row-major. */
  float mem[6] = {1, -2, 3, -4, 5, -6}; /* x[i][j] = mem[j*3 + i] */
  float bias[2] = {0.5f, -1.0f};
  int64_t xs[2] = {3, 2}, st[2] = {1, 3}, bs[1] = {2};
  DLTensor xt = kf_test_tensor(mem, kf_test_f32(), 2, xs, st);
  DLTensor bt = kf_test_tensor(bias, kf_test_f32(), 1, bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  DLTensor* o = &out->dl_tensor;
  assert_int_equal(o->ndim, 2);
  assert_int_equal(o->shape[0], 3);
  assert_int_equal(o->shape[1], 2);
  /* The output follows the input's layout: transposed strides. */
  assert_int_equal(o->strides[0], 1);
  assert_int_equal(o->strides[1], 3);
  const float* y = (const float*)o->data;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float v = mem[j * 3 + i] + bias[j];
      float expect = v > 0 ? v : 0;
      assert_float_equal(y[i * o->strides[0] + j * o->strides[1]], expect, 0);
    }
  out->deleter(out);
  kf_fusion_release(f);
}

static void test_execute_into_strided_output(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  float x[4] = {1, -1, 2, -2}, bias[2] = {1, 1};
  int64_t xs[2] = {2, 2}, bs[1] = {2};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, NULL);
  DLTensor bt = kf_test_tensor(bias, kf_test_f32(), 1, bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  float big[8];
  for (int i = 0; i < 8; ++i) big[i] = -99;
  int64_t os[2] = {2, 2}, ost[2] = {4, 2}; /* every other element of each row */
  DLTensor ot = kf_test_tensor(big, kf_test_f32(), 2, os, ost);
  DLTensor* outs[1] = {&ot};
  KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
  assert_float_equal(big[0], 2, 0);
  assert_float_equal(big[1], -99, 0);
  assert_float_equal(big[2], 0, 0);
  assert_float_equal(big[4], 3, 0);
  assert_float_equal(big[6], 0, 0);
  int64_t shape[2];
  KF_CHECK(kf_output_shape(f, in, 2, 0, shape, 2));
  assert_int_equal(shape[0], 2);
  assert_int_equal(shape[1], 2);
  kf_fusion_release(f);
}

static void test_alias_updates_input_in_place(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, one, y;
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT64, &x));
  KF_CHECK(kf_define_constant_f64(b, 1.0, KF_FLOAT64, &one));
  KF_CHECK(kf_binary(b, KF_OP_ADD, x, one, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, 0));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  double data[3] = {1, 2, 3};
  int64_t s[1] = {3};
  DLTensor t = kf_test_tensor(data, kf_test_f64(), 1, s, NULL);
  const DLTensor* in[1] = {&t};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  assert_ptr_equal(out->dl_tensor.data, data);
  assert_float_equal(data[0], 2, 0);
  assert_float_equal(data[2], 4, 0);
  out->deleter(out);
  kf_fusion_release(f);
}

/* neg -> segment_set -> relu, optionally without the segment_set. */
static kf_fusion neg_relu(int with_segment_set) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, n, c, y;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_unary(b, KF_OP_NEG, x, &n));
  c = n;
  if (with_segment_set) KF_CHECK(kf_segment_set(b, n, &c));
  KF_CHECK(kf_unary(b, KF_OP_RELU, c, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

static void test_segment_set_cuts(void** state) {
  (void)state;
  float x[6] = {1, -2, 3, -4, 5, -6};
  int64_t xs[2] = {2, 3};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, NULL);
  const DLTensor* in[1] = {&xt};
  for (int with = 0; with <= 1; ++with) {
    kf_fusion f = neg_relu(with);
    kf_concrete c;
    KF_CHECK(kf_concretize(f, in, 1, &c));
    kf_segmentation s;
    KF_CHECK(kf_segment(c, &s));
    size_t n;
    KF_CHECK(kf_segmentation_count(s, &n));
    assert_int_equal(n, with ? 2 : 1);
    kf_segment_info info;
    info.struct_size = sizeof info;
    if (with) {
      /* ids: x=0, neg=1, segment_set=2, relu=3; extents of x: -1, -2 */
      KF_CHECK(kf_segmentation_get(s, 0, &info));
      assert_string_equal(info.scheduler, "pointwise");
      assert_int_equal(info.num_inputs, 3);
      assert_int_equal(info.inputs[0], 0);
      assert_int_equal(info.inputs[1], -1);
      assert_int_equal(info.inputs[2], -2);
      assert_int_equal(info.num_outputs, 1);
      assert_int_equal(info.outputs[0], 1);
      assert_int_equal(info.num_dead_after, 0);
      KF_CHECK(kf_segmentation_get(s, 1, &info));
      assert_int_equal(info.run_order, 1);
      assert_int_equal(info.inputs[0], 1);
      assert_int_equal(info.num_outputs, 1);
      assert_int_equal(info.outputs[0], 3);
      assert_int_equal(info.num_dead_after, 1);
      assert_int_equal(info.dead_after[0], 1);
      char* text;
      KF_CHECK(kf_segment_to_text(s, 1, &text));
      assert_non_null(strstr(text, "segment_set"));
      assert_non_null(strstr(text, "relu"));
      assert_null(strstr(text, "neg"));
      kf_string_free(text);
    }
    kf_segmentation_release(s);
    kf_concrete_release(c);
    kf_fusion_release(f);
  }
}

static void test_segment_by_segment_equals_execute(void** state) {
  (void)state;
  kf_fusion f = neg_relu(1);
  float x[6] = {1, -2, 3, -4, 5, -6};
  int64_t xs[2] = {2, 3};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, NULL);
  const DLTensor* in[1] = {&xt};
  DLManagedTensor* plain;
  KF_CHECK(kf_execute(f, in, 1, &plain, 1, NULL));
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 1, &c));
  kf_segmentation s;
  KF_CHECK(kf_segment(c, &s));
  float mid[6], y[6];
  DLTensor mt = kf_test_tensor(mid, kf_test_f32(), 2, xs, NULL);
  DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, xs, NULL);
  DLTensor* o0[1] = {&mt};
  KF_CHECK(kf_execute_segment(s, 0, in, 1, o0, 1, NULL));
  const DLTensor* i1[1] = {&mt};
  DLTensor* o1[1] = {&yt};
  KF_CHECK(kf_execute_segment(s, 1, i1, 1, o1, 1, NULL));
  assert_memory_equal(y, plain->dl_tensor.data, sizeof y);
  assert_float_equal(y[1], 2, 0);
  assert_float_equal(y[0], 0, 0);
  plain->deleter(plain);
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);
}

static void test_shape_scalar_joins_key(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, n, minus1, r;
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT32, &x));
  KF_CHECK(kf_define_scalar(b, KF_INT64, &n));
  KF_CHECK(kf_define_constant_i64(b, -1, KF_INT64, &minus1));
  int64_t shape[2] = {n, minus1};
  KF_CHECK(kf_reshape(b, x, shape, 2, &r));
  KF_CHECK(kf_add_output(b, r, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  float data[12] = {0};
  int64_t xs[1] = {12};
  int64_t rows = 3;
  DLTensor xt = kf_test_tensor(data, kf_test_f32(), 1, xs, NULL);
  DLTensor nt = kf_test_tensor(&rows, kf_test_i64(), 0, NULL, NULL);
  const DLTensor* in[2] = {&xt, &nt};
  int64_t shape_out[2];
  KF_CHECK(kf_output_shape(f, in, 2, 0, shape_out, 2));
  assert_int_equal(shape_out[0], 3);
  assert_int_equal(shape_out[1], 4);
  kf_concrete c3, c4;
  KF_CHECK(kf_concretize(f, in, 2, &c3));
  rows = 4;
  KF_CHECK(kf_concretize(f, in, 2, &c4));
  assert_ptr_not_equal(c3, c4);
  rows = 5;
  KF_EXPECT_ERROR(kf_concretize(f, in, 2, &c4), KF_ERR_SHAPE_MISMATCH, "reshape");
  kf_concrete_release(c3);
  kf_concrete_release(c4);
  kf_fusion_release(f);
}

static void test_size_zero_input(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  float dummy = 0;
  int64_t xs[2] = {0, 4}, bs[1] = {4};
  float bias[4] = {0};
  DLTensor xt = kf_test_tensor(&dummy, kf_test_f32(), 2, xs, NULL);
  DLTensor bt = kf_test_tensor(bias, kf_test_f32(), 1, bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.shape[0], 0);
  assert_int_equal(out->dl_tensor.shape[1], 4);
  out->deleter(out);
  kf_fusion_release(f);
}

static void test_pinned_output_order(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, y;
  KF_CHECK(kf_define_tensor(b, 2, KF_INT32, &x));
  KF_CHECK(kf_unary(b, KF_OP_NEG, x, &y));
  int64_t order[2] = {1, 0};
  KF_CHECK(kf_add_output(b, y, order, 2, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  int32_t data[6] = {1, 2, 3, 4, 5, 6};
  int64_t xs[2] = {2, 3};
  DLTensor xt = kf_test_tensor(data, kf_test_i32(), 2, xs, NULL);
  const DLTensor* in[1] = {&xt};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  assert_int_equal(out->dl_tensor.strides[0], 1);
  assert_int_equal(out->dl_tensor.strides[1], 2);
  const int32_t* y_data = (const int32_t*)out->dl_tensor.data;
  assert_int_equal(y_data[1 * 1 + 2 * 2], -6); /* y[1][2] */
  out->deleter(out);
  kf_fusion_release(f);
}

/* kf_concretize_into: the plan kf_execute_into makes for caller-allocated
 * outputs. x^T + z with y allocated row-major: y's order is the caller's,
 * not x's, so the plan differs from kf_concretize's; outputs laid out as
 * kfuse would lay them out give kf_concretize's own plan. */
static void test_concretize_into_caller_output_order(void** state) {
  (void)state;
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text(
      "input x: tensor<float32, 2>\ninput z: tensor<float32, 2>\nxt = permute(x) {perm=[1, 0]}\n"
      "y = add(xt, z)\noutput y\n", &f));
  float x[6] = {0}, z[6] = {0}, y[6] = {0};
  int64_t xs[2] = {3, 2}, zs[2] = {2, 3}, row_major[2] = {3, 1}, column_major[2] = {1, 2};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, NULL);
  DLTensor zt = kf_test_tensor(z, kf_test_f32(), 2, zs, NULL);
  const DLTensor* in[2] = {&xt, &zt};
  kf_concrete own = NULL, rows = NULL, same = NULL;
  KF_CHECK(kf_concretize(f, in, 2, &own));
  DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, zs, row_major);
  DLTensor* out[1] = {&yt};
  KF_CHECK(kf_concretize_into(f, in, 2, out, 1, &rows));
  assert_ptr_not_equal(own, rows);
  char* text = NULL;
  KF_CHECK(kf_concrete_describe(rows, &text));
  assert_non_null(strstr(text, "value 3 = add: tensor<float32, 2>, sizes [>1, >1], order [0, 1]"));
  kf_string_free(text);
  /* y column-major, as x^T is: kfuse's own layout, kfuse's own plan. */
  DLTensor yc = kf_test_tensor(y, kf_test_f32(), 2, zs, column_major);
  out[0] = &yc;
  KF_CHECK(kf_concretize_into(f, in, 2, out, 1, &same));
  assert_ptr_equal(own, same);
  /* Outputs are checked as kf_execute_into checks them. */
  kf_concrete bad = NULL;
  KF_EXPECT_ERROR(kf_concretize_into(f, in, 2, out, 0, &bad), KF_ERR_INVALID_ARGUMENT,
                  "kf_concretize_into: expected 1 outputs, got 0");
  int64_t wrong[2] = {3, 2};
  DLTensor yw = kf_test_tensor(y, kf_test_f32(), 2, wrong, NULL);
  out[0] = &yw;
  assert_int_equal(kf_concretize_into(f, in, 2, out, 1, &bad), KF_ERR_SHAPE_MISMATCH);
  assert_null(bad);
  kf_concrete_release(same);
  kf_concrete_release(rows);
  kf_concrete_release(own);
  kf_fusion_release(f);
}

/* s = sum(x, axis 1, keepdim) [M,1]; z = s + y with y [M,N] another input:
 * the reduction's epilogue reads y, whose extents the schedulers cannot prove
 * equal to x's, so it becomes its own pointwise segment. Ids: x=0, y=1,
 * s=2, z=3; extents x: -1, -2; y: -3, -4. */
static void test_reduction_epilogue_segment_ids(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(
      "input x: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
      "s = sum(x) {axes=[1], keepdim=true}\nz = add(s, y)\noutput z\n", &f));
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 1, 1, 2, 2, 2};
  int64_t shape[2] = {2, 3};
  DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, shape, NULL);
  DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[2] = {&xt, &yt};
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in, 2, &c));
  kf_segmentation s;
  KF_CHECK(kf_segment(c, &s));
  size_t n;
  KF_CHECK(kf_segmentation_count(s, &n));
  assert_int_equal(n, 2);
  kf_segment_info info;
  info.struct_size = sizeof info;
  KF_CHECK(kf_segmentation_get(s, 0, &info));
  assert_string_equal(info.scheduler, "reduction");
  assert_int_equal(info.num_inputs, 3); /* x, and its extents */
  assert_int_equal(info.inputs[0], 0);
  assert_int_equal(info.inputs[1], -1);
  assert_int_equal(info.inputs[2], -2);
  assert_int_equal(info.num_outputs, 1);
  assert_int_equal(info.outputs[0], 2);
  assert_int_equal(info.num_dead_after, 0);
  KF_CHECK(kf_segmentation_get(s, 1, &info));
  assert_string_equal(info.scheduler, "pointwise");
  assert_int_equal(info.num_inputs, 6); /* s, y, then the extents z depends on */
  assert_int_equal(info.inputs[0], 2);
  assert_int_equal(info.inputs[1], 1);
  assert_int_equal(info.inputs[2], -1);
  assert_int_equal(info.inputs[3], -2);
  assert_int_equal(info.inputs[4], -3);
  assert_int_equal(info.inputs[5], -4);
  assert_int_equal(info.num_outputs, 1);
  assert_int_equal(info.outputs[0], 3);
  assert_int_equal(info.num_dead_after, 1);
  assert_int_equal(info.dead_after[0], 2);
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  const float* z = (const float*)out->dl_tensor.data;
  assert_float_equal(z[0], 7, 0);
  assert_float_equal(z[5], 17, 0);
  out->deleter(out);
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_class_same_concrete),
      cmocka_unit_test(test_execute_values_and_transposed_layout),
      cmocka_unit_test(test_execute_into_strided_output),
      cmocka_unit_test(test_alias_updates_input_in_place),
      cmocka_unit_test(test_segment_set_cuts),
      cmocka_unit_test(test_segment_by_segment_equals_execute),
      cmocka_unit_test(test_shape_scalar_joins_key),
      cmocka_unit_test(test_size_zero_input),
      cmocka_unit_test(test_pinned_output_order),
      cmocka_unit_test(test_concretize_into_caller_output_order),
      cmocka_unit_test(test_reduction_epilogue_segment_ids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
