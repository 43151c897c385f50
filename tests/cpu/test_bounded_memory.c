/* 10^5 executions with distinct shapes and layouts (many concretization
 * classes: size-1 dims, transposes) keep resident memory bounded: the
 * concrete-fusion LRU evicts, and nothing leaks per call. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

static long resident_kb(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
  fclose(f);
  return kb;
}

static void run_shapes(kf_fusion f, unsigned* seed, long calls, float* x, float* b, float* y) {
  for (long i = 0; i < calls; ++i) {
    int64_t rows = 1 + rand_r(seed) % 48, cols = 1 + rand_r(seed) % 48;
    int transposed = rand_r(seed) % 2;
    int64_t xs[2] = {rows, cols}, xst[2] = {transposed ? 1 : cols, transposed ? rows : 1};
    int64_t bs[1] = {rand_r(seed) % 3 ? cols : 1};
    DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, xst);
    DLTensor bt = kf_test_tensor(b, kf_test_f32(), 1, bs, NULL);
    DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, xs, NULL);
    const DLTensor* in[2] = {&xt, &bt};
    DLTensor* out[1] = {&yt};
    KF_CHECK(kf_execute_into(f, in, 2, out, 1, NULL));
    if (i % 8 == 0) { /* and the allocating path */
      DLManagedTensor* m;
      KF_CHECK(kf_execute(f, in, 2, &m, 1, NULL));
      m->deleter(m);
    }
  }
}

static void test_distinct_shapes_bounded_memory(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(
      "input x: tensor<float32, 2>\ninput b: tensor<float32, 1>\ns = add(x, b)\n"
      "m = sum(s) {axes=[1], keepdim=true}\ny = sub(s, m)\noutput y\n", &f));
  KF_CHECK(kf_cache_set_concrete_limit(4)); /* fewer than the classes used */
  static float x[48 * 48], b[48], y[48 * 48];
  unsigned seed = 7;
  run_shapes(f, &seed, 20000, x, b, y); /* reach the steady state */
  long before = resident_kb();
  run_shapes(f, &seed, 80000, x, b, y);
  long after = resident_kb();
  print_message("resident memory: %ld kB after warm-up, %ld kB after 80000 more calls\n", before, after);
  assert_true(before > 0);
  assert_true(after - before < 8 * 1024); /* < 8 MB growth */
  kf_cache_stats stats;
  stats.struct_size = sizeof stats;
  KF_CHECK(kf_cache_get_stats(&stats));
  assert_true(stats.concretizations > 8); /* classes were evicted and rebuilt */
  KF_CHECK(kf_cache_set_concrete_limit(64));
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_distinct_shapes_bounded_memory)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
