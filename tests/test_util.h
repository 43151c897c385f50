/* Helpers shared by the C tests: include after <cmocka.h>. */
#ifndef KFUSE_TEST_UTIL_H
#define KFUSE_TEST_UTIL_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfuse/kfuse.h"

/* Fails the test with kfuse's message when a call does not return KF_OK. */
#define KF_CHECK(call)                                                          \
  do {                                                                          \
    kf_status kf_check_status_ = (call);                                        \
    if (kf_check_status_ != KF_OK)                                              \
      fail_msg("%s -> %s: %s", #call, kf_status_name(kf_check_status_), kf_last_error()); \
  } while (0)

/* Asserts a call fails with `code` and that the message contains `needle`. */
#define KF_EXPECT_ERROR(call, code, needle)                                     \
  do {                                                                          \
    kf_status kf_expect_status_ = (call);                                       \
    if (kf_expect_status_ != (code))                                            \
      fail_msg("%s -> %s, expected %s (message: %s)", #call,                    \
               kf_status_name(kf_expect_status_), kf_status_name(code), kf_last_error()); \
    if (strstr(kf_last_error(), (needle)) == NULL)                              \
      fail_msg("%s: message \"%s\" does not mention \"%s\"", #call, kf_last_error(), (needle)); \
  } while (0)

/* Compares a compact float32 output with `want` element by element (NaN
 * equals NaN), then deletes it. */
static inline void kf_test_expect_f32(DLManagedTensor* out, const float* want, size_t n) {
  const float* got = (const float*)out->dl_tensor.data;
  for (size_t i = 0; i < n; ++i)
    if (!(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
      fail_msg("element %zu: got %g, expected %g", i, (double)got[i], (double)want[i]);
  out->deleter(out);
}

/* A DLTensor over caller memory; shape/strides arrays are borrowed. */
static inline DLTensor kf_test_tensor(void* data, DLDataType dtype, int ndim, int64_t* shape,
                                      int64_t* strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dtype;
  t.shape = shape;
  t.strides = strides;
  t.byte_offset = 0;
  return t;
}

static inline DLDataType kf_test_f32(void) { DLDataType t = {kDLFloat, 32, 1}; return t; }
static inline DLDataType kf_test_f64(void) { DLDataType t = {kDLFloat, 64, 1}; return t; }
static inline DLDataType kf_test_i64(void) { DLDataType t = {kDLInt, 64, 1}; return t; }
static inline DLDataType kf_test_i32(void) { DLDataType t = {kDLInt, 32, 1}; return t; }
static inline DLDataType kf_test_bool(void) { DLDataType t = {KF_DLPACK_BOOL_CODE, 8, 1}; return t; }

/* y = relu(x + b), x [M, N] f32, b [N] f32: the tests' smallest fusion. */
static inline kf_fusion kf_test_bias_relu(void) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x, bias, s, y;
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT32, &bias));
  KF_CHECK(kf_binary(b, KF_OP_ADD, x, bias, &s));
  KF_CHECK(kf_unary(b, KF_OP_RELU, s, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

#endif
