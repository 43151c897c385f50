/* Fusions over a device mesh on GPUs through NCCL: one thread per rank,
 * rank r on device r with its own stream and NCCL communicator
 * (kf_communicator_create_nccl), meshes of 1 rank (any GPU machine) up to
 * 4 (as many GPUs as the machine has); the cases and the check (against
 * the unsharded fusion on the CPU backend) are in multidevice_cases.h.
 * Exits 77 without a device. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"
#include "gpu/gpu_util.h"
#include "multidevice_cases.h"

typedef struct {
  rank_job* job;
  kf_nccl_id id;
} gpu_rank;

static char g_copy_error[128];

static void device_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes && gpu.dtoh(dst, (gpu_deviceptr)(uintptr_t)src, bytes) != 0)
    snprintf(g_copy_error, sizeof g_copy_error, "cuMemcpyDtoH failed");
}

#define RANK_FAIL(...)                                         \
  do {                                                         \
    snprintf(j->message, sizeof j->message, __VA_ARGS__);      \
    j->status = KF_ERR_BACKEND;                                \
    goto done;                                                 \
  } while (0)

static void* run_rank(void* arg) {
  gpu_rank* g = (gpu_rank*)arg;
  rank_job* j = g->job;
  int dev = 0;
  gpu_context ctx = NULL;
  gpu_stream stream = NULL;
  kf_communicator comm = NULL;
  void* dev_in[MAX_IN] = {0};
  DLTensor dl[MAX_IN];
  const DLTensor* ins[MAX_IN];
  if (gpu.device_get(&dev, j->rank) != 0 || gpu.primary_retain(&ctx, dev) != 0 || gpu.ctx_set_current(ctx) != 0)
    RANK_FAIL("device %d: no context", j->rank);
  if (gpu.stream_create(&stream, 1) != 0) RANK_FAIL("device %d: cuStreamCreate failed", j->rank);
  j->status = kf_communicator_create_nccl(&g->id, j->ranks, j->rank, j->rank, &comm);
  if (j->status != KF_OK) {
    snprintf(j->message, sizeof j->message, "kf_communicator_create_nccl: %s", kf_last_error());
    goto done;
  }
  for (int i = 0; i < j->num_inputs; ++i) {
    dl[i] = as_dl(&j->in[i]);
    if (j->in[i].rank > 0) {  /* scalars stay 0-dim host tensors */
      const size_t bytes = (size_t)numel(&j->in[i]) * elem(&j->in[i]);
      gpu_deviceptr p = 0;
      if (gpu.mem_alloc(&p, bytes ? bytes : 1) != 0 || (bytes && gpu.htod(p, j->in[i].data, bytes) != 0))
        RANK_FAIL("device %d: input %d upload failed", j->rank, i);
      dev_in[i] = (void*)(uintptr_t)p;
      dl[i].data = dev_in[i];
      dl[i].device.device_type = kDLCUDA;
      dl[i].device.device_id = j->rank;
    }
    ins[i] = &dl[i];
  }
  kf_exec_options o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.stream = stream;
  o.communicator = comm;
  DLManagedTensor* out[MAX_OUT];
  j->status = kf_execute(j->fusion, ins, (size_t)j->num_inputs, out, j->num_outputs, &o);
  if (j->status != KF_OK) {
    snprintf(j->message, sizeof j->message, "kf_execute: %s", kf_last_error());
    goto done;
  }
  if (gpu.stream_sync(stream) != 0) RANK_FAIL("device %d: stream synchronize failed", j->rank);
  for (size_t k = 0; k < j->num_outputs; ++k) {
    keep_output(j, k, &out[k]->dl_tensor, device_to_host);
    out[k]->deleter(out[k]);
  }
done:
  for (int i = 0; i < j->num_inputs; ++i)
    if (dev_in[i]) gpu.mem_free((gpu_deviceptr)(uintptr_t)dev_in[i]);
  kf_communicator_destroy(comm);
  if (stream) gpu.stream_destroy(stream);
  return NULL;
}

static void run_ranks(rank_job* jobs, int ranks) {
  gpu_rank g[MAX_RANKS];
  pthread_t threads[MAX_RANKS];
  kf_nccl_id id;
  KF_CHECK(kf_nccl_get_unique_id(&id));
  for (int r = 0; r < ranks; ++r) {
    g[r].job = &jobs[r];
    g[r].id = id;
    assert_int_equal(pthread_create(&threads[r], NULL, run_rank, &g[r]), 0);
  }
  for (int r = 0; r < ranks; ++r) pthread_join(threads[r], NULL);
  if (g_copy_error[0]) fail_msg("%s", g_copy_error);
}

static int g_devices = 0;

static void test_meshes(void** state) {
  (void)state;
  const int max_ranks = g_devices < MAX_RANKS ? g_devices : MAX_RANKS;
  for (int ranks = 1; ranks <= max_ranks; ++ranks) {
    for (size_t k = 0; k < sizeof kCases / sizeof kCases[0]; ++k) check_case(&kCases[k], ranks);
    printf("mesh of %d rank(s) on %d GPU(s): %zu cases match the unsharded fusion\n", ranks, ranks,
           sizeof kCases / sizeof kCases[0]);
  }
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  if (gpu.device_count(&g_devices) != 0 || g_devices < 1) return 77;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_meshes)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
