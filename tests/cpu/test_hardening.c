/* Regression tests for adversarial inputs that once crashed, wrapped or
 * corrupted memory (issue 43), each through the public C API on the CPU
 * backend: in-place outputs larger than their input, size arithmetic that
 * overflowed int64, allocation byte counts that wrapped, the segment-by-
 * segment entry points that skipped kf_execute's checks, shape values
 * carried in a double, outputs that overlap each other, in-place updates of
 * stride-0 inputs, and the small contract breaks (slice step, byte_offset
 * wrap, misaligned outputs). Also the other side of the overlap rule: views
 * that interleave in one buffer without sharing an element are accepted. */
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

static DLTensor scalar_i64(int64_t* v) {
  DLTensor t = kf_test_tensor(v, kf_test_i64(), 0, NULL, NULL);
  return t;
}

/* ------------------------------------------------------------------------ */
/* In-place outputs                                                         */

/* a.add_(b) with b broadcasting a up: the output is larger than the memory
 * it would be written into (once a heap overflow). */
static void test_in_place_output_larger_than_its_input(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input a: tensor<float32, 1>\ninput b: tensor<float32, 1>\n"
      "c = add(a, b)\noutput c {alias=0}\n");
  float a[1] = {1}, b[1000];
  for (int i = 0; i < 1000; ++i) b[i] = (float)i;
  int64_t sa[1] = {1}, sb[1] = {1000};
  DLTensor ta = kf_test_tensor(a, kf_test_f32(), 1, sa, NULL);
  DLTensor tb = kf_test_tensor(b, kf_test_f32(), 1, sb, NULL);
  const DLTensor* in[2] = {&ta, &tb};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 2, &out, 1, NULL), KF_ERR_SHAPE_MISMATCH,
                  "output 0 (value 2) is written in place into input 0 (value 0), so it must have that input's "
                  "shape; in dim 0 it has size 1000, the input 1");
  assert_null(out);
  assert_true(a[0] == 1.0f);
  /* The same call with equal shapes runs in place. */
  float a2[1000];
  for (int i = 0; i < 1000; ++i) a2[i] = 1;
  DLTensor ta2 = kf_test_tensor(a2, kf_test_f32(), 1, sb, NULL);
  in[0] = &ta2;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  assert_ptr_equal(out->dl_tensor.data, a2);
  out->deleter(out);
  assert_true(a2[999] == 1000.0f);
  kf_fusion_release(f);
}

/* An in-place update of a stride-0 (broadcast) input would write every row
 * of the result onto one row. */
static void test_in_place_output_over_a_stride0_input(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\n"
      "c = add(a, b)\noutput c {alias=0}\n");
  float a[3] = {1, 2, 3}, b[6] = {0};
  int64_t shape[2] = {2, 3}, sa[2] = {0, 1};
  DLTensor ta = kf_test_tensor(a, kf_test_f32(), 2, shape, sa);
  DLTensor tb = kf_test_tensor(b, kf_test_f32(), 2, shape, NULL);
  const DLTensor* in[2] = {&ta, &tb};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 2, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "input 0 (value 0) is updated in place by output 0 (value 2), but its strides reach one element "
                  "more than once (dim 0 has stride 0");
  kf_fusion_release(f);
}

/* kf_execute_into: an in-place output given as memory that partly overlaps
 * its input (shifted by one element) would read elements it already wrote. */
static void test_in_place_output_shifted_from_its_input(void** state) {
  (void)state;
  kf_fusion f = parse("input a: tensor<float32, 1>\nc = neg(a)\noutput c {alias=0}\n");
  float buf[9] = {0};
  int64_t shape[1] = {8};
  DLTensor ta = kf_test_tensor(buf, kf_test_f32(), 1, shape, NULL);
  DLTensor to = kf_test_tensor(buf + 1, kf_test_f32(), 1, shape, NULL);
  const DLTensor* in[1] = {&ta};
  DLTensor* outs[1] = {&to};
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 0 (value 1): memory overlaps input 0, which it updates in place, but not element for element");
  /* The input's own view is fine. */
  for (int i = 0; i < 8; ++i) buf[i] = (float)i;
  outs[0] = &ta;
  KF_CHECK(kf_execute_into(f, in, 1, outs, 1, NULL));
  assert_true(buf[7] == -7.0f);
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* Size arithmetic                                                          */

static void test_pad_sizes_that_overflow(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input x: tensor<float32, 1>\nconst z: float32 = 0\n"
      "y = pad(x, z) {pads=[9223372036854775806, 9223372036854775806]}\noutput y\n");
  float x[2] = {1, 2};
  int64_t shape[1] = {2};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
  const DLTensor* in[1] = {&tx};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_SHAPE_MISMATCH, "pad (value 2): pads of dim 0 overflow int64");
  assert_null(out);
  kf_fusion_release(f);
  /* One pad that fits int64 but whose sum with the extent does not. */
  f = parse(
      "input x: tensor<float32, 1>\nconst z: float32 = 0\n"
      "y = pad(x, z) {pads=[9223372036854775806, 0]}\noutput y\n");
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_SHAPE_MISMATCH, "pad (value 2): size of dim 0 overflows int64");
  kf_fusion_release(f);
}

static void test_cat_sizes_that_overflow(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input a: tensor<float32, 1>\ninput b: tensor<float32, 1>\ny = cat(a, b) {dim=0}\noutput y\n");
  float one[1] = {1};
  int64_t shape[1] = {(int64_t)1 << 62}, zero[1] = {0};
  /* Two stride-0 views of 2^62 elements each: 2^63 does not fit int64. */
  DLTensor ta = kf_test_tensor(one, kf_test_f32(), 1, shape, zero);
  DLTensor tb = kf_test_tensor(one, kf_test_f32(), 1, shape, zero);
  const DLTensor* in[2] = {&ta, &tb};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 2, &out, 1, NULL), KF_ERR_SHAPE_MISMATCH, "cat (value 2): size of dim 0 overflows int64");
  kf_fusion_release(f);
}

/* A slice step larger than the extent selects the start element (torch:
 * one element), not zero. */
static void test_slice_step_int64_max(void** state) {
  (void)state;
  kf_fusion f = parse("input x: tensor<float32, 1>\ny = slice(x) {dim=0, start=1, step=9223372036854775807}\noutput y\n");
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4}, got[1] = {-1};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
  const DLTensor* in[1] = {&tx};
  KF_CHECK(kf_output_shape(f, in, 1, 0, got, 1));
  assert_int_equal(got[0], 1);
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  const float want[1] = {2};
  kf_test_expect_f32(out, want, 1);
  kf_fusion_release(f);
}

/* Shape values above 2^53 stay exact (they were carried in a double). */
static void test_shape_values_above_2_pow_53(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input n: scalar<int64>\ninput k: scalar<int64>\nconst one: float32 = 1\n"
      "m = sub(n, k)\ny = full([m], one) {dtype=float32}\noutput y\n");
  int64_t n = ((int64_t)1 << 53) + 1, k = (int64_t)1 << 53, got[1] = {-1};
  DLTensor tn = scalar_i64(&n), tk = scalar_i64(&k);
  const DLTensor* in[2] = {&tn, &tk};
  KF_CHECK(kf_output_shape(f, in, 2, 0, got, 1));
  assert_int_equal(got[0], 1);
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in, 2, &out, 1, NULL));
  const float want[1] = {1};
  kf_test_expect_f32(out, want, 1);
  /* Two calls whose sizes differ beyond a double's precision are two
   * classes: the second must not reuse the first's sizes. */
  n = ((int64_t)1 << 53) + 3;
  KF_CHECK(kf_output_shape(f, in, 2, 0, got, 1));
  assert_int_equal(got[0], 3);
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* Allocation byte counts                                                   */

static void test_allocation_bytes_that_wrap(void** state) {
  (void)state;
  /* A float64 stride-0 input of 2^61 elements (8 bytes of memory) through
   * neg: 2^64 bytes of output. */
  kf_fusion f = parse("input x: tensor<float64, 1>\ny = neg(x)\noutput y\n");
  double x[1] = {1};
  int64_t shape[1] = {(int64_t)1 << 61}, zero[1] = {0};
  DLTensor tx = kf_test_tensor(x, kf_test_f64(), 1, shape, zero);
  const DLTensor* in[1] = {&tx};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_OUT_OF_MEMORY, "exceed what can be allocated");
  assert_null(out);
  kf_fusion_release(f);

  /* full([n]) float32 with n = 2^62. */
  f = parse("input n: scalar<int64>\nconst one: float32 = 1\ny = full([n], one) {dtype=float32}\noutput y\n");
  int64_t n = (int64_t)1 << 62;
  DLTensor tn = scalar_i64(&n);
  in[0] = &tn;
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_OUT_OF_MEMORY, "exceed what can be allocated");
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* Caller-provided outputs                                                  */

static void test_outputs_that_overlap_each_other(void** state) {
  (void)state;
  kf_fusion f = parse("input x: tensor<float32, 1>\ny = neg(x)\nz = abs(x)\noutput y\noutput z\n");
  float x[4] = {1, -2, 3, -4}, buf[5] = {0};
  int64_t shape[1] = {4};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
  DLTensor ty = kf_test_tensor(buf, kf_test_f32(), 1, shape, NULL);
  DLTensor tz = kf_test_tensor(buf + 1, kf_test_f32(), 1, shape, NULL);
  const DLTensor* in[1] = {&tx};
  DLTensor* outs[2] = {&ty, &tz};
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 1 (value 2): memory overlaps output 0");
  outs[1] = &ty; /* the very same memory */
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 1 (value 2): memory overlaps output 0");
  kf_fusion_release(f);
}

static void test_output_misaligned_or_wrapping(void** state) {
  (void)state;
  kf_fusion f = parse("input x: tensor<float32, 1>\ny = neg(x)\noutput y\n");
  float x[4] = {1, 2, 3, 4}, y[5] = {0};
  int64_t shape[1] = {4};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
  DLTensor ty = kf_test_tensor(y, kf_test_f32(), 1, shape, NULL);
  ty.byte_offset = 1;
  const DLTensor* in[1] = {&tx};
  DLTensor* outs[1] = {&ty};
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 0 (value 1): data pointer + byte_offset");
  ty.byte_offset = (uint64_t)0 - 4; /* data - 4 in disguise */
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "reach past the end of the address space");
  /* An input's byte_offset that wraps the address space. */
  ty.byte_offset = 0;
  tx.byte_offset = (uint64_t)0 - 4;
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "input 0 (value 0): data pointer + byte_offset");
  /* A reach within int64 offsets (2^62 elements) whose bytes pass 2^64:
   * the byte count itself must not wrap. */
  tx.byte_offset = 0;
  int64_t huge[1] = {((int64_t)1 << 61) + 1}, two[1] = {2};
  tx.shape = huge;
  tx.strides = two;
  KF_EXPECT_ERROR(kf_execute_into(f, in, 1, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "input 0 (value 0): data pointer + byte_offset (");
  kf_fusion_release(f);
}

/* Views of one buffer that interleave without sharing an element are
 * accepted (q and k as column slices of a fused qkv buffer, rotated in
 * place; even and odd columns); a true overlap is still refused. */
static void test_interleaved_views_of_one_buffer(void** state) {
  (void)state;
  kf_fusion f = parse(
      "input q: tensor<float32, 2>\ninput k: tensor<float32, 2>\n"
      "q2 = neg(q)\nk2 = mul(k, k)\noutput q2 {alias=0}\noutput k2 {alias=1}\n");
  enum { T = 3, H = 4 };
  float qkv[T * 3 * H];
  for (int i = 0; i < T * 3 * H; ++i) qkv[i] = (float)i;
  int64_t shape[2] = {T, H}, strides[2] = {3 * H, 1};
  DLTensor tq = kf_test_tensor(qkv, kf_test_f32(), 2, shape, strides);
  DLTensor tk = kf_test_tensor(qkv + H, kf_test_f32(), 2, shape, strides);
  const DLTensor* in[2] = {&tq, &tk};
  DLTensor* outs[2] = {&tq, &tk};
  KF_CHECK(kf_execute_into(f, in, 2, outs, 2, NULL));
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < H; ++h) {
      const float q0 = (float)(t * 3 * H + h), k0 = (float)(t * 3 * H + H + h), v0 = (float)(t * 3 * H + 2 * H + h);
      assert_true(qkv[t * 3 * H + h] == -q0);
      assert_true(qkv[t * 3 * H + H + h] == k0 * k0);
      assert_true(qkv[t * 3 * H + 2 * H + h] == v0); /* v untouched */
    }
  /* Even and odd columns of one [T, 2H] buffer. */
  float buf[T * 2 * H];
  for (int i = 0; i < T * 2 * H; ++i) buf[i] = (float)i;
  int64_t eo_strides[2] = {2 * H, 2};
  DLTensor te = kf_test_tensor(buf, kf_test_f32(), 2, shape, eo_strides);
  DLTensor to = kf_test_tensor(buf + 1, kf_test_f32(), 2, shape, eo_strides);
  in[0] = &te;
  in[1] = &to;
  outs[0] = &te;
  outs[1] = &to;
  KF_CHECK(kf_execute_into(f, in, 2, outs, 2, NULL));
  for (int i = 0; i < T * 2 * H; ++i) assert_true(buf[i] == (i % 2 == 0 ? -(float)i : (float)i * (float)i));
  /* Column windows that share one column per row: refused. */
  DLTensor tk_shifted = kf_test_tensor(qkv + H - 1, kf_test_f32(), 2, shape, strides);
  in[0] = &tq;
  in[1] = &tk_shifted;
  outs[0] = &tq;
  outs[1] = &tk_shifted;
  KF_EXPECT_ERROR(kf_execute_into(f, in, 2, outs, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "output 0 (value 2): memory overlaps input 1, which it is not declared to alias");
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* Running segments one by one: the same checks as kf_execute               */

typedef struct {
  kf_fusion fusion;
  kf_concrete concrete;
  kf_segmentation seg;
} seg_fixture;

/* y = x * s + b over x [2, 3] f32, s an f32 scalar, b [3]: one segment with
 * a tensor, a scalar and a broadcast input. */
static seg_fixture make_segment(float* x, float* b, float* s, DLTensor* tx, DLTensor* ts, DLTensor* tb) {
  seg_fixture fx;
  fx.fusion = parse(
      "input x: tensor<float32, 2>\ninput s: scalar<float32>\ninput b: tensor<float32, 1>\n"
      "m = mul(x, s)\ny = add(m, b)\noutput y\n");
  static int64_t sx[2] = {2, 3}, sb[1] = {3};
  *tx = kf_test_tensor(x, kf_test_f32(), 2, sx, NULL);
  *ts = kf_test_tensor(s, kf_test_f32(), 0, NULL, NULL);
  *tb = kf_test_tensor(b, kf_test_f32(), 1, sb, NULL);
  const DLTensor* in[3] = {tx, ts, tb};
  KF_CHECK(kf_concretize(fx.fusion, in, 3, &fx.concrete));
  KF_CHECK(kf_segment(fx.concrete, &fx.seg));
  size_t count = 0;
  KF_CHECK(kf_segmentation_count(fx.seg, &count));
  assert_int_equal(count, 1);
  return fx;
}

static void release_segment(seg_fixture* fx) {
  kf_segmentation_release(fx->seg);
  kf_concrete_release(fx->concrete);
  kf_fusion_release(fx->fusion);
}

static void test_execute_segment_checks_inputs(void** state) {
  (void)state;
  float x[6] = {1, 2, 3, 4, 5, 6}, b[3] = {1, 1, 1}, s = 2, y[6] = {0};
  DLTensor tx, ts, tb;
  seg_fixture fx = make_segment(x, b, &s, &tx, &ts, &tb);
  int64_t sy[2] = {2, 3};
  DLTensor ty = kf_test_tensor(y, kf_test_f32(), 2, sy, NULL);
  const DLTensor* in[3] = {&tx, &ts, &tb};
  DLTensor* outs[1] = {&ty};
  int64_t shape[2];

  /* NULL data: an input, the scalar, an output. */
  tx.data = NULL;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: input 0 (value 0): data is NULL");
  KF_EXPECT_ERROR(kf_segment_output_shape(fx.seg, 0, in, 3, 0, shape, 2), KF_ERR_INVALID_ARGUMENT,
                  "kf_segment_output_shape: input 0 (value 0): data is NULL");
  tx.data = x;
  ts.data = NULL;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: input 1 (value 1): data is NULL");
  ts.data = &s;
  ty.data = NULL;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: output 0 (value 4): data is NULL");
  ty.data = y;

  /* Negative sizes and strides, a misaligned offset. */
  int64_t neg_shape[2] = {-2, 3};
  tx.shape = neg_shape;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_SHAPE_MISMATCH,
                  "kf_execute_segment: input 0 (value 0): size of dim 0 is -2, expected >= 0");
  tx.shape = sy;
  int64_t neg_strides[2] = {3, -1};
  tx.strides = neg_strides;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_UNSUPPORTED,
                  "kf_execute_segment: input 0 (value 0): stride of dim 1 is -1");
  tx.strides = NULL;
  tx.byte_offset = 2;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: input 0 (value 0): data pointer + byte_offset");
  tx.byte_offset = 0;

  /* Outputs: a shape other than the inferred one (once written past a
   * small buffer), self-overlap, overlap with an input. */
  int64_t small[2] = {1, 3};
  ty.shape = small;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_SHAPE_MISMATCH,
                  "kf_execute_segment: output 0 (value 4): expected size 2 in dim 0, got 1");
  ty.shape = sy;
  int64_t self[2] = {1, 1};
  ty.strides = self;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: output 0 (value 4): strides make the tensor overlap itself");
  ty.strides = NULL;
  outs[0] = &tx;
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_segment: output 0 (value 4): memory overlaps input 0");
  outs[0] = &ty;
  /* No outputs at all for a segment that has one. */
  KF_EXPECT_ERROR(kf_execute_segment(fx.seg, 0, in, 3, NULL, 0, NULL), KF_ERR_INVALID_ARGUMENT,
                  "segment 0 has 1 outputs, got 0");

  /* And the valid call still works. */
  KF_CHECK(kf_segment_output_shape(fx.seg, 0, in, 3, 0, shape, 2));
  assert_int_equal(shape[0], 2);
  assert_int_equal(shape[1], 3);
  KF_CHECK(kf_execute_segment(fx.seg, 0, in, 3, outs, 1, NULL));
  for (int i = 0; i < 6; ++i) assert_true(y[i] == x[i] * 2 + 1);
  release_segment(&fx);
}

/* ------------------------------------------------------------------------ */
/* Builder arguments                                                        */

static void test_builder_counts_and_flags(void** state) {
  (void)state;
  kf_builder b = NULL;
  int64_t x, y, axes[1] = {1};
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  /* keepdim is documented as 0 or 1. */
  KF_EXPECT_ERROR(kf_reduce(b, KF_OP_SUM, x, axes, 1, 2, &y), KF_ERR_INVALID_ARGUMENT,
                  "kf_reduce: keepdim must be 0 or 1, got 2");
  KF_EXPECT_ERROR(kf_var(b, x, axes, 1, 1, -1, &y), KF_ERR_INVALID_ARGUMENT, "kf_var: keepdim must be 0 or 1, got -1");
  /* A count of SIZE_MAX once made p + n wrap: now a named limit. */
  KF_EXPECT_ERROR(kf_reduce(b, KF_OP_SUM, x, axes, SIZE_MAX, 1, &y), KF_ERR_INVALID_ARGUMENT,
                  "kf_reduce: argument 'axes' has 18446744073709551615 entries, more than the limit of");
  KF_EXPECT_ERROR(kf_builder_op(b, KF_OP_ADD, axes, SIZE_MAX, NULL, 0, &y, 1), KF_ERR_INVALID_ARGUMENT,
                  "kf_builder_op: argument 'args' has");
  /* An enum argument outside its enum: checked through its bytes. */
  int64_t idx, src;
  KF_CHECK(kf_define_tensor(b, 2, KF_INT64, &idx));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &src));
  KF_EXPECT_ERROR(kf_scatter(b, x, 1, idx, src, (kf_scatter_reduce)100, 0, &y), KF_ERR_INVALID_ARGUMENT,
                  "kf_scatter: reduce 100 is not a kf_scatter_reduce");
  KF_EXPECT_ERROR(kf_index_reduce(b, x, 1, idx, src, (kf_scatter_reduce)-1, 0, &y), KF_ERR_INVALID_ARGUMENT,
                  "kf_index_reduce: reduce -1 is not a kf_scatter_reduce");
  KF_CHECK(kf_reduce(b, KF_OP_SUM, x, axes, 1, 1, &y));
  kf_builder_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Handles released more often than held                                    */

static void expect_not_held(const char* function) {
  const char* message = kf_last_error();
  assert_non_null(strstr(message, function));
  assert_non_null(strstr(message, "is not a handle the caller holds"));
}

/* A second release used to be ignored silently (a fusion or a concrete
 * fusion: their count was already 0) or to free the object twice (a
 * segmentation, a builder). Now nothing is touched and the caller is told;
 * the handle a second holder still has keeps working. */
static void test_handles_released_twice(void** state) {
  (void)state;
  const char* text = "input a: tensor<float32, 1>\nb = neg(a)\noutput b\n";
  kf_fusion f = parse(text), g = parse(text);
  assert_ptr_equal(f, g); /* the definition cache hands out one fusion */
  kf_fusion_release(f);
  kf_fusion_release(g);
  kf_fusion_release(f); /* one more than held: no count goes below 0 */
  expect_not_held("kf_fusion_release");

  kf_fusion h = parse(text);
  float x[2] = {1.0f, -2.0f};
  int64_t shape[1] = {2};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
  const DLTensor* in[1] = {&tx};
  kf_concrete c = NULL;
  KF_CHECK(kf_concretize(h, in, 1, &c));
  kf_segmentation s = NULL;
  KF_CHECK(kf_segment(c, &s));
  kf_segmentation_release(s);
  kf_segmentation_release(s); /* once a double free */
  expect_not_held("kf_segmentation_release");
  kf_concrete_release(c);
  kf_concrete_release(c);
  expect_not_held("kf_concrete_release");

  /* The fusion still runs: the extra releases took nothing from it. */
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(h, in, 1, &out, 1, NULL));
  float want[2] = {-1.0f, 2.0f};
  kf_test_expect_f32(out, want, 2);
  kf_fusion_release(h);

  kf_builder b = NULL;
  KF_CHECK(kf_builder_create(&b));
  kf_builder_destroy(b);
  kf_builder_destroy(b); /* once a double free */
  expect_not_held("kf_builder_destroy");
  int never_a_handle = 0;
  kf_fusion_release((kf_fusion)&never_a_handle);
  expect_not_held("kf_fusion_release");
}

/* ------------------------------------------------------------------------ */
/* Many segments                                                            */

/* 4000 segments in a chain (neg, cut, neg, cut, ...), run twice: the CPU
 * backend's per-thread environment is reused across segments and calls,
 * so what one segment set must not leak into the next (once each segment
 * built an environment over every value: quadratic in the segments). */
static void test_many_segments(void** state) {
  (void)state;
  enum { N = 4000 };
  size_t cap = 64 + (size_t)N * 48;
  char* text = malloc(cap);
  size_t len = (size_t)snprintf(text, cap, "input v0: tensor<float32, 1>\n");
  for (int i = 0; i < N; ++i)
    len += (size_t)snprintf(text + len, cap - len, "a%d = neg(v%d)\nv%d = segment_set(a%d)\n", i, i, i + 1, i);
  snprintf(text + len, cap - len, "output v%d\n", N);
  kf_fusion f = parse(text);
  free(text);
  for (int call = 0; call < 2; ++call) {
    float x[3] = {1.5f, -2.0f, (float)call};
    int64_t shape[1] = {3};
    DLTensor tx = kf_test_tensor(x, kf_test_f32(), 1, shape, NULL);
    const DLTensor* in[1] = {&tx};
    DLManagedTensor* out = NULL;
    KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
    kf_test_expect_f32(out, x, 3); /* an even number of negations */
  }
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_in_place_output_larger_than_its_input),
      cmocka_unit_test(test_in_place_output_over_a_stride0_input),
      cmocka_unit_test(test_in_place_output_shifted_from_its_input),
      cmocka_unit_test(test_pad_sizes_that_overflow),
      cmocka_unit_test(test_cat_sizes_that_overflow),
      cmocka_unit_test(test_slice_step_int64_max),
      cmocka_unit_test(test_shape_values_above_2_pow_53),
      cmocka_unit_test(test_allocation_bytes_that_wrap),
      cmocka_unit_test(test_outputs_that_overlap_each_other),
      cmocka_unit_test(test_output_misaligned_or_wrapping),
      cmocka_unit_test(test_interleaved_views_of_one_buffer),
      cmocka_unit_test(test_execute_segment_checks_inputs),
      cmocka_unit_test(test_builder_counts_and_flags),
      cmocka_unit_test(test_many_segments),
      cmocka_unit_test(test_handles_released_twice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
