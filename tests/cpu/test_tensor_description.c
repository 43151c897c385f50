/* One description of a tensor's geometry from the entry checks to the
 * backends (issue 45, item 5; core/util/dl_layout.h): NULL strides and the
 * equal explicit compact strides, size-1 dims with any stride, stride-0
 * broadcasts and empty tensors with huge other dims and NULL data must read
 * the same at every stage. Each case goes through the public C API on the
 * CPU backend, both ways where there are two: the same plan (kf_concretize
 * and kf_concretize_into give the same handle for the same key), the same
 * results from kf_execute and kf_execute_into, and the same refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static kf_fusion parse(const char* text) {
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

/* y = relu(x + b) */
static kf_fusion add_relu(void) {
  return parse("input x: tensor<float32, 2>\ninput b: tensor<float32, 2>\ns = add(x, b)\ny = relu(s)\noutput y\n");
}

/* a += b, in place */
static kf_fusion add_in_place(void) {
  return parse("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\nc = add(a, b)\noutput c {alias=0}\n");
}

static float relu(float v) { return v > 0 ? v : 0; }

/* Element (i, j) of a rank-2 float tensor, through its strides (NULL:
 * row-major, as DLPack says). */
static float at(const DLTensor* t, int64_t i, int64_t j) {
  const int64_t si = t->strides ? t->strides[0] : t->shape[1], sj = t->strides ? t->strides[1] : 1;
  const float* p = (const float*)((const char*)t->data + t->byte_offset);
  return p[i * si + j * sj];
}

static void expect_2d(const DLTensor* t, const float* want, int64_t rows, int64_t cols) {
  assert_int_equal(t->ndim, 2);
  assert_int_equal(t->shape[0], rows);
  assert_int_equal(t->shape[1], cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (at(t, i, j) != want[i * cols + j])
        fail_msg("element (%lld, %lld): got %g, expected %g", (long long)i, (long long)j, (double)at(t, i, j),
                 (double)want[i * cols + j]);
}

/* kf_execute's output: checked against `want`, with explicit compact strides
 * (never NULL, kfuse.h), then deleted. */
static void expect_new_output(DLManagedTensor* out, const float* want, int64_t rows, int64_t cols) {
  assert_non_null(out->dl_tensor.strides);
  if (rows > 1) assert_int_equal(out->dl_tensor.strides[0], cols);
  if (cols > 1) assert_int_equal(out->dl_tensor.strides[1], 1);
  expect_2d(&out->dl_tensor, want, rows, cols);
  out->deleter(out);
}

static kf_concrete concretize(kf_fusion f, const DLTensor* x, const DLTensor* b) {
  const DLTensor* in[2] = {x, b};
  kf_concrete c = NULL;
  KF_CHECK(kf_concretize(f, in, 2, &c));
  return c;
}

static kf_concrete concretize_into(kf_fusion f, const DLTensor* x, const DLTensor* b, DLTensor* y) {
  const DLTensor* in[2] = {x, b};
  DLTensor* outs[1] = {y};
  kf_concrete c = NULL;
  KF_CHECK(kf_concretize_into(f, in, 2, outs, 1, &c));
  return c;
}

/* ------------------------------------------------------------------------ */

/* Inputs and outputs with NULL strides and with the same strides spelled
 * out: one plan, the same results, the same refusals of overlapping
 * outputs. */
static void test_null_strides_read_as_compact_strides(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float x[12], b[12], want[12];
  for (int i = 0; i < 12; ++i) {
    x[i] = (float)(i - 6);
    b[i] = 0.5f * (float)(i % 5) - 1.0f;
    want[i] = relu(x[i] + b[i]);
  }
  int64_t shape[2] = {3, 4}, compact[2] = {4, 1};
  kf_concrete first = NULL, first_into = NULL;
  for (int mask = 0; mask < 8; ++mask) {
    DLTensor tx = kf_test_tensor(x, kf_test_f32(), 2, shape, (mask & 1) ? compact : NULL);
    DLTensor tb = kf_test_tensor(b, kf_test_f32(), 2, shape, (mask & 2) ? compact : NULL);
    const DLTensor* in[2] = {&tx, &tb};

    kf_concrete c = concretize(f, &tx, &tb);
    if (first == NULL) first = c;
    else {
      assert_ptr_equal(c, first);
      kf_concrete_release(c);
    }

    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
    expect_new_output(out, want, 3, 4);

    float y[12];
    memset(y, 0xff, sizeof y);
    DLTensor ty = kf_test_tensor(y, kf_test_f32(), 2, shape, (mask & 4) ? compact : NULL);
    DLTensor* outs[1] = {&ty};
    c = concretize_into(f, &tx, &tb, &ty);
    if (first_into == NULL) first_into = c;
    else {
      assert_ptr_equal(c, first_into);
      kf_concrete_release(c);
    }
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    expect_2d(&ty, want, 3, 4);

    /* An output over an input it does not alias is refused, whichever way
     * either spells its strides: over x itself, and over b from its second
     * row on. */
    DLTensor over_x = kf_test_tensor(x, kf_test_f32(), 2, shape, (mask & 4) ? compact : NULL);
    outs[0] = &over_x;
    KF_EXPECT_ERROR(kf_execute_into(f, in, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                    "output 0 (value 3): memory overlaps input 0, which it is not declared to alias");
    float big[16];
    memcpy(big + 4, b, sizeof b);
    DLTensor over_b = kf_test_tensor(big, kf_test_f32(), 2, shape, (mask & 4) ? compact : NULL);
    DLTensor tb_in_big = kf_test_tensor(big + 4, kf_test_f32(), 2, shape, (mask & 2) ? compact : NULL);
    const DLTensor* in_big[2] = {&tx, &tb_in_big};
    outs[0] = &over_b;
    KF_EXPECT_ERROR(kf_execute_into(f, in_big, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                    "output 0 (value 3): memory overlaps input 1, which it is not declared to alias");
  }
  kf_concrete_release(first);
  kf_concrete_release(first_into);
  kf_fusion_release(f);
}

/* An in-place output may be its input's own memory, spelled with NULL
 * strides on one side and explicit compact strides on the other; memory
 * shifted from it by one element is refused either way. */
static void test_in_place_with_either_spelling(void** state) {
  (void)state;
  kf_fusion f = add_in_place();
  int64_t shape[2] = {3, 4}, compact[2] = {4, 1};
  float b[12];
  for (int i = 0; i < 12; ++i) b[i] = (float)(10 * i);
  DLTensor tb = kf_test_tensor(b, kf_test_f32(), 2, shape, NULL);
  for (int mask = 0; mask < 4; ++mask) {
    float a[13], want[12];
    for (int i = 0; i < 13; ++i) a[i] = (float)i;
    for (int i = 0; i < 12; ++i) want[i] = a[i] + b[i];
    DLTensor ta = kf_test_tensor(a, kf_test_f32(), 2, shape, (mask & 1) ? compact : NULL);
    DLTensor to = kf_test_tensor(a, kf_test_f32(), 2, shape, (mask & 2) ? compact : NULL);
    const DLTensor* in[2] = {&ta, &tb};
    DLTensor* outs[1] = {&to};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    expect_2d(&ta, want, 3, 4);
    assert_true(a[12] == 12.0f); /* past the tensor: untouched */

    DLTensor shifted = kf_test_tensor(a + 1, kf_test_f32(), 2, shape, (mask & 2) ? compact : NULL);
    outs[0] = &shifted;
    KF_EXPECT_ERROR(kf_execute_into(f, in, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                    "output 0 (value 2): memory overlaps input 0, which it updates in place, but not element for "
                    "element");
    expect_2d(&ta, want, 3, 4); /* nothing ran */

    /* kf_execute hands back a view of the input: its strides, explicit. */
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
    for (int i = 0; i < 12; ++i) want[i] += b[i];
    assert_ptr_equal(out->dl_tensor.data, a);
    expect_new_output(out, want, 3, 4);
  }
  kf_fusion_release(f);
}

/* Empty tensors are valid with any other dims, in any order, and with NULL
 * data: [0, INT64_MAX] was accepted, [INT64_MAX, 0] refused ("element count
 * overflows int64 at dim 0") although it holds no element either. NULL
 * strides and the strides torch gives such a tensor (a size-0 dim counts as
 * 1) are one plan. Non-empty tensors with NULL data are still refused. */
static void test_empty_with_huge_dims_and_null_data(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  int64_t shapes[4][2] = {{0, INT64_MAX}, {INT64_MAX, 0}, {0, 0}, {INT64_C(1) << 40, 0}};
  int64_t torch[4][2] = {{INT64_MAX, 1}, {1, 1}, {1, 1}, {1, 1}};
  for (int k = 0; k < 4; ++k) {
    DLTensor null_strides = kf_test_tensor(NULL, kf_test_f32(), 2, shapes[k], NULL);
    DLTensor explicit_strides = kf_test_tensor(NULL, kf_test_f32(), 2, shapes[k], torch[k]);
    kf_concrete c1 = concretize(f, &null_strides, &null_strides);
    kf_concrete c2 = concretize(f, &explicit_strides, &null_strides);
    kf_concrete c3 = concretize(f, &null_strides, &explicit_strides);
    assert_ptr_equal(c1, c2);
    assert_ptr_equal(c1, c3);
    kf_concrete_release(c1);
    kf_concrete_release(c2);
    kf_concrete_release(c3);

    const DLTensor* in[2] = {&null_strides, &explicit_strides};
    int64_t got[2] = {-1, -1};
    KF_CHECK(kf_output_shape(f, in, 2, 0, got, 2));
    assert_int_equal(got[0], shapes[k][0]);
    assert_int_equal(got[1], shapes[k][1]);
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
    assert_int_equal(out->dl_tensor.shape[0], shapes[k][0]);
    assert_int_equal(out->dl_tensor.shape[1], shapes[k][1]);
    out->deleter(out);

    /* Into empty outputs with NULL data, either spelling. */
    DLTensor y1 = kf_test_tensor(NULL, kf_test_f32(), 2, shapes[k], NULL);
    DLTensor y2 = kf_test_tensor(NULL, kf_test_f32(), 2, shapes[k], torch[k]);
    DLTensor* outs[1] = {&y1};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    outs[0] = &y2;
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
  }
  /* Empty with dims whose product overflows int64 whichever comes first. */
  int64_t r3[3][3] = {{0, INT64_C(1) << 40, INT64_C(1) << 40},
                      {INT64_C(1) << 40, INT64_C(1) << 40, 0},
                      {INT64_C(1) << 40, 0, INT64_C(1) << 40}};
  kf_fusion g = parse("input x: tensor<float32, 3>\ny = neg(x)\noutput y\n");
  for (int k = 0; k < 3; ++k) {
    DLTensor tx = kf_test_tensor(NULL, kf_test_f32(), 3, r3[k], NULL);
    const DLTensor* in[1] = {&tx};
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(g, in, 1, &out, 1, NULL));
    assert_int_equal(out->dl_tensor.shape[2], r3[k][2]);
    out->deleter(out);
  }
  kf_fusion_release(g);

  /* One element more and the data must be there. */
  int64_t one[2] = {1, 1}, unit[2] = {1, 1};
  DLTensor x = kf_test_tensor(NULL, kf_test_f32(), 2, one, NULL);
  DLTensor xs = kf_test_tensor(NULL, kf_test_f32(), 2, one, unit);
  float v = 1.0f;
  DLTensor b = kf_test_tensor(&v, kf_test_f32(), 2, one, NULL);
  for (int k = 0; k < 2; ++k) {
    const DLTensor* in[2] = {k ? &xs : &x, &b};
    DLManagedTensor* out = NULL;
    KF_EXPECT_ERROR(kf_execute(f, in, 2, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                    "input 0 (value 0): data is NULL for 1 elements");
    const DLTensor* ok[2] = {&b, &b};
    DLTensor y = kf_test_tensor(NULL, kf_test_f32(), 2, one, k ? unit : NULL);
    DLTensor* outs[1] = {&y};
    KF_EXPECT_ERROR(kf_execute_into(f, ok, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                    "output 0 (value 3): data is NULL");
  }
  kf_fusion_release(f);
}

/* A size-1 dim's stride addresses no second element: any value (up to
 * INT64_MAX) reads as the compact one, for inputs, outputs and the
 * in-place check's "element for element". */
static void test_size1_dims_with_any_stride(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float x[4] = {-2, -1, 1, 2}, b[12], want[12];
  for (int i = 0; i < 12; ++i) {
    b[i] = (float)(i % 3) - 1.0f;
    want[i] = relu(x[i % 4] + b[i]);
  }
  int64_t row[2] = {1, 4}, full[2] = {3, 4};
  int64_t row_strides[4][2] = {{4, 1}, {12345, 1}, {INT64_MAX, 1}, {0, 1}};
  DLTensor tb = kf_test_tensor(b, kf_test_f32(), 2, full, NULL);
  DLTensor null_row = kf_test_tensor(x, kf_test_f32(), 2, row, NULL);
  kf_concrete base = concretize(f, &null_row, &tb);
  for (int k = 0; k < 4; ++k) {
    DLTensor tx = kf_test_tensor(x, kf_test_f32(), 2, row, row_strides[k]);
    kf_concrete c = concretize(f, &tx, &tb);
    assert_ptr_equal(c, base);
    kf_concrete_release(c);
    const DLTensor* in[2] = {&tx, &tb};
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
    expect_new_output(out, want, 3, 4);
  }
  kf_concrete_release(base);

  /* A column [4, 1]: its last stride is free too. */
  int64_t col[2] = {4, 1}, col_strides[2] = {1, 777};
  float wcol[4];
  float zero[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) wcol[i] = relu(x[i]);
  DLTensor cz = kf_test_tensor(zero, kf_test_f32(), 2, col, NULL);
  for (int k = 0; k < 2; ++k) {
    DLTensor tx = kf_test_tensor(x, kf_test_f32(), 2, col, k ? col_strides : NULL);
    const DLTensor* in[2] = {&tx, &cz};
    float y[4] = {9, 9, 9, 9};
    DLTensor ty = kf_test_tensor(y, kf_test_f32(), 2, col, k ? NULL : col_strides);
    DLTensor* outs[1] = {&ty};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    for (int i = 0; i < 4; ++i) assert_true(y[i] == wcol[i]);
  }
  kf_fusion_release(f);

  /* In place: the output's size-1 dim may carry another stride than the
   * input's and still be the same elements. */
  kf_fusion g = add_in_place();
  float a[4] = {1, 2, 3, 4}, d[4] = {10, 20, 30, 40};
  int64_t in_strides[2] = {4, 1}, out_strides[2] = {99, 1};
  DLTensor ta = kf_test_tensor(a, kf_test_f32(), 2, row, in_strides);
  DLTensor td = kf_test_tensor(d, kf_test_f32(), 2, row, NULL);
  DLTensor to = kf_test_tensor(a, kf_test_f32(), 2, row, out_strides);
  const DLTensor* in[2] = {&ta, &td};
  DLTensor* outs[1] = {&to};
  KF_CHECK(kf_execute_into(g, in, 2, outs, 1, NULL));
  for (int i = 0; i < 4; ++i) assert_true(a[i] == (float)(11 * (i + 1)));
  kf_fusion_release(g);
}

/* A stride-0 (broadcast) input reads as the tensor it repeats; an output
 * with a stride-0 dim would write one element twice and is refused. */
static void test_broadcast_input(void** state) {
  (void)state;
  kf_fusion f = add_relu();
  float x[12], brow[4] = {-3, -1, 1, 3}, bfull[12], want[12];
  for (int i = 0; i < 12; ++i) {
    x[i] = (float)(i / 4) - 1.0f;
    bfull[i] = brow[i % 4];
    want[i] = relu(x[i] + bfull[i]);
  }
  int64_t full[2] = {3, 4}, row[2] = {1, 4}, stride0[2] = {0, 1};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 2, full, NULL);
  DLTensor spellings[3] = {
      kf_test_tensor(brow, kf_test_f32(), 2, full, stride0), /* expanded */
      kf_test_tensor(brow, kf_test_f32(), 2, row, NULL),     /* broadcast by size 1 */
      kf_test_tensor(bfull, kf_test_f32(), 2, full, NULL),   /* materialized */
  };
  for (int k = 0; k < 3; ++k) {
    const DLTensor* in[2] = {&tx, &spellings[k]};
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
    expect_new_output(out, want, 3, 4);
    float y[12];
    memset(y, 0, sizeof y);
    DLTensor ty = kf_test_tensor(y, kf_test_f32(), 2, full, NULL);
    DLTensor* outs[1] = {&ty};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    expect_2d(&ty, want, 3, 4);
    /* The broadcast operand is no output's memory: a write there is refused. */
    if (k == 0) {
      DLTensor over = kf_test_tensor(brow, kf_test_f32(), 2, row, NULL);
      int64_t one_row[2] = {1, 4};
      DLTensor tx1 = kf_test_tensor(x, kf_test_f32(), 2, one_row, NULL);
      DLTensor b1 = kf_test_tensor(brow, kf_test_f32(), 2, one_row, stride0);
      const DLTensor* in1[2] = {&tx1, &b1};
      outs[0] = &over;
      KF_EXPECT_ERROR(kf_execute_into(f, in1, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                      "output 0 (value 3): memory overlaps input 1, which it is not declared to alias");
    }
  }
  float y[4];
  DLTensor ty = kf_test_tensor(y, kf_test_f32(), 2, full, stride0);
  DLTensor* outs[1] = {&ty};
  const DLTensor* in[2] = {&tx, &spellings[0]};
  KF_EXPECT_ERROR(kf_execute_into(f, in, 2, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 0 (value 3): strides make the tensor overlap itself (dim 0 has stride 0");
  kf_fusion_release(f);
}

/* An in-place input of 1-byte elements whose one stride is 2^62: its reach
 * is at the limit and accepted, and the self-overlap test sized the span of
 * that outermost dim as stride * size = 2^63, a signed overflow (undefined
 * behaviour, which the sanitizer builds report) before dl_layout.h's
 * saturating product. The plan is made; nothing is run (the memory is not
 * there). */
static void test_in_place_stride_at_the_reach_limit(void** state) {
  (void)state;
  kf_fusion f = parse("input a: tensor<int8, 1>\nc = neg(a)\noutput c {alias=0}\n");
  int8_t a[1] = {0};
  int64_t shape[1] = {2}, strides[1] = {INT64_C(1) << 62};
  DLDataType i8 = {kDLInt, 8, 1};
  DLTensor ta = kf_test_tensor(a, i8, 1, shape, strides);
  const DLTensor* in[1] = {&ta};
  kf_concrete c = NULL;
  KF_CHECK(kf_concretize(f, in, 1, &c));
  kf_concrete_release(c);
  /* One element further is past the limit. */
  shape[0] = 3;
  KF_EXPECT_ERROR(kf_concretize(f, in, 1, &c), KF_ERR_SHAPE_MISMATCH,
                  "input 0 (value 0): strides reach beyond int64 offsets at dim 0");
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null_strides_read_as_compact_strides),
      cmocka_unit_test(test_in_place_with_either_spelling),
      cmocka_unit_test(test_empty_with_huge_dims_and_null_data),
      cmocka_unit_test(test_size1_dims_with_any_stride),
      cmocka_unit_test(test_broadcast_input),
      cmocka_unit_test(test_in_place_stride_at_the_reach_limit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
