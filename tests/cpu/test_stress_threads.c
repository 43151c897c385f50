/* 8 threads for KFUSE_STRESS_SECONDS (default 10) define the same and
 * different fusions, concretize them with varying shapes and layouts and
 * execute them on the CPU backend, checking every result. Run under
 * ThreadSanitizer by .ci/run (build-tsan). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <time.h>

#include "test_util.h"

#define THREADS 8

typedef struct {
  unsigned seed;
  long executions;
  int failed;
  char message[256];
} worker;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* y = relu(x * c + b): c picks one of 4 definitions (shared across threads). */
static kf_status define(int variant, kf_fusion* out) {
  kf_builder b;
  kf_status st = kf_builder_create(&b);
  if (st) return st;
  int64_t x, bias, c, m, s, y;
  if ((st = kf_define_tensor(b, 2, KF_FLOAT32, &x)) || (st = kf_define_tensor(b, 1, KF_FLOAT32, &bias)) ||
      (st = kf_define_constant_f64(b, 0.5 * (variant + 1), KF_FLOAT32, &c)) ||
      (st = kf_binary(b, KF_OP_MUL, x, c, &m)) || (st = kf_binary(b, KF_OP_ADD, m, bias, &s)) ||
      (st = kf_unary(b, KF_OP_RELU, s, &y)) || (st = kf_add_output(b, y, NULL, 0, -1)) ||
      (st = kf_builder_finalize(b, out))) {
    kf_builder_destroy(b);
    return st;
  }
  kf_builder_destroy(b);
  return KF_OK;
}

static void* run(void* arg) {
  worker* w = (worker*)arg;
  double seconds = getenv("KFUSE_STRESS_SECONDS") ? atof(getenv("KFUSE_STRESS_SECONDS")) : 10.0;
  double end = now_seconds() + seconds;
  float x[64], bias[8], y[64];
  while (now_seconds() < end && !w->failed) {
    int variant = (int)(rand_r(&w->seed) % 4);
    int64_t rows = 1 + rand_r(&w->seed) % 8, cols = 1 + rand_r(&w->seed) % 8;
    int transposed = rand_r(&w->seed) % 2, broadcast_bias = rand_r(&w->seed) % 2;
    for (int i = 0; i < 64; ++i) x[i] = (float)((int)(rand_r(&w->seed) % 17) - 8);
    for (int i = 0; i < 8; ++i) bias[i] = (float)((int)(rand_r(&w->seed) % 5) - 2);
    kf_fusion f;
    kf_status st = define(variant, &f);
    if (st) {
      snprintf(w->message, sizeof w->message, "define: %s", kf_last_error());
      w->failed = 1;
      break;
    }
    int64_t xs[2] = {rows, cols}, xst[2] = {transposed ? 1 : cols, transposed ? rows : 1};
    int64_t bs[1] = {broadcast_bias ? 1 : cols};
    DLTensor xt = kf_test_tensor(x, kf_test_f32(), 2, xs, xst);
    DLTensor bt = kf_test_tensor(bias, kf_test_f32(), 1, bs, NULL);
    DLTensor yt = kf_test_tensor(y, kf_test_f32(), 2, xs, NULL);
    const DLTensor* in[2] = {&xt, &bt};
    DLTensor* out[1] = {&yt};
    st = kf_execute_into(f, in, 2, out, 1, NULL);
    if (st) {
      snprintf(w->message, sizeof w->message, "execute: %s", kf_last_error());
      w->failed = 1;
    }
    for (int64_t i = 0; i < rows && !w->failed; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float xv = x[i * xst[0] + j * xst[1]];
        float v = xv * (float)(0.5 * (variant + 1)) + bias[broadcast_bias ? 0 : j];
        float expect = v > 0 ? v : 0;
        if (y[i * cols + j] != expect) {
          snprintf(w->message, sizeof w->message, "y[%ld][%ld] = %g, expected %g", (long)i, (long)j,
                   y[i * cols + j], expect);
          w->failed = 1;
          break;
        }
      }
    /* A bad call now and then: its message must be this thread's. */
    if (!w->failed && rand_r(&w->seed) % 8 == 0) {
      const DLTensor* one[1] = {&xt};
      if (kf_execute_into(f, one, 1, out, 1, NULL) != KF_ERR_INVALID_ARGUMENT ||
          strstr(kf_last_error(), "expected 2 inputs, got 1") == NULL) {
        snprintf(w->message, sizeof w->message, "wrong error message: %s", kf_last_error());
        w->failed = 1;
      }
    }
    kf_fusion_release(f);
    ++w->executions;
  }
  return NULL;
}

static void test_threads_define_concretize_execute(void** state) {
  (void)state;
  pthread_t threads[THREADS];
  worker workers[THREADS];
  memset(workers, 0, sizeof workers);
  for (int i = 0; i < THREADS; ++i) {
    workers[i].seed = 1234u + (unsigned)i;
    assert_int_equal(pthread_create(&threads[i], NULL, run, &workers[i]), 0);
  }
  long total = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(threads[i], NULL);
    if (workers[i].failed) fail_msg("thread %d: %s", i, workers[i].message);
    total += workers[i].executions;
  }
  print_message("%ld checked executions on %d threads\n", total, THREADS);
  assert_true(total > THREADS);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_threads_define_concretize_execute)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
