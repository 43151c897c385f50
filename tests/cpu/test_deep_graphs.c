/* Definitions whose shape decides how deep a walk over them goes: long
 * chains of ops, a wide tree, a deep trie of records, a DAG of shape
 * arithmetic, chained reductions. Each case runs on the main thread and on
 * a thread with a 1 MB stack (a JVM thread's), against a fresh definition
 * cache, so every stage (define, finalize, text, concretize, segment,
 * the CPU backend, CUDA codegen through kf_segment_cuda_source, which
 * needs no GPU) runs again on that stack. A case gives the right result or
 * the documented error (KF_MAX_GRAPH_DEPTH, docs/guarantees.md), never a
 * crash. Case bodies run off the main thread, so they report failures
 * through g_err instead of cmocka's assertions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "test_util.h"

static char g_err[1024];

#define BODY_CHECK(call)                                                                          \
  do {                                                                                            \
    kf_status body_status_ = (call);                                                              \
    if (body_status_ != KF_OK) {                                                                  \
      snprintf(g_err, sizeof g_err, "line %d: %s -> %s: %s", __LINE__, #call,                    \
               kf_status_name(body_status_), kf_last_error());                                    \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

#define BODY_EXPECT(cond, ...)                                                                    \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      int body_n_ = snprintf(g_err, sizeof g_err, "line %d: %s: ", __LINE__, #cond);             \
      snprintf(g_err + body_n_, sizeof g_err - (size_t)body_n_, __VA_ARGS__);                     \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

#define BODY_ERROR(call, code, needle)                                                            \
  do {                                                                                            \
    kf_status body_status_ = (call);                                                              \
    BODY_EXPECT(body_status_ == (code), "got %s (%s)", kf_status_name(body_status_), kf_last_error()); \
    BODY_EXPECT(strstr(kf_last_error(), (needle)) != NULL, "message \"%s\"", kf_last_error());   \
  } while (0)

typedef int (*body_fn)(void);

static void* run_body(void* arg) {
  body_fn fn = *(body_fn*)arg;
  return (void*)(intptr_t)fn();
}

/* fn on this thread, then on a thread with a 1 MB stack; each time
 * against an empty definition cache (so nothing is a cache hit). */
static void run_both(body_fn fn) {
  g_err[0] = '\0';
  KF_CHECK(kf_cache_clear());
  if (fn() != 0) fail_msg("main thread: %s", g_err);
  KF_CHECK(kf_cache_clear());
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, (size_t)1 << 20), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, run_body, &fn), 0);
  pthread_attr_destroy(&attr);
  void* rc = NULL;
  assert_int_equal(pthread_join(t, &rc), 0);
  if (rc != NULL) fail_msg("1 MB thread: %s", g_err);
}

/* x: float32 [2, 3] = {-1, 2, -3, 4, -5, 6} */
static float g_x[6] = {-1, 2, -3, 4, -5, 6};
static int64_t g_shape[2] = {2, 3};

static DLTensor x_tensor(void) { return kf_test_tensor(g_x, kf_test_f32(), 2, g_shape, NULL); }

/* Runs f on x (CPU), checks out[i] == want(x[i]) via `want`, and asks for
 * the CUDA source of every segment (generated without a GPU). */
static int run_and_generate(kf_fusion f, const float* want, size_t* source_bytes) {
  DLTensor x = x_tensor();
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out = NULL;
  BODY_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  const float* got = (const float*)out->dl_tensor.data;
  for (int i = 0; i < 6; ++i) {
    const float diff = fabsf(got[i] - want[i]);
    if (!(diff <= 1e-4f * fabsf(want[i]) + 1e-4f)) {
      out->deleter(out);
      BODY_EXPECT(0, "element %d: got %g, expected %g", i, (double)got[i], (double)want[i]);
    }
  }
  out->deleter(out);
  kf_concrete c = NULL;
  kf_segmentation s = NULL;
  BODY_CHECK(kf_concretize(f, in, 1, &c));
  BODY_CHECK(kf_segment(c, &s));
  size_t n = 0, total = 0;
  BODY_CHECK(kf_segmentation_count(s, &n));
  for (size_t k = 0; k < n; ++k) {
    char* text = NULL;
    BODY_CHECK(kf_segment_cuda_source(s, k, &text));
    BODY_EXPECT(strstr(text, "__global__") != NULL, "segment %zu has no kernel", k);
    total += strlen(text);
    kf_string_free(text);
  }
  if (source_bytes) *source_bytes = total;
  kf_segmentation_release(s);
  kf_concrete_release(c);
  return 0;
}

/* ---- a chain of 10^5 unary ops: refused at the limit, the rest runs ---- */

static int chain_over_limit(void) {
  kf_builder b = NULL;
  int64_t v;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &v));
  int64_t k = 0;
  for (; k < 100000; ++k) {
    int64_t next;
    if (kf_unary(b, KF_OP_NEG, v, &next) != KF_OK) break;
    v = next;
  }
  BODY_EXPECT(k == KF_MAX_GRAPH_DEPTH, "the chain was refused at op %lld", (long long)k);
  BODY_EXPECT(strstr(kf_last_error(), "neg: a chain of 10001 ops exceeds the limit of 10000") != NULL, "%s",
              kf_last_error());
  /* The builder is still usable: the 10000 ops it took run. */
  BODY_CHECK(kf_add_output(b, v, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  if (run_and_generate(f, g_x, NULL) != 0) return 1;  /* an even number of negations */

  /* The text form of the deepest fusion prints and parses back to it. */
  char* text = NULL;
  BODY_CHECK(kf_fusion_to_text(f, &text));
  kf_fusion back = NULL;
  BODY_CHECK(kf_fusion_from_text(text, &back));
  BODY_EXPECT(back == f, "the text does not parse back to the same fusion");
  kf_fusion_release(back);
  kf_string_free(text);
  kf_fusion_release(f);

  /* The text form of 10^5 chained ops: refused with its line. */
  const size_t cap = 100000 * 40 + 256;
  char* big = malloc(cap);
  BODY_EXPECT(big != NULL, "out of memory");
  size_t at = (size_t)snprintf(big, cap, "input v0: tensor<float32, 2>\n");
  for (int i = 1; i <= 100000; ++i) at += (size_t)snprintf(big + at, cap - at, "v%d = neg(v%d)\n", i, i - 1);
  snprintf(big + at, cap - at, "output v100000\n");
  const kf_status st = kf_fusion_from_text(big, &back);
  free(big);
  BODY_EXPECT(st == KF_ERR_INVALID_ARGUMENT, "got %s (%s)", kf_status_name(st), kf_last_error());
  BODY_EXPECT(strstr(kf_last_error(), "line 10002") != NULL &&
                  strstr(kf_last_error(), "a chain of 10001 ops exceeds the limit of 10000") != NULL,
              "%s", kf_last_error());
  return 0;
}

static void test_chain_over_limit(void** state) {
  (void)state;
  run_both(chain_over_limit);
}

/* ---- a few thousand chained ops: y = x + 1 + 1 + ... ---- */

static int chain_of_adds(void) {
  enum { kOps = 3000 };
  kf_builder b = NULL;
  int64_t v, one;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &v));
  BODY_CHECK(kf_define_constant_f64(b, 1.0, KF_FLOAT32, &one));
  for (int k = 0; k < kOps; ++k) BODY_CHECK(kf_binary(b, KF_OP_ADD, v, one, &v));
  BODY_CHECK(kf_add_output(b, v, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  float want[6];
  for (int i = 0; i < 6; ++i) want[i] = g_x[i] + (float)kOps;
  const int rc = run_and_generate(f, want, NULL);
  kf_fusion_release(f);
  return rc;
}

static void test_chain_of_adds(void** state) {
  (void)state;
  run_both(chain_of_adds);
}

/* ---- a wide tree: 4096 leaves x + i summed pairwise (depth 13) ---- */

static int wide_tree(void) {
  enum { kLeaves = 4096 };
  kf_builder b = NULL;
  int64_t x;
  static int64_t level[kLeaves];
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  for (int i = 0; i < kLeaves; ++i) {
    int64_t c;
    BODY_CHECK(kf_define_constant_f64(b, (double)i, KF_FLOAT32, &c));
    BODY_CHECK(kf_binary(b, KF_OP_ADD, x, c, &level[i]));
  }
  for (int n = kLeaves; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i) BODY_CHECK(kf_binary(b, KF_OP_ADD, level[2 * i], level[2 * i + 1], &level[i]));
  BODY_CHECK(kf_add_output(b, level[0], NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  float want[6];  /* every partial sum is an integer below 2^24: exact */
  for (int i = 0; i < 6; ++i) want[i] = (float)kLeaves * g_x[i] + (float)(kLeaves * (kLeaves - 1) / 2);
  const int rc = run_and_generate(f, want, NULL);
  kf_fusion_release(f);
  return rc;
}

static void test_wide_tree(void** state) {
  (void)state;
  run_both(wide_tree);
}

/* ---- the limit holds after decompositions: argmax adds levels ---- */

static int decomposed_depth(void) {
  kf_builder b = NULL;
  int64_t v, axis = 1;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &v));
  for (int k = 0; k < KF_MAX_GRAPH_DEPTH - 1; ++k) BODY_CHECK(kf_unary(b, KF_OP_NEG, v, &v));
  BODY_CHECK(kf_reduce(b, KF_OP_ARGMAX, v, &axis, 1, 1, &v));  /* op 10000: accepted as defined */
  BODY_CHECK(kf_add_output(b, v, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_ERROR(kf_builder_finalize(b, &f), KF_ERR_INVALID_ARGUMENT, "exceeds the limit of 10000");
  BODY_EXPECT(strstr(kf_last_error(), "kf_builder_finalize: a chain of 1000") != NULL, "%s", kf_last_error());
  kf_builder_destroy(b);
  return 0;
}

static void test_decomposed_depth(void** state) {
  (void)state;
  run_both(decomposed_depth);
}

/* ---- 10^5 records: the definition trie is as deep; kf_cache_clear ---- */

static int deep_trie(void) {
  kf_builder b = NULL;
  int64_t x, y = 0;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  for (int k = 0; k < 100000; ++k) BODY_CHECK(kf_unary(b, k % 2 ? KF_OP_ABS : KF_OP_NEG, x, &y));
  BODY_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  float want[6];
  for (int i = 0; i < 6; ++i) want[i] = fabsf(g_x[i]);
  DLTensor xt = x_tensor();
  const DLTensor* in[1] = {&xt};
  DLManagedTensor* out = NULL;
  BODY_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  for (int i = 0; i < 6; ++i)
    BODY_EXPECT(((const float*)out->dl_tensor.data)[i] == want[i], "element %d", i);
  out->deleter(out);
  kf_fusion_release(f);
  BODY_CHECK(kf_cache_clear());  /* frees the 10^5-node path */
  return 0;
}

static void test_deep_trie(void** state) {
  (void)state;
  run_both(deep_trie);
}

/* ---- shape arithmetic as a DAG: s = maximum(s, s), 64 times ---- */

static int shape_scalar_dag(void) {
  kf_builder b = NULL;
  int64_t x, s, cols, y;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  BODY_CHECK(kf_size(b, x, 0, &s));
  BODY_CHECK(kf_size(b, x, 1, &cols));
  for (int k = 0; k < 64; ++k) BODY_CHECK(kf_binary(b, KF_OP_MAXIMUM, s, s, &s));  /* 2^64 paths */
  const int64_t shape[2] = {s, cols};
  BODY_CHECK(kf_reshape(b, x, shape, 2, &y));
  BODY_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  const int rc = run_and_generate(f, g_x, NULL);
  kf_fusion_release(f);
  return rc;
}

static void test_shape_scalar_dag(void** state) {
  (void)state;
  run_both(shape_scalar_dag);
}

/* ---- an output stored through a reshape of the same rank ---- */

static int same_rank_view(void) {
  kf_builder b = NULL;
  int64_t x, r, y, rows, cols, z, axis = 1;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  BODY_CHECK(kf_reduce(b, KF_OP_SUM, x, &axis, 1, 1, &r));
  BODY_CHECK(kf_binary(b, KF_OP_SUB, x, r, &y));
  BODY_CHECK(kf_size(b, x, 0, &rows));
  BODY_CHECK(kf_size(b, x, 1, &cols));
  const int64_t shape[2] = {cols, rows};  /* [2, 3] -> [3, 2] */
  BODY_CHECK(kf_reshape(b, y, shape, 2, &z));
  BODY_CHECK(kf_add_output(b, z, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  const float want[6] = {-1 + 2, 2 + 2, -3 + 2, 4 - 5, -5 - 5, 6 - 5};  /* row sums -2 and 5 */
  const int rc = run_and_generate(f, want, NULL);
  kf_fusion_release(f);
  return rc;
}

static void test_same_rank_view(void** state) {
  (void)state;
  run_both(same_rank_view);
}

/* ---- chained reductions: source linear in the chain, split in kernels ---- */

static kf_fusion chained_reductions(kf_op reduction, int pairs) {
  kf_builder b = NULL;
  int64_t y, r, axis = 1;
  if (kf_builder_create(&b) != KF_OK || kf_define_tensor(b, 2, KF_FLOAT32, &y) != KF_OK) return NULL;
  for (int k = 0; k < pairs; ++k)
    if (kf_reduce(b, reduction, y, &axis, 1, 1, &r) != KF_OK || kf_binary(b, KF_OP_SUB, y, r, &y) != KF_OK)
      return NULL;
  kf_fusion f = NULL;
  if (kf_add_output(b, y, NULL, 0, -1) != KF_OK || kf_builder_finalize(b, &f) != KF_OK) f = NULL;
  kf_builder_destroy(b);
  return f;
}

static int reductions_source(void) {
  /* N pairs r = sum(y) {axes=[1], keepdim=true}; y = sub(y, r): one kernel
   * of N phases re-evaluated the chain per phase, 4.3 MB of CUDA at N = 50
   * (240 MB at N = 400). Now at most 8 phases a kernel (kMaxRowPhases). */
  kf_fusion f = chained_reductions(KF_OP_SUM, 50);
  BODY_EXPECT(f != NULL, "%s", kf_last_error());
  DLTensor x = x_tensor();
  const DLTensor* in[1] = {&x};
  kf_concrete c = NULL;
  kf_segmentation s = NULL;
  BODY_CHECK(kf_concretize(f, in, 1, &c));
  BODY_CHECK(kf_segment(c, &s));
  size_t n = 0, total = 0, largest = 0;
  BODY_CHECK(kf_segmentation_count(s, &n));
  for (size_t k = 0; k < n; ++k) {
    char* text = NULL;
    BODY_CHECK(kf_segment_cuda_source(s, k, &text));
    const size_t bytes = strlen(text);
    total += bytes;
    largest = bytes > largest ? bytes : largest;
    kf_string_free(text);
  }
  BODY_EXPECT(n >= 7, "%zu segments for 50 chained reductions", n);
  BODY_EXPECT(largest < ((size_t)1 << 20), "a segment's source has %zu bytes", largest);
  BODY_EXPECT(total < ((size_t)6 << 20), "the sources have %zu bytes", total);
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);

  /* The split chain computes what the chain does: y - mean(y) repeated
   * is x - mean(x) (the CPU backend runs the segments). */
  f = chained_reductions(KF_OP_MEAN, 40);
  BODY_EXPECT(f != NULL, "%s", kf_last_error());
  const float want[6] = {-1 + 2.0f / 3, 2 + 2.0f / 3, -3 + 2.0f / 3, 4 - 5.0f / 3, -5 - 5.0f / 3, 6 - 5.0f / 3};
  const int rc = run_and_generate(f, want, NULL);
  kf_fusion_release(f);
  return rc;
}

static void test_chained_reductions_source(void** state) {
  (void)state;
  run_both(reductions_source);
}

/* ---- source that would double per level: refused, error from the
 * thread codegen runs on ---- */

static int source_cap(void) {
  /* v = slice(cat(v, v), 0:3) 40 times: v itself, but the kernel writer
   * evaluates v once per index it is read at, two per level, which only
   * the source cap (kMaxKernelSourceBytes, here KFUSE_MAX_SOURCE_MB)
   * stops. Deeper than codegen runs inline: the error crosses from the
   * thread codegen runs on. */
  kf_builder b = NULL;
  int64_t v;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &v));
  for (int k = 0; k < 40; ++k) {
    int64_t pair[2] = {v, v}, c;
    BODY_CHECK(kf_cat(b, pair, 2, 1, &c));
    BODY_CHECK(kf_slice(b, c, 1, 0, 3, 1, &v));
  }
  BODY_CHECK(kf_add_output(b, v, NULL, 0, -1));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  DLTensor x = x_tensor();
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out = NULL;
  BODY_CHECK(kf_execute(f, in, 1, &out, 1, NULL));  /* the CPU backend: x */
  for (int i = 0; i < 6; ++i) BODY_EXPECT(((const float*)out->dl_tensor.data)[i] == g_x[i], "element %d", i);
  out->deleter(out);
  kf_concrete c = NULL;
  kf_segmentation s = NULL;
  BODY_CHECK(kf_concretize(f, in, 1, &c));
  BODY_CHECK(kf_segment(c, &s));
  char* text = NULL;
  BODY_ERROR(kf_segment_cuda_source(s, 0, &text), KF_ERR_UNSUPPORTED,
             "codegen: the kernels of this segment would take more than 2 MiB of CUDA source");
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);
  return 0;
}

static void test_source_cap(void** state) {
  (void)state;
  /* 2 MiB instead of 32: the same refusal, at a 16th of the memory. */
  assert_int_equal(setenv("KFUSE_MAX_SOURCE_MB", "2", 1), 0);
  run_both(source_cap);
  unsetenv("KFUSE_MAX_SOURCE_MB");
}

/* ---- a mesh: a deep replicated chain met by a sharded operand ---- */

static int deep_sharded(void) {
  kf_builder b = NULL;
  int64_t x, w, v, z;
  BODY_CHECK(kf_builder_create(&b));
  BODY_CHECK(kf_builder_set_mesh(b, 2));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  BODY_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &w));
  BODY_CHECK(kf_shard(b, w, 0));
  v = x;
  for (int k = 0; k < KF_MAX_GRAPH_DEPTH - 10; ++k) BODY_CHECK(kf_unary(b, KF_OP_NEG, v, &v));
  BODY_CHECK(kf_binary(b, KF_OP_ADD, v, w, &z));  /* the chain's block is computed from x's */
  BODY_CHECK(kf_add_output(b, z, NULL, 0, -1));
  BODY_CHECK(kf_shard(b, z, 0));
  kf_fusion f = NULL;
  BODY_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  char* text = NULL;
  BODY_CHECK(kf_fusion_to_text(f, &text));
  BODY_EXPECT(strstr(text, "mesh 2") != NULL, "no mesh in the text");
  kf_string_free(text);
  kf_fusion_release(f);
  return 0;
}

static void test_deep_sharded(void** state) {
  (void)state;
  run_both(deep_sharded);
}

int main(void) {
  /* KF_TEST_FILTER=test_wide_tree (a cmocka pattern) runs some cases only. */
  if (getenv("KF_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("KF_TEST_FILTER"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_over_limit),
      cmocka_unit_test(test_chain_of_adds),
      cmocka_unit_test(test_wide_tree),
      cmocka_unit_test(test_decomposed_depth),
      cmocka_unit_test(test_deep_trie),
      cmocka_unit_test(test_shape_scalar_dag),
      cmocka_unit_test(test_same_rank_view),
      cmocka_unit_test(test_chained_reductions_source),
      cmocka_unit_test(test_source_cap),
      cmocka_unit_test(test_deep_sharded),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
