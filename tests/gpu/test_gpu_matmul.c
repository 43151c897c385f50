/* matmul and linear on the GPU (cuBLASLt library segments) vs the CPU
 * backend, through the public C API: fp32/fp16/bf16/fp64; odd sizes; batch
 * broadcasting (stride-0 batches, batches folded into M, loops over batch
 * dims that do not collapse); 1-D operands; transposed, sliced and offset
 * operand views (CUBLAS_OP_T, compact scratch copies, unaligned pointers);
 * strided and column-major outputs (kf_execute_into); linear with and
 * without bias (epilogue; broadcast and strided bias through the fill
 * path); empty dims; layernorm -> linear -> gelu -> linear with its four
 * segments; and matmul patterns (bias and relu/gelu_tanh in the cuBLASLt
 * epilogue, fp32/fp16/bf16/fp64, the cast-to-float32 form), fused, through
 * their natural fallbacks (strided or broadcast bias, K = 0) and with the
 * fallback forced (KFUSE_EPILOGUE_FALLBACK=1). The epilogue does not round
 * between the product and the activation while the CPU reference does
 * (docs/semantics.md), which these tolerances cover; gelu_tanh cases use
 * at least 2e-3 (cuBLASLt's GELU may use a fast tanh). Inputs lie on a 1/16
 * grid in [-1, 1]; the tolerance is
 * tol(dtype) * (|cpu| + sqrt(K)) with tol f64 1e-12, f32 1e-5, f16 1e-2,
 * bf16 2e-2. Every mismatch is printed; a test fails at its end if any case
 * failed. Exits 77 without a CUDA device. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "gpu/dl_values.h"
#include "gpu/gpu_util.h"

#define MAX_RANK 6
#define MAX_IO 8

static gpu_stream g_stream;
static int g_failures;
/* A floor under tolerance(dtype), for cases where cuBLASLt computes a
 * function less exactly than the CPU reference (its GELU epilogue). */
static double g_min_tol;

/* ---- dtypes ------------------------------------------------------------- */

static const kf_dtype kFloats[] = {KF_FLOAT32, KF_FLOAT16, KF_BFLOAT16, KF_FLOAT64};

/* ---- inputs ------------------------------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double grid_value(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)((int)(g_rng % 33) - 16) / 16.0;
}

/* Host storage viewed with shape, strides (NULL when !strided) and offset;
 * the GPU run gets a device copy of the same storage. */
typedef struct {
  kf_dtype dtype;
  int rank;
  int64_t shape[MAX_RANK], strides[MAX_RANK];
  int strided;
  int64_t offset, storage;
  void* host;
} tin;

static tin make(kf_dtype dt, int rank, const int64_t* shape) {
  tin t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  t.storage = 1;
  for (int d = 0; d < rank; ++d) {
    t.shape[d] = shape[d];
    t.storage *= shape[d];
  }
  return t;
}

static void set_strides(tin* t, const int64_t* strides, int64_t offset) {
  int64_t last = 0;
  for (int d = 0; d < t->rank; ++d) {
    t->strides[d] = strides[d];
    last += (t->shape[d] - 1) * strides[d];
  }
  t->strided = 1;
  t->offset = offset;
  t->storage = offset + last + 1;
}

/* A view of a [d1, d0] compact buffer as [d0, d1] (the last two dims
 * swapped): a transposed operand. */
static tin transposed_view(kf_dtype dt, int64_t rows, int64_t cols) {
  int64_t shape[2] = {rows, cols}, strides[2] = {1, rows};
  tin t = make(dt, 2, shape);
  set_strides(&t, strides, 0);
  return t;
}

static void fill(tin* t) {
  size_t e = (size_t)dtype_bytes(t->dtype);
  t->host = calloc((size_t)(t->storage > 0 ? t->storage : 1), e);
  for (int64_t i = 0; i < t->storage; ++i) store(t->dtype, (char*)t->host + (size_t)i * e, grid_value());
}

static DLTensor view(const tin* t, void* data, int cuda) {
  DLTensor d;
  memset(&d, 0, sizeof d);
  d.data = data;
  d.device.device_type = cuda ? kDLCUDA : kDLCPU;
  d.ndim = t->rank;
  d.dtype = dl_of(t->dtype);
  d.shape = (int64_t*)t->shape;
  d.strides = t->strided ? (int64_t*)t->strides : NULL;
  d.byte_offset = (uint64_t)(t->offset * dtype_bytes(t->dtype));
  return d;
}

/* ---- comparing ---------------------------------------------------------- */

/* `a` on the host; `b` a GPU tensor whose touched elements are in `bhost`
 * (element 0 of b first). */
static int compare(const DLTensor* a, const DLTensor* b, const void* bhost, double k,
                   const char* what) {
  kf_dtype t = dtype_of_dl(a->dtype);
  if (a->ndim != b->ndim || memcmp(&a->dtype, &b->dtype, sizeof a->dtype) != 0) {
    printf("MISMATCH %s: rank/dtype differ\n", what);
    return 1;
  }
  int64_t n = 1;
  for (int d = 0; d < a->ndim; ++d) {
    if (a->shape[d] != b->shape[d]) {
      printf("MISMATCH %s: dim %d is %lld on the CPU, %lld on the GPU\n", what, d,
             (long long)a->shape[d], (long long)b->shape[d]);
      return 1;
    }
    n *= a->shape[d];
  }
  const size_t e = (size_t)dtype_bytes(t);
  const double tol = fmax(tolerance(t), g_min_tol), floor_ = sqrt(k > 1 ? k : 1);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = a->ndim - 1; d >= 0; --d) {
      int64_t idx = rest % a->shape[d];
      rest /= a->shape[d];
      oa += idx * stride_at(a, d);
      ob += idx * stride_at(b, d);
    }
    double va = load_f(t, (const char*)a->data + a->byte_offset + (size_t)oa * e);
    double vb = load_f(t, (const char*)bhost + (size_t)ob * e);
    if (!(fabs(va - vb) <= tol * (fabs(va) + floor_))) {
      if (bad < 5) printf("MISMATCH %s: element %lld: cpu %.17g gpu %.17g\n", what, (long long)i, va, vb);
      ++bad;
    }
  }
  if (bad > 5) printf("MISMATCH %s: %d of %lld elements differ\n", what, bad, (long long)n);
  return bad;
}

/* Runs `f` on the CPU and the GPU and compares its one output. With
 * `out_strides` (not NULL) both runs write into caller outputs of those
 * strides (kf_execute_into); else kf_execute allocates. */
static void run_case(kf_fusion f, tin* in, size_t nin, double k, const int64_t* out_strides,
                     const char* what) {
  DLTensor cpu_t[MAX_IO], gpu_t[MAX_IO];
  const DLTensor* cpu_p[MAX_IO];
  const DLTensor* gpu_p[MAX_IO];
  void* dev[MAX_IO] = {0};
  for (size_t i = 0; i < nin; ++i) {
    size_t bytes = (size_t)in[i].storage * (size_t)dtype_bytes(in[i].dtype);
    dev[i] = gpu_alloc(bytes);
    gpu_to_device(dev[i], in[i].host, bytes);
    cpu_t[i] = view(&in[i], in[i].host, 0);
    gpu_t[i] = view(&in[i], dev[i], 1);
    cpu_p[i] = &cpu_t[i];
    gpu_p[i] = &gpu_t[i];
  }
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  DLManagedTensor *cpu_out = NULL, *gpu_out = NULL;
  DLTensor cpu_into, gpu_into;
  int64_t oshape[MAX_RANK];
  void *cpu_buf = NULL, *gpu_buf = NULL;
  const DLTensor *a, *b;
  kf_status s;
  if (out_strides) {
    kf_value_info vi;
    vi.struct_size = sizeof vi;
    KF_CHECK(kf_fusion_output(f, 0, &vi));
    KF_CHECK(kf_output_shape(f, cpu_p, nin, 0, oshape, (size_t)vi.rank));
    tin o = make(vi.dtype, vi.rank, oshape);
    set_strides(&o, out_strides, 0);
    size_t bytes = (size_t)o.storage * (size_t)dtype_bytes(vi.dtype);
    cpu_buf = calloc(bytes ? bytes : 1, 1);
    gpu_buf = gpu_alloc(bytes);
    cpu_into = view(&o, cpu_buf, 0);
    gpu_into = view(&o, gpu_buf, 1);
    cpu_into.shape = gpu_into.shape = oshape;
    cpu_into.strides = gpu_into.strides = (int64_t*)out_strides;
    DLTensor* co[1] = {&cpu_into};
    DLTensor* go[1] = {&gpu_into};
    s = kf_execute_into(f, cpu_p, nin, co, 1, NULL);
    if (s == KF_OK) s = kf_execute_into(f, gpu_p, nin, go, 1, &opts);
    a = &cpu_into;
    b = &gpu_into;
  } else {
    s = kf_execute(f, cpu_p, nin, &cpu_out, 1, NULL);
    if (s == KF_OK) s = kf_execute(f, gpu_p, nin, &gpu_out, 1, &opts);
    a = cpu_out ? &cpu_out->dl_tensor : NULL;
    b = gpu_out ? &gpu_out->dl_tensor : NULL;
  }
  if (s != KF_OK) {
    printf("FAILED %s: %s: %s\n", what, kf_status_name(s), kf_last_error());
    ++g_failures;
  } else {
    GPU_CHECK(gpu.stream_sync(g_stream));
    size_t bytes = (size_t)span_of(b) * (size_t)dtype_bytes(dtype_of_dl(b->dtype));
    void* host = malloc(bytes ? bytes : 1);
    gpu_to_host(host, (const char*)b->data + b->byte_offset, bytes);
    if (compare(a, b, host, k, what)) ++g_failures;
    free(host);
  }
  if (cpu_out) cpu_out->deleter(cpu_out);
  if (gpu_out) gpu_out->deleter(gpu_out);
  GPU_CHECK(gpu.stream_sync(g_stream));
  free(cpu_buf);
  gpu_free(gpu_buf);
  for (size_t i = 0; i < nin; ++i) {
    gpu_free(dev[i]);
    free(in[i].host);
  }
}

static void end_test(const char* name) {
  if (g_failures) {
    int n = g_failures;
    g_failures = 0;
    fail_msg("%s: %d case(s) failed (see MISMATCH/FAILED lines above)", name, n);
  }
}

/* ---- fusions ------------------------------------------------------------ */

static kf_fusion matmul_fusion(kf_dtype dt, int ra, int rb) {
  kf_builder b;
  int64_t x, y, z;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, ra, dt, &x));
  KF_CHECK(kf_define_tensor(b, rb, dt, &y));
  KF_CHECK(kf_matmul(b, x, y, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* bias_rank < 0: no bias. */
static kf_fusion linear_fusion(kf_dtype dt, int rx, int rw, int bias_rank) {
  kf_builder b;
  int64_t x, w, bias = -1, z;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, rx, dt, &x));
  KF_CHECK(kf_define_tensor(b, rw, dt, &w));
  if (bias_rank >= 0) KF_CHECK(kf_define_tensor(b, bias_rank, dt, &bias));
  KF_CHECK(kf_linear(b, x, w, bias, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* Matmul patterns (one library segment with a nested task). */
typedef enum {
  LINEAR_BIAS,     /* act(linear(x [M,K], w [N,K], bias [N])) */
  LINEAR_NO_BIAS,  /* act(linear(x, w)) */
  MATMUL_BIAS_ADD, /* act(x [M,K] @ w [K,N] + bias [N]) */
  LINEAR_CAST_F32, /* cast(act(cast(linear(x, w), f32) + cast(bias, f32)), dt) */
} pattern_kind;

/* act: KF_OP_RELU, KF_OP_GELU_TANH, or -1 (none: MATMUL_BIAS_ADD only). */
static kf_fusion pattern_fusion(kf_dtype dt, pattern_kind kind, int act) {
  kf_builder b;
  int64_t x, w, bias = -1, h, y;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, dt, &x));
  KF_CHECK(kf_define_tensor(b, 2, dt, &w));
  if (kind != LINEAR_NO_BIAS) KF_CHECK(kf_define_tensor(b, 1, dt, &bias));
  if (kind == MATMUL_BIAS_ADD) {
    KF_CHECK(kf_matmul(b, x, w, &h));
    KF_CHECK(kf_binary(b, KF_OP_ADD, h, bias, &h));
  } else {
    KF_CHECK(kf_linear(b, x, w, kind == LINEAR_BIAS ? bias : -1, &h));
  }
  if (kind == LINEAR_CAST_F32) {
    int64_t hf, bf;
    KF_CHECK(kf_cast(b, h, KF_FLOAT32, &hf));
    KF_CHECK(kf_cast(b, bias, KF_FLOAT32, &bf));
    KF_CHECK(kf_binary(b, KF_OP_ADD, hf, bf, &h));
  }
  y = h;
  if (act >= 0) KF_CHECK(kf_unary(b, (kf_op)act, h, &y));
  if (kind == LINEAR_CAST_F32) KF_CHECK(kf_cast(b, y, dt, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* Asserts that `f`, for GPU tensors like `in`, is one library segment whose
 * nested task is `pattern` (concretization reads metadata only, so host
 * buffers stand in for device memory). */
static void expect_pattern(kf_fusion f, tin* in, size_t nin, const char* pattern) {
  DLTensor t[MAX_IO];
  const DLTensor* p[MAX_IO];
  for (size_t i = 0; i < nin; ++i) {
    t[i] = view(&in[i], in[i].host, 1);
    p[i] = &t[i];
  }
  kf_concrete c;
  kf_segmentation seg;
  size_t count = 0;
  KF_CHECK(kf_concretize(f, p, nin, &c));
  KF_CHECK(kf_segment(c, &seg));
  KF_CHECK(kf_segmentation_count(seg, &count));
  assert_int_equal(count, 1);
  kf_segment_info info;
  info.struct_size = sizeof info;
  KF_CHECK(kf_segmentation_get(seg, 0, &info));
  assert_string_equal(info.scheduler, "library");
  assert_int_equal(info.num_children, 1);
  kf_task_info task;
  task.struct_size = sizeof task;
  KF_CHECK(kf_segment_child(seg, 0, 0, &task));
  assert_string_equal(task.pattern, pattern);
  kf_segmentation_release(seg);
  kf_concrete_release(c);
}

/* One pattern case: M x K by N, fresh inputs; `bias_shape`/`bias_stride`
 * for the bias ([N] compact when 0); `out_strides` as in run_case. */
static void run_pattern(kf_dtype dt, pattern_kind kind, int act, int64_t M, int64_t K, int64_t N,
                        int64_t bias_len, int64_t bias_stride, const int64_t* out_strides,
                        const char* name) {
  static const char* const names[] = {"linear+bias", "linear", "matmul+bias", "linear+bias"};
  char pattern[64], what[200];
  snprintf(pattern, sizeof pattern, "%s%s", names[kind],
           act == KF_OP_RELU ? "+relu" : act == KF_OP_GELU_TANH ? "+gelu_tanh" : "");
  kf_fusion f = pattern_fusion(dt, kind, act);
  const int64_t sx[2] = {M, K}, sw_nk[2] = {N, K}, sw_kn[2] = {K, N}, sb[1] = {bias_len ? bias_len : N};
  tin in[3] = {make(dt, 2, sx), make(dt, 2, kind == MATMUL_BIAS_ADD ? sw_kn : sw_nk), make(dt, 1, sb)};
  if (bias_stride) set_strides(&in[2], &bias_stride, 0);
  const size_t nin = kind == LINEAR_NO_BIAS ? 2 : 3;
  for (size_t i = 0; i < nin; ++i) fill(&in[i]);
  expect_pattern(f, in, nin, pattern);
  snprintf(what, sizeof what, "%s %s %lldx%lldx%lld%s%s", pattern, kf_dtype_name(dt), (long long)M,
           (long long)K, (long long)N, kind == LINEAR_CAST_F32 ? " via float32" : "", name);
  /* cuBLASLt's GELU epilogue may use a fast tanh (tanh.approx.f32: about
   * 2^-11 relative error), far above fp32/fp64 rounding. */
  g_min_tol = act == KF_OP_GELU_TANH ? 2e-3 : 0;
  run_case(f, in, nin, (double)(K ? K : 1), out_strides, what);
  g_min_tol = 0;
  kf_fusion_release(f);
}

/* Every pattern kind x activation x dtype at odd sizes, then layouts where
 * cuBLASLt cannot apply the activation and the library segment falls back
 * by itself (product into a temporary, the rest as a generated kernel). */
static void pattern_cases(void) {
  static const int acts[2] = {KF_OP_RELU, KF_OP_GELU_TANH};
  for (size_t d = 0; d < 4; ++d) {
    const kf_dtype dt = kFloats[d];
    for (int a = 0; a < 2; ++a) {
      for (int kind = LINEAR_BIAS; kind <= LINEAR_CAST_F32; ++kind) {
        if (kind == LINEAR_CAST_F32 && dt != KF_FLOAT16 && dt != KF_BFLOAT16) continue;
        run_pattern(dt, (pattern_kind)kind, acts[a], 33, 65, 17, 0, 0, NULL, "");
        run_pattern(dt, (pattern_kind)kind, acts[a], 128, 256, 64, 0, 0, NULL, "");
      }
      /* no bias, column-major output: the activation still fuses */
      const int64_t cm[2] = {1, 33};
      run_pattern(dt, LINEAR_NO_BIAS, acts[a], 33, 65, 17, 0, 0, cm, ", column-major output");
      /* the bias cannot be an epilogue vector: fallback */
      run_pattern(dt, MATMUL_BIAS_ADD, acts[a], 33, 65, 17, 0, 2, NULL, ", strided bias (fallback)");
      run_pattern(dt, MATMUL_BIAS_ADD, acts[a], 33, 65, 17, 1, 0, NULL, ", bias [1] (fallback)");
      run_pattern(dt, LINEAR_BIAS, acts[a], 33, 65, 17, 0, 0, cm, ", column-major output (fallback)");
      /* K = 0: no GEMM at all, act(bias) */
      run_pattern(dt, LINEAR_BIAS, acts[a], 4, 0, 17, 0, 0, NULL, ", K = 0 (fallback)");
    }
    /* a bias add alone: the BIAS epilogue, or fill + accumulate */
    run_pattern(dt, MATMUL_BIAS_ADD, -1, 33, 65, 17, 0, 0, NULL, "");
    run_pattern(dt, MATMUL_BIAS_ADD, -1, 33, 65, 17, 0, 2, NULL, ", strided bias");
  }
}

static void test_epilogues(void** state) {
  (void)state;
  pattern_cases();
  end_test("epilogues");
}

/* The same cases with every pattern run unfused (a forced fallback: what
 * happens where cuBLASLt has no algorithm for an epilogue). */
static void test_epilogue_fallback_forced(void** state) {
  (void)state;
  setenv("KFUSE_EPILOGUE_FALLBACK", "1", 1);
  pattern_cases();
  unsetenv("KFUSE_EPILOGUE_FALLBACK");
  end_test("epilogues, fallback forced");
}

/* ---- tests -------------------------------------------------------------- */

typedef struct {
  int ra, rb;
  int64_t a[4], b[4];
  const char* name;
} mm_shape;

static void test_matmul_shapes(void** state) {
  (void)state;
  static const mm_shape shapes[] = {
      {2, 2, {33, 65}, {65, 17}, "33x65 @ 65x17"},
      {2, 2, {1, 1}, {1, 1}, "1x1 @ 1x1"},
      {2, 2, {128, 256}, {256, 64}, "128x256 @ 256x64"},
      {3, 2, {3, 5, 7}, {7, 6}, "[3,5,7] @ [7,6] (batch folded into M)"},
      {2, 3, {5, 7}, {3, 7, 6}, "[5,7] @ [3,7,6] (A broadcast)"},
      {3, 3, {4, 5, 7}, {4, 7, 6}, "[4,5,7] @ [4,7,6]"},
      {4, 3, {4, 1, 5, 7}, {3, 7, 6}, "[4,1,5,7] @ [3,7,6] (broadcast both)"},
      {3, 4, {1, 5, 7}, {2, 3, 7, 6}, "[1,5,7] @ [2,3,7,6]"},
      {1, 2, {7}, {7, 5}, "[7] @ [7,5]"},
      {2, 1, {5, 7}, {7}, "[5,7] @ [7]"},
      {1, 1, {7}, {7}, "[7] @ [7] (dot)"},
      {3, 1, {3, 5, 7}, {7}, "[3,5,7] @ [7]"},
      {1, 3, {7}, {2, 7, 5}, "[7] @ [2,7,5]"},
      {2, 2, {3, 0}, {0, 4}, "[3,0] @ [0,4] (K = 0: zeros)"},
      {2, 2, {0, 4}, {4, 5}, "[0,4] @ [4,5] (M = 0)"},
      {3, 3, {0, 2, 3}, {1, 3, 2}, "[0,2,3] @ [1,3,2] (empty batch)"},
  };
  for (size_t d = 0; d < 4; ++d)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
      const mm_shape* s = &shapes[i];
      kf_fusion f = matmul_fusion(kFloats[d], s->ra, s->rb);
      tin in[2] = {make(kFloats[d], s->ra, s->a), make(kFloats[d], s->rb, s->b)};
      fill(&in[0]);
      fill(&in[1]);
      char what[160];
      snprintf(what, sizeof what, "matmul %s %s", kf_dtype_name(kFloats[d]), s->name);
      run_case(f, in, 2, (double)s->a[s->ra - 1], NULL, what);
      kf_fusion_release(f);
    }
  end_test("matmul shapes");
}

static void test_matmul_layouts(void** state) {
  (void)state;
  for (size_t d = 0; d < 4; ++d) {
    const kf_dtype dt = kFloats[d];
    kf_fusion f = matmul_fusion(dt, 2, 2);
    char what[160];
    const int64_t M = 33, K = 65, N = 17;
    for (int kind = 0; kind < 6; ++kind) {
      int64_t sa[2] = {M, K}, sb[2] = {K, N};
      tin in[2] = {make(dt, 2, sa), make(dt, 2, sb)};
      const char* name = "";
      switch (kind) {
        case 0: in[0] = transposed_view(dt, M, K); name = "A transposed"; break;
        case 1: in[1] = transposed_view(dt, K, N); name = "B transposed"; break;
        case 2:
          in[0] = transposed_view(dt, M, K);
          in[1] = transposed_view(dt, K, N);
          name = "A and B transposed";
          break;
        case 3: {  /* every other column: neither layout fits, scratch copy */
          int64_t st[2] = {2 * K, 2};
          set_strides(&in[0], st, 0);
          name = "A sliced (column stride 2)";
          break;
        }
        case 4: {  /* element offset: pointers aligned to the element only */
          int64_t st[2] = {K, 1};
          set_strides(&in[0], st, 1);
          set_strides(&in[1], (int64_t[]){N, 1}, 3);
          name = "A and B at odd element offsets";
          break;
        }
        default: {  /* padded rows (leading dims larger than the width) */
          int64_t st[2] = {K + 3, 1};
          set_strides(&in[0], st, 0);
          set_strides(&in[1], (int64_t[]){N + 5, 1}, 0);
          name = "padded leading dims";
          break;
        }
      }
      fill(&in[0]);
      fill(&in[1]);
      snprintf(what, sizeof what, "matmul %s 33x65x17 %s", kf_dtype_name(dt), name);
      run_case(f, in, 2, (double)K, NULL, what);
    }
    kf_fusion_release(f);

    /* Batched operands whose batch dims do not collapse (a permuted batch):
     * a loop over the outer batch dim. */
    f = matmul_fusion(dt, 4, 4);
    {
      int64_t sa[4] = {3, 2, 5, 7}, sb[4] = {3, 2, 7, 4};
      tin in[2] = {make(dt, 4, sa), make(dt, 4, sb)};
      int64_t st[4] = {5 * 7, 3 * 5 * 7, 7, 1}; /* storage [2,3,5,7], dims 0 and 1 swapped */
      set_strides(&in[0], st, 0);
      fill(&in[0]);
      fill(&in[1]);
      snprintf(what, sizeof what, "matmul %s permuted batch dims", kf_dtype_name(dt));
      run_case(f, in, 2, 7, NULL, what);
    }
    kf_fusion_release(f);

    /* Outputs: column-major (no transpose trick), padded rows, and a batch
     * of column-major matrices. */
    f = matmul_fusion(dt, 2, 2);
    {
      int64_t sa[2] = {M, K}, sb[2] = {K, N};
      const int64_t cm[2] = {1, M}, padded[2] = {N + 2, 1}, sliced[2] = {2 * N, 2};
      const int64_t* outs[3] = {cm, padded, sliced};
      const char* names[3] = {"column-major output", "padded output rows", "sliced output (scratch)"};
      for (int o = 0; o < 3; ++o) {
        tin in[2] = {make(dt, 2, sa), make(dt, 2, sb)};
        fill(&in[0]);
        fill(&in[1]);
        snprintf(what, sizeof what, "matmul %s %s", kf_dtype_name(dt), names[o]);
        run_case(f, in, 2, (double)K, outs[o], what);
      }
    }
    kf_fusion_release(f);
  }
  end_test("matmul layouts");
}

static void test_linear(void** state) {
  (void)state;
  for (size_t d = 0; d < 4; ++d) {
    const kf_dtype dt = kFloats[d];
    char what[160];
    for (int with_bias = 0; with_bias <= 1; ++with_bias) {
      const char* bname = with_bias ? "with bias" : "without bias";
      /* x [33,65], w [17,65] */
      kf_fusion f = linear_fusion(dt, 2, 2, with_bias ? 1 : -1);
      int64_t sx[2] = {33, 65}, sw[2] = {17, 65}, sb[1] = {17};
      for (int layout = 0; layout < 3; ++layout) {
        tin in[3] = {make(dt, 2, sx), make(dt, 2, sw), make(dt, 1, sb)};
        const char* lname = "";
        if (layout == 1) {
          in[1] = transposed_view(dt, 17, 65);
          lname = ", w transposed";
        } else if (layout == 2) {
          in[0] = transposed_view(dt, 33, 65);
          lname = ", x transposed";
        }
        for (int i = 0; i < 2 + with_bias; ++i) fill(&in[i]);
        snprintf(what, sizeof what, "linear %s [33,65] x [17,65] %s%s", kf_dtype_name(dt), bname, lname);
        run_case(f, in, (size_t)(2 + with_bias), 65, NULL, what);
      }
      if (with_bias) {
        /* bias with stride 2: not an epilogue vector, filled into D */
        tin in[3] = {make(dt, 2, sx), make(dt, 2, sw), make(dt, 1, sb)};
        set_strides(&in[2], (int64_t[]){2}, 0);
        for (int i = 0; i < 3; ++i) fill(&in[i]);
        snprintf(what, sizeof what, "linear %s strided bias", kf_dtype_name(dt));
        run_case(f, in, 3, 65, NULL, what);
        /* column-major output: the bias runs along D's columns (fill) */
        tin in2[3] = {make(dt, 2, sx), make(dt, 2, sw), make(dt, 1, sb)};
        for (int i = 0; i < 3; ++i) fill(&in2[i]);
        const int64_t cm[2] = {1, 33};
        snprintf(what, sizeof what, "linear %s bias, column-major output", kf_dtype_name(dt));
        run_case(f, in2, 3, 65, cm, what);
        /* bias of one element broadcast to every feature */
        int64_t one[1] = {1};
        tin in3[3] = {make(dt, 2, sx), make(dt, 2, sw), make(dt, 1, one)};
        for (int i = 0; i < 3; ++i) fill(&in3[i]);
        snprintf(what, sizeof what, "linear %s bias [1] broadcast", kf_dtype_name(dt));
        run_case(f, in3, 3, 65, NULL, what);
        /* K = 0: the output is the bias */
        int64_t x0[2] = {4, 0}, w0[2] = {17, 0};
        tin in4[3] = {make(dt, 2, x0), make(dt, 2, w0), make(dt, 1, sb)};
        for (int i = 0; i < 3; ++i) fill(&in4[i]);
        snprintf(what, sizeof what, "linear %s K = 0 with bias", kf_dtype_name(dt));
        run_case(f, in4, 3, 1, NULL, what);
      }
      kf_fusion_release(f);

      /* batched x [2,3,8] (folded into M), w [5,8] */
      f = linear_fusion(dt, 3, 2, with_bias ? 1 : -1);
      {
        int64_t x3[3] = {2, 3, 8}, w2[2] = {5, 8}, b5[1] = {5};
        tin in[3] = {make(dt, 3, x3), make(dt, 2, w2), make(dt, 1, b5)};
        for (int i = 0; i < 2 + with_bias; ++i) fill(&in[i]);
        snprintf(what, sizeof what, "linear %s [2,3,8] x [5,8] %s", kf_dtype_name(dt), bname);
        run_case(f, in, (size_t)(2 + with_bias), 8, NULL, what);
      }
      kf_fusion_release(f);

      /* 1-D x [8], w [5,8] */
      f = linear_fusion(dt, 1, 2, with_bias ? 1 : -1);
      {
        int64_t x1[1] = {8}, w2[2] = {5, 8}, b5[1] = {5};
        tin in[3] = {make(dt, 1, x1), make(dt, 2, w2), make(dt, 1, b5)};
        for (int i = 0; i < 2 + with_bias; ++i) fill(&in[i]);
        snprintf(what, sizeof what, "linear %s [8] x [5,8] %s", kf_dtype_name(dt), bname);
        run_case(f, in, (size_t)(2 + with_bias), 8, NULL, what);
      }
      kf_fusion_release(f);

      /* 1-D w [8]: x [4,8] -> [4] (bias [1]) */
      f = linear_fusion(dt, 2, 1, with_bias ? 1 : -1);
      {
        int64_t x2[2] = {4, 8}, w1[1] = {8}, b1[1] = {1};
        tin in[3] = {make(dt, 2, x2), make(dt, 1, w1), make(dt, 1, b1)};
        for (int i = 0; i < 2 + with_bias; ++i) fill(&in[i]);
        snprintf(what, sizeof what, "linear %s [4,8] x [8] %s", kf_dtype_name(dt), bname);
        run_case(f, in, (size_t)(2 + with_bias), 8, NULL, what);
      }
      kf_fusion_release(f);
    }
  }
  end_test("linear");
}

/* layernorm -> linear -> gelu -> linear: four segments, GPU == CPU. */
static void test_layernorm_mlp(void** state) {
  (void)state;
  static const char* const expected[] = {"normalization", "library", "pointwise", "library"};
  const kf_dtype dts[] = {KF_FLOAT32, KF_FLOAT64, KF_FLOAT16};
  for (int d = 0; d < 3; ++d) {
    const kf_dtype dt = dts[d];
    kf_builder b;
    int64_t x, g, be, w1, b1, w2, b2, h, y, axis = 1, eps;
    int64_t mean, xc, sq, var, ve, inv, t1, t2, ln, act;
    KF_CHECK(kf_builder_create(&b));
    KF_CHECK(kf_define_tensor(b, 2, dt, &x));
    KF_CHECK(kf_define_tensor(b, 1, dt, &g));
    KF_CHECK(kf_define_tensor(b, 1, dt, &be));
    KF_CHECK(kf_define_tensor(b, 2, dt, &w1));
    KF_CHECK(kf_define_tensor(b, 1, dt, &b1));
    KF_CHECK(kf_define_tensor(b, 2, dt, &w2));
    KF_CHECK(kf_define_tensor(b, 1, dt, &b2));
    KF_CHECK(kf_reduce(b, KF_OP_MEAN, x, &axis, 1, 1, &mean));
    KF_CHECK(kf_binary(b, KF_OP_SUB, x, mean, &xc));
    KF_CHECK(kf_binary(b, KF_OP_MUL, xc, xc, &sq));
    KF_CHECK(kf_reduce(b, KF_OP_MEAN, sq, &axis, 1, 1, &var));
    KF_CHECK(kf_define_constant_f64(b, 1e-5, KF_FLOAT64, &eps));
    KF_CHECK(kf_binary(b, KF_OP_ADD, var, eps, &ve));
    KF_CHECK(kf_unary(b, KF_OP_RSQRT, ve, &inv));
    KF_CHECK(kf_binary(b, KF_OP_MUL, xc, inv, &t1));
    KF_CHECK(kf_binary(b, KF_OP_MUL, t1, g, &t2));
    KF_CHECK(kf_binary(b, KF_OP_ADD, t2, be, &ln));
    KF_CHECK(kf_linear(b, ln, w1, b1, &h));
    KF_CHECK(kf_unary(b, KF_OP_GELU, h, &act));
    KF_CHECK(kf_linear(b, act, w2, b2, &y));
    KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
    kf_fusion f;
    KF_CHECK(kf_builder_finalize(b, &f));
    kf_builder_destroy(b);

    const int64_t M = 37, H = 64, F = 96, O = 33;
    const int64_t sx[2] = {M, H}, sh[1] = {H}, sw1[2] = {F, H}, sf[1] = {F}, sw2[2] = {O, F},
                  so[1] = {O};
    tin in[7] = {make(dt, 2, sx),  make(dt, 1, sh), make(dt, 1, sh), make(dt, 2, sw1),
                 make(dt, 1, sf),  make(dt, 2, sw2), make(dt, 1, so)};
    for (int i = 0; i < 7; ++i) fill(&in[i]);

    /* The segmentation for GPU inputs. */
    void* dev[7];
    DLTensor t[7];
    const DLTensor* p[7];
    for (int i = 0; i < 7; ++i) {
      dev[i] = gpu_alloc((size_t)in[i].storage * (size_t)dtype_bytes(dt));
      t[i] = view(&in[i], dev[i], 1);
      p[i] = &t[i];
    }
    kf_concrete c;
    kf_segmentation seg;
    size_t count = 0;
    KF_CHECK(kf_concretize(f, p, 7, &c));
    KF_CHECK(kf_segment(c, &seg));
    KF_CHECK(kf_segmentation_count(seg, &count));
    assert_int_equal(count, 4);
    for (size_t i = 0; i < count; ++i) {
      kf_segment_info info;
      info.struct_size = sizeof info;
      KF_CHECK(kf_segmentation_get(seg, i, &info));
      assert_string_equal(info.scheduler, expected[i]);
    }
    kf_segmentation_release(seg);
    kf_concrete_release(c);
    for (int i = 0; i < 7; ++i) gpu_free(dev[i]);

    char what[128];
    snprintf(what, sizeof what, "layernorm -> linear -> gelu -> linear %s", kf_dtype_name(dt));
    /* the second linear sums F terms of magnitude ~1 */
    run_case(f, in, 7, (double)F * (dt == KF_FLOAT16 ? 4 : 1), NULL, what);
    kf_fusion_release(f);
  }
  end_test("layernorm mlp");
}

/* Mixed operand dtypes are rejected with a message that says so. */
static void test_rejections(void** state) {
  (void)state;
  kf_builder b;
  int64_t x, y, z;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT16, &x));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &y));
  KF_CHECK(kf_matmul(b, x, y, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  int64_t s[2] = {4, 4};
  tin in[2] = {make(KF_FLOAT16, 2, s), make(KF_FLOAT32, 2, s)};
  void* d0 = gpu_alloc(64);
  void* d1 = gpu_alloc(64);
  DLTensor t0 = view(&in[0], d0, 1), t1 = view(&in[1], d1, 1);
  const DLTensor* p[2] = {&t0, &t1};
  DLManagedTensor* out;
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  KF_EXPECT_ERROR(kf_execute(f, p, 2, &out, 1, &opts), KF_ERR_UNSUPPORTED, "argument 0 is float16");
  GPU_CHECK(gpu.stream_sync(g_stream));
  gpu_free(d0);
  gpu_free(d1);
  kf_fusion_release(f);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  GPU_CHECK(gpu.stream_create(&g_stream, 0));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_shapes), cmocka_unit_test(test_matmul_layouts),
      cmocka_unit_test(test_linear),        cmocka_unit_test(test_layernorm_mlp),
      cmocka_unit_test(test_rejections),    cmocka_unit_test(test_epilogues),
      cmocka_unit_test(test_epilogue_fallback_forced),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  gpu.stream_destroy(g_stream);
  return failed;
}
