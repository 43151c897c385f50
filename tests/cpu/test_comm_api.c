/* Communicators through the C API: a local group's handles and their
 * ranks, every argument error with the argument it names, and NCCL on a
 * machine without a GPU: a status that says why (never a crash), naming
 * NCCL or CUDA. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "test_util.h"

static void test_local_group(void** state) {
  (void)state;
  for (int n = 1; n <= 4; ++n) {
    kf_communicator comms[4] = {NULL, NULL, NULL, NULL};
    KF_CHECK(kf_communicator_create_local(n, comms));
    for (int r = 0; r < n; ++r) {
      int rank = -1, size = -1;
      assert_non_null(comms[r]);
      KF_CHECK(kf_communicator_rank(comms[r], &rank, &size));
      assert_int_equal(rank, r);
      assert_int_equal(size, n);
    }
    for (int r = n; r < 4; ++r) assert_null(comms[r]); /* only comms[0..n-1] are written */
    for (int r = 0; r < n; ++r) kf_communicator_destroy(comms[r]);
  }
  kf_communicator_destroy(NULL); /* a no-op */
}

static void test_argument_errors(void** state) {
  (void)state;
  kf_communicator comms[2] = {NULL, NULL};
  KF_EXPECT_ERROR(kf_communicator_create_local(2, NULL), KF_ERR_INVALID_ARGUMENT, "'comms' is NULL");
  KF_EXPECT_ERROR(kf_communicator_create_local(0, comms), KF_ERR_INVALID_ARGUMENT, "'num_ranks' is 0, expected 1..1024");
  KF_EXPECT_ERROR(kf_communicator_create_local(-3, comms), KF_ERR_INVALID_ARGUMENT, "'num_ranks' is -3");
  KF_EXPECT_ERROR(kf_communicator_create_local(1025, comms), KF_ERR_INVALID_ARGUMENT, "'num_ranks' is 1025");
  assert_null(comms[0]);

  KF_CHECK(kf_communicator_create_local(2, comms));
  int rank = 0, size = 0;
  KF_EXPECT_ERROR(kf_communicator_rank(NULL, &rank, &size), KF_ERR_INVALID_ARGUMENT, "'communicator' is NULL");
  KF_EXPECT_ERROR(kf_communicator_rank(comms[1], NULL, &size), KF_ERR_INVALID_ARGUMENT, "'rank' is NULL");
  KF_EXPECT_ERROR(kf_communicator_rank(comms[1], &rank, NULL), KF_ERR_INVALID_ARGUMENT, "'num_ranks' is NULL");
  kf_communicator_destroy(comms[0]);
  kf_communicator_destroy(comms[1]);

  kf_nccl_id id;
  memset(&id, 0, sizeof id);
  kf_communicator out = NULL;
  KF_EXPECT_ERROR(kf_nccl_get_unique_id(NULL), KF_ERR_INVALID_ARGUMENT, "kf_nccl_get_unique_id: argument 'id' is NULL");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(NULL, 1, 0, 0, &out), KF_ERR_INVALID_ARGUMENT, "'id' is NULL");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(&id, 1, 0, 0, NULL), KF_ERR_INVALID_ARGUMENT, "'out' is NULL");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(&id, 0, 0, 0, &out), KF_ERR_INVALID_ARGUMENT, "'num_ranks' is 0");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(&id, 2, 2, 0, &out), KF_ERR_INVALID_ARGUMENT,
                  "'rank' is 2, expected 0..1 (num_ranks is 2)");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(&id, 2, -1, 0, &out), KF_ERR_INVALID_ARGUMENT, "'rank' is -1");
  KF_EXPECT_ERROR(kf_communicator_create_nccl(&id, 2, 1, -1, &out), KF_ERR_INVALID_ARGUMENT,
                  "'device' is -1, expected >= 0");
  KF_EXPECT_ERROR(kf_communicator_wrap_nccl(NULL, &out), KF_ERR_INVALID_ARGUMENT, "'nccl_comm' is NULL");
  KF_EXPECT_ERROR(kf_communicator_wrap_nccl(&id, NULL), KF_ERR_INVALID_ARGUMENT, "'out' is NULL");
  assert_null(out);
}

/* A failure that explains itself: not OK, one of the statuses the header
 * gives for a missing library, driver or device, and a message naming
 * NCCL or CUDA. */
static void expect_explained_failure(kf_status s, const char* call) {
  if (s == KF_OK) fail_msg("%s succeeded without a GPU", call);
  if (s != KF_ERR_UNSUPPORTED && s != KF_ERR_NO_DEVICE && s != KF_ERR_BACKEND)
    fail_msg("%s -> %s: %s", call, kf_status_name(s), kf_last_error());
  if (strstr(kf_last_error(), "NCCL") == NULL && strstr(kf_last_error(), "CUDA") == NULL)
    fail_msg("%s: message \"%s\" names neither NCCL nor CUDA", call, kf_last_error());
}

static void test_nccl_without_gpu(void** state) {
  (void)state;
  kf_nccl_id id;
  memset(&id, 0, sizeof id);
  kf_communicator out = NULL;
  /* With a GPU (the GPU machine runs the cpu label too) NCCL may work:
   * only its absence is tested here (tests/gpu/test_comm_nccl.c does the
   * rest). ncclGetUniqueId needs no device (NCCL 2.28 makes one here). */
  kf_status s = kf_nccl_get_unique_id(&id);
  if (s != KF_OK) {
    expect_explained_failure(s, "kf_nccl_get_unique_id");
  } else {
    int filled = 0;
    for (size_t i = 0; i < sizeof id.bytes; ++i) filled |= id.bytes[i] != 0;
    assert_true(filled);
  }
  s = kf_communicator_create_nccl(&id, 1, 0, 0, &out);
  if (s == KF_OK) {
    kf_communicator_destroy(out);
    skip();
  }
  expect_explained_failure(s, "kf_communicator_create_nccl");
  assert_null(out);
  /* A device far beyond any machine's. */
  expect_explained_failure(kf_communicator_create_nccl(&id, 1, 0, 4096, &out), "kf_communicator_create_nccl(device 4096)");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_group),
      cmocka_unit_test(test_argument_errors),
      cmocka_unit_test(test_nccl_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
