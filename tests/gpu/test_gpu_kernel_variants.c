/* Kernel variants compile on first need (loaded_kernel.h). A row plan
 * covers rows the registers hold (the main kernel), rows of at most a
 * warp's worth (the short-row kernel, several rows per block), rows too
 * long for the registers (the long-row kernel), rows whose block fits a
 * multiprocessor more often with fewer registers (the tight kernel) and a
 * few long rows (the split-row kernels); a
 * column plan's vector kernels have scalar twins for the calls whose
 * tensors fail a vector check (here: a width not a multiple of the
 * vector), and a one-kernel twin (with its scalar twin) for calls of at
 * most 32 rows. The first call compiles only what its sizes take; each other
 * variant compiles when a call first takes it, and a call that takes a
 * loaded variant compiles nothing. Compiles are counted as the files of a
 * disk cache of this test's own; the sums are exact in float32, so every
 * variant must give exactly the host's result. */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "gpu/gpu_util.h"
#include "test_util.h"

/* A constant no other test uses, so every kernel here is new to the cache. */
static const char* kRowSum =
    "input x: tensor<float32, 2>\n"
    "const k: float32 = 1.5\n"
    "y = mul(x, k)\n"
    "s = sum(y) {axes=[1], keepdim=false}\n"
    "output s\n";

/* The same reduced over dim 0: a column plan. */
static const char* kColumnSum =
    "input x: tensor<float32, 2>\n"
    "const k: float32 = 1.5\n"
    "y = mul(x, k)\n"
    "s = sum(y) {axes=[0], keepdim=false}\n"
    "output s\n";

/* The test's own disk cache: mkdtemp (main) replaces the Xs with a unique name. */
static char cache_dir[] = "/tmp/kfuse-variants-XXXXXX";

static int cached_kernels(void) {
  DIR* d = opendir(cache_dir);
  assert_non_null(d);
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    const size_t len = strlen(e->d_name);
    if (len > 6 && strcmp(e->d_name + len - 6, ".kfbin") == 0) ++n;
  }
  closedir(d);
  return n;
}

/* A float32 matrix on device 0 (shape: two extents the caller keeps). */
static DLTensor device_matrix(void* data, int64_t* shape) {
  DLTensor x;
  memset(&x, 0, sizeof x);
  x.data = data;
  x.device.device_type = kDLCUDA;
  x.ndim = 2;
  x.dtype = kf_test_f32();
  x.shape = shape;
  return x;
}

/* Host values in [-(period / 2) / 8, (period / 2) / 8], multiples of 1/8. */
static float* host_matrix(size_t n, int period) {
  float* host = malloc(n * sizeof(float));
  assert_non_null(host);
  for (size_t i = 0; i < n; ++i) host[i] = (float)((int)((i * 7 + i / 5) % period) - period / 2) / 8.0f;
  return host;
}

/* Runs f on the device copy of host ([rows, cols] float32, `offset`
 * elements into its allocation) and copies its one output's first `count`
 * elements into a new array. */
static float* run_on_device(kf_fusion f, const float* host, int64_t rows, int64_t cols, size_t offset, size_t count) {
  const size_t n = (size_t)(rows * cols);
  char* dev = gpu_alloc((n + offset) * sizeof(float));
  gpu_to_device(dev + offset * sizeof(float), host, n * sizeof(float));
  int64_t shape[2] = {rows, cols};
  const DLTensor x = device_matrix(dev + offset * sizeof(float), shape);
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out[1];
  KF_CHECK(kf_execute(f, in, 1, out, 1, NULL));
  GPU_CHECK(gpu.ctx_sync());
  float* got = malloc(count * sizeof(float));
  assert_non_null(got);
  gpu_to_host(got, out[0]->dl_tensor.data, count * sizeof(float));
  out[0]->deleter(out[0]);
  gpu_free(dev);
  return got;
}

/* Runs a row (dim 1) or column (dim 0) sum of k * x on [rows, cols]
 * (x `offset` elements into its allocation) and checks every sum exactly. */
static void run_sum_at(kf_fusion f, int64_t rows, int64_t cols, int dim, double k, size_t offset) {
  float* host = host_matrix((size_t)(rows * cols), 19);
  const int64_t sums = dim == 1 ? rows : cols, length = dim == 1 ? cols : rows;
  float* got = run_on_device(f, host, rows, cols, offset, (size_t)sums);
  for (int64_t i = 0; i < sums; ++i) {
    double want = 0; /* every partial sum is a multiple of 1/16 below 2^20: exact */
    for (int64_t j = 0; j < length; ++j) want += k * host[dim == 1 ? i * cols + j : j * cols + i];
    if ((float)want != got[i]) fail_msg("[%lld x %lld] sum %lld over dim %d: got %.9g, want %.9g", (long long)rows,
                                        (long long)cols, (long long)i, dim, got[i], want);
  }
  free(got);
  free(host);
}

static void run_sum(kf_fusion f, int64_t rows, int64_t cols, int dim, double k) { run_sum_at(f, rows, cols, dim, k, 0); }

static void test_variants_compile_on_first_need(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kRowSum, &f));

  /* The plan has a long-row kernel and a split-row plan. */
  {
    int64_t shape[2] = {64, 1024};
    void* dev = gpu_alloc(64 * 1024 * sizeof(float));
    const DLTensor x = device_matrix(dev, shape);
    const DLTensor* in[1] = {&x};
    kf_concrete c;
    KF_CHECK(kf_concretize(f, in, 1, &c));
    kf_segmentation s;
    KF_CHECK(kf_segment(c, &s));
    char* source = NULL;
    KF_CHECK(kf_segment_cuda_source(s, 0, &source));
    assert_non_null(strstr(source, "_long(const KfArgs args)"));
    assert_non_null(strstr(source, "rows split over blocks"));
    kf_string_free(source);
    kf_segmentation_release(s);
    kf_concrete_release(c);
    gpu_free(dev);
  }

  const int before = cached_kernels();
  run_sum(f, 64, 1024, 1, 1.5); /* 64 threads per row: the main kernel only */
  const int main_only = cached_kernels();
  assert_int_equal(main_only - before, 1);
  run_sum(f, 512, 32768, 1, 1.5); /* rows too long for the registers */
  const int with_long = cached_kernels();
  assert_int_equal(with_long - main_only, 1);
  run_sum(f, 4, 32768, 1, 1.5); /* a few long rows: the split-row kernels */
  const int with_split = cached_kernels();
  assert_true(with_split - with_long >= 2);
  run_sum(f, 200, 9000, 1, 1.5); /* blocks of 18 warps: the tight kernel (48 registers) */
  const int with_tight = cached_kernels();
  assert_int_equal(with_tight - with_split, 1);
  run_sum(f, 1001, 128, 1, 1.5); /* 8 threads per row: the short-row kernel, 32 rows per block */
  const int with_short = cached_kernels();
  assert_int_equal(with_short - with_tight, 1);
  run_sum(f, 100, 2000, 1, 1.5); /* every variant loaded: nothing compiles */
  run_sum(f, 300, 20000, 1, 1.5);
  run_sum(f, 3, 20000, 1, 1.5);
  run_sum(f, 50, 10000, 1, 1.5);
  run_sum(f, 7, 512, 1, 1.5);     /* 32 threads per row */
  run_sum(f, 100003, 8, 1, 1.5);  /* one thread per row */
  assert_int_equal(cached_kernels(), with_short);
  kf_fusion_release(f);
}

static void test_scalar_twins_compile_on_first_need(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kColumnSum, &f));
  const int before = cached_kernels();
  run_sum(f, 256, 1024, 0, 1.5); /* the vector partials and the finish */
  const int vector = cached_kernels();
  assert_int_equal(vector - before, 2);
  run_sum(f, 256, 1001, 0, 1.5); /* a width the vectors do not divide: the scalar twin */
  const int twin = cached_kernels();
  assert_int_equal(twin - vector, 1);
  run_sum(f, 64, 2048, 0, 1.5);
  run_sum(f, 3000, 1003, 0, 1.5);
  assert_int_equal(cached_kernels(), twin);
  /* At most 32 rows: the one-kernel twin alone (no finish), then its
   * scalar twin for a width the vectors do not divide. */
  run_sum(f, 8, 1024, 0, 1.5);
  const int short_columns = cached_kernels();
  assert_int_equal(short_columns - twin, 1);
  run_sum(f, 3, 1001, 0, 1.5);
  const int short_scalar = cached_kernels();
  assert_int_equal(short_scalar - short_columns, 1);
  run_sum(f, 32, 4096, 0, 1.5);
  run_sum(f, 2, 77, 0, 1.5);
  run_sum(f, 33, 1024, 0, 1.5); /* 33 rows: the split kernels, loaded */
  assert_int_equal(cached_kernels(), short_scalar);
  kf_fusion_release(f);
}

/* A first call whose width the vectors do not divide compiles an Edges
 * kernel alone (the host sees it from the sizes): each row's aligned
 * middle moves in vectors, its head and tail per element, in registers or
 * (long rows, a kernel of its own) streamed; rows shorter than a warp's
 * share of them take the short-row kernel's scalar twin. The main kernel compiles when an even
 * width first comes. x one float into its allocation is a concretization
 * of its own (4-byte alignment) whose plan is the aligned one's (x joins
 * its vectors: Tuning::row_unaligned_inputs), so its calls fail the
 * vector checks and take the Edges kernels already compiled. */
static void test_first_call_takes_the_twin_it_needs(void** state) {
  (void)state;
  static const char* kRowSumOdd =
      "input x: tensor<float32, 2>\n"
      "const k: float32 = 2.5\n"
      "y = mul(x, k)\n"
      "s = sum(y) {axes=[1], keepdim=false}\n"
      "output s\n";
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kRowSumOdd, &f));
  const int before = cached_kernels();
  run_sum(f, 64, 1001, 1, 2.5); /* held in registers */
  assert_int_equal(cached_kernels() - before, 1);
  run_sum(f, 300, 40001, 1, 2.5); /* long rows */
  const int edges = cached_kernels();
  assert_int_equal(edges - before, 2);
  run_sum(f, 300, 30001, 1, 2.5);
  assert_int_equal(cached_kernels(), edges);
  /* Rows of 3: several rows per warp, the short-row kernel's scalar twin
   * (the Edges kernel would give each a block of one warp). */
  run_sum(f, 7, 3, 1, 2.5);
  const int short_scalar = cached_kernels();
  assert_int_equal(short_scalar - edges, 1);
  run_sum(f, 1000, 5, 1, 2.5);
  assert_int_equal(cached_kernels(), short_scalar);
  run_sum(f, 64, 1024, 1, 2.5);
  const int main_kernel = cached_kernels();
  assert_int_equal(main_kernel - short_scalar, 1);
  run_sum_at(f, 64, 1024, 1, 2.5, 1);
  run_sum_at(f, 64, 1001, 1, 2.5, 1);
  run_sum_at(f, 300, 40001, 1, 2.5, 1);
  assert_int_equal(cached_kernels(), main_kernel);
  kf_fusion_release(f);
}

/* Row sums and column sums of k * x on [rows, cols] (x `offset` elements
 * into its allocation), both checked exactly. */
static void run_row_and_column_sums(kf_fusion f, int64_t rows, int64_t cols, double k, size_t offset) {
  const size_t n = (size_t)(rows * cols);
  float* host = host_matrix(n, 19);
  char* dev = gpu_alloc((n + offset) * sizeof(float));
  gpu_to_device(dev + offset * sizeof(float), host, n * sizeof(float));
  int64_t shape[2] = {rows, cols};
  const DLTensor x = device_matrix(dev + offset * sizeof(float), shape);
  const DLTensor* in[1] = {&x};
  DLManagedTensor* out[2];
  KF_CHECK(kf_execute(f, in, 1, out, 2, NULL));
  GPU_CHECK(gpu.ctx_sync());
  for (int dim = 1; dim >= 0; --dim) {
    const int64_t sums = dim == 1 ? rows : cols, length = dim == 1 ? cols : rows;
    float* got = malloc((size_t)sums * sizeof(float));
    assert_non_null(got);
    gpu_to_host(got, out[1 - dim]->dl_tensor.data, (size_t)sums * sizeof(float));
    for (int64_t i = 0; i < sums; ++i) {
      double want = 0; /* exact, as in run_sum_at */
      for (int64_t j = 0; j < length; ++j) want += k * host[dim == 1 ? i * cols + j : j * cols + i];
      if ((float)want != got[i])
        fail_msg("[%lld x %lld] +%zu: sum %lld over dim %d: got %.9g, want %.9g", (long long)rows, (long long)cols,
                 offset, (long long)i, dim, got[i], want);
    }
    free(got);
  }
  out[0]->deleter(out[0]);
  out[1]->deleter(out[1]);
  gpu_free(dev);
  free(host);
}

/* An inner-outer plan (row sums and column sums in one kernel) at a width
 * the vectors do not divide: its Edges kernel, the column partials in
 * shared memory, compiles alone with the finishing kernel; long rows take
 * the long Edges kernel; an even width the main kernel; rows that start
 * off a vector boundary, at any width, an Edges kernel again. */
static void test_inner_outer_edges(void** state) {
  (void)state;
  static const char* kRowsAndColumns =
      "input x: tensor<float32, 2>\n"
      "const k: float32 = 0.5\n"
      "y = mul(x, k)\n"
      "r = sum(y) {axes=[1], keepdim=false}\n"
      "c = sum(y) {axes=[0], keepdim=false}\n"
      "output r\n"
      "output c\n";
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kRowsAndColumns, &f));
  const int before = cached_kernels();
  run_row_and_column_sums(f, 300, 1001, 0.5, 0); /* the Edges kernel and the finish */
  const int edges = cached_kernels();
  assert_int_equal(edges - before, 2);
  run_row_and_column_sums(f, 5, 3, 0.5, 0);
  run_row_and_column_sums(f, 1000, 4093, 0.5, 0); /* (float32: at most 4096 in registers) */
  assert_int_equal(cached_kernels(), edges);
  run_row_and_column_sums(f, 40, 50001, 0.5, 0); /* long rows */
  const int long_edges = cached_kernels();
  assert_int_equal(long_edges - edges, 1);
  run_row_and_column_sums(f, 64, 1024, 0.5, 0); /* the main kernel */
  const int main_kernel = cached_kernels();
  assert_int_equal(main_kernel - long_edges, 1);
  /* One float into the allocation: a concretization of its own (4-byte
   * alignment) whose plan is the aligned one's (x joins its vectors:
   * Tuning::row_unaligned_inputs), its calls taking the Edges kernel and
   * finish already compiled; three floats in at an odd width, the same. */
  run_row_and_column_sums(f, 64, 1024, 0.5, 1);
  run_row_and_column_sums(f, 64, 1001, 0.5, 3);
  assert_int_equal(cached_kernels(), main_kernel);
  kf_fusion_release(f);
}

/* x - max(x) over each row: two passes, so the long-row kernel stages the
 * row where it fits half the shared memory; longer rows that 8 vectors per
 * thread hold take the wide kernel. Checked exactly (a difference of two
 * multiples of 1/8 below 2). */
static void run_centered(kf_fusion f, int64_t rows, int64_t cols) {
  const size_t n = (size_t)(rows * cols);
  float* host = host_matrix(n, 13);
  float* got = run_on_device(f, host, rows, cols, 0, n);
  for (int64_t i = 0; i < rows; ++i) {
    float m = host[i * cols];
    for (int64_t j = 1; j < cols; ++j) m = host[i * cols + j] > m ? host[i * cols + j] : m;
    for (int64_t j = 0; j < cols; ++j)
      if (got[i * cols + j] != host[i * cols + j] - m)
        fail_msg("[%lld x %lld] (%lld, %lld): got %.9g, want %.9g", (long long)rows, (long long)cols, (long long)i,
                 (long long)j, got[i * cols + j], host[i * cols + j] - m);
  }
  free(got);
  free(host);
}

static void test_wide_rows_compile_on_first_need(void** state) {
  (void)state;
  static const char* kCentered =
      "input x: tensor<float32, 2>\n"
      "m = max(x) {axes=[1], keepdim=true}\n"
      "y = sub(x, m)\n"
      "output y\n";
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kCentered, &f));
  const int before = cached_kernels();
  run_centered(f, 300, 32768); /* 128 KB rows: streamed by the long-row kernel, held by the wide one */
  const int wide = cached_kernels();
  assert_int_equal(wide - before, 1);
  run_centered(f, 300, 24000); /* 94 KB rows: staged, the long-row kernel */
  const int with_long = cached_kernels();
  assert_int_equal(with_long - wide, 1);
  run_centered(f, 300, 30000); /* (fewer rows would take the split-row kernels) */
  run_centered(f, 300, 20000);
  assert_int_equal(cached_kernels(), with_long);
  kf_fusion_release(f);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  /* A disk cache of this test's own (read once, on the first compile). */
  if (mkdtemp(cache_dir) == NULL) return 1;
  setenv("KFUSE_CACHE_DIR", cache_dir, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variants_compile_on_first_need),
      cmocka_unit_test(test_scalar_twins_compile_on_first_need),
      cmocka_unit_test(test_first_call_takes_the_twin_it_needs),
      cmocka_unit_test(test_inner_outer_edges),
      cmocka_unit_test(test_wide_rows_compile_on_first_need),
  };
  const int failed = cmocka_run_group_tests(tests, NULL, NULL);
  char command[128];
  snprintf(command, sizeof command, "rm -rf '%s'", cache_dir);
  if (system(command) != 0) fprintf(stderr, "could not remove %s\n", cache_dir);
  return failed;
}
