/* The CPU backend's memory on broadcast inputs (issue 43, item 13). Once it
 * stored every intermediate at its full logical size: argmax over a 16-byte
 * stride-0 float32 input of 2^31 elements reached 24 GB and was killed by
 * the OOM killer (an overcommitted allocation succeeds; touching its pages
 * does not). Now a value is held at the size of its distinct elements, a
 * large value that one op reads once is computed as that op reads it, and
 * what must still be stored is counted against a limit before a page is
 * touched (core/runtime/cpu/eval.h, host_memory.h).
 *
 * Each test runs fusions over [2^16, 2^15] (2^31 elements) or other views
 * far larger than the memory they use, checks the results, and asserts the
 * process's peak resident memory stays under 200 MiB. main() sets
 * KFUSE_CPU_MEMORY_LIMIT to 1 GiB, so that the case whose output alone is
 * too large fails the same way on every host. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "test_util.h"

#define ROWS ((int64_t)1 << 16)
#define COLS ((int64_t)1 << 15)
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

/* The case: argmax over a float32 input of 2^31 elements, every
 * stride 0 over a 16-byte buffer; then a row of 2^15 distinct values
 * broadcast over 2^16 rows (a NaN counts as the maximum). Once eq, isnan,
 * logical_or and where of argmax's decomposition each took 2^31 elements. */
static void test_argmax_of_a_broadcast(void** state) {
  (void)state;
  float buf[4] = {1.5f, 2, 3, 4};
  int64_t shape[2] = {ROWS, COLS}, zero[2] = {0, 0};
  DLTensor x = kf_test_tensor(buf, kf_test_f32(), 2, shape, zero);
  kf_fusion f = parse("input x: tensor<float32, 2>\na = argmax(x) {axes=[1]}\noutput a\n");
  DLManagedTensor* out = run1(f, &x);
  assert_int_equal(out->dl_tensor.shape[0], ROWS);
  expect_i64(out, ROWS, 0); /* all equal: the first index */
  out->deleter(out);
  kf_fusion_release(f);
  f = parse("input x: tensor<float32, 2>\na = argmin(x) {axes=[0], keepdim=true}\noutput a\n");
  out = run1(f, &x);
  assert_int_equal(out->dl_tensor.shape[1], COLS);
  expect_i64(out, COLS, 0);
  out->deleter(out);
  kf_fusion_release(f);

  float* row = malloc(COLS * sizeof(float));
  for (int64_t j = 0; j < COLS; ++j) row[j] = (float)(j % 1000);
  row[12345] = 5000;
  int64_t row_strides[2] = {0, 1};
  x = kf_test_tensor(row, kf_test_f32(), 2, shape, row_strides);
  f = parse("input x: tensor<float32, 2>\na = argmax(x) {axes=[1]}\noutput a\n");
  out = run1(f, &x);
  expect_i64(out, ROWS, 12345);
  out->deleter(out);
  row[777] = NAN;
  out = run1(f, &x);
  expect_i64(out, ROWS, 777);
  out->deleter(out);
  kf_fusion_release(f);
  free(row);
  expect_small_peak_rss("argmax of [2^16, 2^15] broadcasts");
}

/* argmax along a dim of 2^25 elements of one stride-0 value: the index
 * (iota) and the masked index (where) differ in every element, so they
 * cannot be held small; each is read once, by the next op, and is computed
 * as it is read (256 MiB of int64 each, never stored). */
static void test_argmax_along_a_long_broadcast_dim(void** state) {
  (void)state;
  float buf[4] = {-7, 0, 0, 0};
  int64_t shape[1] = {(int64_t)1 << 25}, zero[1] = {0};
  DLTensor x = kf_test_tensor(buf, kf_test_f32(), 1, shape, zero);
  kf_fusion f = parse("input x: tensor<float32, 1>\na = argmax(x) {axes=[0]}\noutput a\n");
  DLManagedTensor* out = run1(f, &x);
  assert_int_equal(out->dl_tensor.ndim, 0);
  expect_i64(out, 1, 0);
  out->deleter(out);
  kf_fusion_release(f);
  expect_small_peak_rss("argmax along 2^25 stride-0 elements");
}

/* sum, mean and var over a stride-0 input, and over a broadcast that the
 * fusion makes (expand) and then computes on: exp of it is read by two
 * reductions, so it is stored, at the size of its distinct elements. */
static void test_sum_and_mean_of_a_broadcast(void** state) {
  (void)state;
  float buf[4] = {0.5f, 0, 0, 0};
  int64_t shape[2] = {ROWS, COLS}, zero[2] = {0, 0};
  DLTensor x = kf_test_tensor(buf, kf_test_f32(), 2, shape, zero);
  kf_fusion f = parse(
      "input x: tensor<float32, 2>\n"
      "s = sum(x) {axes=[1]}\nm = mean(x) {axes=[0]}\nv = var(x) {axes=[1]}\n"
      "e = exp(x)\nt = sum(e) {axes=[1]}\nu = mean(e) {axes=[0]}\n"
      "output s\noutput m\noutput v\noutput t\noutput u\n");
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out[5] = {NULL};
  KF_CHECK(kf_execute(f, in, 1, out, 5, NULL));
  expect_f32(out[0], ROWS, 16384.0f); /* 2^15 halves: exact */
  expect_f32(out[1], COLS, 0.5f);
  expect_f32(out[2], ROWS, 0.0f);
  const float e = (float)exp(0.5); /* exp in double, rounded once, as the CPU backend */
  /* exp(0.5) rounded to float32, then summed in double: 2^15 * e exactly. */
  expect_f32(out[3], ROWS, (float)((double)e * 32768.0));
  expect_f32(out[4], COLS, e);
  for (int k = 0; k < 5; ++k) out[k]->deleter(out[k]);
  kf_fusion_release(f);

  /* expand of a [2^15] row. */
  float* row = malloc(COLS * sizeof(float));
  for (int64_t j = 0; j < COLS; ++j) row[j] = (float)(j % 7);
  int64_t row_shape[1] = {COLS};
  DLTensor r = kf_test_tensor(row, kf_test_f32(), 1, row_shape, NULL);
  f = parse(
      "input r: tensor<float32, 1>\nconst rows: int64 = 65536\nn = size(r) {dim=0}\n"
      "x = expand(r, [rows, n])\ny = mul(x, x)\ns = sum(y) {axes=[1]}\noutput s\n");
  DLManagedTensor* o = run1(f, &r);
  double want = 0;
  for (int64_t j = 0; j < COLS; ++j) want += (double)(row[j] * row[j]);
  expect_f32(o, ROWS, (float)want);
  o->deleter(o);
  kf_fusion_release(f);
  free(row);
  expect_small_peak_rss("sum, mean and var of [2^16, 2^15] broadcasts");
}

/* A chain of pointwise ops over broadcast inputs (a row, a scalar, a
 * stride-0 tensor) reduced to a small output; then a sum of a row plus a
 * column, whose 2^26 elements all differ: read once by the sum, they are
 * computed as it reads them. */
static void test_pointwise_chain_to_a_small_output(void** state) {
  (void)state;
  float* row = malloc(COLS * sizeof(float));
  for (int64_t j = 0; j < COLS; ++j) row[j] = (float)(j % 5) * 0.25f;
  float one[4] = {1, 0, 0, 0};
  int64_t shape[2] = {ROWS, COLS}, row_strides[2] = {0, 1}, zero[2] = {0, 0};
  DLTensor a = kf_test_tensor(row, kf_test_f32(), 2, shape, row_strides);
  DLTensor b = kf_test_tensor(one, kf_test_f32(), 2, shape, zero);
  float scale = 2;
  DLTensor s = kf_test_tensor(&scale, kf_test_f32(), 0, NULL, NULL);
  kf_fusion f = parse(
      "input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\ninput s: scalar<float32>\n"
      "c = mul(a, s)\nd = add(c, b)\ne = cast(d) {dtype=float64}\ng = sqrt(e)\nh = max(g) {axes=[1]}\n"
      "k = gt(d, b)\nm = cast(k) {dtype=int32}\nn = sum(m) {axes=[1]}\noutput h\noutput n\n");
  const DLTensor* in[3] = {&a, &b, &s};
  DLManagedTensor* out[2] = {NULL};
  KF_CHECK(kf_execute(f, in, 3, out, 2, NULL));
  const double* h = (const double*)out[0]->dl_tensor.data;
  const int64_t* n = (const int64_t*)out[1]->dl_tensor.data;
  int64_t above = 0; /* elements of a row with a * 2 + 1 > 1 */
  for (int64_t j = 0; j < COLS; ++j) above += row[j] > 0;
  for (int64_t i = 0; i < ROWS; ++i) {
    if (h[i] != sqrt(3.0)) fail_msg("h[%lld] = %.17g", (long long)i, h[i]); /* the largest: sqrt(1 * 2 + 1) */
    if (n[i] != above) fail_msg("n[%lld] = %lld, expected %lld", (long long)i, (long long)n[i], (long long)above);
  }
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  kf_fusion_release(f);
  free(row);

  /* [2^12, 2^14] float32 = 256 MiB of distinct sums. */
  const int64_t m = (int64_t)1 << 12, w = (int64_t)1 << 14;
  float* col = malloc(m * sizeof(float));
  float* line = malloc(w * sizeof(float));
  for (int64_t i = 0; i < m; ++i) col[i] = (float)i;
  for (int64_t j = 0; j < w; ++j) line[j] = (float)(j % 3);
  int64_t cs[2] = {m, 1}, ls[1] = {w};
  DLTensor tc = kf_test_tensor(col, kf_test_f32(), 2, cs, NULL);
  DLTensor tl = kf_test_tensor(line, kf_test_f32(), 1, ls, NULL);
  f = parse("input c: tensor<float32, 2>\ninput l: tensor<float32, 1>\nx = add(c, l)\ns = sum(x) {axes=[1]}\noutput s\n");
  in[0] = &tc;
  in[1] = &tl;
  KF_CHECK(kf_execute(f, in, 2, out, 1, NULL));
  const float* sums = (const float*)out[0]->dl_tensor.data;
  double line_sum = 0;
  for (int64_t j = 0; j < w; ++j) line_sum += line[j];
  for (int64_t i = 0; i < m; ++i) {
    const double want = (double)i * (double)w + line_sum; /* exact in double */
    if (sums[i] != (float)want) fail_msg("row %lld: %.9g, expected %.9g", (long long)i, (double)sums[i], want);
  }
  out[0]->deleter(out[0]);
  kf_fusion_release(f);
  free(col);
  free(line);
  expect_small_peak_rss("pointwise chains over broadcasts");
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
      cmocka_unit_test(test_argmax_of_a_broadcast),
      cmocka_unit_test(test_argmax_along_a_long_broadcast_dim),
      cmocka_unit_test(test_sum_and_mean_of_a_broadcast),
      cmocka_unit_test(test_pointwise_chain_to_a_small_output),
      cmocka_unit_test(test_too_large_for_memory_is_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
