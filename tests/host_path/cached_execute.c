/* The shared host path of a cached execute, without a GPU: N calls of
 * kf_execute_into on a small fusion (3 inputs of 16x16, one kernel) on the
 * CPU backend in dry-run mode (KFUSE_CPU_DRY_RUN=1: segments are dispatched,
 * not computed), so what runs is what a GPU call runs on the host up to the
 * backend: binding, the concretization lookup, output checks, the executor.
 *
 *   cached_execute [--calls N] [--max-allocations-per-call K]
 *
 * Counts heap allocations (this program interposes malloc) and fails when
 * they exceed K per call. instruction_budget.sh runs it under callgrind,
 * collecting only inside cached_calls(). */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfuse/kfuse.h"

static atomic_long g_allocations;

extern void* __libc_malloc(size_t);
void* malloc(size_t n) {
  atomic_fetch_add_explicit(&g_allocations, 1, memory_order_relaxed);
  return __libc_malloc(n);
}

static const char* kFusion =
    "input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\ninput c: tensor<float32, 2>\n"
    "m = mul(a, b)\ny = add(m, c)\noutput y\n";

/* The measured loop: callgrind collects inside this function only. Returns
 * the number of calls that failed. */
__attribute__((noinline)) long cached_calls(kf_fusion f, const DLTensor* const* in, DLTensor* const* out,
                                            long calls) {
  long failed = 0;
  for (long i = 0; i < calls; ++i) failed += kf_execute_into(f, in, 3, out, 1, NULL) != KF_OK;
  return failed;
}

int main(int argc, char** argv) {
  long calls = 10000, max_allocations = -1;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atol(argv[++i]);
    else if (!strcmp(argv[i], "--max-allocations-per-call") && i + 1 < argc) max_allocations = atol(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--calls N] [--max-allocations-per-call K]\n", argv[0]);
      return 2;
    }
  }
  setenv("KFUSE_CPU_DRY_RUN", "1", 1);
  kf_fusion f;
  if (kf_fusion_from_text(kFusion, &f) != KF_OK) {
    fprintf(stderr, "define: %s\n", kf_last_error());
    return 1;
  }
  static float data[4][16 * 16];
  int64_t shape[2] = {16, 16};
  DLTensor t[4];
  memset(t, 0, sizeof t);
  for (int k = 0; k < 4; ++k) {
    t[k].data = data[k];
    t[k].device.device_type = kDLCPU;
    t[k].ndim = 2;
    t[k].dtype.code = kDLFloat;
    t[k].dtype.bits = 32;
    t[k].dtype.lanes = 1;
    t[k].shape = shape;
  }
  const DLTensor* in[3] = {&t[0], &t[1], &t[2]};
  DLTensor* out[1] = {&t[3]};
  /* The first call concretizes and segments; the second warms per-thread
   * storage. Not through cached_calls(): callgrind must not count them. */
  for (int k = 0; k < 2; ++k)
    if (kf_execute_into(f, in, 3, out, 1, NULL) != KF_OK) {
      fprintf(stderr, "warm-up execute: %s\n", kf_last_error());
      return 1;
    }
  long before = atomic_load(&g_allocations);
  long failed = cached_calls(f, in, out, calls);
  long allocations = atomic_load(&g_allocations) - before;
  kf_fusion_release(f);
  if (failed != 0) {
    fprintf(stderr, "%ld of %ld calls failed: %s\n", failed, calls, kf_last_error());
    return 1;
  }
  double per_call = (double)allocations / (double)calls;
  printf("%ld cached executes: %.2f heap allocations per call\n", calls, per_call);
  if (max_allocations >= 0 && per_call > (double)max_allocations) {
    fprintf(stderr, "more than %ld heap allocations per call\n", max_allocations);
    return 1;
  }
  return 0;
}
