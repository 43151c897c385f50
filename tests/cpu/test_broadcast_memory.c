/* The CPU backend's memory on broadcast inputs (issue 43, item 13): argmax
 * over a 16-byte stride-0 float32 input of 2^31 elements once reached 24 GB
 * and was killed by the OOM killer (an overcommitted allocation succeeds;
 * touching its pages does not). What the backend must store is counted
 * against a limit before a page is touched (core/runtime/cpu/host_memory.h).
 *
 * Each test checks the results and asserts the process's peak resident
 * memory stays under 200 MiB. main() sets KFUSE_CPU_MEMORY_LIMIT to 1 GiB,
 * so that the cases too large for it fail the same way on every host. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "test_util.h"

#define MAX_RSS_MIB 200

static kf_fusion parse(const char* text) {
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

/* The process's peak resident memory so far stays under MAX_RSS_MIB. */
static void expect_small_peak_rss(const char* after) {
  struct rusage u;
  assert_int_equal(getrusage(RUSAGE_SELF, &u), 0);
  const long mib = u.ru_maxrss / 1024; /* KiB on Linux */
  if (mib >= MAX_RSS_MIB) fail_msg("%s: peak resident memory %ld MiB (at most %d expected)", after, mib, MAX_RSS_MIB);
}

static void expect_i64(DLManagedTensor* out, int64_t n, int64_t want) {
  const int64_t* got = (const int64_t*)out->dl_tensor.data;
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want) fail_msg("element %lld: got %lld, expected %lld", (long long)i, (long long)got[i], (long long)want);
}

static void expect_f32(DLManagedTensor* out, int64_t n, float want) {
  const float* got = (const float*)out->dl_tensor.data;
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want) fail_msg("element %lld: got %.9g, expected %.9g", (long long)i, (double)got[i], (double)want);
}

/* Runs a one-input, one-output fusion; returns the output. */
static DLManagedTensor* run1(kf_fusion f, DLTensor* x) {
  const DLTensor* in[1] = {x};
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  return out;
}

/* What must be stored at a size beyond the limit is KF_ERR_OUT_OF_MEMORY
 * before a page is touched, naming the value and its bytes (the limit is
 * 1 GiB here): an output of 2 GiB; a scan's result (a running sum of a
 * broadcast differs in every element) of 1 GiB, which the next segment
 * reads; an iota of 1 GiB that two reductions read (stored, not streamed). */
static void test_too_large_for_memory_is_out_of_memory(void** state) {
  (void)state;
  float buf[4] = {1, 0, 0, 0};
  int64_t big[1] = {(int64_t)1 << 29}, zero[1] = {0};
  DLTensor x = kf_test_tensor(buf, kf_test_f32(), 1, big, zero);
  kf_fusion f = parse("input x: tensor<float32, 1>\ny = neg(x)\noutput y\n");
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out = NULL;
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_OUT_OF_MEMORY,
                  "output 0 (value 1): out of host memory: 2147483648 bytes would bring the CPU backend's tensors to");
  assert_non_null(strstr(kf_last_error(), "over its limit of 1073741824 bytes (KFUSE_CPU_MEMORY_LIMIT)"));
  assert_null(out);
  kf_fusion_release(f);

  int64_t n[1] = {(int64_t)1 << 28};
  x = kf_test_tensor(buf, kf_test_f32(), 1, n, zero);
  f = parse("input x: tensor<float32, 1>\nc = cumsum(x) {dim=0}\ns = sum(c) {axes=[0]}\noutput s\n");
  KF_EXPECT_ERROR(kf_execute(f, in, 1, &out, 1, NULL), KF_ERR_OUT_OF_MEMORY,
                  "intermediate value 1: out of host memory: 1073741824 bytes would bring");
  kf_fusion_release(f);
  int64_t count = (int64_t)1 << 27;
  DLTensor tc = kf_test_tensor(&count, kf_test_i64(), 0, NULL, NULL);
  in[0] = &tc;
  f = parse(
      "input n: scalar<int64>\nconst z: int64 = 0\nconst o: int64 = 1\ni = iota(n, z, o) {dtype=int64}\n"
      "a = sum(i) {axes=[0]}\nb = max(i) {axes=[0]}\noutput a\noutput b\n");
  DLManagedTensor* two[2] = {NULL};
  KF_EXPECT_ERROR(kf_execute(f, in, 1, two, 2, NULL), KF_ERR_OUT_OF_MEMORY,
                  "iota (value 3): out of host memory: 1073741824 bytes would bring");
  count = 1000;
  KF_CHECK(kf_execute(f, in, 1, two, 2, NULL));
  expect_i64(two[0], 1, 499500);
  expect_i64(two[1], 1, 999);
  two[0]->deleter(two[0]);
  two[1]->deleter(two[1]);
  kf_fusion_release(f);
  in[0] = &x;
  /* The scan within the limit still runs. */
  n[0] = 1000;
  x = kf_test_tensor(buf, kf_test_f32(), 1, n, zero);
  f = parse("input x: tensor<float32, 1>\nc = cumsum(x) {dim=0}\ns = sum(c) {axes=[0]}\noutput s\n");
  out = run1(f, &x);
  expect_f32(out, 1, 500500.0f);
  out->deleter(out);
  kf_fusion_release(f);
  expect_small_peak_rss("fusions too large for the memory limit");
}

int main(void) {
  setenv("KFUSE_CPU_MEMORY_LIMIT", "1073741824", 1); /* read once, at the first allocation */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_too_large_for_memory_is_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
