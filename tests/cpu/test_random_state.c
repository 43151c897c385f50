/* Random numbers whose seed and offset live in tensors (rank-0 int64),
 * read when the kernel runs, with the fusion advancing the offset in place
 * (`next = add(off, 1)`, output aliased to the offset input): three calls
 * draw three different dropout masks, each bit-identical to the same fusion
 * given the offsets as scalars (o, o+1, o+2), and the offset ends at o+3.
 * This is what makes a captured CUDA graph draw anew at each replay
 * (python_gpu_torch checks that on a GPU). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

#define ROWS 16
#define COLS 24

static const char* kBody =
    "const lo: float32 = 0\n"
    "const hi: float32 = 1\n"
    "a = size(x) {dim=0}\n"
    "b = size(x) {dim=1}\n"
    "u = uniform([a, b], lo, hi, seed, off) {dtype=float32}\n"
    "const p: float32 = 0.5\n"
    "keep = ge(u, p)\n"
    "const z: float32 = 0\n"
    "y = where(keep, x, z)\n";

static void run(kf_fusion f, const DLTensor* const* ins, size_t n, float* y) {
  DLManagedTensor* out[2];
  size_t m;
  KF_CHECK(kf_fusion_num_outputs(f, &m));
  KF_CHECK(kf_execute(f, ins, n, out, m, NULL));
  memcpy(y, out[0]->dl_tensor.data, sizeof(float) * ROWS * COLS);
  for (size_t i = 0; i < m; ++i) out[i]->deleter(out[i]);
}

static void test_offset_advanced_in_place(void** state) {
  (void)state;
  char text[2048];
  snprintf(text, sizeof text,
           "input x: tensor<float32, 2>\ninput seed: tensor<int64, 0>\ninput off: tensor<int64, 0>\n%s"
           "const one: int64 = 1\nnext = add(off, one)\noutput y\noutput next {alias=2}\n",
           kBody);
  kf_fusion stateful;
  KF_CHECK(kf_fusion_from_text(text, &stateful));
  snprintf(text, sizeof text,
           "input x: tensor<float32, 2>\ninput seed: scalar<int64>\ninput off: scalar<int64>\n%soutput y\n", kBody);
  kf_fusion plain;
  KF_CHECK(kf_fusion_from_text(text, &plain));

  float x[ROWS * COLS];
  for (int i = 0; i < ROWS * COLS; ++i) x[i] = 1.0f + (float)i;
  int64_t seed = 1234, off = 77;
  int64_t shape[2] = {ROWS, COLS};
  DLTensor tx = kf_test_tensor(x, kf_test_f32(), 2, shape, NULL);
  DLTensor ts = kf_test_tensor(&seed, kf_test_i64(), 0, NULL, NULL);
  DLTensor to = kf_test_tensor(&off, kf_test_i64(), 0, NULL, NULL);
  const DLTensor* ins[3] = {&tx, &ts, &to};

  float got[3][ROWS * COLS], want[ROWS * COLS];
  for (int call = 0; call < 3; ++call) {
    run(stateful, ins, 3, got[call]);
    assert_int_equal(off, 77 + call + 1);
    int64_t s = 1234, o = 77 + call;
    DLTensor ps = kf_test_tensor(&s, kf_test_i64(), 0, NULL, NULL);
    DLTensor po = kf_test_tensor(&o, kf_test_i64(), 0, NULL, NULL);
    const DLTensor* pins[3] = {&tx, &ps, &po};
    run(plain, pins, 3, want);
    assert_memory_equal(got[call], want, sizeof want);
  }
  /* Three different masks, each keeping about half. */
  for (int c = 0; c < 3; ++c) {
    int kept = 0;
    for (int i = 0; i < ROWS * COLS; ++i) kept += got[c][i] != 0;
    assert_true(kept > ROWS * COLS / 4 && kept < 3 * ROWS * COLS / 4);
  }
  assert_true(memcmp(got[0], got[1], sizeof got[0]) != 0);
  assert_true(memcmp(got[1], got[2], sizeof got[1]) != 0);
  kf_fusion_release(stateful);
  kf_fusion_release(plain);
}

static void test_seed_must_be_rank0_integer(void** state) {
  (void)state;
  kf_fusion f;
  KF_EXPECT_ERROR(kf_fusion_from_text("input x: tensor<float32, 2>\ninput seed: tensor<int64, 1>\n"
                                      "input off: scalar<int64>\n"
                                      "const lo: float32 = 0\nconst hi: float32 = 1\n"
                                      "u = uniform([], lo, hi, seed, off) {dtype=float32}\noutput u\n",
                                      &f),
                  KF_ERR_INVALID_ARGUMENT, "rank-0 integer tensor");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_offset_advanced_in_place),
      cmocka_unit_test(test_seed_must_be_rank0_integer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
