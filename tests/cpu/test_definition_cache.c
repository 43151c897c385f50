/* The process-wide definition cache through the public API: the same
 * records in the same order give the same kf_fusion, anything else gives
 * another; the LRU limit evicts without invalidating callers' handles;
 * threads defining one fusion at once share it; and the thread-local error
 * message of each thread is its own. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */

static kf_cache_stats stats(void) {
  kf_cache_stats s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  KF_CHECK(kf_cache_get_stats(&s));
  return s;
}

/* Every test starts from an empty cache with zeroed counters. */
static int reset_cache(void** state) {
  (void)state;
  if (kf_cache_set_limit(1024) != KF_OK || kf_cache_clear() != KF_OK) return -1;
  return 0;
}

/* y = op(x, c) with x: dtype rank 2, c a constant; optionally reduced. */
typedef struct {
  kf_op op;
  kf_dtype dtype;
  double constant;
  int64_t axis;     /* -1: no reduction */
  int swap_order;   /* define the constant before the tensor */
} recipe_t;

static kf_fusion define(recipe_t r) {
  kf_builder b = NULL;
  int64_t x, c, y;
  KF_CHECK(kf_builder_create(&b));
  if (r.swap_order) {
    KF_CHECK(kf_define_constant_f64(b, r.constant, r.dtype, &c));
    KF_CHECK(kf_define_tensor(b, 2, r.dtype, &x));
  } else {
    KF_CHECK(kf_define_tensor(b, 2, r.dtype, &x));
    KF_CHECK(kf_define_constant_f64(b, r.constant, r.dtype, &c));
  }
  KF_CHECK(kf_binary(b, r.op, x, c, &y));
  if (r.axis >= 0) KF_CHECK(kf_reduce(b, KF_OP_SUM, y, &r.axis, 1, 0, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f = NULL;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

static const recipe_t kBase = {KF_OP_ADD, KF_FLOAT32, 1.0, -1, 0};

/* Runs a recipe fusion (float32, no reduction) on [[1, 2], [3, 4]]. */
static void check_runs(kf_fusion f, float c) {
  float x[4] = {1, 2, 3, 4};
  int64_t shape[2] = {2, 2};
  DLTensor t = kf_test_tensor(x, kf_test_f32(), 2, shape, NULL);
  const DLTensor* inputs[1] = {&t};
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, inputs, 1, &out, 1, NULL));
  const float* y = (const float*)out->dl_tensor.data;
  for (int i = 0; i < 4; ++i) assert_float_equal(y[i], x[i] + c, 0);
  out->deleter(out);
}

/* ------------------------------------------------------------------------ */
/* same records, same fusion                                                */

static void test_same_definition_same_pointer(void** state) {
  (void)state;
  kf_fusion a = define(kBase);
  kf_cache_stats s = stats();
  assert_int_equal(s.definitions, 1);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.fusions, 1);

  kf_fusion b = define(kBase);
  assert_ptr_equal(a, b);
  s = stats();
  assert_int_equal(s.definitions, 2);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, 1);
  assert_int_equal(s.fusions, 1);

  /* The text form goes through the same cache. */
  char* text = NULL;
  KF_CHECK(kf_fusion_to_text(a, &text));
  kf_fusion parsed = NULL;
  KF_CHECK(kf_fusion_from_text(text, &parsed));
  kf_string_free(text);
  assert_ptr_equal(parsed, a);
  s = stats();
  assert_int_equal(s.hits, 2);
  assert_int_equal(s.misses, 1);

  check_runs(a, 1.0f);
  kf_fusion_release(parsed);
  kf_fusion_release(b);
  kf_fusion_release(a);
}

/* ------------------------------------------------------------------------ */
/* any difference, another fusion                                           */

static void test_differences_give_other_fusions(void** state) {
  (void)state;
  recipe_t variants[5];
  for (int i = 0; i < 5; ++i) variants[i] = kBase;
  variants[0].op = KF_OP_SUB;          /* another op */
  variants[1].dtype = KF_FLOAT64;      /* another dtype */
  variants[2].constant = 2.0;          /* another constant value */
  variants[3].swap_order = 1;          /* the same records in another order */
  variants[4].axis = 1;                /* another op after */

  kf_fusion fusions[7];
  fusions[0] = define(kBase);
  for (int i = 0; i < 5; ++i) fusions[i + 1] = define(variants[i]);
  /* An attribute: the same reduction over another axis. */
  recipe_t axis0 = kBase;
  axis0.axis = 0;
  fusions[6] = define(axis0);

  for (int i = 0; i < 7; ++i)
    for (int j = i + 1; j < 7; ++j)
      if (fusions[i] == fusions[j]) fail_msg("variants %d and %d share a fusion", i, j);
  kf_cache_stats s = stats();
  assert_int_equal(s.misses, 7);
  assert_int_equal(s.hits, 0);
  assert_int_equal(s.fusions, 7);

  /* ... and each of them is found again. */
  kf_fusion again = define(variants[3]);
  assert_ptr_equal(again, fusions[4]);
  kf_fusion_release(again);
  assert_int_equal(stats().hits, 1);
  for (int i = 0; i < 7; ++i) kf_fusion_release(fusions[i]);
}

/* ------------------------------------------------------------------------ */
/* LRU eviction                                                             */

static recipe_t with_constant(double c) {
  recipe_t r = kBase;
  r.constant = c;
  return r;
}

static void test_lru_eviction(void** state) {
  (void)state;
  KF_CHECK(kf_cache_set_limit(2));
  kf_fusion a = define(with_constant(1));
  kf_fusion b = define(with_constant(2));
  kf_fusion a_again = define(with_constant(1));  /* a is now the most recent */
  assert_ptr_equal(a, a_again);
  kf_fusion c = define(with_constant(3));        /* evicts b, the least recent */
  kf_cache_stats s = stats();
  assert_int_equal(s.evictions, 1);
  assert_int_equal(s.fusions, 2);
  assert_int_equal(s.misses, 3);
  assert_int_equal(s.hits, 1);

  kf_fusion a_third = define(with_constant(1));  /* still cached: a hit */
  assert_ptr_equal(a, a_third);
  assert_int_equal(stats().hits, 2);

  /* b was evicted, yet its handle still works ... */
  check_runs(b, 2.0f);
  char* text = NULL;
  KF_CHECK(kf_fusion_to_text(b, &text));
  assert_non_null(strstr(text, "= 2"));
  kf_string_free(text);
  /* ... and defining it again builds a new fusion (b is still alive, so
   * the new one cannot share its address). */
  kf_fusion b_new = define(with_constant(2));
  assert_ptr_not_equal(b_new, b);
  s = stats();
  assert_int_equal(s.misses, 4);
  assert_int_equal(s.evictions, 2);  /* c made room for b_new */
  check_runs(b_new, 2.0f);
  check_runs(c, 3.0f);

  /* Lowering the limit evicts at once. */
  KF_CHECK(kf_cache_set_limit(1));
  s = stats();
  assert_int_equal(s.fusions, 1);
  assert_int_equal(s.evictions, 3);
  check_runs(a, 1.0f);

  kf_fusion_release(b_new);
  kf_fusion_release(a_third);
  kf_fusion_release(c);
  kf_fusion_release(a_again);
  kf_fusion_release(b);
  kf_fusion_release(a);
  KF_CHECK(kf_cache_set_limit(1024));
}

/* kf_cache_clear drops every fusion; handles stay usable. */
static void test_clear_keeps_handles(void** state) {
  (void)state;
  kf_fusion a = define(kBase);
  KF_CHECK(kf_cache_clear());
  kf_cache_stats s = stats();
  assert_int_equal(s.fusions, 0);
  assert_int_equal(s.definitions, 0);
  check_runs(a, 1.0f);
  kf_fusion b = define(kBase);
  assert_ptr_not_equal(a, b);
  assert_int_equal(stats().misses, 1);
  kf_fusion_release(b);
  kf_fusion_release(a);
}

/* ------------------------------------------------------------------------ */
/* many threads, one fusion                                                 */

enum { kThreads = 16, kRounds = 50 };

static pthread_barrier_t g_barrier;

typedef struct {
  kf_fusion seen[kRounds];
} define_job_t;

static void* define_many(void* arg) {
  define_job_t* job = (define_job_t*)arg;
  pthread_barrier_wait(&g_barrier);
  for (int r = 0; r < kRounds; ++r) {
    recipe_t recipe = kBase;
    recipe.axis = 1;
    job->seen[r] = define(recipe);
  }
  return NULL;
}

static void test_threads_share_one_fusion(void** state) {
  (void)state;
  pthread_t threads[kThreads];
  static define_job_t jobs[kThreads];
  assert_int_equal(pthread_barrier_init(&g_barrier, NULL, kThreads), 0);
  for (int t = 0; t < kThreads; ++t)
    assert_int_equal(pthread_create(&threads[t], NULL, define_many, &jobs[t]), 0);
  for (int t = 0; t < kThreads; ++t) pthread_join(threads[t], NULL);
  pthread_barrier_destroy(&g_barrier);

  kf_fusion first = jobs[0].seen[0];
  assert_non_null(first);
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r)
      if (jobs[t].seen[r] != first) fail_msg("thread %d round %d got another fusion", t, r);
  kf_cache_stats s = stats();
  assert_int_equal(s.definitions, kThreads * kRounds);
  assert_int_equal(s.misses, 1);
  assert_int_equal(s.hits, kThreads * kRounds - 1);
  assert_int_equal(s.fusions, 1);
  for (int t = 0; t < kThreads; ++t)
    for (int r = 0; r < kRounds; ++r) kf_fusion_release(jobs[t].seen[r]);
}

/* ------------------------------------------------------------------------ */
/* thread-local error messages                                              */

enum { kErrorThreads = 8, kErrorRounds = 2000 };

typedef struct {
  int index;
  int wrong;  /* messages that were not this thread's own */
} error_job_t;

static void* fail_many(void* arg) {
  error_job_t* job = (error_job_t*)arg;
  kf_builder b = NULL;
  if (kf_builder_create(&b) != KF_OK) {
    job->wrong = -1;
    return NULL;
  }
  /* Each thread fails with its own rank, so its message is its own. */
  const int rank = 100 + job->index;
  char expected[64];
  snprintf(expected, sizeof expected, "rank %d is out of range", rank);
  pthread_barrier_wait(&g_barrier);
  for (int r = 0; r < kErrorRounds; ++r) {
    int64_t id;
    if (kf_define_tensor(b, rank, KF_FLOAT32, &id) != KF_ERR_INVALID_ARGUMENT ||
        strstr(kf_last_error(), expected) == NULL)
      ++job->wrong;
    /* A success on this thread clears only this thread's message. */
    if (r % 2 == 1) {
      if (kf_check_version(KF_API_VERSION) != KF_OK || kf_last_error()[0] != '\0') ++job->wrong;
    }
  }
  kf_builder_destroy(b);
  return NULL;
}

static void test_thread_local_errors(void** state) {
  (void)state;
  pthread_t threads[kErrorThreads];
  error_job_t jobs[kErrorThreads];
  assert_int_equal(pthread_barrier_init(&g_barrier, NULL, kErrorThreads), 0);
  for (int t = 0; t < kErrorThreads; ++t) {
    jobs[t].index = t;
    jobs[t].wrong = 0;
    assert_int_equal(pthread_create(&threads[t], NULL, fail_many, &jobs[t]), 0);
  }
  for (int t = 0; t < kErrorThreads; ++t) pthread_join(threads[t], NULL);
  pthread_barrier_destroy(&g_barrier);
  for (int t = 0; t < kErrorThreads; ++t)
    if (jobs[t].wrong != 0) fail_msg("thread %d read %d messages that were not its own", t, jobs[t].wrong);
  /* The main thread never failed: its message is empty. */
  assert_string_equal(kf_last_error(), "");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_same_definition_same_pointer, reset_cache),
      cmocka_unit_test_setup(test_differences_give_other_fusions, reset_cache),
      cmocka_unit_test_setup(test_lru_eviction, reset_cache),
      cmocka_unit_test_setup(test_clear_keeps_handles, reset_cache),
      cmocka_unit_test_setup(test_threads_share_one_fusion, reset_cache),
      cmocka_unit_test_setup(test_thread_local_errors, reset_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
