/* kfuse.h with a DLPack 1.x dlpack.h (tests/dlpack1/dlpack/dlpack.h comes
 * first on the include path): kfuse.h must use the header's own
 * DLManagedTensorVersioned and flags instead of declaring them, and the
 * versioned and 0.6 entry points must work with them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#if !defined(DLPACK_MAJOR_VERSION) || DLPACK_MAJOR_VERSION != 1
#error "this test must see the DLPack 1.x stand-in header"
#endif
#ifdef KF_DLPACK_VERSIONED_DECLARED
#error "kfuse.h declared DLManagedTensorVersioned although dlpack.h 1.x does"
#endif

static void test_versioned_with_dlpack1_header(void** state) {
  (void)state;
  kf_builder b;
  int64_t x, y;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 1, KF_FLOAT32, &x));
  KF_CHECK(kf_unary(b, KF_OP_NEG, x, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);

  float data[4] = {1, -2, 3, -4};
  int64_t shape[1] = {4};
  DLManagedTensorVersioned in;
  memset(&in, 0, sizeof in);
  in.version.major = DLPACK_MAJOR_VERSION;
  in.version.minor = DLPACK_MINOR_VERSION;
  in.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  in.dl_tensor = kf_test_tensor(data, kf_test_f32(), 1, shape, NULL);
  in.dl_tensor.dtype.code = kDLFloat;
  const DLManagedTensorVersioned* ins[1] = {&in};
  DLManagedTensorVersioned* out = NULL;
  KF_CHECK(kf_execute_versioned(f, ins, 1, &out, 1, NULL));
  assert_int_equal(out->version.major, 1);
  assert_int_equal(out->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0);
  const float* y_data = (const float*)out->dl_tensor.data;
  assert_float_equal(y_data[0], -1, 0);
  assert_float_equal(y_data[3], 4, 0);
  out->deleter(out);

  /* kDLBool from the 1.x header is what kfuse calls KF_DLPACK_BOOL_CODE */
  assert_int_equal(kDLBool, KF_DLPACK_BOOL_CODE);

  /* the 0.6 entry point with the same header */
  const DLTensor* plain[1] = {&in.dl_tensor};
  DLManagedTensor* legacy = NULL;
  KF_CHECK(kf_execute(f, plain, 1, &legacy, 1, NULL));
  assert_float_equal(((const float*)legacy->dl_tensor.data)[1], 2, 0);
  legacy->deleter(legacy);
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_versioned_with_dlpack1_header),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
