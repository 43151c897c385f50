/* Caller output layouts through the C API (the plans themselves:
 * test_output_layouts.cpp). kf_execute_into into row-major and
 * column-major outputs of x^T + z gives the right values, and kf_execute
 * after it on the same thread (which reuses the thread's binding) still
 * chooses its own layout: the earlier call's output layouts do not leak
 * into the later call's key. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "test_util.h"

enum { M = 64, N = 48 };

static void test_execute_after_execute_into(void** state) {
  (void)state;
  kf_fusion f = NULL;
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 2>\ninput z: tensor<float32, 2>\ny = add(x, z)\noutput y\n", &f));
  static float a[M * N], b[M * N], out[M * N];
  for (int i = 0; i < M * N; ++i) {
    a[i] = (float)i;
    b[i] = 1000.0f * (float)(i % 7);
  }
  int64_t shape[2] = {M, N}, row_major[2] = {N, 1}, col_major[2] = {1, M};
  DLTensor x = kf_test_tensor(a, kf_test_f32(), 2, shape, col_major);
  DLTensor z = kf_test_tensor(b, kf_test_f32(), 2, shape, row_major);
  const DLTensor* in[2] = {&x, &z};
  int64_t* orders[2] = {row_major, col_major};
  for (int k = 0; k < 2; ++k) {
    memset(out, 0, sizeof out);
    DLTensor y = kf_test_tensor(out, kf_test_f32(), 2, shape, orders[k]);
    DLTensor* outs[1] = {&y};
    KF_CHECK(kf_execute_into(f, in, 2, outs, 1, NULL));
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        const float want = a[i + j * M] + b[i * N + j];
        const float got = out[i * orders[k][0] + j * orders[k][1]];
        if (got != want) fail_msg("layout %d, [%d, %d]: got %g, want %g", k, i, j, (double)got, (double)want);
      }
    DLManagedTensor* mine = NULL;
    KF_CHECK(kf_execute(f, in, 2, &mine, 1, NULL));
    /* kfuse's own layout follows x: column-major. */
    assert_int_equal(mine->dl_tensor.strides[0], 1);
    assert_int_equal(mine->dl_tensor.strides[1], M);
    mine->deleter(mine);
  }
  kf_fusion_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_execute_after_execute_into),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
