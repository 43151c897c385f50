/* DLPack 1.x through the public C API on the CPU backend: versioned inputs
 * and outputs (kf_execute_versioned), borrowed DLTensors with flags
 * (kf_execute_flagged, kf_execute_into_flagged), both layouts giving the
 * same results, the read-only flag against in-place outputs, and the
 * version check. With Debian's dlpack.h (0.6) the 1.x layout comes from
 * kfuse.h; tests/dlpack1/ builds the same calls against a 1.x dlpack.h. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

/* x += 1 in place (output 0 aliases input 0), plus a fresh output x > 2. */
static kf_fusion add_one_in_place(void) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, one, y, two, gt;
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT64, &x));
  KF_CHECK(kf_define_constant_f64(b, 1.0, KF_FLOAT64, &one));
  KF_CHECK(kf_binary(b, KF_OP_ADD, x, one, &y));
  KF_CHECK(kf_define_constant_f64(b, 2.0, KF_FLOAT64, &two));
  KF_CHECK(kf_binary(b, KF_OP_GT, x, two, &gt));
  KF_CHECK(kf_add_output(b, y, NULL, 0, 0));
  KF_CHECK(kf_add_output(b, gt, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* A versioned tensor over caller memory (its deleter is never called by
 * kfuse: inputs are borrowed). */
static DLManagedTensorVersioned versioned(DLTensor t, uint64_t flags) {
  DLManagedTensorVersioned m;
  memset(&m, 0, sizeof m);
  m.version.major = 1;
  m.version.minor = 0;
  m.flags = flags;
  m.dl_tensor = t;
  return m;
}

static float g_x[6] = {-1, 2, -3, 4, -5, 6};
static float g_b[3] = {0.5f, 0.5f, 0.5f};
static const float g_want[6] = {0, 2.5f, 0, 4.5f, 0, 6.5f};
static int64_t g_xs[2] = {2, 3};
static int64_t g_bs[1] = {3};

static void expect_values(const DLTensor* t, const float* want) {
  assert_non_null(t->shape);
  assert_non_null(t->strides);
  assert_int_equal(t->ndim, 2);
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const float* p = (const float*)((const char*)t->data + t->byte_offset);
      assert_float_equal(p[i * t->strides[0] + j * t->strides[1]], want[i * 3 + j], 0);
    }
}

/* The layout kfuse.h declares (or dlpack.h 1.x does) is DLPack 1.0's. */
static void test_layout_is_dlpack_1(void** state) {
  (void)state;
  assert_int_equal(offsetof(DLManagedTensorVersioned, version), 0);
  assert_int_equal(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
  assert_int_equal(offsetof(DLManagedTensorVersioned, deleter), 16);
  assert_int_equal(offsetof(DLManagedTensorVersioned, flags), 24);
  assert_int_equal(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
  assert_int_equal(sizeof(DLPackVersion), 8);
  assert_int_equal(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
  assert_int_equal(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
#if !defined(DLPACK_MAJOR_VERSION)
  assert_int_equal(KF_DLPACK_VERSIONED_DECLARED, 1); /* declared by kfuse.h */
#endif
}

static void test_versioned_in_versioned_out(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  DLManagedTensorVersioned x = versioned(kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL), 0);
  DLManagedTensorVersioned b = versioned(kf_test_tensor(g_b, kf_test_f32(), 1, g_bs, NULL), 0);
  const DLManagedTensorVersioned* in[2] = {&x, &b};
  DLManagedTensorVersioned* out = NULL;
  KF_CHECK(kf_execute_versioned(f, in, 2, &out, 1, NULL));
  assert_non_null(out);
  assert_int_equal(out->version.major, KF_DLPACK_MAJOR_VERSION);
  assert_int_equal(out->version.minor, KF_DLPACK_MINOR_VERSION);
  assert_int_equal(out->flags, 0);
  assert_ptr_equal(out->manager_ctx != NULL, 1);
  assert_int_equal(out->dl_tensor.device.device_type, kDLCPU);
  assert_int_equal(out->dl_tensor.dtype.code, kDLFloat);
  assert_int_equal(out->dl_tensor.dtype.bits, 32);
  assert_int_equal(out->dl_tensor.shape[0], 2);
  assert_int_equal(out->dl_tensor.shape[1], 3);
  expect_values(&out->dl_tensor, g_want);
  /* A versioned output is a valid versioned input: chain it. */
  const DLManagedTensorVersioned* again[2] = {out, &b};
  DLManagedTensorVersioned* out2 = NULL;
  KF_CHECK(kf_execute_versioned(f, again, 2, &out2, 1, NULL));
  const float want2[6] = {0.5f, 3, 0.5f, 5, 0.5f, 7};
  expect_values(&out2->dl_tensor, want2);
  out2->deleter(out2);
  out->deleter(out);
  kf_fusion_release(f);
}

/* 0.6 and 1.x give the same results, and mix in one call through the
 * flagged entry point (a DLManagedTensor's dl_tensor next to a versioned
 * one's). */
static void test_both_layouts_agree(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  DLTensor xt = kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL);
  DLTensor bt = kf_test_tensor(g_b, kf_test_f32(), 1, g_bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  DLManagedTensor* legacy = NULL;
  KF_CHECK(kf_execute(f, in, 2, &legacy, 1, NULL));
  expect_values(&legacy->dl_tensor, g_want);

  /* legacy output (0.6) as input 0, a versioned tensor as input 1 */
  DLManagedTensorVersioned b = versioned(bt, DLPACK_FLAG_BITMASK_READ_ONLY);
  const DLTensor* mixed[2] = {&legacy->dl_tensor, &b.dl_tensor};
  const uint64_t flags[2] = {0, b.flags};
  DLManagedTensorVersioned* out = NULL;
  KF_CHECK(kf_execute_flagged(f, mixed, flags, 2, &out, 1, NULL));
  const float want2[6] = {0.5f, 3, 0.5f, 5, 0.5f, 7};
  expect_values(&out->dl_tensor, want2);
  assert_int_equal(out->flags, 0);
  out->deleter(out);

  /* flags NULL: all writable */
  KF_CHECK(kf_execute_flagged(f, in, NULL, 2, &out, 1, NULL));
  expect_values(&out->dl_tensor, g_want);
  out->deleter(out);
  legacy->deleter(legacy);
  kf_fusion_release(f);
}

/* Read-only inputs that no output aliases are fine: kfuse only reads them. */
static void test_read_only_inputs_are_read(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  DLManagedTensorVersioned x = versioned(kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL),
                                         DLPACK_FLAG_BITMASK_READ_ONLY);
  DLManagedTensorVersioned b = versioned(kf_test_tensor(g_b, kf_test_f32(), 1, g_bs, NULL),
                                         DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED);
  const DLManagedTensorVersioned* in[2] = {&x, &b};
  DLManagedTensorVersioned* out = NULL;
  KF_CHECK(kf_execute_versioned(f, in, 2, &out, 1, NULL));
  expect_values(&out->dl_tensor, g_want);
  assert_int_equal(out->flags, 0);
  out->deleter(out);
  kf_fusion_release(f);
}

static void test_in_place_output_writable_input(void** state) {
  (void)state;
  kf_fusion f = add_one_in_place();
  double data[3] = {1, 2, 3};
  int64_t s[1] = {3};
  DLManagedTensorVersioned x = versioned(kf_test_tensor(data, kf_test_f64(), 1, s, NULL), 0);
  const DLManagedTensorVersioned* in[1] = {&x};
  DLManagedTensorVersioned* out[2] = {NULL, NULL};
  KF_CHECK(kf_execute_versioned(f, in, 1, out, 2, NULL));
  /* output 0 is a writable view of the input's memory */
  assert_ptr_equal(out[0]->dl_tensor.data, data);
  assert_int_equal(out[0]->flags, 0);
  assert_float_equal(data[0], 2, 0);
  assert_float_equal(data[2], 4, 0);
  /* output 1 is bool (DLPack code 6, 8 bits): the input before the update
   * was {1, 2, 3}, so x > 2 is {0, 0, 1} */
  assert_int_equal(out[1]->dl_tensor.dtype.code, KF_DLPACK_BOOL_CODE);
  assert_int_equal(out[1]->dl_tensor.dtype.bits, 8);
  const uint8_t* gt = (const uint8_t*)out[1]->dl_tensor.data;
  assert_int_equal(gt[0], 0);
  assert_int_equal(gt[1], 0);
  assert_int_equal(gt[2], 1);
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  assert_float_equal(data[0], 2, 0); /* the view's deleter leaves the memory */
  kf_fusion_release(f);
}

static void test_in_place_output_read_only_input_fails(void** state) {
  (void)state;
  kf_fusion f = add_one_in_place();
  double data[3] = {1, 2, 3};
  int64_t s[1] = {3};
  DLTensor t = kf_test_tensor(data, kf_test_f64(), 1, s, NULL);
  DLManagedTensorVersioned x = versioned(t, DLPACK_FLAG_BITMASK_READ_ONLY);
  const DLManagedTensorVersioned* in[1] = {&x};
  DLManagedTensorVersioned* sentinel = (DLManagedTensorVersioned*)&x;
  DLManagedTensorVersioned* out[2] = {sentinel, sentinel};
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 1, out, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_versioned: output 0 (value 2) is declared to alias input 0 (value 0), "
                  "which is read-only (DLPACK_FLAG_BITMASK_READ_ONLY)");
  /* nothing ran, no output was written */
  assert_float_equal(data[0], 1, 0);
  assert_float_equal(data[2], 3, 0);
  assert_ptr_equal(out[0], sentinel);
  assert_ptr_equal(out[1], sentinel);

  /* the same through the flagged entry points */
  const DLTensor* tin[1] = {&t};
  const uint64_t ro[1] = {DLPACK_FLAG_BITMASK_READ_ONLY};
  KF_EXPECT_ERROR(kf_execute_flagged(f, tin, ro, 1, out, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_flagged: output 0 (value 2) is declared to alias input 0 (value 0)");
  uint8_t gt[3];
  DLTensor gt_t = kf_test_tensor(gt, kf_test_bool(), 1, s, NULL);
  DLTensor* into[2] = {&t, &gt_t};
  KF_EXPECT_ERROR(kf_execute_into_flagged(f, tin, ro, 1, into, NULL, 2, NULL),
                  KF_ERR_INVALID_ARGUMENT, "input 0 (value 0), which is read-only");
  assert_float_equal(data[0], 1, 0);
  /* writable: runs in place */
  const uint64_t rw[1] = {0};
  KF_CHECK(kf_execute_into_flagged(f, tin, rw, 1, into, NULL, 2, NULL));
  assert_float_equal(data[0], 2, 0);
  assert_int_equal(gt[2], 1);
  kf_fusion_release(f);
}

static void test_execute_into_read_only_output_fails(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  DLTensor xt = kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL);
  DLTensor bt = kf_test_tensor(g_b, kf_test_f32(), 1, g_bs, NULL);
  const DLTensor* in[2] = {&xt, &bt};
  float y[6] = {9, 9, 9, 9, 9, 9};
  int64_t ystrides[2] = {3, 1};
  DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, g_xs, ystrides);
  DLTensor* outs[1] = {&yt};
  const uint64_t ro[1] = {DLPACK_FLAG_BITMASK_READ_ONLY};
  KF_EXPECT_ERROR(kf_execute_into_flagged(f, in, NULL, 2, outs, ro, 1, NULL),
                  KF_ERR_INVALID_ARGUMENT,
                  "kf_execute_into_flagged: output 0 (value 3) is read-only");
  assert_float_equal(y[0], 9, 0);
  const uint64_t rw[1] = {DLPACK_FLAG_BITMASK_IS_COPIED};
  const uint64_t in_ro[2] = {DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY};
  KF_CHECK(kf_execute_into_flagged(f, in, in_ro, 2, outs, rw, 1, NULL));
  expect_values(&yt, g_want);
  kf_fusion_release(f);
}

static void test_version_and_argument_errors(void** state) {
  (void)state;
  kf_fusion f = kf_test_bias_relu();
  DLManagedTensorVersioned x = versioned(kf_test_tensor(g_x, kf_test_f32(), 2, g_xs, NULL), 0);
  DLManagedTensorVersioned b = versioned(kf_test_tensor(g_b, kf_test_f32(), 1, g_bs, NULL), 0);
  DLManagedTensorVersioned* out = NULL;

  b.version.major = 2;
  b.version.minor = 3;
  const DLManagedTensorVersioned* in[2] = {&x, &b};
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 2, &out, 1, NULL), KF_ERR_UNSUPPORTED,
                  "kf_execute_versioned: input 1 (value 1): DLPack version 2.3 is not supported "
                  "(kfuse reads major version 1)");
  b.version.major = 1;
  b.version.minor = 7; /* a later minor of major 1 reads the same */
  KF_CHECK(kf_execute_versioned(f, in, 2, &out, 1, NULL));
  out->deleter(out);
  out = NULL;

  KF_EXPECT_ERROR(kf_execute_versioned(NULL, in, 2, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "argument 'fusion' is NULL");
  KF_EXPECT_ERROR(kf_execute_versioned(f, NULL, 2, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "argument 'inputs' is NULL");
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 2, NULL, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "argument 'outputs' is NULL");
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 1, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "expected 2 inputs, got 1");
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 2, &out, 2, NULL), KF_ERR_INVALID_ARGUMENT,
                  "expected 1 outputs, got 2");
  const DLManagedTensorVersioned* with_null[2] = {&x, NULL};
  KF_EXPECT_ERROR(kf_execute_versioned(f, with_null, 2, &out, 1, NULL), KF_ERR_INVALID_ARGUMENT,
                  "input 1 (value 1): tensor pointer is NULL");
  /* the usual input checks apply to the versioned tensor's dl_tensor */
  x.dl_tensor.ndim = 1;
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 2, &out, 1, NULL), KF_ERR_SHAPE_MISMATCH,
                  "input 0 (value 0): expected rank 2, got rank 1");
  x.dl_tensor.ndim = 2;
  x.dl_tensor.dtype = kf_test_f64();
  KF_EXPECT_ERROR(kf_execute_versioned(f, in, 2, &out, 1, NULL), KF_ERR_DTYPE_MISMATCH,
                  "input 0 (value 0): expected float32, got float64");
  assert_null(out);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout_is_dlpack_1),
      cmocka_unit_test(test_versioned_in_versioned_out),
      cmocka_unit_test(test_both_layouts_agree),
      cmocka_unit_test(test_read_only_inputs_are_read),
      cmocka_unit_test(test_in_place_output_writable_input),
      cmocka_unit_test(test_in_place_output_read_only_input_fails),
      cmocka_unit_test(test_execute_into_read_only_output_fails),
      cmocka_unit_test(test_version_and_argument_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
