/* NCCL communicators on device 0 through the C API: a one-rank group from
 * kf_nccl_get_unique_id, and a caller's ncclComm_t wrapped (kfuse must not
 * destroy it: the test still uses it after kf_communicator_destroy). NCCL
 * is opened here with dlopen, as kfuse does, so the test builds without
 * it. Exits 77 without a CUDA device or without libnccl.so.2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "test_util.h"
#include "gpu/gpu_util.h"

typedef struct { char internal[128]; } nccl_unique_id; /* ncclUniqueId */

static struct {
  int (*get_unique_id)(nccl_unique_id*);
  int (*init_rank)(void**, int, nccl_unique_id, int);
  int (*count)(void*, int*);
  int (*destroy)(void*);
} nccl;

static int nccl_open(void) {
  void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return 0;
  *(void**)&nccl.get_unique_id = dlsym(lib, "ncclGetUniqueId");
  *(void**)&nccl.init_rank = dlsym(lib, "ncclCommInitRank");
  *(void**)&nccl.count = dlsym(lib, "ncclCommCount");
  *(void**)&nccl.destroy = dlsym(lib, "ncclCommDestroy");
  return nccl.get_unique_id && nccl.init_rank && nccl.count && nccl.destroy;
}

static void test_one_rank(void** state) {
  (void)state;
  kf_nccl_id id;
  kf_communicator c = NULL;
  int rank = -1, size = -1;
  KF_CHECK(kf_nccl_get_unique_id(&id));
  KF_CHECK(kf_communicator_create_nccl(&id, 1, 0, 0, &c));
  KF_CHECK(kf_communicator_rank(c, &rank, &size));
  assert_int_equal(rank, 0);
  assert_int_equal(size, 1);
  kf_communicator_destroy(c);
}

static void test_wrap_does_not_own(void** state) {
  (void)state;
  nccl_unique_id id;
  void* raw = NULL;
  int count = 0, rank = -1, size = -1;
  kf_communicator c = NULL;
  assert_int_equal(nccl.get_unique_id(&id), 0);
  assert_int_equal(nccl.init_rank(&raw, 1, id, 0), 0);
  KF_CHECK(kf_communicator_wrap_nccl(raw, &c));
  KF_CHECK(kf_communicator_rank(c, &rank, &size));
  assert_int_equal(rank, 0);
  assert_int_equal(size, 1);
  kf_communicator_destroy(c);
  assert_int_equal(nccl.count(raw, &count), 0); /* still alive */
  assert_int_equal(count, 1);
  assert_int_equal(nccl.destroy(raw), 0);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  if (!nccl_open()) {
    fprintf(stderr, "no libnccl.so.2: skipping\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_rank),
      cmocka_unit_test(test_wrap_does_not_own),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
