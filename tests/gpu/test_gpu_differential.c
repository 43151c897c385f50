/* CPU reference vs GPU through the public C API: every unary, binary and
 * ternary op on every dtype its type rule accepts, casts, reductions (every
 * op; inner, outer, middle and all axes; keepdim), layout classes
 * (contiguous, transposed, broadcast, size-1, size-0, offset pointers,
 * sliced strides, strided outputs), random ops (uniform and normal bit for bit,
 * see core/runtime/cpu/philox.h), end-to-end
 * fusions (layernorm, softmax, rmsnorm, gelu+bias, transpose+add, two
 * segments), a caller allocator, and with KFUSE_TEST_LARGE=1 a tensor of
 * more than 2^31 elements. Tolerances by dtype: f64 1e-12, f32 1e-5, f16
 * 1e-2, bf16 2e-2 (relative, with an absolute floor of the same size);
 * integers and bool exact. Every mismatch is printed; each test fails at
 * its end if any case failed. Exits 77 without a CUDA device. */
#include <math.h>
#include <string.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"
#include "op_sweep.h"
#include "gpu/dl_values.h"
#include "gpu/gpu_util.h"

#define MAX_RANK 6
#define MAX_IO 8

static gpu_stream g_stream;
static int g_row_major_outputs; /* KF_TEST_OUTPUTS=row-major (run_case_tol) */
/* With g_row_major_outputs: when set, the caller's outputs are stored in
   this memory order instead (outermost first, as many dims as each output),
   or output o in g_out_orders[o] where that is set */
static const int* g_out_order;
static const int* const* g_out_orders;
static int g_failures;

/* ---- dtypes ------------------------------------------------------------ */

#define kAll kSweepDtypes  /* (tests/op_sweep.h) */
#define NUM_DTYPES NUM_SWEEP_DTYPES

static int is_float_dtype(kf_dtype t) {
  return t == KF_FLOAT64 || t == KF_FLOAT32 || t == KF_FLOAT16 || t == KF_BFLOAT16 || t == KF_FLOAT8_E4M3FN ||
         t == KF_FLOAT8_E5M2;
}

/* ---- inputs ------------------------------------------------------------ */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double uniform01(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) * 0x1.0p-53;
}

/* A test input: host storage the tensor views with its shape, strides and
 * offset; the GPU run gets a device copy of the same storage. */
typedef struct {
  kf_dtype dtype;
  int rank;
  int64_t shape[MAX_RANK];
  int64_t strides[MAX_RANK];
  int strided;      /* 0: DLPack strides NULL (compact) */
  int64_t offset;   /* elements, as byte_offset */
  int64_t storage;  /* elements */
  void* host;
  int scalar;       /* a 0-dim CPU scalar, shared by both runs */
} tin;

static int64_t numel_of(int rank, const int64_t* shape) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

static tin input(kf_dtype dt, int rank, const int64_t* shape) {
  tin t;
  memset(&t, 0, sizeof t);
  t.dtype = dt;
  t.rank = rank;
  for (int d = 0; d < rank; ++d) t.shape[d] = shape[d];
  t.storage = numel_of(rank, shape);
  return t;
}

static void with_strides(tin* t, const int64_t* strides, int64_t offset) {
  int64_t last = 0;
  int empty = 0;
  for (int d = 0; d < t->rank; ++d) {
    t->strides[d] = strides[d];
    last += (t->shape[d] - 1) * strides[d];
    if (t->shape[d] == 0) empty = 1;
  }
  t->strided = 1;
  t->offset = offset;
  t->storage = empty ? offset : offset + last + 1;
}

/* Fills the whole storage (gaps included) with values in [lo, hi] on a
 * 1/16 grid, so they are exact in every float dtype and ties happen;
 * `nonzero` keeps them away from 0 (divisors). */
static void fill(tin* t, double lo, double hi, int nonzero) {
  size_t e = (size_t)dtype_bytes(t->dtype);
  t->host = calloc((size_t)(t->storage > 0 ? t->storage : 1), e);
  for (int64_t i = 0; i < t->storage; ++i) {
    double v;
    if (t->dtype == KF_BOOL) {
      v = uniform01() < 0.5;
    } else if (is_float_dtype(t->dtype)) {
      v = floor((lo + (hi - lo) * uniform01()) * 16.0) / 16.0;
      if (v < lo) v = lo;
      if (nonzero && fabs(v) < 0.125) v = (v < 0 && lo < 0) ? -0.5 : 0.5;
    } else {
      v = floor(lo + (hi - lo + 1) * uniform01());
      if (v > hi) v = hi;
      if (nonzero && v == 0) v = hi != 0 ? hi : 1;
    }
    store(t->dtype, (char*)t->host + (size_t)i * e, v);
  }
}

static tin scalar_input(kf_dtype dt, double v) {
  tin t = input(dt, 0, NULL);
  t.scalar = 1;
  t.host = calloc(1, 8);
  store(dt, t.host, v);
  return t;
}

static void free_inputs(tin* in, size_t n) {
  for (size_t i = 0; i < n; ++i) free(in[i].host);
}

/* ---- running and comparing --------------------------------------------- */

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

/* > 0: compare() checks float16/bfloat16 results by their distance in
 * ulps (adjacent bit patterns: 1), at most this many (test_fast_forms). */
static int g_max_ulps = 0;

/* A 16-bit float's bits in order (-0 and +0 the same). */
static int ordered16(uint16_t u) { return (u & 0x8000) ? -(int)(u & 0x7fff) : (int)(u & 0x7fff); }

/* Compares the CPU result `a` with the GPU result `b` (whose elements were
 * copied to `bhost`, element 0 first). Returns the number of mismatches. */
static int compare(const DLTensor* a, const DLTensor* b, const void* bhost, double scale,
                   double tol_override, const char* what) {
  kf_dtype t = dtype_of_dl(a->dtype);
  if (a->ndim != b->ndim || memcmp(&a->dtype, &b->dtype, sizeof a->dtype) != 0) {
    printf("MISMATCH %s: rank/dtype differ\n", what);
    return 1;
  }
  for (int d = 0; d < a->ndim; ++d)
    if (a->shape[d] != b->shape[d]) {
      printf("MISMATCH %s: shape differs in dim %d\n", what, d);
      return 1;
    }
  int64_t n = numel_of(a->ndim, a->shape);
  const size_t e = (size_t)dtype_bytes(t);
  const char* abase = (const char*)a->data + a->byte_offset;
  double tol = tol_override >= 0 ? tol_override : tolerance(t);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = a->ndim - 1; d >= 0; --d) {
      int64_t idx = rest % a->shape[d];
      rest /= a->shape[d];
      oa += idx * stride_at(a, d);
      ob += idx * stride_at(b, d);
    }
    const void* pa = abase + (size_t)oa * e;
    const void* pb = (const char*)bhost + (size_t)ob * e;
    int ok;
    double va, vb;
    if (is_float_dtype(t)) {
      va = load_f(t, pa);
      vb = load_f(t, pb);
      if (isnan(va) || isnan(vb)) ok = isnan(va) && isnan(vb);
      else if (g_max_ulps > 0 && (t == KF_FLOAT16 || t == KF_BFLOAT16))
        ok = abs(ordered16(*(const uint16_t*)pa) - ordered16(*(const uint16_t*)pb)) <= g_max_ulps;
      else if (isinf(va) || isinf(vb)) ok = va == vb;
      else ok = fabs(va - vb) <= tol * (scale + fmax(fabs(va), fabs(vb)));
    } else {
      va = (double)load_i(t, pa);
      vb = (double)load_i(t, pb);
      ok = load_i(t, pa) == load_i(t, pb);
    }
    if (!ok) {
      if (bad < 5) printf("MISMATCH %s: element %lld: cpu %.17g gpu %.17g\n", what, (long long)i, va, vb);
      ++bad;
    }
  }
  if (bad > 5) printf("MISMATCH %s: %d of %lld elements differ\n", what, bad, (long long)n);
  return bad;
}

/* Copies the tensor inputs to the GPU (dev[i]: their memory, NULL for
 * scalars, which stay host views) and points gpu_p at their views. */
static void to_device(tin* in, size_t nin, DLTensor* gpu_t, const DLTensor** gpu_p, void** dev) {
  for (size_t i = 0; i < nin; ++i) {
    dev[i] = NULL;
    if (in[i].scalar) {
      gpu_t[i] = view(&in[i], in[i].host, 0);
    } else {
      size_t bytes = (size_t)in[i].storage * (size_t)dtype_bytes(in[i].dtype);
      dev[i] = gpu_alloc(bytes);
      gpu_to_device(dev[i], in[i].host, bytes);
      gpu_t[i] = view(&in[i], dev[i], 1);
    }
    gpu_p[i] = &gpu_t[i];
  }
}

/* Runs `f` on the CPU and on the GPU (on g_stream) and compares every
 * output. scale: absolute floor multiplier (reductions pass their length);
 * tol_override < 0 uses the dtype's tolerance. */
static void run_case_tol(kf_fusion f, tin* in, size_t nin, const char* what, double scale,
                         double tol_override) {
  DLTensor cpu_t[MAX_IO], gpu_t[MAX_IO];
  const DLTensor* cpu_p[MAX_IO];
  const DLTensor* gpu_p[MAX_IO];
  void* dev[MAX_IO] = {0};
  to_device(in, nin, gpu_t, gpu_p, dev);
  for (size_t i = 0; i < nin; ++i) {
    cpu_t[i] = view(&in[i], in[i].host, 0);
    cpu_p[i] = &cpu_t[i];
  }
  size_t nout = 0;
  KF_CHECK(kf_fusion_num_outputs(f, &nout));
  DLManagedTensor* cpu_out[MAX_IO];
  DLManagedTensor* gpu_out[MAX_IO];
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  if (getenv("KF_TEST_TRACE") != NULL) { /* which case a sticky device error came from */
    printf("case %s\n", what);
    fflush(stdout);
  }
  kf_status s = kf_execute(f, cpu_p, nin, cpu_out, nout, NULL);
  if (s != KF_OK) {
    printf("FAILED %s: CPU run: %s: %s\n", what, kf_status_name(s), kf_last_error());
    ++g_failures;
  } else {
    /* KF_TEST_OUTPUTS=row-major: the GPU writes into compact row-major
     * outputs the caller allocates (kf_execute_into; an in-place output is
     * its input), whatever layout kfuse would pick for them. */
    DLTensor into[MAX_IO];
    int64_t out_strides[MAX_IO][MAX_RANK];
    void* into_dev[MAX_IO] = {0};
    if (g_row_major_outputs) {
      DLTensor* pout[MAX_IO];
      for (size_t o = 0; o < nout; ++o) {
        int64_t alias = -1;
        KF_CHECK(kf_output_alias(f, o, &alias));
        if (alias >= 0) {
          into[o] = gpu_t[alias];
        } else {
          const DLTensor* c = &cpu_out[o]->dl_tensor;
          into_dev[o] = gpu_alloc((size_t)numel_of(c->ndim, c->shape) * (size_t)dtype_bytes(dtype_of_dl(c->dtype)) + 1);
          into[o] = *c;
          into[o].data = into_dev[o];
          into[o].byte_offset = 0;
          into[o].strides = NULL; /* compact row-major */
          const int* order = g_out_orders != NULL && g_out_orders[o] != NULL ? g_out_orders[o] : g_out_order;
          if (order != NULL) { /* compact, in that order */
            int64_t st = 1;
            for (int k = c->ndim - 1; k >= 0; --k) {
              out_strides[o][order[k]] = st;
              st *= c->shape[order[k]];
            }
            into[o].strides = out_strides[o];
          }
          into[o].device.device_type = kDLCUDA;
          into[o].device.device_id = 0;
        }
        pout[o] = &into[o];
      }
      s = kf_execute_into(f, gpu_p, nin, pout, nout, &opts);
    } else {
      s = kf_execute(f, gpu_p, nin, gpu_out, nout, &opts);
    }
    if (s != KF_OK) {
      printf("FAILED %s: GPU run: %s: %s\n", what, kf_status_name(s), kf_last_error());
      ++g_failures;
    } else {
      GPU_CHECK(gpu.stream_sync(g_stream));
      for (size_t o = 0; o < nout; ++o) {
        DLTensor* b = g_row_major_outputs ? &into[o] : &gpu_out[o]->dl_tensor;
        if (b->device.device_type != kDLCUDA) {
          printf("FAILED %s: output %zu is not on the GPU (no tensor input on the GPU?)\n", what, o);
          ++g_failures;
          if (!g_row_major_outputs) gpu_out[o]->deleter(gpu_out[o]);
          continue;
        }
        size_t bytes = (size_t)span_of(b) * (size_t)dtype_bytes(dtype_of_dl(b->dtype));
        void* host = malloc(bytes ? bytes : 1);
        gpu_to_host(host, (const char*)b->data + b->byte_offset, bytes);
        char label[300];
        snprintf(label, sizeof label, "%s [output %zu]", what, o);
        if (compare(&cpu_out[o]->dl_tensor, b, host, scale, tol_override, label)) ++g_failures;
        free(host);
        if (!g_row_major_outputs) gpu_out[o]->deleter(gpu_out[o]);
      }
      GPU_CHECK(gpu.stream_sync(g_stream));
    }
    for (size_t o = 0; o < nout; ++o) {
      cpu_out[o]->deleter(cpu_out[o]);
      gpu_free(into_dev[o]);
    }
  }
  for (size_t i = 0; i < nin; ++i) gpu_free(dev[i]);
}

static void run_case(kf_fusion f, tin* in, size_t nin, const char* what) {
  run_case_tol(f, in, nin, what, 1.0, -1);
}

static void end_test(const char* name) {
  if (g_failures) {
    int n = g_failures;
    g_failures = 0;
    fail_msg("%s: %d case(s) failed (see MISMATCH/FAILED lines above)", name, n);
  }
}

/* ---- op sweeps ---------------------------------------------------------- */

typedef struct {
  double lo, hi;
  int nonzero;
} range;

/* Argument ranges that keep each op inside its domain. */
static range op_range(kf_op op, int arg, int is_int) {
  range r = {is_int ? -9 : -3, is_int ? 9 : 3, 0};
  switch (op) {
    case KF_OP_LOG: case KF_OP_LOG2: case KF_OP_LOG10: case KF_OP_SQRT: case KF_OP_RSQRT:
    case KF_OP_RECIPROCAL:
      r.lo = is_int ? 1 : 0.125; r.hi = 4; break;
    case KF_OP_LOG1P: r.lo = is_int ? 0 : -0.5; r.hi = 4; break;
    case KF_OP_ACOSH: r.lo = is_int ? 1 : 1.0625; r.hi = 4; break;
    case KF_OP_ASIN: case KF_OP_ACOS: case KF_OP_ATANH:
      r.lo = is_int ? 0 : -0.875; r.hi = is_int ? 0 : 0.875; break;
    case KF_OP_TAN: r.lo = -1.25; r.hi = 1.25; break;
    case KF_OP_DIV: case KF_OP_FMOD: case KF_OP_REMAINDER:
      if (arg == 1) { r.lo = is_int ? -5 : -3; r.hi = is_int ? 5 : 3; r.nonzero = 1; }
      break;
    case KF_OP_POW:
      if (arg == 0) { r.lo = is_int ? -3 : 0.125; r.hi = 3; }
      else { r.lo = is_int ? 0 : -2; r.hi = is_int ? 4 : 2; }
      break;
    case KF_OP_SHIFT_LEFT: case KF_OP_SHIFT_RIGHT:
      if (arg == 1) { r.lo = 0; r.hi = 5; } else { r.lo = -50; r.hi = 50; }
      break;
    case KF_OP_CLAMP:
      if (arg == 1) { r.lo = -2; r.hi = -0.5; }
      if (arg == 2) { r.lo = 0.5; r.hi = 2; }
      if (is_int && arg == 1) { r.lo = -4; r.hi = -1; }
      if (is_int && arg == 2) { r.lo = 1; r.hi = 4; }
      break;
    case KF_OP_LERP:
      if (arg == 2) { r.lo = 0; r.hi = 1; }
      break;
    default: break;
  }
  return r;
}

static const int64_t kSweepShape[2] = {3, 70};

/* Each op of `category` (the library's op table: tests/op_sweep.h) on
 * every dtype its type rule accepts; an op that runs for no dtype fails. */
static void sweep(kf_op_category category, int arity) {
  kf_op ops[256];
  const int nops = sweep_ops(category, arity, ops, 256);
  int ran = 0;
  for (int i = 0; i < nops; ++i) {
    const kf_op op = ops[i];
    int dtypes = 0;
    for (int k = 0; k < NUM_SWEEP_DTYPES; ++k) {
      kf_dtype dt = kSweepDtypes[k];
      kf_fusion f = sweep_fusion(op, arity, dt);
      if (f == NULL) continue;  // the type rule rejects this dtype
      tin in[3];
      for (int a = 0; a < arity; ++a) {
        kf_dtype t = (op == KF_OP_WHERE && a == 0) ? KF_BOOL : dt;
        in[a] = input(t, 2, kSweepShape);
        range r = op_range(op, a, !is_float_dtype(dt));
        fill(&in[a], r.lo, r.hi, r.nonzero);
      }
      char what[128];
      snprintf(what, sizeof what, "%s on %s", kf_op_name(op), kf_dtype_name(dt));
      run_case(f, in, (size_t)arity, what);
      free_inputs(in, (size_t)arity);
      kf_fusion_release(f);
      ++dtypes;
    }
    if (dtypes == 0) fail_msg("%s: runs for no dtype", kf_op_name(op));
    ran += dtypes;
  }
  printf("%d ops, %d op/dtype cases\n", nops, ran);
}

static void test_unary_ops(void** state) {
  (void)state;
  sweep(KF_OP_CATEGORY_UNARY, 1);
  end_test("unary ops");
}

static void test_binary_ops(void** state) {
  (void)state;
  sweep(KF_OP_CATEGORY_BINARY, 2);
  end_test("binary ops");
}

static void test_ternary_ops(void** state) {
  (void)state;
  sweep(KF_OP_CATEGORY_TERNARY, 3);
  end_test("ternary ops");
}

static void test_casts(void** state) {
  (void)state;
  for (int i = 0; i < NUM_DTYPES; ++i)
    for (int j = 0; j < NUM_DTYPES; ++j) {
      kf_builder b;
      int64_t x, y;
      kf_fusion f;
      KF_CHECK(kf_builder_create(&b));
      KF_CHECK(kf_define_tensor(b, 2, kAll[i], &x));
      KF_CHECK(kf_cast(b, x, kAll[j], &y));
      KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
      KF_CHECK(kf_builder_finalize(b, &f));
      kf_builder_destroy(b);
      tin in = input(kAll[i], 2, kSweepShape);
      fill(&in, -40, 40, 0);
      char what[96];
      snprintf(what, sizeof what, "cast %s -> %s", kf_dtype_name(kAll[i]), kf_dtype_name(kAll[j]));
      run_case(f, &in, 1, what);
      free_inputs(&in, 1);
      kf_fusion_release(f);
    }
  end_test("casts");
}

/* ---- reductions -------------------------------------------------------- */

static void test_reductions(void** state) {
  (void)state;
  static const kf_op ops[] = {KF_OP_SUM, KF_OP_PROD, KF_OP_MAX, KF_OP_MIN,
                              KF_OP_MEAN, KF_OP_VAR, KF_OP_VAR_MEAN};
  /* inner, outer, middle, two axes, all axes */
  static const int64_t axes[][3] = {{2}, {0}, {1}, {0, 2}, {0}};
  static const size_t naxes[] = {1, 1, 1, 2, 0};
  static const char* axis_names[] = {"inner", "outer", "middle", "outer+inner", "all"};
  const int64_t shape[3] = {6, 33, 57};
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; ++o)
    for (int k = 0; k < NUM_DTYPES; ++k)
      for (size_t a = 0; a < 5; ++a)
        for (int keep = 0; keep <= 1; ++keep) {
          kf_dtype dt = kAll[k];
          kf_builder b;
          int64_t x, y, y2;
          kf_fusion f = NULL;
          KF_CHECK(kf_builder_create(&b));
          KF_CHECK(kf_define_tensor(b, 3, dt, &x));
          kf_status s;
          if (ops[o] == KF_OP_VAR) s = kf_var(b, x, axes[a], naxes[a], 1, keep, &y);
          else if (ops[o] == KF_OP_VAR_MEAN) s = kf_var_mean(b, x, axes[a], naxes[a], 1, keep, &y, &y2);
          else s = kf_reduce(b, ops[o], x, axes[a], naxes[a], keep, &y);
          if (s == KF_OK) {
            KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
            if (ops[o] == KF_OP_VAR_MEAN) KF_CHECK(kf_add_output(b, y2, NULL, 0, -1));
            KF_CHECK(kf_builder_finalize(b, &f));
          }
          kf_builder_destroy(b);
          if (f == NULL) continue;
          tin in = input(dt, 3, shape);
          /* products stay finite with values near 1 */
          if (ops[o] == KF_OP_PROD) fill(&in, is_float_dtype(dt) ? 0.75 : -2, is_float_dtype(dt) ? 1.25 : 2, 0);
          else fill(&in, -3, 3, 0);
          int64_t length = naxes[a] == 0 ? 6 * 33 * 57 : a == 3 ? 6 * 57 : shape[axes[a][0]];
          char what[128];
          snprintf(what, sizeof what, "%s over %s axes%s on %s", kf_op_name(ops[o]), axis_names[a],
                   keep ? " (keepdim)" : "", kf_dtype_name(dt));
          /* Summation order differs: the absolute floor grows with the length. */
          run_case_tol(f, &in, 1, what, 1.0 + (double)length / 8.0, -1);
          free_inputs(&in, 1);
          kf_fusion_release(f);
        }
  end_test("reductions");
}

/* Column reductions (sum/mean/max over dim 0): vector tiles with a partial
 * last tile (2056 = 8 * 257 columns), scalar tiles (1001 columns), many
 * splits of the reduced rows (3000) and one (5). */
static void test_column_reductions(void** state) {
  (void)state;
  static const kf_op ops[] = {KF_OP_SUM, KF_OP_MEAN, KF_OP_MAX};
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64, KF_INT32};
  const int64_t shapes[][2] = {{3000, 2056}, {700, 1001}, {5, 4096}, {1, 8}};
  for (size_t o = 0; o < 3; ++o)
    for (size_t d = 0; d < 4; ++d)
      for (size_t k = 0; k < 4; ++k) {
        if (ops[o] == KF_OP_MEAN && dts[d] == KF_INT32) continue;
        kf_builder b;
        int64_t x, y;
        kf_fusion f = NULL;
        const int64_t axis = 0;
        KF_CHECK(kf_builder_create(&b));
        KF_CHECK(kf_define_tensor(b, 2, dts[d], &x));
        if (kf_reduce(b, ops[o], x, &axis, 1, 0, &y) == KF_OK) {
          KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
          KF_CHECK(kf_builder_finalize(b, &f));
        }
        kf_builder_destroy(b);
        if (f == NULL) continue;
        tin in = input(dts[d], 2, shapes[k]);
        fill(&in, -3, 3, 0);
        char what[128];
        snprintf(what, sizeof what, "%s over dim 0 of [%lld,%lld] %s", kf_op_name(ops[o]),
                 (long long)shapes[k][0], (long long)shapes[k][1], kf_dtype_name(dts[d]));
        run_case_tol(f, &in, 1, what, 1.0 + (double)shapes[k][0] / 8.0, -1);
        free_inputs(&in, 1);
        kf_fusion_release(f);
      }
  end_test("column reductions");
}

/* ---- layouts ----------------------------------------------------------- */

static kf_fusion build_binary_rank(kf_op op, kf_dtype dt, int rank) {
  kf_builder b;
  int64_t x, y, z;
  kf_fusion f;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, rank, dt, &x));
  KF_CHECK(kf_define_tensor(b, rank, dt, &y));
  KF_CHECK(kf_binary(b, op, x, y, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

static kf_fusion build_unary_rank(kf_op op, kf_dtype dt, int rank) {
  kf_builder b;
  int64_t x, z;
  kf_fusion f;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, rank, dt, &x));
  KF_CHECK(kf_unary(b, op, x, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

static kf_fusion build_sum_rank(kf_dtype dt, int rank, int64_t axis) {
  kf_builder b;
  int64_t x, z;
  kf_fusion f;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, rank, dt, &x));
  KF_CHECK(kf_reduce(b, KF_OP_SUM, x, &axis, 1, 0, &z));
  KF_CHECK(kf_add_output(b, z, NULL, 0, -1));
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

typedef enum { L_CONTIG, L_TRANSPOSED, L_BROADCAST, L_OFFSET, L_SLICED, L_COUNT } layout_kind;
static const char* kLayoutNames[] = {"contiguous", "transposed", "broadcast", "offset", "sliced"};

/* A rank-2 input of `shape` in layout `k`. */
static tin layout_input(kf_dtype dt, const int64_t* shape, layout_kind k) {
  tin t = input(dt, 2, shape);
  int64_t s[2];
  switch (k) {
    case L_CONTIG: break;
    case L_TRANSPOSED: s[0] = 1; s[1] = shape[0]; with_strides(&t, s, 0); break;
    case L_BROADCAST: s[0] = 0; s[1] = 1; with_strides(&t, s, 0); break;
    case L_OFFSET: s[0] = shape[1]; s[1] = 1; with_strides(&t, s, 1); break;
    case L_SLICED: s[0] = shape[1] * 2 + 3; s[1] = 2; with_strides(&t, s, 0); break;
    default: break;
  }
  fill(&t, -3, 3, 0);
  return t;
}

static void test_layouts(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_FLOAT16, KF_INT64};
  const int64_t shapes[][2] = {{37, 53}, {0, 53}, {37, 0}, {1, 53}, {37, 1}, {1, 1}};
  for (size_t d = 0; d < 3; ++d) {
    kf_fusion add = build_binary_rank(KF_OP_ADD, dts[d], 2);
    kf_fusion neg = build_unary_rank(KF_OP_NEG, dts[d], 2);
    kf_fusion sum0 = build_sum_rank(dts[d], 2, 0);
    kf_fusion sum1 = build_sum_rank(dts[d], 2, 1);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      for (int a = 0; a < L_COUNT; ++a)
        for (int b = 0; b < L_COUNT; ++b) {
          tin in[2] = {layout_input(dts[d], shapes[s], (layout_kind)a),
                       layout_input(dts[d], shapes[s], (layout_kind)b)};
          char what[160];
          snprintf(what, sizeof what, "add %s [%lld,%lld] %s + %s", kf_dtype_name(dts[d]),
                   (long long)shapes[s][0], (long long)shapes[s][1], kLayoutNames[a], kLayoutNames[b]);
          run_case(add, in, 2, what);
          if (b == 0) {
            snprintf(what, sizeof what, "neg %s [%lld,%lld] %s", kf_dtype_name(dts[d]),
                     (long long)shapes[s][0], (long long)shapes[s][1], kLayoutNames[a]);
            run_case(neg, in, 1, what);
            snprintf(what, sizeof what, "sum(0) %s [%lld,%lld] %s", kf_dtype_name(dts[d]),
                     (long long)shapes[s][0], (long long)shapes[s][1], kLayoutNames[a]);
            run_case_tol(sum0, in, 1, what, 8, -1);
            snprintf(what, sizeof what, "sum(1) %s [%lld,%lld] %s", kf_dtype_name(dts[d]),
                     (long long)shapes[s][0], (long long)shapes[s][1], kLayoutNames[a]);
            run_case_tol(sum1, in, 1, what, 8, -1);
          }
          free_inputs(in, 2);
        }
    kf_fusion_release(add);
    kf_fusion_release(neg);
    kf_fusion_release(sum0);
    kf_fusion_release(sum1);
  }
  /* Size-1 dims in the middle, rank 4 with a permuted layout. */
  {
    kf_fusion add = build_binary_rank(KF_OP_MUL, KF_FLOAT32, 4);
    const int64_t shape[4] = {5, 1, 7, 9};
    const int64_t perm_strides[4] = {1, 5, 45, 5};  /* dims stored as (2, 3, 0) */
    tin in[2] = {input(KF_FLOAT32, 4, shape), input(KF_FLOAT32, 4, shape)};
    with_strides(&in[1], perm_strides, 0);
    fill(&in[0], -3, 3, 0);
    fill(&in[1], -3, 3, 0);
    run_case(add, in, 2, "mul f32 [5,1,7,9] contiguous * permuted");
    free_inputs(in, 2);
    kf_fusion_release(add);
  }
  end_test("layouts");
}

/* A concatenation whose operand is laid out across the output's walk
 * (a transposed dy of a gated activation's backward, the outputs
 * row-major): the tiled scheduler stages that operand through
 * shared-memory tiles of the output's extents, which pass the operand's
 * end along the concatenated dim. The tile must be filled inside the
 * operand only (corpus seed 259726623, c0045: an illegal address on the
 * H200). Along the tile's fast dim (2) and its other dim (1), vector and
 * scalar fills. */
static void test_cat_tiles(void** state) {
  (void)state;
  static const char* kText =
      "input a: tensor<%s, 3>\n"
      "input dy: tensor<%s, 3>\n"
      "af = cast(a) {dtype=float32}\n"
      "g = slice(af) {dim=%d, start=0, stop=%lld}\n"
      "u = slice(af) {dim=%d, start=%lld, stop=end}\n"
      "dyf = cast(dy) {dtype=float32}\n"
      "dg = mul(dyf, u)\n"
      "sg = sigmoid(g)\n"
      "du = mul(dyf, sg)\n"
      "c = cat(dg, du) {dim=%d}\n"
      "o = cast(c) {dtype=%s}\n"
      "output o\n";
  const kf_dtype dts[] = {KF_FLOAT16, KF_FLOAT32};
  /* {batch, rows, features}: the concatenation doubles dim `cat`. */
  const int64_t shapes[][3] = {{2, 64, 72}, {3, 37, 45}, {1, 128, 256}};
  const int saved = g_row_major_outputs;
  g_row_major_outputs = 1;
  for (int d = 0; d < 2; ++d)
    for (int cat = 1; cat <= 2; ++cat)
      for (int s = 0; s < 3; ++s) {
        const char* dn = kf_dtype_name(dts[d]);
        const int64_t half = shapes[s][cat];
        char text[1024];
        snprintf(text, sizeof text, kText, dn, dn, cat, (long long)half, cat, (long long)half, cat, dn);
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        int64_t ashape[3] = {shapes[s][0], shapes[s][1], shapes[s][2]};
        ashape[cat] *= 2;
        const int64_t* dshape = shapes[s];
        /* dy stored with dim 1 innermost: strides {R*F, 1, R}. */
        const int64_t dstrides[3] = {dshape[1] * dshape[2], 1, dshape[1]};
        tin in[2] = {input(dts[d], 3, ashape), input(dts[d], 3, dshape)};
        with_strides(&in[1], dstrides, 0);
        fill(&in[0], -2, 2, 0);
        fill(&in[1], -2, 2, 0);
        char what[160];
        snprintf(what, sizeof what, "cat dim %d of a transposed operand %s [%lld,%lld,%lld]", cat, dn,
                 (long long)dshape[0], (long long)dshape[1], (long long)dshape[2]);
        run_case_tol(f, in, 2, what, 4.0, -1);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  g_row_major_outputs = saved;
  end_test("cat tiles");
}

/* Phase 2 along the inputs' memory, every output through a staged tile
   (transpose.cpp's BChoice from an input): a gated activation's backward,
   its two gradients concatenated along the features of row-major inputs,
   stored in another memory order. The gate and up halves and dy are read
   at three shifts (vectors where the split keeps them whole: 64, 128; per
   element at 37 and 45, and tiles straddling the cat). */
static void test_staged_tiles_from_inputs(void** state) {
  (void)state;
  static const char* kText =
      "input a: tensor<%s, 3>\n"
      "input dy: tensor<%s, 3>\n"
      "af = cast(a) {dtype=float32}\n"
      "g = slice(af) {dim=2, start=0, stop=%lld}\n"
      "u = slice(af) {dim=2, start=%lld, stop=end}\n"
      "dyf = cast(dy) {dtype=float32}\n"
      "dg = mul(dyf, u)\n"
      "sg = sigmoid(g)\n"
      "du = mul(dyf, sg)\n"
      "c = cat(dg, du) {dim=2}\n"
      "o = cast(c) {dtype=%s}\n"
      "output o\n";
  static const int kOrders[3][3] = {{2, 1, 0}, {0, 2, 1}, {1, 2, 0}};
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT16, KF_FLOAT32};
  /* {batch, rows, features of a half} */
  const int64_t shapes[][3] = {{2, 96, 64}, {3, 37, 45}, {1, 130, 128}, {4, 33, 37}};
  const int saved = g_row_major_outputs;
  g_row_major_outputs = 1;
  for (int d = 0; d < 3; ++d)
    for (int s = 0; s < 4; ++s)
      for (int k = 0; k < 3; ++k) {
        const char* dn = kf_dtype_name(dts[d]);
        const int64_t half = shapes[s][2];
        char text[1024];
        snprintf(text, sizeof text, kText, dn, dn, (long long)half, (long long)half, dn);
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        const int64_t ashape[3] = {shapes[s][0], shapes[s][1], 2 * half};
        tin in[2] = {input(dts[d], 3, ashape), input(dts[d], 3, shapes[s])};
        fill(&in[0], -2, 2, 0);
        fill(&in[1], -2, 2, 0);
        char what[160];
        snprintf(what, sizeof what, "gated backward into order [%d,%d,%d] %s [%lld,%lld,%lld]", kOrders[k][0],
                 kOrders[k][1], kOrders[k][2], dn, (long long)shapes[s][0], (long long)shapes[s][1], (long long)half);
        g_out_order = kOrders[k];
        run_case_tol(f, in, 2, what, 4.0, -1);
        g_out_order = NULL;
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  g_row_major_outputs = saved;
  end_test("staged from inputs");
}

/* The k part of a qkv split: qkv [B, S, 3 * H * D] (q = {B, S, H, D})
   stored with S innermost (then B), or with B innermost (then S), read
   through a slice and a reshape, permuted to [B, H, S, D]. */
static void run_qkv_split(kf_dtype dt, const int64_t q[4], int batch_innermost) {
  static const char* kQkv =
      "input qkv: tensor<%s, 3>\n"
      "const b: int64 = %lld\n"
      "const s: int64 = %lld\n"
      "const h: int64 = %lld\n"
      "const d: int64 = %lld\n"
      "k = slice(qkv) {dim=2, start=%lld, stop=%lld}\n"
      "k4 = reshape(k, [b, s, h, d])\n"
      "kt = permute(k4) {perm=[0, 2, 1, 3]}\n"
      "output kt\n";
  const char* dn = kf_dtype_name(dt);
  const int64_t hd = q[2] * q[3];
  char text[1024], what[200];
  snprintf(text, sizeof text, kQkv, dn, (long long)q[0], (long long)q[1], (long long)q[2], (long long)q[3], (long long)hd,
           (long long)(2 * hd));
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const int64_t shape[3] = {q[0], q[1], 3 * hd};
  const int64_t along_s[3] = {q[1], 1, q[0] * q[1]}, along_b[3] = {1, q[0], q[0] * q[1]};
  tin in[1] = {input(dt, 3, shape)};
  with_strides(&in[0], batch_innermost ? along_b : along_s, 0);
  fill(&in[0], -3, 3, 0);
  snprintf(what, sizeof what, "qkv split of qkv stored %s innermost %s [%lld,%lld,%lld]", batch_innermost ? "B" : "S", dn,
           (long long)shape[0], (long long)shape[1], (long long)shape[2]);
  run_case_tol(f, in, 1, what, 4.0, -1);
  free_inputs(in, 1);
  kf_fusion_release(f);
}

/* Tiles of computed values: an input laid out across the outputs' fast dim
   read through a slice (swiglu of a column-major gate_up, a qkv split) or a
   reshape (heads merged from a tensor stored along the sequence): the tiles
   hold the slices / the reshape's output, filled by evaluating them. */
static void test_computed_tiles(void** state) {
  (void)state;
  static const char* kSwiglu =
      "input gu: tensor<%s, 2>\n"
      "gate = slice(gu) {dim=1, start=0, stop=%lld}\n"
      "up = slice(gu) {dim=1, start=%lld, stop=end}\n"
      "sg = silu(gate)\n"
      "y = mul(sg, up)\n"
      "output y\n";
  static const char* kBiasSigmoid =
      "input x: tensor<%s, 2>\n"
      "input bias: tensor<%s, 1>\n"
      "xf = cast(x) {dtype=float32}\n"
      "bf = cast(bias) {dtype=float32}\n"
      "h = add(xf, bf)\n"
      "sg = sigmoid(h)\n"
      "y = cast(sg) {dtype=%s}\n"
      "pre = cast(h) {dtype=%s}\n"
      "output y\n"
      "output pre\n";
  static const char* kSwiglu3 =
      "input gu: tensor<%s, 3>\n"
      "guf = cast(gu) {dtype=float32}\n"
      "gate = slice(guf) {dim=2, start=0, stop=%lld}\n"
      "up = slice(guf) {dim=2, start=%lld, stop=end}\n"
      "sg = silu(gate)\n"
      "y = mul(sg, up)\n"
      "output y\n";
  static const char* kMerge =
      "input x: tensor<%s, 4>\n"
      "const half: float32 = 0.5\n"
      "const b: int64 = %lld\n"
      "const s: int64 = %lld\n"
      "const rest: int64 = -1\n"
      "xf = cast(x) {dtype=float32}\n"
      "xs = mul(xf, half)\n"
      "p = permute(xs) {perm=[0, 2, 1, 3]}\n"
      "m = reshape(p, [b, s, rest])\n"
      "output m\n";
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT32};
  const int saved = g_row_major_outputs;
  g_row_major_outputs = 1;
  char text[1024], what[160];
  for (int d = 0; d < 2; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    const int64_t sw[][2] = {{256, 128}, {77, 45}, {130, 2}};
    for (int s = 0; s < 3; ++s) { /* gu [rows, 2 * half] stored column-major */
      snprintf(text, sizeof text, kSwiglu, dn, (long long)sw[s][1], (long long)sw[s][1]);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t shape[2] = {sw[s][0], 2 * sw[s][1]}, strides[2] = {1, sw[s][0]};
      tin in[1] = {input(dts[d], 2, shape)};
      with_strides(&in[0], strides, s == 1 ? 3 : 0);
      fill(&in[0], -3, 3, 0);
      snprintf(what, sizeof what, "swiglu of column-major gate_up %s [%lld, %lld]", dn, (long long)shape[0], (long long)shape[1]);
      run_case_tol(f, in, 1, what, 4.0, -1);
      free_inputs(in, 1);
      kf_fusion_release(f);
    }
    const int64_t mh[][4] = {{2, 4, 100, 32}, {1, 3, 65, 8}, {2, 2, 129, 40}};
    for (int s = 0; s < 3; ++s) { /* x [B, H, S, D] stored with S innermost, then B, H, D outermost */
      const int64_t* sh = mh[s];
      snprintf(text, sizeof text, kMerge, dn, (long long)sh[0], (long long)sh[2]);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t strides[4] = {sh[2], sh[0] * sh[2], 1, sh[0] * sh[1] * sh[2]};
      tin in[1] = {input(dts[d], 4, sh)};
      with_strides(&in[0], strides, 0);
      fill(&in[0], -3, 3, 0);
      snprintf(what, sizeof what, "merge heads of x stored along S %s [%lld,%lld,%lld,%lld]", dn, (long long)sh[0],
               (long long)sh[1], (long long)sh[2], (long long)sh[3]);
      run_case_tol(f, in, 1, what, 4.0, -1);
      free_inputs(in, 1);
      kf_fusion_release(f);
    }
    const int64_t qk[][4] = {{2, 96, 3, 16}, {3, 33, 2, 40}}; /* B, S, heads, head dim */
    for (int s = 0; s < 2; ++s) run_qkv_split(dts[d], qk[s], 0);
    /* swiglu of a contiguous fused gate_up [B, S, 2H] into outputs stored
       (H, B, S) outermost first: tiles of the two halves, each a slice
       along the input's innermost dim (corpus seed 1177032527 c0141) */
    static const int kHbs[3] = {2, 0, 1};
    const int64_t g3[][3] = {{2, 100, 96}, {3, 65, 40}, {1, 130, 72}};
    for (int s = 0; s < 3; ++s) {
      snprintf(text, sizeof text, kSwiglu3, dn, (long long)g3[s][2], (long long)g3[s][2]);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t shape[3] = {g3[s][0], g3[s][1], 2 * g3[s][2]};
      tin in[1] = {input(dts[d], 3, shape)};
      const int64_t contiguous[3] = {shape[1] * shape[2], shape[2], 1};
      if (s == 1) with_strides(&in[0], contiguous, 3); /* at an offset: no vectors */
      fill(&in[0], -3, 3, 0);
      snprintf(what, sizeof what, "swiglu of a fused gate_up into outputs (H, B, S) %s [%lld, %lld, %lld]", dn,
               (long long)shape[0], (long long)shape[1], (long long)shape[2]);
      g_out_order = kHbs;
      run_case_tol(f, in, 1, what, 4.0, -1);
      g_out_order = NULL;
      free_inputs(in, 1);
      kf_fusion_release(f);
    }
    /* sigmoid(x + bias) and its pre-activation, x column-major, the result
       row-major and the pre-activation column-major (into outputs in two
       orders): phase 1 writes the pre-activation along a (corpus seed
       1177032527 c0086) */
    static const int kRows[2] = {0, 1}, kCols[2] = {1, 0};
    static const int* const kTwoOrders[2] = {kRows, kCols};
    const int64_t bs[][2] = {{256, 192}, {77, 130}, {64, 9}};
    for (int s = 0; s < 3; ++s) {
      snprintf(text, sizeof text, kBiasSigmoid, dn, dn, dn, dn);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t shape[2] = {bs[s][0], bs[s][1]}, col_major[2] = {1, bs[s][0]};
      tin in[2] = {input(dts[d], 2, shape), input(dts[d], 1, &shape[1])};
      with_strides(&in[0], col_major, s == 1 ? 5 : 0);
      fill(&in[0], -3, 3, 0);
      fill(&in[1], -1, 1, 0);
      snprintf(what, sizeof what, "bias sigmoid, outputs in two orders %s [%lld, %lld]", dn, (long long)shape[0],
               (long long)shape[1]);
      g_out_orders = kTwoOrders;
      run_case(f, in, 2, what);
      g_out_orders = NULL;
      free_inputs(in, 2);
      kf_fusion_release(f);
    }
  }
  /* a cat whose first operand is computed from a slice at an offset of a
     column-major input: the tile is filled inside that operand's part only */
  static const char* kCat =
      "input gu: tensor<%s, 2>\n"
      "up = slice(gu) {dim=1, start=%lld, stop=end}\n"
      "gate = slice(gu) {dim=1, start=0, stop=%lld}\n"
      "su = silu(up)\n"
      "y = cat(su, gate) {dim=1}\n"
      "output y\n";
  for (int d = 0; d < 2; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    const int64_t cs[][2] = {{200, 128}, {67, 45}};
    for (int s = 0; s < 2; ++s) {
      snprintf(text, sizeof text, kCat, dn, (long long)cs[s][1], (long long)cs[s][1]);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t shape[2] = {cs[s][0], 2 * cs[s][1]}, strides[2] = {1, cs[s][0]};
      tin in[1] = {input(dts[d], 2, shape)};
      with_strides(&in[0], strides, 0);
      fill(&in[0], -3, 3, 0);
      snprintf(what, sizeof what, "cat of a computed tile at an offset %s [%lld, %lld]", dn, (long long)shape[0], (long long)shape[1]);
      run_case_tol(f, in, 1, what, 4.0, -1);
      free_inputs(in, 1);
      kf_fusion_release(f);
    }
  }
  /* an embedding lookup (scaled) stored column-major, tokens fastest: the
     table's rows gathered into a tile, threads along the hidden dim (seed
     1940430775 c0008, [32768, 4096] fp16: a plain loop read one element a
     row); odd sizes, tokens repeated */
  static const char* kEmbedding =
      "input weight: tensor<%s, 2>\n"
      "input tokens: tensor<int64, 1>\n"
      "const two: %s = 2\n"
      "e = index_select(weight, tokens) {dim=0}\n"
      "y = mul(e, two)\n"
      "output y\n";
  static const int kColumnMajor[2] = {1, 0};
  for (int d = 0; d < 2; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    const int64_t es[][3] = {{500, 256, 300}, {97, 130, 77}, {64, 8, 129}}; /* table rows, hidden, tokens */
    for (int s = 0; s < 3; ++s) {
      snprintf(text, sizeof text, kEmbedding, dn, dn);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t wshape[2] = {es[s][0], es[s][1]}, tshape[1] = {es[s][2]};
      tin in[2] = {input(dts[d], 2, wshape), input(KF_INT64, 1, tshape)};
      fill(&in[0], -3, 3, 0);
      fill(&in[1], 0, (double)(es[s][0] - 1), 0);
      snprintf(what, sizeof what, "embedding stored column-major %s [%lld, %lld] x %lld tokens", dn, (long long)wshape[0],
               (long long)wshape[1], (long long)tshape[0]);
      g_out_order = kColumnMajor;
      run_case(f, in, 2, what);
      g_out_order = NULL;
      free_inputs(in, 2);
      kf_fusion_release(f);
    }
  }
  g_row_major_outputs = saved;
  end_test("computed tiles");
}

/* Tiles held as stored (TiledInput::element_bytes: 1- and 2-byte inputs
   in their storage type, converted when phase 2 reads them) beside float
   tiles, and an input broadcast over the batch joining the tiles: a
   dropout-residual whose output is stored with the sequence innermost
   (seed 1056028048 c0000 and c0049). x [B, S, H] row-major, keep (bool)
   and q (int8) row-major, u [S, H] broadcast over B by the add (its tile
   read at no batch index) or, in the second size, [B, S, H] with stride 0
   along B; odd sizes, an offset that leaves x without vectors there, the
   output (B, H, S). */
static void test_stored_tiles(void** state) {
  (void)state;
  static const char* kText =
      "input x: tensor<%s, 3>\n"
      "input keep: tensor<bool, 3>\n"
      "input u: tensor<%s, %d>\n"
      "input q: tensor<int8, 3>\n"
      "const zero: float32 = 0.0\n"
      "const scale: float32 = 0.25\n"
      "xf = cast(x) {dtype=float32}\n"
      "uf = cast(u) {dtype=float32}\n"
      "qf = cast(q) {dtype=float32}\n"
      "z = where(keep, xf, zero)\n"
      "h = add(z, uf)\n"
      "qs = mul(qf, scale)\n"
      "y = add(h, qs)\n"
      "output y\n";
  static const int kBhs[3] = {0, 2, 1};
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT16, KF_FLOAT32};
  const int64_t sizes[][3] = {{4, 256, 192}, {3, 77, 130}, {2, 129, 64}};
  char text[1024], what[160];
  const int saved = g_row_major_outputs;
  g_row_major_outputs = 1;
  for (int d = 0; d < 3; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    for (int s = 0; s < 3; ++s) {
      const int strided = s == 1;
      snprintf(text, sizeof text, kText, dn, dn, strided ? 3 : 2);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int64_t* sh = sizes[s];
      const int64_t row_major[3] = {sh[1] * sh[2], sh[2], 1}, over_batch[3] = {0, sh[2], 1};
      tin in[4] = {input(dts[d], 3, sh), input(KF_BOOL, 3, sh), input(dts[d], strided ? 3 : 2, strided ? sh : sh + 1),
                   input(KF_INT8, 3, sh)};
      if (strided) {
        with_strides(&in[0], row_major, 3);
        with_strides(&in[2], over_batch, 0);
      }
      fill(&in[0], -3, 3, 0);
      fill(&in[1], 0, 1, 0);
      fill(&in[2], -2, 2, 0);
      fill(&in[3], -100, 100, 0);
      snprintf(what, sizeof what, "stored tiles and a broadcast tile, output (B, H, S) %s [%lld, %lld, %lld]", dn,
               (long long)sh[0], (long long)sh[1], (long long)sh[2]);
      g_out_order = kBhs;
      run_case(f, in, 4, what);
      g_out_order = NULL;
      free_inputs(in, 4);
      kf_fusion_release(f);
    }
  }
  g_row_major_outputs = saved;
  end_test("stored tiles");
}

/* Tiles over groups of dims (TiledParams::group_a / group_b): a batch dim
   of 2-8 innermost in memory in the tiled input (a channel cat, a qkv
   split) or in the outputs (an add whose first operand is stored batch
   innermost) shares its tile's group with the next memory dim; the tile's
   linear index is unravelled at run time. Odd extents: tiles straddle the
   inner dim's rows and the groups' ends (corpus seed 1631654200 c0011,
   c0117, c0074, c0170, c0171). */
static void test_tile_groups(void** state) {
  (void)state;
  static const char* kCat =
      "input x0: tensor<%s, 4>\n"
      "input x1: tensor<%s, 4>\n"
      "y = cat(x0, x1) {dim=1}\n"
      "output y\n";
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT32};
  const int saved = g_row_major_outputs;
  char text[1024], what[200];
  for (int d = 0; d < 2; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    /* channel cat: x0 [N, C, H, W] stored with N innermost (then C, H, W
       outermost, or then H), x1 contiguous; outputs row-major or following x0 */
    /* (N = 40 fills most of a tile: the plan's ungrouped twin runs) */
    const int64_t cs[][4] = {{2, 12, 9, 7}, {3, 5, 13, 11}, {8, 16, 8, 8}, {2, 40, 3, 5}, {40, 6, 5, 3}};
    for (int s = 0; s < 5; ++s)
      for (int order = 0; order < 2; ++order)
        for (int rm = 0; rm < 2; ++rm) {
          const int64_t* sh = cs[s];
          snprintf(text, sizeof text, kCat, dn, dn);
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          /* order 0: memory (W, H, C, N) outermost first; 1: (W, C, H, N) */
          const int64_t st0[4] = {1, sh[0], sh[0] * sh[1], sh[0] * sh[1] * sh[2]};
          const int64_t st1[4] = {1, sh[0] * sh[2], sh[0], sh[0] * sh[1] * sh[2]};
          tin in[2] = {input(dts[d], 4, sh), input(dts[d], 4, sh)};
          with_strides(&in[0], order == 0 ? st0 : st1, 0);
          fill(&in[0], -3, 3, 0);
          fill(&in[1], -3, 3, 0);
          g_row_major_outputs = rm;
          snprintf(what, sizeof what, "channel cat, x0 batch innermost (order %d) %s [%lld,%lld,%lld,%lld]%s", order, dn,
                   (long long)sh[0], (long long)sh[1], (long long)sh[2], (long long)sh[3], rm ? " row-major out" : "");
          run_case(f, in, 2, what);
          free_inputs(in, 2);
          kf_fusion_release(f);
        }
    /* an add into outputs with the batch innermost: y [B, S, H] stored with
       B innermost (the outputs follow it), x contiguous (tiled along H) */
    g_row_major_outputs = 0;
    kf_fusion add = build_binary_rank(KF_OP_ADD, dts[d], 3);
    /* (one fusion: its plan's grouped kernel for B of 2-8, then the same
       plan's ungrouped twin for B = 40, chosen at launch) */
    const int64_t as[][3] = {{2, 67, 130}, {8, 33, 64}, {5, 129, 17}, {3, 7, 200}, {40, 9, 70}};
    for (int s = 0; s < 5; ++s) {
      const int64_t* sh = as[s];
      const int64_t st[3] = {1, sh[0], sh[0] * sh[1]};
      tin in[2] = {input(dts[d], 3, sh), input(dts[d], 3, sh)};
      with_strides(&in[0], st, 0);
      fill(&in[0], -3, 3, 0);
      fill(&in[1], -3, 3, 0);
      snprintf(what, sizeof what, "add into batch-innermost outputs %s [%lld,%lld,%lld]", dn, (long long)sh[0], (long long)sh[1],
               (long long)sh[2]);
      run_case(add, in, 2, what);
      free_inputs(in, 2);
    }
    kf_fusion_release(add);
    /* qkv split of qkv [B, S, 3 * H * D] stored with B innermost, then S */
    g_row_major_outputs = 1;
    const int64_t qk[][4] = {{2, 96, 3, 16}, {3, 33, 2, 40}, {8, 17, 2, 8}};
    for (int s = 0; s < 3; ++s) run_qkv_split(dts[d], qk[s], 1);
    /* a product of contiguous [B, S, H] inputs into outputs stored with B
       innermost, then H ([S][H][B] memory): b's next dim in the outputs is
       a, so b's group takes S (seed 2012453407 c0168); B = 40 takes the
       ungrouped twin */
    static const int shb[3] = {1, 2, 0};
    g_out_order = shb;
    kf_fusion mul = build_binary_rank(KF_OP_MUL, dts[d], 3);
    const int64_t ms[][3] = {{2, 37, 70}, {3, 5, 129}, {2, 64, 64}, {5, 33, 200}, {40, 9, 70}};
    for (int s = 0; s < 5; ++s) {
      const int64_t* sh = ms[s];
      tin in[2] = {input(dts[d], 3, sh), input(dts[d], 3, sh)};
      fill(&in[0], -3, 3, 0);
      fill(&in[1], -3, 3, 0);
      snprintf(what, sizeof what, "mul into [S][H][B] outputs %s [%lld,%lld,%lld]", dn, (long long)sh[0], (long long)sh[1],
               (long long)sh[2]);
      run_case(mul, in, 2, what);
      free_inputs(in, 2);
    }
    kf_fusion_release(mul);
    g_out_order = NULL;
  }
  g_row_major_outputs = saved;
  end_test("tile groups");
}

/* Results into caller-provided, non-compact GPU outputs (kf_execute_into). */
static void test_strided_outputs(void** state) {
  (void)state;
  kf_fusion f = build_binary_rank(KF_OP_SUB, KF_FLOAT32, 2);
  int64_t shape[2] = {29, 31};
  tin in[2] = {input(KF_FLOAT32, 2, shape), input(KF_FLOAT32, 2, shape)};
  fill(&in[0], -3, 3, 0);
  fill(&in[1], -3, 3, 0);
  float* expect = malloc(29 * 31 * sizeof(float));
  for (int i = 0; i < 29 * 31; ++i) expect[i] = ((float*)in[0].host)[i] - ((float*)in[1].host)[i];
  int64_t layouts[][2] = {{1, 29}, {64, 2}, {31, 1}};
  int64_t offsets[] = {0, 0, 3};
  for (int l = 0; l < 3; ++l) {
    size_t storage = (size_t)(offsets[l] + 28 * layouts[l][0] + 30 * layouts[l][1] + 1);
    float* dev_in[2];
    DLTensor ti[2];
    const DLTensor* pin[2];
    for (int k = 0; k < 2; ++k) {
      dev_in[k] = gpu_alloc(29 * 31 * sizeof(float));
      gpu_to_device(dev_in[k], in[k].host, 29 * 31 * sizeof(float));
      ti[k] = view(&in[k], dev_in[k], 1);
      pin[k] = &ti[k];
    }
    float* dev_out = gpu_alloc(storage * sizeof(float));
    DLTensor to = kf_test_tensor(dev_out, kf_test_f32(), 2, shape, layouts[l]);
    to.device.device_type = kDLCUDA;
    to.byte_offset = (uint64_t)offsets[l] * sizeof(float);
    DLTensor* pout[1] = {&to};
    kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
    KF_CHECK(kf_execute_into(f, pin, 2, pout, 1, &opts));
    GPU_CHECK(gpu.stream_sync(g_stream));
    float* host = malloc(storage * sizeof(float));
    gpu_to_host(host, dev_out, storage * sizeof(float));
    for (int i = 0; i < 29; ++i)
      for (int j = 0; j < 31; ++j) {
        float got = host[offsets[l] + i * layouts[l][0] + j * layouts[l][1]];
        if (got != expect[i * 31 + j])
          fail_msg("strided output %d: (%d,%d) = %g, expected %g", l, i, j, got, expect[i * 31 + j]);
      }
    free(host);
    gpu_free(dev_out);
    gpu_free(dev_in[0]);
    gpu_free(dev_in[1]);
  }
  free(expect);
  free_inputs(in, 2);
  kf_fusion_release(f);
}

/* kf_execute_into with two outputs in two orders and every input
 * row-major (a float32 residual stream and its half, the second stored
 * column-major): the tiled kernel computes the second into a shared tile
 * and stores it with threads along its memory (TiledParams::
 * outputs_staged). Odd shapes take the scalar kernel, a short dim the
 * tile's edges. */
static void test_staged_outputs(void** state) {
  (void)state;
  const char* text =
      "input x: tensor<float32, 2>\ninput r: tensor<float32, 2>\nconst h: float32 = 0.5\n"
      "s = add(x, r)\nt = mul(s, h)\noutput s\noutput t\n";
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const int64_t shapes[][2] = {{512, 1024}, {333, 1001}, {5, 4096}, {4096, 3}};
  for (size_t q = 0; q < sizeof shapes / sizeof shapes[0]; ++q) {
    int64_t shape[2] = {shapes[q][0], shapes[q][1]};
    const size_t n = (size_t)(shape[0] * shape[1]);
    tin in[2] = {input(KF_FLOAT32, 2, shape), input(KF_FLOAT32, 2, shape)};
    fill(&in[0], -3, 3, 0);
    fill(&in[1], -3, 3, 0);
    float* dev_in[2];
    DLTensor ti[2];
    const DLTensor* pin[2];
    for (int k = 0; k < 2; ++k) {
      dev_in[k] = gpu_alloc(n * sizeof(float));
      gpu_to_device(dev_in[k], in[k].host, n * sizeof(float));
      ti[k] = view(&in[k], dev_in[k], 1);
      pin[k] = &ti[k];
    }
    int64_t row_major[2] = {shape[1], 1}, column_major[2] = {1, shape[0]};
    float* dev_out[2] = {gpu_alloc(n * sizeof(float)), gpu_alloc(n * sizeof(float))};
    DLTensor to[2] = {kf_test_tensor(dev_out[0], kf_test_f32(), 2, shape, row_major),
                      kf_test_tensor(dev_out[1], kf_test_f32(), 2, shape, column_major)};
    to[0].device.device_type = kDLCUDA;
    to[1].device.device_type = kDLCUDA;
    DLTensor* pout[2] = {&to[0], &to[1]};
    kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
    KF_CHECK(kf_execute_into(f, pin, 2, pout, 2, &opts));
    GPU_CHECK(gpu.stream_sync(g_stream));
    float* host[2] = {malloc(n * sizeof(float)), malloc(n * sizeof(float))};
    gpu_to_host(host[0], dev_out[0], n * sizeof(float));
    gpu_to_host(host[1], dev_out[1], n * sizeof(float));
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j) {
        const float sum = ((float*)in[0].host)[i * shape[1] + j] + ((float*)in[1].host)[i * shape[1] + j];
        const float got_s = host[0][i * shape[1] + j], got_t = host[1][j * shape[0] + i];
        if (got_s != sum || got_t != sum * 0.5f)
          fail_msg("staged outputs %lldx%lld at (%lld,%lld): s %g t %g, expected %g %g", (long long)shape[0],
                   (long long)shape[1], (long long)i, (long long)j, got_s, got_t, sum, sum * 0.5f);
      }
    for (int k = 0; k < 2; ++k) {
      free(host[k]);
      gpu_free(dev_out[k]);
      gpu_free(dev_in[k]);
    }
    free_inputs(in, 2);
  }
  kf_fusion_release(f);
}

/* ---- random ------------------------------------------------------------ */

static void test_random(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT64, KF_FLOAT32, KF_FLOAT16, KF_BFLOAT16};
  for (int normal = 0; normal <= 1; ++normal)
    for (int k = 0; k < 4; ++k) {
      kf_builder b;
      int64_t shape[2], lo, hi, seed, offset, y;
      kf_fusion f;
      KF_CHECK(kf_builder_create(&b));
      KF_CHECK(kf_define_scalar(b, KF_INT64, &seed));
      KF_CHECK(kf_define_scalar(b, KF_INT64, &offset));
      KF_CHECK(kf_define_constant_i64(b, 123, KF_INT64, &shape[0]));
      KF_CHECK(kf_define_constant_i64(b, 457, KF_INT64, &shape[1]));
      KF_CHECK(kf_define_constant_f64(b, normal ? 0.5 : -2.0, KF_FLOAT64, &lo));
      KF_CHECK(kf_define_constant_f64(b, normal ? 2.0 : 3.0, KF_FLOAT64, &hi));
      if (normal) KF_CHECK(kf_normal(b, shape, 2, lo, hi, seed, offset, dts[k], &y));
      else KF_CHECK(kf_uniform(b, shape, 2, lo, hi, seed, offset, dts[k], &y));
      /* Scalar inputs alone would make a CPU fusion: adding a tensor of
       * zeros puts it on the GPU and keeps every bit. */
      int64_t zeros, sum;
      KF_CHECK(kf_define_tensor(b, 2, dts[k], &zeros));
      KF_CHECK(kf_binary(b, KF_OP_ADD, y, zeros, &sum));
      KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
      KF_CHECK(kf_add_output(b, sum, NULL, 0, -1));
      KF_CHECK(kf_builder_finalize(b, &f));
      kf_builder_destroy(b);
      const double seeds[][2] = {{0, 0}, {42, 7}, {-1, 1e15}};
      const int64_t zshape[2] = {123, 457};
      for (int s = 0; s < 3; ++s) {
        tin in[3] = {scalar_input(KF_INT64, seeds[s][0]), scalar_input(KF_INT64, seeds[s][1]),
                     input(dts[k], 2, zshape)};
        fill(&in[2], 0, 0, 0);
        char what[96];
        snprintf(what, sizeof what, "%s %s seed %g offset %g", normal ? "normal" : "uniform",
                 kf_dtype_name(dts[k]), seeds[s][0], seeds[s][1]);
        /* both are specified bit for bit (normal's log/cos: core/ir/portable_math.h) */
        run_case_tol(f, in, 3, what, 1.0, 0);
        free_inputs(in, 3);
      }
      kf_fusion_release(f);
    }
  end_test("random");
}

/* ---- end-to-end fusions ------------------------------------------------ */

static int64_t c_f64(kf_builder b, double v, kf_dtype t) {
  int64_t id;
  KF_CHECK(kf_define_constant_f64(b, v, t, &id));
  return id;
}

static int64_t bin(kf_builder b, kf_op op, int64_t x, int64_t y) {
  int64_t z;
  KF_CHECK(kf_binary(b, op, x, y, &z));
  return z;
}

static int64_t red(kf_builder b, kf_op op, int64_t x, int64_t axis, int keep) {
  int64_t z;
  KF_CHECK(kf_reduce(b, op, x, &axis, 1, keep, &z));
  return z;
}

static int64_t un(kf_builder b, kf_op op, int64_t x) {
  int64_t z;
  KF_CHECK(kf_unary(b, op, x, &z));
  return z;
}

static kf_fusion finish(kf_builder b, int64_t out) {
  kf_fusion f;
  KF_CHECK(kf_add_output(b, out, NULL, 0, -1));
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* kind: 0 layernorm, 1 softmax, 2 rmsnorm, 3 gelu(x + bias), 4 permute(x) + z,
 * and as frameworks write them, which the simplify stage rewrites
 * (core/simplify, docs/semantics.md "Algebraic simplification"): 5 rmsnorm
 * with pow(x, 2), sqrt and reciprocal; 6 layernorm dividing by sqrt(var +
 * eps); 7 pow(|x| + 0.25, c) for c = 2, 3, -2, 0.5, -0.5, -1, summed. */
static kf_fusion build_e2e(int kind, kf_dtype dt) {
  kf_builder b;
  int64_t x, w, bias, y;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, dt, &x));
  switch (kind) {
    case 0: {
      KF_CHECK(kf_define_tensor(b, 1, dt, &w));
      KF_CHECK(kf_define_tensor(b, 1, dt, &bias));
      int64_t mean = red(b, KF_OP_MEAN, x, 1, 1);
      int64_t xc = bin(b, KF_OP_SUB, x, mean);
      int64_t var = red(b, KF_OP_MEAN, bin(b, KF_OP_MUL, xc, xc), 1, 1);
      int64_t inv = un(b, KF_OP_RSQRT, bin(b, KF_OP_ADD, var, c_f64(b, 1e-5, KF_FLOAT64)));
      y = bin(b, KF_OP_ADD, bin(b, KF_OP_MUL, bin(b, KF_OP_MUL, xc, inv), w), bias);
      break;
    }
    case 1: {
      int64_t m = red(b, KF_OP_MAX, x, 1, 1);
      int64_t e = un(b, KF_OP_EXP, bin(b, KF_OP_SUB, x, m));
      y = bin(b, KF_OP_DIV, e, red(b, KF_OP_SUM, e, 1, 1));
      break;
    }
    case 2: {
      KF_CHECK(kf_define_tensor(b, 1, dt, &w));
      int64_t ms = red(b, KF_OP_MEAN, bin(b, KF_OP_MUL, x, x), 1, 1);
      int64_t inv = un(b, KF_OP_RSQRT, bin(b, KF_OP_ADD, ms, c_f64(b, 1e-6, KF_FLOAT64)));
      y = bin(b, KF_OP_MUL, bin(b, KF_OP_MUL, x, inv), w);
      break;
    }
    case 3:
      KF_CHECK(kf_define_tensor(b, 1, dt, &bias));
      y = un(b, KF_OP_GELU, bin(b, KF_OP_ADD, x, bias));
      break;
    case 5: {
      KF_CHECK(kf_define_tensor(b, 1, dt, &w));
      int64_t ms = red(b, KF_OP_MEAN, bin(b, KF_OP_POW, x, c_f64(b, 2, KF_FLOAT64)), 1, 1);
      int64_t inv = un(b, KF_OP_RECIPROCAL, un(b, KF_OP_SQRT, bin(b, KF_OP_ADD, ms, c_f64(b, 1e-6, KF_FLOAT64))));
      y = bin(b, KF_OP_MUL, bin(b, KF_OP_MUL, x, inv), w);
      break;
    }
    case 6: {
      KF_CHECK(kf_define_tensor(b, 1, dt, &w));
      KF_CHECK(kf_define_tensor(b, 1, dt, &bias));
      int64_t mean = red(b, KF_OP_MEAN, x, 1, 1);
      int64_t xc = bin(b, KF_OP_SUB, x, mean);
      int64_t var = red(b, KF_OP_MEAN, bin(b, KF_OP_POW, xc, c_f64(b, 2, KF_FLOAT64)), 1, 1);
      int64_t sd = un(b, KF_OP_SQRT, bin(b, KF_OP_ADD, var, c_f64(b, 1e-5, KF_FLOAT64)));
      y = bin(b, KF_OP_ADD, bin(b, KF_OP_MUL, bin(b, KF_OP_DIV, xc, sd), w), bias);
      break;
    }
    case 7: {
      const double cs[] = {2, 3, -2, 0.5, -0.5, -1};
      int64_t base = bin(b, KF_OP_ADD, un(b, KF_OP_ABS, x), c_f64(b, 0.25, KF_FLOAT64));
      y = bin(b, KF_OP_POW, base, c_f64(b, 1, KF_FLOAT64));
      for (int k = 0; k < 6; ++k) y = bin(b, KF_OP_ADD, y, bin(b, KF_OP_POW, base, c_f64(b, cs[k], KF_FLOAT64)));
      break;
    }
    default: {
      int64_t z, t, perm[2] = {1, 0};
      KF_CHECK(kf_define_tensor(b, 2, dt, &z));
      KF_CHECK(kf_permute(b, x, perm, 2, &t));
      y = bin(b, KF_OP_ADD, t, z);
      break;
    }
  }
  return finish(b, y);
}

static void test_fusions(void** state) {
  (void)state;
  static const char* names[] = {"layernorm", "softmax", "rmsnorm", "gelu_bias", "transpose_add",
                                "rmsnorm_pow_reciprocal_sqrt", "layernorm_div_sqrt", "pow_constants"};
  const kf_dtype dts[] = {KF_FLOAT32, KF_FLOAT16, KF_BFLOAT16, KF_FLOAT64};
  /* Rows held in registers (1024, 4096, 2056, 1000: a partial last vector
   * group), rows too long for them (40000: the streaming path), short rows
   * (77, 3, 64), widths that are not a multiple of the vector width (77,
   * 131, 4099, 40001: the Edges kernel, rows at every shift, weights read
   * per element) and transposes with partial tiles (131x67). */
  const int64_t shapes[][2] = {{64, 1024}, {5, 77}, {1, 4096}, {300, 3}, {0, 16},  {3, 40000},
                               {9, 2056},  {67, 131}, {4, 1000}, {33, 64}, {21, 4099}, {6, 40001}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int kind = 0; kind < 8; ++kind)
    for (int d = 0; d < 4; ++d)
      for (int s = 0; s < kShapes; ++s) {
        kf_fusion f = build_e2e(kind, dts[d]);
        tin in[3];
        size_t n = 1;
        in[0] = input(dts[d], 2, shapes[s]);
        fill(&in[0], -3, 3, 0);
        int64_t row = shapes[s][1];
        if (kind == 0 || kind == 2 || kind == 3 || kind == 5 || kind == 6) {
          in[n] = input(dts[d], 1, &row);
          fill(&in[n++], 0.5, 1.5, 0);
        }
        if (kind == 0 || kind == 6) {
          in[n] = input(dts[d], 1, &row);
          fill(&in[n++], -1, 1, 0);
        }
        if (kind == 4) {
          int64_t tshape[2] = {shapes[s][1], shapes[s][0]};
          in[n] = input(dts[d], 2, tshape);
          fill(&in[n++], -3, 3, 0);
        }
        char what[128];
        snprintf(what, sizeof what, "%s %s [%lld,%lld]", names[kind], kf_dtype_name(dts[d]),
                 (long long)shapes[s][0], (long long)shapes[s][1]);
        run_case_tol(f, in, n, what, 4.0, -1);
        free_inputs(in, n);
        kf_fusion_release(f);
      }
  end_test("fusions");
}

/* Cross-entropy as a torch backend hands it over: the forward returns the
 * float32 log-softmax it saves and gathers it at the labels (the row
 * kernel writes it, a second kernel gathers: segmentation's gather rule,
 * docs/segmentation.md step 4), and the backward's one-hot written as a
 * compare of an iota with the labels (kfuse.torch's lowering of a scatter
 * at one index per row), and a loss beside its saved logsumexp. Rows of a
 * vocabulary (50257: odd, the cluster and Edges kernels), short ones, a
 * tiny one, and many rows of 21 classes (odd: short rows that fail the
 * vector checks). */
static void test_cross_entropy_forms(void** state) {
  (void)state;
  static const char* const kForms[] = {
      "input x: tensor<%1$s, 2>\n"
      "input label: tensor<int64, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[1], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[1], keepdim=true}\n"
      "ls = log(s)\n"
      "y = sub(d, ls)\n"
      "t = gather(y, label) {dim=1}\n"
      "nt = neg(t)\n"
      "output y\n"
      "output nt\n",
      "input logp: tensor<float32, 2>\n"
      "input label: tensor<int64, 2>\n"
      "const zero: int64 = 0\n"
      "const one: int64 = 1\n"
      "const fzero: float32 = 0\n"
      "const m1: float32 = -1\n"
      "v = size(logp) {dim=1}\n"
      "pos0 = iota(v, zero, one) {dtype=int64}\n"
      "pos = reshape(pos0, [one, v])\n"
      "hit = eq(pos, label)\n"
      "oh = where(hit, m1, fzero)\n"
      "const q: float32 = 0.25\n"
      "g = mul(oh, q)\n"
      "sg = sum(g) {axes=[1], keepdim=true}\n"
      "p = exp(logp)\n"
      "ps = mul(p, sg)\n"
      "dx = sub(g, ps)\n"
      "out = cast(dx) {dtype=%1$s}\n"
      "output out\n",
      /* the loss per row beside its saved logsumexp (row outputs only: a
       * streamed row plan, whose short rows at an odd width take the
       * short-row kernel's scalar twin) */
      "input x: tensor<%1$s, 2>\n"
      "input label: tensor<int64, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[1], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[1], keepdim=true}\n"
      "ls = log(s)\n"
      "lse = add(ls, m)\n"
      "t = gather(xf, label) {dim=1}\n"
      "loss = sub(lse, t)\n"
      "output loss\n"
      "output lse\n",
  };
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT32};
  const int64_t shapes[][2] = {{64, 50257}, {300, 1000}, {5, 77}, {1, 3}, {100003, 21}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 2; ++d)
      for (int s = 0; s < kShapes; ++s) {
        char text[2048];
        snprintf(text, sizeof text, kForms[k], kf_dtype_name(dts[d]));
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        const int64_t labels[2] = {shapes[s][0], 1};
        tin in[2];
        in[0] = input(k != 1 ? dts[d] : KF_FLOAT32, 2, shapes[s]);
        fill(&in[0], k != 1 ? -4 : -12, k != 1 ? 4 : -0.5, 0);
        in[1] = input(KF_INT64, 2, labels);
        fill(&in[1], 0, (double)(shapes[s][1] - 1), 0);
        char what[128];
        snprintf(what, sizeof what, "cross-entropy %s %s [%lld,%lld]", k == 0 ? "forward" : k == 1 ? "backward" : "loss",
                 kf_dtype_name(dts[d]), (long long)shapes[s][0], (long long)shapes[s][1]);
        run_case_tol(f, in, 2, what, 8.0, -1);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  end_test("cross_entropy_forms");
}

/* Norm backward (the inner-outer scheduler): grad input from row sums,
 * grad weight and bias as column sums, in one kernel plus a finishing
 * kernel; and an activation backward with its bias gradient (the column
 * scheduler with a domain-shaped output). Layernorm and rmsnorm backward as frameworks write them (mean and
 * rstd saved by the forward pass as float32 inputs), and a variant with a
 * column mean and max. Shapes: rows held in registers, rows streamed
 * (40000 columns), many rows per block, odd widths, zero rows (the column
 * results are identities) and zero columns. */
static const char* const kNormBackward[] = {
    /* layernorm backward */
    "input dy: tensor<%1$s, 2>\n"
    "input x: tensor<%1$s, 2>\n"
    "input mean: tensor<float32, 2>\n"
    "input rstd: tensor<float32, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "xf = cast(x) {dtype=float32}\n"
    "wf = cast(w) {dtype=float32}\n"
    "xc = sub(xf, mean)\n"
    "xhat = mul(xc, rstd)\n"
    "g = mul(dyf, wf)\n"
    "gx = mul(g, xhat)\n"
    "s1 = mean(g) {axes=[1], keepdim=true}\n"
    "s2 = mean(gx) {axes=[1], keepdim=true}\n"
    "a = sub(g, s1)\n"
    "b = mul(xhat, s2)\n"
    "c = sub(a, b)\n"
    "dx = mul(c, rstd)\n"
    "dxo = cast(dx) {dtype=%1$s}\n"
    "dyx = mul(dyf, xhat)\n"
    "dw = sum(dyx) {axes=[0], keepdim=false}\n"
    "db = sum(dyf) {axes=[0], keepdim=false}\n"
    "output dxo\n"
    "output dw\n"
    "output db\n",
    /* rmsnorm backward (keepdim column sum) */
    "input dy: tensor<%1$s, 2>\n"
    "input x: tensor<%1$s, 2>\n"
    "input mean: tensor<float32, 2>\n"
    "input rstd: tensor<float32, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "xf = cast(x) {dtype=float32}\n"
    "wf = cast(w) {dtype=float32}\n"
    "xn = mul(xf, rstd)\n"
    "g = mul(dyf, wf)\n"
    "gx = mul(g, xn)\n"
    "s = mean(gx) {axes=[1], keepdim=true}\n"
    "b = mul(xn, s)\n"
    "c = sub(g, b)\n"
    "dx = mul(c, rstd)\n"
    "dxo = cast(dx) {dtype=%1$s}\n"
    "dyx = mul(dyf, xn)\n"
    "dw = sum(dyx) {axes=[0], keepdim=true}\n"
    "output dxo\n"
    "output dw\n",
    /* a column mean and max beside a row max (other combine ops) */
    "input dy: tensor<%1$s, 2>\n"
    "input x: tensor<%1$s, 2>\n"
    "input mean: tensor<float32, 2>\n"
    "input rstd: tensor<float32, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "xf = cast(x) {dtype=float32}\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "y = sub(xf, m)\n"
    "yr = mul(y, rstd)\n"
    "cm = mean(yr) {axes=[0], keepdim=false}\n"
    "dyy = mul(dyf, y)\n"
    "cx = max(dyy) {axes=[0], keepdim=false}\n"
    "output y\n"
    "output cm\n"
    "output cx\n"
    "output m\n",
    /* silu backward with the bias gradient (the column scheduler writing
     * grad input as it reduces) */
    "input dy: tensor<%1$s, 2>\n"
    "input x: tensor<%1$s, 2>\n"
    "input mean: tensor<float32, 2>\n"
    "input rstd: tensor<float32, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "xf = cast(x) {dtype=float32}\n"
    "bf = cast(w) {dtype=float32}\n"
    "h = add(xf, bf)\n"
    "s = sigmoid(h)\n"
    "const one: float32 = 1\n"
    "om = sub(one, s)\n"
    "hs = mul(h, om)\n"
    "t = add(one, hs)\n"
    "d = mul(s, t)\n"
    "dx = mul(dyf, d)\n"
    "dxo = cast(dx) {dtype=%1$s}\n"
    "db = sum(dx) {axes=[0], keepdim=false}\n"
    "output dxo\n"
    "output db\n",
};

static void test_norm_backward(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT16};
  /* Rows in registers (1024, 2056, 1000), staged in shared memory with
   * the column partials (6000; 16392 in 16-bit types, which in float32
   * needs more than a block's shared memory: streamed, as 40000 always);
   * 5000 x 2048 and 3000 x 4096 give each block of the grid (resident
   * blocks only) several rows, the last ones ending on any block. */
  const int64_t shapes[][2] = {{64, 1024}, {5, 77},    {3, 40000},  {2000, 256}, {0, 16},    {7, 0},
                               {9, 2056},  {300, 3},   {1000, 1000}, {33, 16392}, {300, 6000}, {257, 4097},
                               {40, 20001}, {130, 1001}, {5000, 2048}, {3000, 4096}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < 3; ++d)
      for (int s = 0; s < kShapes; ++s) {
        /* A max over zero elements has no identity (an error, as in PyTorch). */
        if (k == 2 && (shapes[s][0] == 0 || shapes[s][1] == 0)) continue;
        char text[2048];
        snprintf(text, sizeof text, kNormBackward[k], kf_dtype_name(dts[d]));
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[5];
        const int64_t rows[2] = {shapes[s][0], 1};
        in[0] = input(dts[d], 2, shapes[s]);
        in[1] = input(dts[d], 2, shapes[s]);
        in[2] = input(KF_FLOAT32, 2, rows);
        in[3] = input(KF_FLOAT32, 2, rows);
        in[4] = input(dts[d], 1, &shapes[s][1]);
        fill(&in[0], -2, 2, 0);
        fill(&in[1], -3, 3, 0);
        fill(&in[2], -0.5, 0.5, 0);
        fill(&in[3], 0.5, 2, 0);
        fill(&in[4], 0.5, 1.5, 0);
        char what[128];
        snprintf(what, sizeof what, "norm backward %d %s [%lld,%lld]", k, kf_dtype_name(dts[d]),
                 (long long)shapes[s][0], (long long)shapes[s][1]);
        run_case_tol(f, in, 5, what, 16.0, -1);
        free_inputs(in, 5);
        kf_fusion_release(f);
      }
  /* Rows that start off a vector boundary (one element into the buffer):
   * dy and x alike (the Edges kernels, at aligned widths too), or x alone
   * (their row shifts differ: the main kernel's own fallback). */
  const int64_t offset_shapes[][2] = {{100, 1024}, {100, 1001}, {20, 30000}};
  for (int s = 0; s < 3; ++s)
    for (int both = 0; both < 2; ++both) {
      char text[2048];
      snprintf(text, sizeof text, kNormBackward[0], "bfloat16");
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      tin in[5];
      const int64_t rows[2] = {offset_shapes[s][0], 1};
      in[0] = layout_input(KF_BFLOAT16, offset_shapes[s], both ? L_OFFSET : L_CONTIG);
      in[1] = layout_input(KF_BFLOAT16, offset_shapes[s], L_OFFSET);
      in[2] = input(KF_FLOAT32, 2, rows);
      in[3] = input(KF_FLOAT32, 2, rows);
      in[4] = input(KF_BFLOAT16, 1, &offset_shapes[s][1]);
      fill(&in[2], -0.5, 0.5, 0);
      fill(&in[3], 0.5, 2, 0);
      fill(&in[4], 0.5, 1.5, 0);
      char what[128];
      snprintf(what, sizeof what, "layernorm backward, %s offset [%lld,%lld]", both ? "dy and x" : "x",
               (long long)offset_shapes[s][0], (long long)offset_shapes[s][1]);
      run_case_tol(f, in, 5, what, 16.0, -1);
      free_inputs(in, 5);
      kf_fusion_release(f);
    }
  /* Rank 3 ([B, T, C], the column sums over B and T): a block's rows
   * cross from one batch to the next. */
  static const char* kRank3 =
      "input dy: tensor<bfloat16, 3>\n"
      "input x: tensor<bfloat16, 3>\n"
      "input rstd: tensor<float32, 3>\n"
      "input w: tensor<bfloat16, 1>\n"
      "dyf = cast(dy) {dtype=float32}\n"
      "xf = cast(x) {dtype=float32}\n"
      "wf = cast(w) {dtype=float32}\n"
      "xn = mul(xf, rstd)\n"
      "g = mul(dyf, wf)\n"
      "gx = mul(g, xn)\n"
      "s = mean(gx) {axes=[2], keepdim=true}\n"
      "b = mul(xn, s)\n"
      "c = sub(g, b)\n"
      "dx = mul(c, rstd)\n"
      "dxo = cast(dx) {dtype=bfloat16}\n"
      "dyx = mul(dyf, xn)\n"
      "dw = sum(dyx) {axes=[0, 1], keepdim=false}\n"
      "output dxo\n"
      "output dw\n";
  const int64_t shapes3[][3] = {{3, 700, 2048}, {2, 1500, 4096}, {5, 7, 1024}};
  for (int s = 0; s < 3; ++s) {
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(kRank3, &f));
    tin in[4];
    const int64_t rows[3] = {shapes3[s][0], shapes3[s][1], 1};
    in[0] = input(KF_BFLOAT16, 3, shapes3[s]);
    in[1] = input(KF_BFLOAT16, 3, shapes3[s]);
    in[2] = input(KF_FLOAT32, 3, rows);
    in[3] = input(KF_BFLOAT16, 1, &shapes3[s][2]);
    fill(&in[0], -2, 2, 0);
    fill(&in[1], -3, 3, 0);
    fill(&in[2], 0.5, 2, 0);
    fill(&in[3], 0.5, 1.5, 0);
    char what[128];
    snprintf(what, sizeof what, "rmsnorm backward rank 3 [%lld,%lld,%lld]", (long long)shapes3[s][0],
             (long long)shapes3[s][1], (long long)shapes3[s][2]);
    run_case_tol(f, in, 4, what, 16.0, -1);
    free_inputs(in, 4);
    kf_fusion_release(f);
  }
  end_test("norm backward");
}

/* Pointwise over rows of an odd width (the scalar twin's flat vectors:
 * 16-byte vectors of consecutive positions, which cross rows): x and the
 * output dense, a per-row value and a per-column weight read per lane, in
 * ranks 2 and 3 and with too few positions for one vector. */
static void test_flat_vectors(void** state) {
  (void)state;
  static const char* kText =
      "input x: tensor<%1$s, 3>\n"
      "input a: tensor<float32, 3>\n"
      "input w: tensor<%1$s, 1>\n"
      "xf = cast(x) {dtype=float32}\n"
      "wf = cast(w) {dtype=float32}\n"
      "d = sub(xf, a)\n"
      "e = exp(d)\n"
      "y = mul(e, wf)\n"
      "yc = cast(y) {dtype=%1$s}\n"
      "output yc\n";
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT32};
  const int64_t shapes[][3] = {{3, 5, 1001}, {2, 7, 3}, {4, 33, 4097}, {1, 1, 5}, {2, 64, 1024}, {6, 11, 50257}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int d = 0; d < 2; ++d)
    for (int s = 0; s < kShapes; ++s) {
      char text[1024];
      snprintf(text, sizeof text, kText, kf_dtype_name(dts[d]));
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      tin in[3];
      const int64_t rows[3] = {shapes[s][0], shapes[s][1], 1};
      in[0] = input(dts[d], 3, shapes[s]);
      in[1] = input(KF_FLOAT32, 3, rows);
      in[2] = input(dts[d], 1, &shapes[s][2]);
      fill(&in[0], -2, 2, 0);
      fill(&in[1], -1, 1, 0);
      fill(&in[2], 0.5, 1.5, 0);
      char what[128];
      snprintf(what, sizeof what, "flat vectors %s [%lld,%lld,%lld]", kf_dtype_name(dts[d]), (long long)shapes[s][0],
               (long long)shapes[s][1], (long long)shapes[s][2]);
      run_case_tol(f, in, 3, what, 8.0, -1);
      free_inputs(in, 3);
      kf_fusion_release(f);
    }
  end_test("flat vectors");
}

/* Dropout + residual + layernorm: three row inputs of two dtypes (a 1-byte
 * keep mask between bfloat16 rows), staged in shared memory by the
 * long-row kernels, each staged row rounded up to 16 bytes so that the
 * next one's vectors stay aligned (a row of 12289 masks is not: an
 * earlier build failed with a misaligned address there). Widths: odd
 * ones whose block fits a multiprocessor once (12289, 20003: the staged
 * LongEdges kernel), held in registers (4097, 1001: Edges) and streamed
 * (40001); multiples of 8 but not 16 (12296: the tight kernel; 40008: the
 * streamed LongRows kernel). */
static void test_staged_mixed_rows(void** state) {
  (void)state;
  static const char* kText =
      "input x: tensor<bfloat16, 2>\n"
      "input keep: tensor<bool, 2>\n"
      "input residual: tensor<bfloat16, 2>\n"
      "input w: tensor<bfloat16, 1>\n"
      "input b: tensor<bfloat16, 1>\n"
      "const scale: float32 = 1.25\n"
      "const eps: float32 = 1e-5\n"
      "xf = cast(x) {dtype=float32}\n"
      "kf = cast(keep) {dtype=float32}\n"
      "rf = cast(residual) {dtype=float32}\n"
      "wf = cast(w) {dtype=float32}\n"
      "bf = cast(b) {dtype=float32}\n"
      "xk = mul(xf, kf)\n"
      "xs = mul(xk, scale)\n"
      "h = add(xs, rf)\n"
      "ho = cast(h) {dtype=bfloat16}\n"
      "v, mu = var_mean(h) {axes=[1], keepdim=true, correction=0}\n"
      "ve = add(v, eps)\n"
      "r = rsqrt(ve)\n"
      "hc = sub(h, mu)\n"
      "n = mul(hc, r)\n"
      "nw = mul(n, wf)\n"
      "o = add(nw, bf)\n"
      "y = cast(o) {dtype=bfloat16}\n"
      "output ho\n"
      "output y\n"
      "output mu\n";
  const int64_t shapes[][2] = {{6, 12296}, {6, 12289}, {33, 4097}, {5, 40001}, {40, 1001}, {3, 20003}, {4, 40008}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int s = 0; s < kShapes; ++s) {
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(kText, &f));
    tin in[5];
    in[0] = input(KF_BFLOAT16, 2, shapes[s]);
    in[1] = input(KF_BOOL, 2, shapes[s]);
    in[2] = input(KF_BFLOAT16, 2, shapes[s]);
    in[3] = input(KF_BFLOAT16, 1, &shapes[s][1]);
    in[4] = input(KF_BFLOAT16, 1, &shapes[s][1]);
    fill(&in[0], -2, 2, 0);
    fill(&in[1], 0, 1, 0);
    fill(&in[2], -1, 1, 0);
    fill(&in[3], 0.5, 1.5, 0);
    fill(&in[4], -1, 1, 0);
    char what[128];
    snprintf(what, sizeof what, "dropout + residual + layernorm [%lld,%lld]", (long long)shapes[s][0],
             (long long)shapes[s][1]);
    run_case_tol(f, in, 5, what, 16.0, -1);
    free_inputs(in, 5);
    kf_fusion_release(f);
  }
  end_test("staged mixed rows");
}

/* Normalizations over outer dims (the column scheduler in phases, with an
 * epilogue): softmax over dim 0 (two phases), its backward (one phase and
 * an epilogue), a channels-last norm over dims 0 and 1 (Welford partials,
 * saved mean and rstd), and two phases with row outputs only (no
 * epilogue). Shapes: vector tiles with a partial last tile (2056), scalar
 * tiles (1001, 3 columns), many splits of the rows (3000) and few (5),
 * one row, and rank 3 with the rows over two dims. Math in float32, or
 * float64 for float64 storage. */
static const char* const kColumnNorms[] = {
    "input x: tensor<%1$s, %2$d>\n"
    "input w: tensor<%1$s, 1>\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "m = max(xf) {axes=%3$s, keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=true}\n"
    "p = div(e, s)\n"
    "y = cast(p) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, %2$d>\n"
    "input w: tensor<%1$s, 1>\n"
    "dyf = cast(x) {dtype=%4$s}\n"
    "yf = cast(w) {dtype=%4$s}\n"
    "p = mul(dyf, yf)\n"
    "s = sum(p) {axes=%3$s, keepdim=true}\n"
    "d = sub(dyf, s)\n"
    "dx = mul(yf, d)\n"
    "y = cast(dx) {dtype=%1$s}\n"
    "output y\n"
    "output s\n",
    "input x: tensor<%1$s, %2$d>\n"
    "input w: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-5\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "wf = cast(w) {dtype=%4$s}\n"
    "v, mu = var_mean(xf) {axes=%3$s, keepdim=false, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "n = mul(xc, r)\n"
    "o = mul(n, wf)\n"
    "y = cast(o) {dtype=%1$s}\n"
    "output y\n"
    "output mu\n"
    "output r\n",
    "input x: tensor<%1$s, %2$d>\n"
    "input w: tensor<%1$s, 1>\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "m = max(xf) {axes=%3$s, keepdim=false}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=false}\n"
    "l = log(s)\n"
    "lse = add(l, m)\n"
    "output lse\n"
    "output m\n",
};

static void test_column_normalizations(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64};
  const int64_t shapes[][3] = {{3000, 2056, 0}, {700, 1001, 0}, {5, 4096, 0}, {1, 8, 0},
                               {300, 3, 0},     {4, 700, 64},   {3, 5, 1001}, {2, 1, 2056}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < 4; ++k)
    for (int d = 0; d < 3; ++d)
      for (int s = 0; s < kShapes; ++s) {
        const int rank = shapes[s][2] > 0 ? 3 : 2;
        char text[2048];
        snprintf(text, sizeof text, kColumnNorms[k], kf_dtype_name(dts[d]), rank, rank == 3 ? "[0, 1]" : "[0]",
                 dts[d] == KF_FLOAT64 ? "float64" : "float32");
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[2];
        in[0] = input(dts[d], rank, shapes[s]);
        in[1] = input(dts[d], 1, &shapes[s][rank - 1]);
        fill(&in[0], -3, 3, 0);
        fill(&in[1], 0.5, 1.5, 0);
        char what[160];
        snprintf(what, sizeof what, "column norm %d %s [%lld,%lld,%lld]", k, kf_dtype_name(dts[d]),
                 (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
        run_case_tol(f, in, 2, what, 16.0 + (double)(shapes[s][0] * (rank == 3 ? shapes[s][1] : 1)) / 64.0, -1);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  end_test("column normalizations");
}

/* Short columns (ColumnParams::short_rows, launch.cpp takes_short_columns):
 * reductions over a middle dim of 0-33 rows with the innermost dim kept
 * run as one kernel, each thread looping over all the rows of its columns
 * and storing the outputs (no partials, no finishing kernel); 33 rows take
 * the split kernels, as before. sum, mean, max and var_mean (Welford's
 * finish), keepdim or not, over [T, K, H] in float32, float16 and
 * bfloat16; the MoE combine (rows gathered by index_select, weighted per
 * token and slot, summed over the slots). Widths a multiple of the
 * vectors (5120) and odd (4097: the scalar twin), inputs aligned and one
 * element off (a 2- or 4-byte misaligned pointer: the scalar twin, or a
 * narrower vector plan for the class). Zero rows give the identities (NaN
 * for a mean or variance). */
static const char* const kShortReduce[] = {"sum", "mean", "max", "var_mean"};

/* One short-columns case: reduction r of kShortReduce over dim 1 of [t, k, h]. */
static void short_columns_case(kf_dtype dt, int64_t t, int64_t k, int64_t h, int misaligned, size_t r) {
  const int keep = r == 1;
  char text[512];
  if (r == 3)
    snprintf(text, sizeof text,
             "input x: tensor<%s, 3>\n"
             "xf = cast(x) {dtype=float32}\n"
             "v, m = var_mean(xf) {axes=[1], keepdim=false, correction=1}\n"
             "output v\n"
             "output m\n",
             kf_dtype_name(dt));
  else
    snprintf(text, sizeof text,
             "input x: tensor<%s, 3>\n"
             "y = %s(x) {axes=[1], keepdim=%s}\n"
             "output y\n",
             kf_dtype_name(dt), kShortReduce[r], keep ? "true" : "false");
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const int64_t shape[3] = {t, k, h};
  tin in = input(dt, 3, shape);
  if (misaligned) {
    const int64_t strides[3] = {k * h, h, 1};
    with_strides(&in, strides, 1);
  }
  fill(&in, -3, 3, 0);
  char what[160];
  snprintf(what, sizeof what, "short columns %s over [%lld,%lld,%lld] %s%s%s", kShortReduce[r], (long long)t,
           (long long)k, (long long)h, kf_dtype_name(dt), keep ? " (keepdim)" : "", misaligned ? " misaligned" : "");
  run_case_tol(f, &in, 1, what, 1.0 + (double)k / 8.0, -1);
  free_inputs(&in, 1);
  kf_fusion_release(f);
}

static void test_short_columns(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_FLOAT16, KF_BFLOAT16};
  const int64_t ks[] = {0, 1, 2, 3, 8, 33};
  const int64_t hs[] = {5120, 4097};
  const int64_t t = 7;
  for (size_t d = 0; d < 3; ++d)
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ++ki)
      for (size_t hi = 0; hi < 2; ++hi)
        for (int misaligned = 0; misaligned <= 1; ++misaligned)
          for (size_t r = 0; r < 4; ++r)
            if (ks[ki] != 0 || r != 2)  // max over no rows: an error, not an identity
              short_columns_case(dts[d], t, ks[ki], hs[hi], misaligned, r);
  /* Past 32 rows, columns enough to fill the device alone (the split
   * kernel's one split; GridTargets::short_columns_blocks): the twin loops
   * over 40 rows of 2^20 columns (a masked mean pool's shape). */
  for (size_t d = 0; d < 3; ++d)
    for (int misaligned = 0; misaligned <= 1; ++misaligned)
      for (size_t r = 0; r < 4; r += 3) short_columns_case(dts[d], 128, 40, 8192, misaligned, r);
  /* The MoE combine of vLLM: y[t, h] = sum_k w[t, k] * x[idx[t * K + k], h]. */
  for (size_t d = 0; d < 3; ++d)
    for (size_t ki = 1; ki < sizeof ks / sizeof ks[0]; ++ki)
      for (size_t hi = 0; hi < 2; ++hi)
        for (int misaligned = 0; misaligned <= 1; ++misaligned) {
          const int64_t k = ks[ki], h = hs[hi], rows = t * k;
          char text[1024];
          snprintf(text, sizeof text,
                   "input expert_out: tensor<%1$s, 2>\n"
                   "input unpermute: tensor<int64, 1>\n"
                   "input routing_weights: tensor<float32, 2>\n"
                   "const t: int64 = %2$lld\n"
                   "const k: int64 = %3$lld\n"
                   "const h: int64 = %4$lld\n"
                   "gathered = index_select(expert_out, unpermute) {dim=0}\n"
                   "gatheredf = cast(gathered) {dtype=float32}\n"
                   "per_token = reshape(gatheredf, [t, k, h])\n"
                   "w3 = unsqueeze(routing_weights) {dim=2}\n"
                   "weighted = mul(per_token, w3)\n"
                   "y = sum(weighted) {axes=[1], keepdim=false}\n"
                   "out = cast(y) {dtype=%1$s}\n"
                   "output out\n",
                   kf_dtype_name(dts[d]), (long long)t, (long long)k, (long long)h);
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          const int64_t xshape[2] = {rows, h}, ishape[1] = {rows}, wshape[2] = {t, k};
          tin in[3];
          in[0] = input(dts[d], 2, xshape);
          in[1] = input(KF_INT64, 1, ishape);
          in[2] = input(KF_FLOAT32, 2, wshape);
          if (misaligned) {
            const int64_t xs[2] = {h, 1}, is[1] = {1};
            with_strides(&in[0], xs, 1);
            with_strides(&in[1], is, 1);
          }
          fill(&in[0], -3, 3, 0);
          fill(&in[1], 0, (double)(rows - 1), 0);
          fill(&in[2], 0, 1, 0);
          char what[160];
          snprintf(what, sizeof what, "moe combine [%lld,%lld,%lld] %s%s", (long long)t, (long long)k, (long long)h,
                   kf_dtype_name(dts[d]), misaligned ? " misaligned" : "");
          run_case_tol(f, in, 3, what, 1.0 + (double)k / 8.0, -1);
          free_inputs(in, 3);
          kf_fusion_release(f);
        }
  end_test("short columns");
}

/* Column kernels at any element alignment (the scalar twins' vector path,
 * KernelWriter::any_left): odd widths, so each row starts at another
 * misalignment; bfloat16 inputs beside float32 outputs, so a lane's output
 * vector is two 16-byte chunks (8 lanes of 4 bytes) and its input one; a
 * grad-input output stored by aligned chunks with the lane below's bytes,
 * single elements at each row's edges; widths below one lane (3), ending
 * mid-lane (1001, 2055), a tile's width plus one (257), and an aligned
 * one (264) for the vector kernel. */
static void test_column_any_alignment(void** state) {
  (void)state;
  static const char* kText =
      "input dy: tensor<bfloat16, 2>\n"
      "input x: tensor<bfloat16, 2>\n"
      "input b: tensor<float32, 1>\n"
      "dyf = cast(dy) {dtype=float32}\n"
      "xf = cast(x) {dtype=float32}\n"
      "h = add(xf, b)\n"
      "s = sigmoid(h)\n"
      "dx = mul(dyf, s)\n"
      "db = sum(dx) {axes=[0], keepdim=false}\n"
      "dxb = cast(dx) {dtype=bfloat16}\n"
      "output dx\n"
      "output dxb\n"
      "output db\n";
  const int64_t shapes[][2] = {{300, 1001}, {40, 3}, {5, 2055}, {1000, 257}, {70, 264}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < kShapes; ++k) {
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(kText, &f));
    tin in[3];
    in[0] = input(KF_BFLOAT16, 2, shapes[k]);
    in[1] = input(KF_BFLOAT16, 2, shapes[k]);
    in[2] = input(KF_FLOAT32, 1, &shapes[k][1]);
    fill(&in[0], -3, 3, 0);
    fill(&in[1], -3, 3, 0);
    fill(&in[2], -1, 1, 0);
    char what[128];
    snprintf(what, sizeof what, "column any alignment [%lld,%lld]", (long long)shapes[k][0], (long long)shapes[k][1]);
    run_case_tol(f, in, 3, what, 16.0 + (double)shapes[k][0] / 64.0, -1);
    free_inputs(in, 3);
    kf_fusion_release(f);
  }
  end_test("column any alignment");
}

/* Batch norm's training forward (statistics over dims 0 and 2 of [B, C, HW]):
 * the biased var_mean and the unbiased var of the same input share one
 * accumulator; rows of 2 x 70000 exceed a block's shared memory in every
 * dtype (the streamed path, Welford merged per vector step), the others
 * are held in registers or staged. Values in [97, 103] (mean far from 0,
 * small spread) check that the per-step merges keep the variance's
 * accuracy. */
static void test_batch_norm_stats(void** state) {
  (void)state;
  static const char* const text =
      "input x: tensor<%1$s, 3>\n"
      "input w: tensor<%1$s, 1>\n"
      "input rm: tensor<%2$s, 1>\n"
      "const eps: float32 = 1e-5\n"
      "const momentum: float32 = 0.1\n"
      "xf = cast(x) {dtype=%2$s}\n"
      "wf = cast(w) {dtype=%2$s}\n"
      "v, mu = var_mean(xf) {axes=[0, 2], keepdim=false, correction=0}\n"
      "vu = var(xf) {axes=[0, 2], keepdim=false, correction=1}\n"
      "ve = add(v, eps)\n"
      "r = rsqrt(ve)\n"
      "mu1 = unsqueeze(mu) {dim=1}\n"
      "r1 = unsqueeze(r) {dim=1}\n"
      "w1 = unsqueeze(wf) {dim=1}\n"
      "xc = sub(xf, mu1)\n"
      "xn = mul(xc, r1)\n"
      "n = mul(xn, w1)\n"
      "y = cast(n) {dtype=%1$s}\n"
      "rv0 = mul(vu, momentum)\n"
      "rv1 = mul(rm, momentum)\n"
      "rv = add(rv0, rv1)\n"
      "output y\n"
      "output mu\n"
      "output r\n"
      "output rv\n";
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64};
  const int64_t shapes[][3] = {{2, 3, 70000}, {4, 16, 300}, {3, 5, 1001}, {1, 2, 1}, {2, 0, 8}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int d = 0; d < 3; ++d)
    for (int s = 0; s < kShapes; ++s) {
      char src[2048];
      snprintf(src, sizeof src, text, kf_dtype_name(dts[d]), dts[d] == KF_FLOAT64 ? "float64" : "float32");
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(src, &f));
      tin in[3];
      in[0] = input(dts[d], 3, shapes[s]);
      in[1] = input(dts[d], 1, &shapes[s][1]);
      in[2] = input(dts[d] == KF_FLOAT64 ? KF_FLOAT64 : KF_FLOAT32, 1, &shapes[s][1]);
      fill(&in[0], 97, 103, 0);
      fill(&in[1], 0.5, 1.5, 0);
      fill(&in[2], -1, 1, 0);
      char what[160];
      snprintf(what, sizeof what, "batch norm stats %s [%lld,%lld,%lld]", kf_dtype_name(dts[d]),
               (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2]);
      run_case_tol(f, in, 3, what, 16.0 + (double)(shapes[s][0] * shapes[s][2]) / 1024.0, -1);
      free_inputs(in, 3);
      kf_fusion_release(f);
    }
  end_test("batch norm stats");
}

/* Few rows too long for one block (fewer than two per multiprocessor):
 * the rows split over blocks (emit_split_row), for a layernorm (Welford
 * partials, the saved mean and rstd), a softmax (two phases and an
 * epilogue) and a plain row sum (no epilogue); rank 3 with the kept dim
 * between the reduced ones (a batch norm's layout). Shapes: vector slabs
 * (300000), an odd length (99999: the element path), one row, and rows
 * long enough for many splits. */
static const char* const kSplitRows[] = {
    "input x: tensor<%1$s, %2$d>\n"
    "const eps: float32 = 1e-5\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "v, mu = var_mean(xf) {axes=%3$s, keepdim=true, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "n = mul(xc, r)\n"
    "y = cast(n) {dtype=%1$s}\n"
    "output y\n"
    "output mu\n"
    "output r\n",
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "m = max(xf) {axes=%3$s, keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=true}\n"
    "p = div(e, s)\n"
    "y = cast(p) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "s = sum(xf) {axes=%3$s, keepdim=false}\n"
    "output s\n",
    /* log_softmax with a float32 output of a narrower input: the output
     * sets the vector width (4), so a staged bfloat16 vector is 8 bytes. */
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=%4$s}\n"
    "m = max(xf) {axes=%3$s, keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=true}\n"
    "ls = log(s)\n"
    "y = sub(d, ls)\n"
    "output y\n",
};

/* Fusion k of kSplitRows over `axes` of x (dtype dt, shape[2] == 0: rank
 * 2) against the CPU backend, with a tolerance that grows with the
 * reduction's length; with `twice`, also the same bytes from two GPU runs. */
static void gpu_twice_identical(kf_fusion f, tin* in, size_t nin, const char* what);
static void row_case(const char* label, int k, kf_dtype dt, const int64_t shape[3], const char* axes, double length,
                     int twice) {
  const int rank = shape[2] > 0 ? 3 : 2;
  char text[2048];
  snprintf(text, sizeof text, kSplitRows[k], kf_dtype_name(dt), rank, axes, "float32");
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  tin in = input(dt, rank, shape);
  fill(&in, -3, 3, 0);
  char what[160];
  snprintf(what, sizeof what, "%s %d %s [%lld,%lld,%lld] axes %s", label, k, kf_dtype_name(dt), (long long)shape[0],
           (long long)shape[1], (long long)shape[2], axes);
  run_case_tol(f, &in, 1, what, 16.0 + length / 1024.0, -1);
  if (twice) gpu_twice_identical(f, &in, 1, what);
  free_inputs(&in, 1);
  kf_fusion_release(f);
}

static void test_split_rows(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int64_t shapes[][3] = {{3, 300000, 0}, {1, 99999, 0}, {130, 70000, 0}, {4, 8, 40000}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  /* all = 1: every dim reduced (one row: the finish gives all its threads
   * to the splits, emit_split_row.cpp). */
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 2; ++d)
      for (int s = 0; s < kShapes; ++s)
        for (int all = 0; all < 2; ++all) {
          const int rank = shapes[s][2] > 0 ? 3 : 2;
          const char* axes = all ? (rank == 3 ? "[0, 1, 2]" : "[0, 1]") : (rank == 3 ? "[0, 2]" : "[1]");
          const double length = all ? (double)numel_of(rank, shapes[s])
                                    : (double)(rank == 3 ? shapes[s][0] * shapes[s][2] : shapes[s][1]);
          row_case("split rows", k, dts[d], shapes[s], axes, length, 0);
        }
  end_test("split rows");
}

/* Reductions over inputs laid out in another order than their logical
 * one: the row or column kernel and the walk follow the memory order
 * (RowDomain::order), the outputs keep their logical indices. Each case
 * is a fusion over `axes` of x in memory order `order` (dims outermost
 * first): reductions over the outermost-in-memory dims (a column
 * reduction in memory), softmax and log_softmax over dim 0 of a
 * transposed input (the reduced dim innermost: a row reduction), layer
 * and RMS norm over the last logical dim of a transposed input (a
 * column normalization), channels-first sums ([B, C, N] with C
 * outermost), a max beside a broadcast weight; float32 and bfloat16, odd
 * sizes (vector widths fail: the scalar twins) and aligned ones. */
static const char* const kOrderFusions[] = {
    /* 0: a sum and a max of the same rows */
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=float32}\n"
    "s = sum(xf) {axes=%3$s, keepdim=false}\n"
    "m = max(xf) {axes=%3$s, keepdim=false}\n"
    "output s\n"
    "output m\n",
    /* 1: softmax */
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=%3$s, keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=true}\n"
    "p = div(e, s)\n"
    "y = cast(p) {dtype=%1$s}\n"
    "output y\n",
    /* 2: log_softmax, float32 output */
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=%3$s, keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=%3$s, keepdim=true}\n"
    "ls = log(s)\n"
    "y = sub(d, ls)\n"
    "output y\n",
    /* 3: layer norm with its saved mean and rstd */
    "input x: tensor<%1$s, %2$d>\n"
    "const eps: float32 = 1e-5\n"
    "xf = cast(x) {dtype=float32}\n"
    "v, mu = var_mean(xf) {axes=%3$s, keepdim=true, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "n = mul(xc, r)\n"
    "y = cast(n) {dtype=%1$s}\n"
    "output y\n"
    "output mu\n"
    "output r\n",
    /* 4: RMS norm */
    "input x: tensor<%1$s, %2$d>\n"
    "const eps: float32 = 1e-6\n"
    "xf = cast(x) {dtype=float32}\n"
    "sq = mul(xf, xf)\n"
    "ms = mean(sq) {axes=%3$s, keepdim=true}\n"
    "ve = add(ms, eps)\n"
    "r = rsqrt(ve)\n"
    "n = mul(xf, r)\n"
    "y = cast(n) {dtype=%1$s}\n"
    "output y\n",
    /* 5: a mean */
    "input x: tensor<%1$s, %2$d>\n"
    "xf = cast(x) {dtype=float32}\n"
    "s = mean(xf) {axes=%3$s, keepdim=false}\n"
    "output s\n",
};

/* x of `shape` laid out in `order` (dims outermost first), compact. */
static tin ordered_input(kf_dtype dt, int rank, const int64_t* shape, const int* order) {
  tin t = input(dt, rank, shape);
  int64_t strides[MAX_RANK], next = 1;
  for (int k = rank - 1; k >= 0; --k) {
    strides[order[k]] = next;
    next *= shape[order[k]];
  }
  with_strides(&t, strides, 0);
  return t;
}

typedef struct {
  int fusion;
  int rank;
  int64_t shape[4];
  int order[4];
  const char* axes;
  double length; /* elements per reduction (the tolerance's floor) */
} order_case;

static void test_memory_order_reductions(void** state) {
  (void)state;
  static const order_case cases[] = {
      /* reduced dims outermost in memory (c0033's class): a column reduction */
      {0, 4, {3, 5, 37, 130}, {2, 3, 0, 1}, "[2, 3]", 37 * 130},
      {0, 4, {2, 8, 64, 128}, {2, 3, 0, 1}, "[2, 3]", 64 * 128},
      {5, 4, {3, 5, 37, 130}, {2, 3, 0, 1}, "[2, 3]", 37 * 130},
      /* a reduced dim between kept ones in memory */
      {0, 3, {9, 33, 17}, {2, 1, 0}, "[1]", 33},
      {0, 3, {9, 33, 17}, {1, 0, 2}, "[0, 2]", 9 * 17},
      /* mean over dim 1 of a transposed matrix (c0151's class) */
      {5, 2, {257, 1003}, {1, 0}, "[1]", 1003},
      {5, 2, {256, 1024}, {1, 0}, "[1]", 1024},
      /* channels-first sums: [B, C, N] with C outermost (c0084's class) */
      {0, 3, {6, 130, 70}, {1, 2, 0}, "[1]", 130},
      {0, 3, {4, 64, 96}, {1, 2, 0}, "[1]", 64},
      {0, 4, {3, 19, 7, 9}, {1, 0, 2, 3}, "[0, 2, 3]", 3 * 7 * 9},
      /* softmax and log_softmax over dim 0 of a transposed input (c0155,
         c0009): the reduced dim innermost, a row normalization */
      {1, 2, {1001, 67}, {1, 0}, "[0]", 1001},
      {1, 2, {1024, 64}, {1, 0}, "[0]", 1024},
      {2, 2, {1001, 67}, {1, 0}, "[0]", 1001},
      {2, 2, {4096, 3}, {1, 0}, "[0]", 4096},
      {2, 2, {50257, 5}, {1, 0}, "[0]", 50257},
      /* ... and over dim 1 of one: a column normalization */
      {1, 2, {67, 1001}, {1, 0}, "[1]", 1001},
      {2, 2, {64, 1024}, {1, 0}, "[1]", 1024},
      {1, 3, {5, 129, 33}, {2, 0, 1}, "[2]", 33},
      /* layer and RMS norm over the last logical dim of a transposed input */
      {3, 2, {300, 1001}, {1, 0}, "[1]", 1001},
      {3, 2, {256, 1024}, {1, 0}, "[1]", 1024},
      {3, 3, {4, 33, 130}, {2, 0, 1}, "[2]", 130},
      {4, 2, {300, 1001}, {1, 0}, "[1]", 1001},
      {4, 3, {4, 33, 128}, {2, 1, 0}, "[2]", 128},
      /* norms over a dim innermost in memory but logically first */
      {3, 2, {1001, 300}, {1, 0}, "[0]", 1001},
      {4, 3, {130, 4, 33}, {1, 2, 0}, "[0]", 130},
  };
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int d = 0; d < 2; ++d) {
      const order_case* oc = &cases[c];
      char text[2048];
      snprintf(text, sizeof text, kOrderFusions[oc->fusion], kf_dtype_name(dts[d]), oc->rank, oc->axes);
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      tin in = ordered_input(dts[d], oc->rank, oc->shape, oc->order);
      fill(&in, -3, 3, 0);
      char what[200];
      snprintf(what, sizeof what, "memory order: fusion %d %s [%lld,%lld,%lld,%lld] order [%d,%d,%d,%d] axes %s", oc->fusion,
               kf_dtype_name(dts[d]), (long long)oc->shape[0], (long long)oc->shape[1], (long long)oc->shape[2],
               (long long)oc->shape[3], oc->order[0], oc->order[1], oc->order[2], oc->order[3], oc->axes);
      run_case_tol(f, &in, 1, what, 16.0 + oc->length / 1024.0, -1);
      /* deterministic: the same bytes from two runs */
      if (d == 0) gpu_twice_identical(f, &in, 1, what);
      free_inputs(&in, 1);
      kf_fusion_release(f);
    }
  /* A broadcast weight beside the permuted input: the reference is x (it
     covers more dims), whatever the weight's order. */
  {
    static const char* kText =
        "input x: tensor<float32, 2>\n"
        "input w: tensor<float32, 2>\n"
        "p = mul(x, w)\n"
        "s = sum(p) {axes=[0], keepdim=false}\n"
        "m = max(p) {axes=[0], keepdim=false}\n"
        "output s\n"
        "output m\n";
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(kText, &f));
    const int64_t xs[2] = {1003, 77}, ws[2] = {1003, 1};
    const int tr[2] = {1, 0};
    tin in[2] = {ordered_input(KF_FLOAT32, 2, xs, tr), input(KF_FLOAT32, 2, ws)};
    fill(&in[0], -3, 3, 0);
    fill(&in[1], 0.5, 1.5, 0);
    run_case_tol(f, in, 2, "memory order: transposed x times a [N, 1] weight", 16.0, -1);
    free_inputs(in, 2);
    kf_fusion_release(f);
  }
  end_test("memory order reductions");
}

/* Row normalizations into caller-allocated outputs laid out across the
 * rows (a kept dim innermost: the caller's [1, 0] or [0, 2, 1]). Under
 * KFUSE_TUNE_ROW_ACROSS_OUTPUTS=1 (the ctest entry
 * gpu_test_gpu_differential_rows_across) the row kernel writes them itself
 * (RowParams::across: a warp per row, 16 rows per block, column chunks
 * through a shared tile), else they are copied at the end. Rows not a
 * multiple of 16 and fewer than 16, rows shorter than a chunk (256) and
 * not a multiple of it, odd widths and an input at an odd offset (no
 * vectors: the scalar path), a row output beside an across one, two
 * across outputs. */
static const char* kAcrossFusions[] = {
    /* 0: layernorm, rank 2 */
    "input x: tensor<%1$s, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "input b: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-5\n"
    "xf = cast(x) {dtype=float32}\n"
    "v, mu = var_mean(xf) {axes=[1], keepdim=true, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "n = mul(xc, r)\n"
    "wf = cast(w) {dtype=float32}\n"
    "bf = cast(b) {dtype=float32}\n"
    "y0 = mul(n, wf)\n"
    "y1 = add(y0, bf)\n"
    "y = cast(y1) {dtype=%1$s}\n"
    "output y\n",
    /* 1: log-softmax saved beside its log-sum-exp (a row output), rank 2 */
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "ls = log(s)\n"
    "lp = sub(d, ls)\n"
    "lpo = cast(lp) {dtype=%1$s}\n"
    "lse = add(ls, m)\n"
    "output lpo\n"
    "output lse\n",
    /* 2: residual add + RMSNorm, the sum an output too, rank 2 */
    "input x: tensor<%1$s, 2>\n"
    "input res: tensor<%1$s, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-6\n"
    "xf = cast(x) {dtype=float32}\n"
    "rf = cast(res) {dtype=float32}\n"
    "h = add(xf, rf)\n"
    "sq = mul(h, h)\n"
    "ms = mean(sq) {axes=[1], keepdim=true}\n"
    "ve = add(ms, eps)\n"
    "r = rsqrt(ve)\n"
    "n = mul(h, r)\n"
    "wf = cast(w) {dtype=float32}\n"
    "y = mul(n, wf)\n"
    "yo = cast(y) {dtype=%1$s}\n"
    "ho = cast(h) {dtype=%1$s}\n"
    "output yo\n"
    "output ho\n",
    /* 3: softmax over the last dim, rank 3 */
    "input x: tensor<%1$s, 3>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[2], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[2], keepdim=true}\n"
    "p = div(e, s)\n"
    "y = cast(p) {dtype=%1$s}\n"
    "output y\n",
};

static void test_rows_across(void** state) {
  (void)state;
  typedef struct {
    int fusion;
    int64_t shape[3]; /* rank 3 for fusion 3, else the first two */
    int64_t offset;   /* x's storage offset (elements) */
  } across_case;
  static const across_case cases[] = {
      {0, {37, 1000, 0}, 0},    {0, {1000, 4095, 0}, 0}, {0, {5, 300, 0}, 0},  {0, {300, 12288, 0}, 0},
      {0, {64, 768, 0}, 3},     {1, {64, 50257, 0}, 0},  {1, {33, 32000, 0}, 0}, {1, {16, 64, 0}, 0},
      {2, {129, 2560, 0}, 0},   {2, {20, 1600, 0}, 1},   {3, {3, 37, 1000}, 0}, {3, {2, 129, 128}, 0},
      {3, {4, 15, 4100}, 0},
  };
  static const int kRank2[2] = {1, 0}, kRank3[3] = {0, 2, 1};
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int saved = g_row_major_outputs;
  g_row_major_outputs = 1;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int d = 0; d < 2; ++d) {
      const across_case* ac = &cases[c];
      const int rank = ac->fusion == 3 ? 3 : 2;
      char text[4096];
      snprintf(text, sizeof text, kAcrossFusions[ac->fusion], kf_dtype_name(dts[d]));
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      size_t nin = 0, nout = 0;
      KF_CHECK(kf_fusion_num_inputs(f, &nin));
      KF_CHECK(kf_fusion_num_outputs(f, &nout));
      const int64_t width = ac->shape[rank - 1];
      tin in[3];
      in[0] = input(dts[d], rank, ac->shape);
      if (ac->offset > 0) { /* row-major at an odd offset */
        int64_t strides[3], next = 1;
        for (int k = rank - 1; k >= 0; --k) strides[k] = next, next *= ac->shape[k];
        with_strides(&in[0], strides, ac->offset);
      }
      fill(&in[0], -3, 3, 0);
      for (size_t i = 1; i < nin; ++i) {
        in[i] = ac->fusion == 2 && i == 1 ? input(dts[d], rank, ac->shape) : input(dts[d], 1, &width);
        fill(&in[i], 0.5, 1.5, 0);
      }
      /* the across outputs in the caller's order; fusion 1's row output compact */
      const int* orders[2] = {rank == 3 ? kRank3 : kRank2, ac->fusion == 1 ? NULL : kRank2};
      g_out_orders = orders;
      char what[200];
      snprintf(what, sizeof what, "rows across: fusion %d %s [%lld, %lld%s%s] offset %lld", ac->fusion,
               kf_dtype_name(dts[d]), (long long)ac->shape[0], (long long)ac->shape[1], rank == 3 ? ", " : "",
               rank == 3 ? "..." : "", (long long)ac->offset);
      run_case_tol(f, in, nin, what, 16.0 + (double)width / 1024.0, -1);
      g_out_orders = NULL;
      (void)nout;
      free_inputs(in, nin);
      kf_fusion_release(f);
    }
  g_row_major_outputs = saved;
  end_test("rows across");
}

/* Row reductions whose inputs disagree on their innermost dim: the ones
 * across the rows are copied into kfuse's layout first (layout.cpp
 * choose_input_relayouts; the permute copy on the GPU, the CPU backend's
 * copy for the reference), the in-place residual of an add + RMSNorm is
 * not. %1$s: dtype, %2$d: the reduced dim of the rank-3 inputs (2, or 1
 * for fusion 0: a column normalization); fusion 3 takes two more
 * arguments, the others ignore them. */
static const char* kRelayoutFusions[] = {
    /* 0: softmax backward */
    "input dy: tensor<%1$s, 3>\n"
    "input y: tensor<%1$s, 3>\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "yf = cast(y) {dtype=float32}\n"
    "p = mul(dyf, yf)\n"
    "s = sum(p) {axes=[%2$d], keepdim=true}\n"
    "d = sub(dyf, s)\n"
    "dx = mul(yf, d)\n"
    "o = cast(dx) {dtype=%1$s}\n"
    "output o\n",
    /* 1: log_softmax backward (y read only after the row sum) */
    "input dy: tensor<%1$s, 3>\n"
    "input y: tensor<%1$s, 3>\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "yf = cast(y) {dtype=float32}\n"
    "s = sum(dyf) {axes=[%2$d], keepdim=true}\n"
    "e = exp(yf)\n"
    "es = mul(e, s)\n"
    "dx = sub(dyf, es)\n"
    "o = cast(dx) {dtype=%1$s}\n"
    "output o\n",
    /* 2: layer norm backward recomputing its statistics, with weight grad */
    "input dy: tensor<%1$s, 3>\n"
    "input x: tensor<%1$s, 3>\n"
    "input w: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-5\n"
    "dyf = cast(dy) {dtype=float32}\n"
    "xf = cast(x) {dtype=float32}\n"
    "wf = cast(w) {dtype=float32}\n"
    "v, mu = var_mean(xf) {axes=[%2$d], keepdim=true, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "xhat = mul(xc, r)\n"
    "g = mul(dyf, wf)\n"
    "gx = mul(g, xhat)\n"
    "s1 = mean(g) {axes=[%2$d], keepdim=true}\n"
    "s2 = mean(gx) {axes=[%2$d], keepdim=true}\n"
    "a = sub(g, s1)\n"
    "b = mul(xhat, s2)\n"
    "c = sub(a, b)\n"
    "dx = mul(c, r)\n"
    "o = cast(dx) {dtype=%1$s}\n"
    "dyx = mul(dyf, xhat)\n"
    "dw = sum(dyx) {axes=[0, 1], keepdim=false}\n"
    "output o\n"
    "output dw\n",
    /* 3: residual add + RMSNorm, the sum an output too (%3$s, %4$s: each
       output's attributes, written in place into x and the residual in
       c0056's class, where neither is copied) */
    "input x: tensor<%1$s, 3>\n"
    "input res: tensor<%1$s, 3>\n"
    "input w: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-6\n"
    "xf = cast(x) {dtype=float32}\n"
    "rf = cast(res) {dtype=float32}\n"
    "h = add(xf, rf)\n"
    "sq = mul(h, h)\n"
    "ms = mean(sq) {axes=[%2$d], keepdim=true}\n"
    "ve = add(ms, eps)\n"
    "r = rsqrt(ve)\n"
    "n = mul(h, r)\n"
    "wf = cast(w) {dtype=float32}\n"
    "y = mul(n, wf)\n"
    "yo = cast(y) {dtype=%1$s}\n"
    "ho = cast(h) {dtype=%1$s}\n"
    "output yo%3$s\n"
    "output ho%4$s\n",
};

/* x of rank-3 `shape` laid out in `order` (dims outermost first), its
 * innermost dim padded by `pad` elements, `offset` elements in. */
static tin laid_out_input(kf_dtype dt, const int64_t* shape, const int* order, int64_t pad, int64_t offset) {
  tin t = input(dt, 3, shape);
  int64_t strides[3], next = 1;
  for (int k = 2; k >= 0; --k) {
    strides[order[k]] = next;
    next *= shape[order[k]] + (k == 2 ? pad : 0);
  }
  with_strides(&t, strides, offset);
  return t;
}

typedef struct {
  int fusion;
  int64_t shape[3];
  int order[2][3]; /* the two full-size inputs' layouts */
  int64_t pad[2], offset[2];
  int in_place; /* fusion 3's outputs written into x and the residual */
  int dim;      /* the reduced dim */
} relayout_case;

static void test_relayout_inputs(void** state) {
  (void)state;
  static const relayout_case cases[] = {
      /* c0061's class: y column-major */
      {0, {1, 300, 1000}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {0, 0}, 0, 2},
      {0, {4, 37, 4100}, {{0, 1, 2}, {2, 0, 1}}, {0, 3}, {17, 5}, 0, 2},
      {0, {2, 8, 70000}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {0, 0}, 0, 2}, /* split rows */
      /* dy across the rows instead, y at an offset (c0036's class) */
      {0, {3, 129, 2048}, {{0, 2, 1}, {0, 1, 2}}, {1, 0}, {0, 2049}, 0, 2},
      /* c0178's class */
      {1, {1, 64, 30001}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {0, 0}, 0, 2},
      {1, {2, 100, 1024}, {{0, 1, 2}, {1, 2, 0}}, {8, 0}, {0, 3}, 0, 2},
      /* c0047 and c0142's class, with the weight grad's column sums */
      {2, {8, 64, 768}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {0, 0}, 0, 2},
      {2, {2, 129, 1000}, {{0, 1, 2}, {2, 0, 1}}, {3, 0}, {0, 1}, 0, 2},
      /* dy across, x row-major (c0050's class) */
      {2, {2, 33, 1536}, {{0, 2, 1}, {0, 1, 2}}, {0, 0}, {0, 0}, 0, 2},
      /* c0026's class: x at an offset, the residual permuted */
      {3, {4, 96, 2560}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {17, 0}, 0, 2},
      {3, {1, 4, 12288}, {{0, 1, 2}, {0, 2, 1}}, {0, 1}, {0, 0}, 0, 2},
      /* c0008's class: the middle dim, y with it innermost */
      {0, {8, 100, 1024}, {{0, 1, 2}, {2, 0, 1}}, {0, 0}, {17, 0}, 0, 1},
      {0, {3, 1000, 130}, {{0, 1, 2}, {2, 0, 1}}, {0, 0}, {0, 0}, 0, 1},
      /* c0056's class: in place, not copied */
      {3, {2, 64, 2560}, {{0, 1, 2}, {0, 2, 1}}, {0, 0}, {0, 0}, 1, 2},
  };
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int saved = g_row_major_outputs;
  for (int mode = 0; mode < 2; ++mode) {
    g_row_major_outputs = mode;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
      for (int d = 0; d < 2; ++d) {
        const relayout_case* rc = &cases[c];
        char text[4096];
        const int dim = rc->dim;
        snprintf(text, sizeof text, kRelayoutFusions[rc->fusion], kf_dtype_name(dts[d]), dim,
                 rc->in_place ? " {alias=0}" : "", rc->in_place ? " {alias=1}" : "");
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        size_t nin = 0;
        KF_CHECK(kf_fusion_num_inputs(f, &nin));
        tin in[3];
        for (int i = 0; i < 2; ++i) {
          in[i] = laid_out_input(dts[d], rc->shape, rc->order[i], rc->pad[i], rc->offset[i]);
          fill(&in[i], -2, 2, 0);
        }
        if (nin == 3) {
          in[2] = input(dts[d], 1, &rc->shape[2]);
          fill(&in[2], 0.5, 1.5, 0);
        }
        char what[240];
        snprintf(what, sizeof what,
                 "relayout inputs: fusion %d dim %d %s [%lld,%lld,%lld] orders [%d,%d,%d] [%d,%d,%d] pads %lld %lld offsets "
                 "%lld %lld%s, %s outputs",
                 rc->fusion, dim, kf_dtype_name(dts[d]), (long long)rc->shape[0], (long long)rc->shape[1],
                 (long long)rc->shape[2], rc->order[0][0], rc->order[0][1], rc->order[0][2], rc->order[1][0],
                 rc->order[1][1], rc->order[1][2], (long long)rc->pad[0], (long long)rc->pad[1],
                 (long long)rc->offset[0], (long long)rc->offset[1], rc->in_place ? ", in place" : "",
                 mode ? "row-major" : "kfuse's");
        const double length = (double)rc->shape[dim];
        run_case_tol(f, in, nin, what, 16.0 + length / 1024.0 + (rc->fusion == 2 ? rc->shape[0] * rc->shape[1] / 64.0 : 0),
                     -1);
        free_inputs(in, nin);
        kf_fusion_release(f);
      }
  }
  g_row_major_outputs = saved;
  end_test("relayout inputs");
}

/* Row inputs aligned to less than a vector (a storage offset of 1, 3 or 5
 * elements, rows padded to an odd stride), which the vector plans leave
 * out (vector_plan.cpp): means, softmax, log_softmax, layer and RMS norm
 * over rows of register, staged, streamed and split lengths. */
static void test_unaligned_rows(void** state) {
  (void)state;
  const int64_t shapes[][2] = {{300, 1000}, {7, 4096}, {33, 30001}, {5, 200000}};
  const int64_t offsets[] = {1, 3, 5};
  const int64_t pads[] = {0, 1, 3};
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int fusions[] = {5, 1, 2, 3, 4};
  for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; ++sh)
    for (int d = 0; d < 2; ++d)
      for (size_t o = 0; o < sizeof offsets / sizeof offsets[0]; ++o)
        for (size_t pd = 0; pd < sizeof pads / sizeof pads[0]; ++pd) {
          if (sh >= 2 && o > 0 && pd > 0) continue; /* (long rows: fewer combinations) */
          const int fu = fusions[(sh + o + pd) % 5];
          char text[2048];
          snprintf(text, sizeof text, kOrderFusions[fu], kf_dtype_name(dts[d]), 2, "[1]");
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in = input(dts[d], 2, shapes[sh]);
          const int64_t strides[2] = {shapes[sh][1] + pads[pd], 1};
          with_strides(&in, strides, offsets[o]);
          fill(&in, -3, 3, 0);
          char what[200];
          snprintf(what, sizeof what, "unaligned rows: fusion %d %s [%lld,%lld] offset %lld row stride %lld", fu,
                   kf_dtype_name(dts[d]), (long long)shapes[sh][0], (long long)shapes[sh][1], (long long)offsets[o],
                   (long long)strides[0]);
          run_case_tol(f, &in, 1, what, 16.0 + (double)shapes[sh][1] / 1024.0, -1);
          free_inputs(&in, 1);
          kf_fusion_release(f);
        }
  /* Inputs at different shifts in one row: a padded or offset x beside a
   * contiguous residual and a weight (the Edges kernels load each input
   * at its own row's shift, kf_vload_any; the outputs are the reference).
   * Widths held in registers and staged as long rows. */
  static const char* add_rmsnorm =
      "input x: tensor<%s, 2>\ninput r: tensor<%s, 2>\ninput w: tensor<%s, 1>\n"
      "xf = cast(x) {dtype=float32}\nrf = cast(r) {dtype=float32}\nh = add(xf, rf)\n"
      "sq = mul(h, h)\nms = mean(sq) {axes=[1], keepdim=true}\nrs = rsqrt(ms)\nn = mul(h, rs)\n"
      "wf = cast(w) {dtype=float32}\no = mul(n, wf)\ny = cast(o) {dtype=%s}\nhh = cast(h) {dtype=%s}\n"
      "output y\noutput hh\n";
  const int64_t widths[] = {1000, 4096, 12288, 30001};
  for (size_t k = 0; k < sizeof widths / sizeof widths[0]; ++k)
    for (int d = 0; d < 2; ++d)
      for (int v = 0; v < 3; ++v) {
        const char* dn = kf_dtype_name(dts[d]);
        char text[2048];
        snprintf(text, sizeof text, add_rmsnorm, dn, dn, dn, dn, dn);
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        const int64_t shape[2] = {37, widths[k]};
        tin in[3] = {input(dts[d], 2, shape), input(dts[d], 2, shape), input(dts[d], 1, &shape[1])};
        /* v 0: x padded by 3; 1: x at an offset of 1, r padded by 1; 2: the weight at an offset of 3. */
        const int64_t xs[2] = {widths[k] + (v == 0 ? 3 : 0), 1}, rs[2] = {widths[k] + (v == 1 ? 1 : 0), 1}, ws[1] = {1};
        with_strides(&in[0], xs, v == 1 ? 1 : 0);
        with_strides(&in[1], rs, 0);
        with_strides(&in[2], ws, v == 2 ? 3 : 0);
        for (int i = 0; i < 3; ++i) fill(&in[i], -2, 2, 0);
        char what[200];
        snprintf(what, sizeof what, "unaligned rows: add_rmsnorm %s [37,%lld] variant %d", dn, (long long)widths[k], v);
        run_case_tol(f, in, 3, what, 16.0 + (double)widths[k] / 1024.0, -1);
        free_inputs(in, 3);
        kf_fusion_release(f);
      }
  /* Rows read twice with only row outputs, at offsets that misalign every
   * row the same way (row stride a multiple of the vector): a log-sum-exp
   * (one streamed online pass) and an argmax of a scaled float16 row (two
   * phases), each misaligned input joining the row's vector plan and
   * peeled by the Edges kernels (seed 1414814702 c0130, c0124). */
  static const char* const row_outputs_only[] = {
      "input x: tensor<%s, 2>\nxf = cast(x) {dtype=float32}\nm = max(xf) {axes=[1], keepdim=true}\n"
      "d = sub(xf, m)\ne = exp(d)\ns = sum(e) {axes=[1], keepdim=true}\nls = log(s)\nlse = add(ls, m)\n"
      "output lse\n",
      "input x: tensor<%s, 2>\nconst t: float32 = 0.7\nxf = cast(x) {dtype=float32}\nq = div(xf, t)\n"
      "i = argmax(q) {axes=[1], keepdim=false}\noutput i\n",
  };
  const int64_t ro_shapes[][2] = {{64, 1000}, {40, 14336}, {24, 32000}, {3, 200000}};
  const int64_t ro_offsets[] = {3, 4097};
  for (int fu = 0; fu < 2; ++fu)
    for (size_t k = 0; k < sizeof ro_shapes / sizeof ro_shapes[0]; ++k)
      for (int d = 0; d < 2; ++d)
        for (size_t o = 0; o < 2; ++o) {
          const kf_dtype dt = fu == 1 && d == 0 ? KF_FLOAT16 : dts[d];
          char text[1024];
          snprintf(text, sizeof text, row_outputs_only[fu], kf_dtype_name(dt));
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in = input(dt, 2, ro_shapes[k]);
          const int64_t strides[2] = {ro_shapes[k][1], 1};
          with_strides(&in, strides, ro_offsets[o]);
          fill(&in, -3, 3, 0);
          char what[200];
          snprintf(what, sizeof what, "unaligned rows: %s %s [%lld,%lld] offset %lld", fu == 0 ? "logsumexp" : "argmax",
                   kf_dtype_name(dt), (long long)ro_shapes[k][0], (long long)ro_shapes[k][1],
                   (long long)ro_offsets[o]);
          run_case_tol(f, &in, 1, what, 16.0 + (double)ro_shapes[k][1] / 1024.0, -1);
          free_inputs(&in, 1);
          kf_fusion_release(f);
        }
  /* A layernorm's float32 weight and bias at an offset of one or two
   * floats beside an aligned x (VectorPlan::any_aligned: vector inputs
   * loaded at any alignment, kf_vload_any, in every row kernel): rows held
   * in registers, staged, long and in clusters (few rows). */
  static const char* layernorm =
      "input x: tensor<%s, 2>\ninput w: tensor<float32, 1>\ninput b: tensor<float32, 1>\n"
      "xf = cast(x) {dtype=float32}\nm = mean(xf) {axes=[1], keepdim=true}\nxc = sub(xf, m)\nsq = mul(xc, xc)\n"
      "va = mean(sq) {axes=[1], keepdim=true}\nrs = rsqrt(va)\nn = mul(xc, rs)\no = mul(n, w)\nob = add(o, b)\n"
      "y = cast(ob) {dtype=%s}\noutput y\n";
  const int64_t ln_shapes[][2] = {{600, 1024}, {600, 8192}, {37, 12288}, {300, 30000}};
  for (size_t k = 0; k < sizeof ln_shapes / sizeof ln_shapes[0]; ++k)
    for (int d = 0; d < 2; ++d)
      for (int64_t off = 1; off <= 2; ++off) {
        const char* dn = kf_dtype_name(dts[d]);
        char text[2048];
        snprintf(text, sizeof text, layernorm, dn, dn);
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[3] = {input(dts[d], 2, ln_shapes[k]), input(KF_FLOAT32, 1, &ln_shapes[k][1]),
                     input(KF_FLOAT32, 1, &ln_shapes[k][1])};
        const int64_t ws[1] = {1};
        with_strides(&in[1], ws, off);
        with_strides(&in[2], ws, off);
        for (int i = 0; i < 3; ++i) fill(&in[i], -2, 2, 0);
        char what[200];
        snprintf(what, sizeof what, "unaligned rows: layernorm %s [%lld,%lld], float32 weight and bias at offset %lld",
                 dn, (long long)ln_shapes[k][0], (long long)ln_shapes[k][1], (long long)off);
        run_case_tol(f, in, 3, what, 16.0 + (double)ln_shapes[k][1] / 1024.0, -1);
        free_inputs(in, 3);
        kf_fusion_release(f);
      }
  end_test("unaligned rows");
}

/* Rows too long for one block's shared memory, or too few to fill the
 * device, shared by the blocks of a thread-block cluster on sm_90
 * (RowKernel::Cluster, launch.h cluster_blocks): each block stages and
 * reduces its part, the parts' values combine over the cluster. The
 * layernorm (two-pass variance on the staged path) and softmax (two
 * phases) of kSplitRows, over rows and batch-norm layouts. On an H100 or
 * H200 (132 multiprocessors, 227 KB): 100 x 20000 float32 takes clusters
 * of 2 (its bfloat16 twin: registers), 256 x 60000 and 4 x 300 x 20000
 * bfloat16 clusters of 4, the others clusters of 8; 4 x 300 x 20001 is an
 * odd length along a reduced dim of the batch-norm layout (no Edges
 * kernel there: the cluster kernel's element path). 300 x 16392 float32:
 * rows one block could stage, in clusters of 2 for softmax (an online pair
 * with an output pass: RowParams::cluster_stageable) and one block each
 * for layernorm. On older devices the same calls take the long-row or
 * split-row kernels. */
static void test_cluster_rows(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int64_t shapes[][3] = {{100, 20000, 0}, {256, 60000, 0}, {40, 200000, 0},
                               {4, 300, 20000}, {4, 300, 20001}, {2, 24, 100000}, {300, 16392, 0}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < 2; ++k)
    for (int d = 0; d < 2; ++d)
      for (int s = 0; s < kShapes; ++s) {
        const int rank3 = shapes[s][2] > 0;
        /* The blocks' values combine in a fixed order: the same bytes twice. */
        row_case("cluster rows", k, dts[d], shapes[s], rank3 ? "[0, 2]" : "[1]",
                 (double)(rank3 ? shapes[s][0] * shapes[s][2] : shapes[s][1]), 1);
      }
  /* A bfloat16 input staged for a float32 output: its vectors are 8 bytes,
   * and the cluster kernel's cp.async copied 16 from each (a misaligned
   * shared store: found by the generated corpus, seed 333280337). */
  const int64_t narrow[][3] = {{511, 32768, 0}, {256, 60000, 0}};
  for (int s = 0; s < 2; ++s) row_case("cluster rows", 3, KF_BFLOAT16, narrow[s], "[1]", (double)narrow[s][1], 1);
  end_test("cluster rows");
}

/* Short rows (QK-norm's head_dim, a few hundred elements at most): rows
 * that need at most a warp at the register path's row_items take the
 * short-row kernel, several rows per block, each reduced within its group
 * of threads by shuffles (KernelPlan::short_rows_name). Softmax,
 * log_softmax, RMSNorm with a weight, layer norm (var_mean), sum, max,
 * var and argmax over rows of 1 to 256 elements, row counts that are not multiples
 * of the rows per block (whose last groups compute a row again and must
 * not store it), in float32, bfloat16 and float16. Widths the vectors do
 * not divide (1, 3, bfloat16 100) take the Edges or scalar kernels. */
static const char* const kShortRows[] = {
    /* log-sum-exp: one pass, no output per element (a streamed plan) */
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "ls = log(s)\n"
    "lse = add(ls, m)\n"
    "y = cast(lse) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "p = div(e, s)\n"
    "y = cast(p) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "ls = log(s)\n"
    "y = sub(d, ls)\n"
    "yc = cast(y) {dtype=%1$s}\n"
    "output yc\n",
    "input x: tensor<%1$s, 2>\n"
    "input w: tensor<%1$s, 1>\n"
    "const eps: float32 = 1e-6\n"
    "xf = cast(x) {dtype=float32}\n"
    "wf = cast(w) {dtype=float32}\n"
    "sq = mul(xf, xf)\n"
    "ms = mean(sq) {axes=[1], keepdim=true}\n"
    "me = add(ms, eps)\n"
    "r = rsqrt(me)\n"
    "n = mul(xf, r)\n"
    "nw = mul(n, wf)\n"
    "y = cast(nw) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, 2>\n"
    "const eps: float32 = 1e-5\n"
    "xf = cast(x) {dtype=float32}\n"
    "v, mu = var_mean(xf) {axes=[1], keepdim=true, correction=0}\n"
    "ve = add(v, eps)\n"
    "r = rsqrt(ve)\n"
    "xc = sub(xf, mu)\n"
    "n = mul(xc, r)\n"
    "y = cast(n) {dtype=%1$s}\n"
    "output y\n"
    "output mu\n"
    "output r\n",
    "input x: tensor<%1$s, 2>\n"
    "s = sum(x) {axes=[1], keepdim=false}\n"
    "output s\n",
    "input x: tensor<%1$s, 2>\n"
    "m = max(x) {axes=[1], keepdim=true}\n"
    "output m\n",
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "v = var(xf) {axes=[1], keepdim=false, correction=1}\n"
    "output v\n",
    /* a max, then the least index holding it (values on a 1/16 grid: ties) */
    "input x: tensor<%1$s, 2>\n"
    "i = argmax(x) {axes=[1], keepdim=false}\n"
    "output i\n",
};

static void test_short_rows(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT16};
  const int64_t lengths[] = {1, 3, 8, 32, 64, 100, 112, 128, 256};
  const int64_t rows[] = {1, 7, 1000, 100003};
  const char* const names[] = {"logsumexp", "softmax", "log_softmax", "rmsnorm", "layernorm", "sum", "max", "var", "argmax"};
  for (size_t k = 0; k < sizeof kShortRows / sizeof kShortRows[0]; ++k)
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; ++d) {
      char text[2048];
      snprintf(text, sizeof text, kShortRows[k], kf_dtype_name(dts[d]));
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      const int weight = strstr(text, "input w") != NULL;
      for (size_t n = 0; n < sizeof lengths / sizeof lengths[0]; ++n)
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; ++r) {
          /* (the many rows at one thread and at several per row only: the
           * CPU reference's time) */
          if (rows[r] > 1000 && lengths[n] != 8 && lengths[n] != 128) continue;
          const int64_t shape[2] = {rows[r], lengths[n]};
          tin in[2];
          in[0] = input(dts[d], 2, shape);
          fill(&in[0], -3, 3, 0);
          if (weight) {
            in[1] = input(dts[d], 1, &lengths[n]);
            fill(&in[1], -2, 2, 0);
          }
          char what[160];
          snprintf(what, sizeof what, "short rows %s %s [%lld, %lld]", names[k], kf_dtype_name(dts[d]),
                   (long long)rows[r], (long long)lengths[n]);
          run_case_tol(f, in, weight ? 2 : 1, what, 2.0, -1);
          free_inputs(in, weight ? 2 : 1);
        }
      kf_fusion_release(f);
    }
  end_test("short rows");
}

/* Reshapes as the sizes group their dims (reshape_groups.h): dims kept
 * whole pass their index through, split and merged dims index
 * arithmetically, a regrouping with no common factor unravels the whole
 * linear index; in pointwise kernels, a group norm (rows over a split
 * dim, its output reshaped back: two segments) and a row sum. */
static const struct {
  const char* text;
  int rank;
  int64_t shape[3];
} kReshapes[] = {
    {"input x: tensor<float32, 3>\nconst a: int64 = 6\nconst r: int64 = -1\n"
     "y = reshape(x, [a, r])\nz = mul(y, y)\noutput z\n", 3, {6, 7, 130}},
    {"input x: tensor<float32, 2>\nconst a: int64 = 5\nconst b: int64 = 7\nconst r: int64 = -1\n"
     "y = reshape(x, [a, b, r])\nz = add(y, y)\noutput z\n", 2, {5, 7 * 96}},
    {"input x: tensor<bfloat16, 3>\nconst a: int64 = 9\nconst r: int64 = -1\n"
     "y = reshape(x, [a, r])\nyf = cast(y) {dtype=float32}\nz = exp(yf)\noutput z\n", 3, {9, 1, 4000}},
    {"input x: tensor<float32, 2>\nconst a: int64 = 4\nconst b: int64 = 15\n"
     "y = reshape(x, [a, b])\nz = neg(y)\noutput z\n", 2, {6, 10}},
    {"input x: tensor<bfloat16, 3>\nconst b: int64 = 2\nconst g: int64 = 4\nconst pg: int64 = 6\n"
     "const c: int64 = 24\nconst r: int64 = -1\nconst eps: float32 = 1e-5\n"
     "xf = cast(x) {dtype=float32}\nxg = reshape(xf, [b, g, pg, r])\n"
     "v, mu = var_mean(xg) {axes=[2, 3], keepdim=true, correction=0}\n"
     "ve = add(v, eps)\nrs = rsqrt(ve)\nxc = sub(xg, mu)\nn = mul(xc, rs)\n"
     "nc = cast(n) {dtype=bfloat16}\ny = reshape(nc, [b, c, r])\noutput y\noutput mu\n", 3, {2, 24, 5000}},
    {"input x: tensor<float32, 3>\nconst b: int64 = 3\nconst r: int64 = -1\n"
     "xg = reshape(x, [b, r])\ns = sum(xg) {axes=[1], keepdim=false}\noutput s\n", 3, {3, 40, 1001}},
};

static void test_reshapes(void** state) {
  (void)state;
  for (size_t k = 0; k < sizeof kReshapes / sizeof kReshapes[0]; ++k) {
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(kReshapes[k].text, &f));
    kf_value_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    KF_CHECK(kf_fusion_input(f, 0, &info));
    tin in = input(info.dtype, kReshapes[k].rank, kReshapes[k].shape);
    fill(&in, -2, 2, 0);
    char what[64];
    snprintf(what, sizeof what, "reshape case %zu", k);
    run_case_tol(f, &in, 1, what, 64.0, -1);
    free_inputs(&in, 1);
    kf_fusion_release(f);
  }
  end_test("reshapes");
}

/* exp(x) | segment_set | + y, then a sum: more than one segment, with an
 * intermediate the executor allocates; also through a caller allocator. */
typedef struct {
  int allocs, frees;
} counting_allocator;

static int counting_alloc(void* ctx, size_t bytes, int device, void* stream, void** ptr) {
  (void)device;
  (void)stream;
  ((counting_allocator*)ctx)->allocs++;
  gpu_deviceptr p = 0;
  if (gpu.mem_alloc(&p, bytes) != 0) return 1;
  *ptr = (void*)(uintptr_t)p;
  return 0;
}

static void counting_free(void* ctx, void* ptr, size_t bytes, int device, void* stream) {
  (void)bytes;
  (void)device;
  /* The memory may still be in use by work queued on the stream. */
  gpu.stream_sync((gpu_stream)stream);
  ((counting_allocator*)ctx)->frees++;
  gpu.mem_free((gpu_deviceptr)(uintptr_t)ptr);
}

/* Online softmax pairs (core/schedule/online_softmax.h): max and the sum
 * of exp(x - max) in one pass on the register path, the other paths in
 * two phases: a log-sum-exp with keepdim (cross-entropy's), one through an
 * unsqueezed max, and a log-softmax (its output re-reads x - max). Rows
 * holding -inf in part, -inf only, +inf, NaN, and -inf everywhere but the
 * last element must give the two-phase results (NaN where the definition
 * takes exp(-inf - -inf) or exp(inf - inf)). Lengths: cached rows (1000,
 * 32000 bfloat16, 4097), rows of 3, and 50000 (shared memory or memory). */
static const char* const kOnlineSoftmax[] = {
    "input x: tensor<%s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "ls = log(s)\n"
    "lse = add(m, ls)\n"
    "output lse\n"
    "output s\n",
    "input x: tensor<%s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=false}\n"
    "mu = unsqueeze(m) {dim=1}\n"
    "d = sub(xf, mu)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=false}\n"
    "ls = log(s)\n"
    "lse = add(m, ls)\n"
    "output lse\n",
    "input x: tensor<%s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "m = max(xf) {axes=[1], keepdim=true}\n"
    "d = sub(xf, m)\n"
    "e = exp(d)\n"
    "s = sum(e) {axes=[1], keepdim=true}\n"
    "ls = log(s)\n"
    "y = sub(d, ls)\n"
    "yc = cast(y) {dtype=%s}\n"
    "output yc\n",
};

/* Runs `text` (one input x of dtype dt and shape [rows, n]) on x in
 * [-8, 8] with special lines, each a row (over_rows) or a column, as the
 * fusion's softmax reduces them: line 1 holds -inf in part, 2 -inf only,
 * 3 one +inf, 4 one NaN, 5 -inf everywhere but its last element (the
 * lines that exist). */
static void run_online_case(const char* text, kf_dtype dt, const int64_t* shape, int over_rows, const char* what,
                            double tol) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  tin in = input(dt, 2, shape);
  fill(&in, -8, 8, 0);
  const int64_t n = shape[1], lines = over_rows ? shape[0] : shape[1], len = over_rows ? shape[1] : shape[0];
  const size_t e = (size_t)dtype_bytes(dt);
  char* x = (char*)in.host;
#define AT(l, i) (x + ((size_t)(over_rows ? (l) : (i)) * (size_t)n + (size_t)(over_rows ? (i) : (l))) * e)
  if (lines > 1) {
    store(dt, AT(1, len / 3), -INFINITY);
    store(dt, AT(1, len - 1), -INFINITY);
  }
  for (int64_t i = 0; lines > 2 && i < len; ++i) store(dt, AT(2, i), -INFINITY);
  if (lines > 3) store(dt, AT(3, len / 2), INFINITY);
  if (lines > 4) store(dt, AT(4, 0), NAN);
  if (lines > 5) {
    for (int64_t i = 0; i + 1 < len; ++i) store(dt, AT(5, i), -INFINITY);
    store(dt, AT(5, len - 1), 1.0);
  }
#undef AT
  run_case_tol(f, &in, 1, what, tol, -1);
  free_inputs(&in, 1);
  kf_fusion_release(f);
}

static void test_online_softmax(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int64_t shapes[][2] = {{64, 1000}, {9, 32000}, {33, 4097}, {40, 3}, {7, 50000}, {13, 50257}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 2; ++d)
      for (int sh = 0; sh < kShapes; ++sh) {
        char text[1024], what[160];
        snprintf(text, sizeof text, kOnlineSoftmax[k], kf_dtype_name(dts[d]), kf_dtype_name(dts[d]));
        snprintf(what, sizeof what, "online softmax %d %s [%lld,%lld]", k, kf_dtype_name(dts[d]),
                 (long long)shapes[sh][0], (long long)shapes[sh][1]);
        run_online_case(text, dts[d], shapes[sh], 1, what, 16.0 + (double)shapes[sh][1] / 1024.0);
      }
  end_test("online softmax");
}

/* The fast forms (core/ir/approx_math.h) end to end: fusions whose
 * exp, sigmoid, silu or shared division take their fast form, with only
 * bfloat16/float16 outputs, store the CPU reference's correctly rounded
 * result or its neighbour (at most 1 ulp apart: the CPU computes in
 * float64, the GPU in float32 with sums in another order). Softmax over
 * rows and over columns (online pairs, odd widths: the scalar twins),
 * silu(x) * g and sigmoid, over inputs that take exp from about 1e-35 up
 * to the edge of float32's range. */
static void test_fast_forms(void** state) {
  (void)state;
  static const char* kSoftmax =
      "input x: tensor<%1$s, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[%2$d], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[%2$d], keepdim=true}\n"
      "p = div(e, s)\n"
      "y = cast(p) {dtype=%1$s}\n"
      "output y\n";
  static const char* kSiluGate =
      "input x: tensor<%1$s, 2>\n"
      "input g: tensor<%1$s, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "gf = cast(g) {dtype=float32}\n"
      "s = silu(xf)\n"
      "p = mul(s, gf)\n"
      "y = cast(p) {dtype=%1$s}\n"
      "output y\n";
  static const char* kSigmoid =
      "input x: tensor<%1$s, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "s = sigmoid(xf)\n"
      "y = cast(s) {dtype=%1$s}\n"
      "output y\n";
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT16};
  const int64_t shapes[][2] = {{64, 1000}, {33, 3001}, {300, 1000}, {257, 77}};
  g_max_ulps = 1;
  for (int d = 0; d < 2; ++d)
    for (int sh = 0; sh < 4; ++sh)
      for (int k = 0; k < 4; ++k) {
        char text[1024], what[160];
        const char* name = k < 2 ? (k == 0 ? "softmax rows" : "softmax columns") : k == 2 ? "silu gate" : "sigmoid";
        if (k < 2) snprintf(text, sizeof text, kSoftmax, kf_dtype_name(dts[d]), k == 0 ? 1 : 0);
        else snprintf(text, sizeof text, k == 2 ? kSiluGate : kSigmoid, kf_dtype_name(dts[d]));
        snprintf(what, sizeof what, "fast forms: %s %s [%lld,%lld]", name, kf_dtype_name(dts[d]),
                 (long long)shapes[sh][0], (long long)shapes[sh][1]);
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[2];
        in[0] = input(dts[d], 2, shapes[sh]);
        in[1] = input(dts[d], 2, shapes[sh]);
        fill(&in[0], k < 2 ? -40 : -80, k < 2 ? 40 : 80, 0);
        fill(&in[1], -4, 4, 0);
        run_case(f, in, k == 2 ? 2 : 1, what);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  g_max_ulps = 0;
  end_test("fast forms");
}

/* Online pairs over columns (ColumnParams::online): softmax over dim 0
 * with float32 math, its max and sum in one phase of column partials,
 * combined per split and across splits as kf_online, with the special
 * columns of run_online_case; vector tiles (2056, 64 columns), the scalar
 * twin (1001, 3), many splits of the rows (3000) and few (5). */
static void test_online_column_softmax(void** state) {
  (void)state;
  static const char* kText =
      "input x: tensor<%1$s, 2>\n"
      "xf = cast(x) {dtype=float32}\n"
      "m = max(xf) {axes=[0], keepdim=true}\n"
      "d = sub(xf, m)\n"
      "e = exp(d)\n"
      "s = sum(e) {axes=[0], keepdim=true}\n"
      "p = div(e, s)\n"
      "y = cast(p) {dtype=%1$s}\n"
      "ls = log(s)\n"
      "lse = add(m, ls)\n"
      "output y\n"
      "output lse\n";
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int64_t shapes[][2] = {{1000, 64}, {3000, 2056}, {5, 1001}, {40, 3}, {700, 8}};
  enum { kShapes = sizeof shapes / sizeof shapes[0] };
  for (int d = 0; d < 2; ++d)
    for (int sh = 0; sh < kShapes; ++sh) {
      char text[1024], what[160];
      snprintf(text, sizeof text, kText, kf_dtype_name(dts[d]));
      snprintf(what, sizeof what, "online column softmax %s [%lld,%lld]", kf_dtype_name(dts[d]),
               (long long)shapes[sh][0], (long long)shapes[sh][1]);
      run_online_case(text, dts[d], shapes[sh], 0, what, 16.0 + (double)shapes[sh][0] / 64.0);
    }
  end_test("online column softmax");
}

/* Lanes shifted along the vector dim (KernelWriter::shifted_lanes): RoPE's
 * rotate_half, cat(-x[..., h:], x[..., :h]), times a float32 table; a cat
 * of three slices (x[..., a:], x[..., :a] with a middle piece); and a
 * slice at an offset. Widths whose halves are multiples of the vector
 * width (128, 96, 8) take the shifted vector loads; others (100, 6, 130)
 * fail the run-time conditions and take the scalar loop. */
static const char* const kShifted[] = {
    "input x: tensor<%1$s, 3>\n"
    "input c: tensor<float32, 2>\n"
    "cu = unsqueeze(c) {dim=1}\n"
    "xf = cast(x) {dtype=float32}\n"
    "x1 = slice(xf) {dim=2, start=0, stop=%2$d}\n"
    "x2 = slice(xf) {dim=2, start=%2$d, stop=end}\n"
    "n2 = neg(x2)\n"
    "r = cat(n2, x1) {dim=2}\n"
    "a = mul(xf, cu)\n"
    "b = mul(r, cu)\n"
    "y = add(a, b)\n"
    "yc = cast(y) {dtype=%1$s}\n"
    "output yc\n",
    "input x: tensor<%1$s, 3>\n"
    "input c: tensor<float32, 2>\n"
    "cu = unsqueeze(c) {dim=1}\n"
    "xf = cast(x) {dtype=float32}\n"
    "x1 = slice(xf) {dim=2, start=0, stop=%2$d}\n"
    "x2 = slice(xf) {dim=2, start=%2$d, stop=%3$d}\n"
    "x3 = slice(xf) {dim=2, start=%3$d, stop=end}\n"
    "r = cat(x3, x2, x1) {dim=2}\n"
    "y = mul(r, cu)\n"
    "yc = cast(y) {dtype=%1$s}\n"
    "output yc\n",
};

/* float8 storage: casts to and from both formats (the values sweep past
 * each format's range: NaN for e4m3fn, inf for e5m2), math on float8
 * tensors (rounded to the format after each op), and per-tensor dynamic
 * quantization (amax, scale, cast) with its dequantization. The vector
 * path (aligned, last dim a multiple of 16) and the scalar one (odd
 * widths). Every template names %1$s: glibc's fortified printf aborts on
 * a format that uses %2$s without %1$s. Not yet run on a device (session 7 had no device time left):
 * the next device run checks it. */
static const char* const kFloat8[] = {
    "input x: tensor<%1$s, 2>\n"
    "q = cast(x) {dtype=%2$s}\n"
    "y = cast(q) {dtype=float32}\n"
    "output q\n"
    "output y\n",
    "# math on %2$s (the source dtype %1$s is not used)\n"
    "input a: tensor<%2$s, 2>\n"
    "input b: tensor<%2$s, 2>\n"
    "c = mul(a, b)\n"
    "d = add(c, a)\n"
    "e = exp(b)\n"
    "output d\n"
    "output e\n",
    "input x: tensor<%1$s, 2>\n"
    "xf = cast(x) {dtype=float32}\n"
    "ax = abs(xf)\n"
    "amax = max(ax) {axes=[0, 1], keepdim=true}\n"
    "const tiny: float32 = 1e-12\n"
    "am = maximum(amax, tiny)\n"
    "const fmax: float32 = 448\n"
    "scale = div(fmax, am)\n"
    "xs = mul(xf, scale)\n"
    "y = cast(xs) {dtype=%2$s}\n"
    "yf = cast(y) {dtype=float32}\n"
    "inv = div(am, fmax)\n"
    "back = mul(yf, inv)\n"
    "output y\n"
    "output back\n",
};

static void test_float8(void** state) {
  (void)state;
  const kf_dtype src[] = {KF_FLOAT32, KF_BFLOAT16};
  const kf_dtype f8[] = {KF_FLOAT8_E4M3FN, KF_FLOAT8_E5M2};
  const int64_t shapes[][2] = {{64, 512}, {33, 100}, {1, 17}, {1000, 3}};
  for (int k = 0; k < 3; ++k)
    for (int s = 0; s < 2; ++s)
      for (int q = 0; q < 2; ++q)
        for (int si = 0; si < 4; ++si) {
          char text[2048];
          snprintf(text, sizeof text, kFloat8[k], kf_dtype_name(src[s]), kf_dtype_name(f8[q]));
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in[2];
          const kf_dtype in_t = k == 1 ? f8[q] : src[s];
          in[0] = input(in_t, 2, shapes[si]);
          in[1] = input(in_t, 2, shapes[si]);
          /* Casts sweep far past 448 and 57344; the others stay in range. */
          fill(&in[0], k == 0 ? -70000 : -3, k == 0 ? 70000 : 3, 0);
          fill(&in[1], -2, 2, 0);
          char what[160];
          snprintf(what, sizeof what, "float8 %d %s %s [%lld,%lld]", k, kf_dtype_name(src[s]), kf_dtype_name(f8[q]),
                   (long long)shapes[si][0], (long long)shapes[si][1]);
          run_case(f, in, k == 1 ? 2 : 1, what);
          free_inputs(in, 2);
          kf_fusion_release(f);
        }
  /* Exactness of the casts (the GPU rounds with the hardware's cvt on
   * sm_89+, the CPU with core/ir/fp8.h): every code, every midpoint
   * between neighbours and the floats next to it, the range's edges, NaN,
   * inf and zeros, compared bit for bit. */
  for (int q = 0; q < 2; ++q) {
    float vals[4096];
    int n = 0;
    const int top = f8[q] == KF_FLOAT8_E4M3FN ? 0x7e : 0x7b;
    for (int c = 0; c <= top; ++c) {
      const double v = fp8_value(f8[q], c), w = c < top ? fp8_value(f8[q], c + 1) : 2 * v - fp8_value(f8[q], c - 1);
      const float m = (float)((v + w) / 2);
      const float cand[4] = {(float)v, m, nextafterf(m, 0.0f), nextafterf(m, INFINITY)};
      for (int k = 0; k < 4; ++k) {
        vals[n++] = cand[k];
        vals[n++] = -cand[k];
      }
    }
    const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e30f, -1e30f, 1e-30f, -1e-30f};
    for (size_t k = 0; k < sizeof specials / sizeof specials[0]; ++k) vals[n++] = specials[k];
    /* sat 0: the cast alone; sat 1: clamp to the format's range, then the
     * cast (one saturating conversion on the GPU), and the float8 value
     * read back as float32 (the rounded register). */
    for (int sat = 0; sat < 2; ++sat) {
    char text[512];
    if (sat == 0)
      snprintf(text, sizeof text, "input x: tensor<float32, 2>\ny = cast(x) {dtype=%s}\noutput y\n", kf_dtype_name(f8[q]));
    else
      snprintf(text, sizeof text,
               "input x: tensor<float32, 2>\nconst lo: float32 = %s\nconst hi: float32 = %s\nc = clamp(x, lo, hi)\n"
               "y = cast(c) {dtype=%s}\nz = cast(y) {dtype=float32}\nw = mul(z, x)\noutput y\noutput w\n",
               q == 0 ? "-448" : "-57344", q == 0 ? "448" : "57344", kf_dtype_name(f8[q]));
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(text, &f));
    /* Two rows a multiple of 16 long, so that the vector path (two lanes
     * per conversion) runs: the second row shifted by one, so each value
     * also shares a pair with its other neighbour (NaN beside an in-range
     * value, for one). */
    const int m = (n + 16) / 16 * 16;
    const int64_t shape[2] = {2, m};
    tin in[1] = {input(KF_FLOAT32, 2, shape)};
    float* rows = calloc((size_t)(2 * m), sizeof(float));
    memcpy(rows, vals, (size_t)n * sizeof(float));
    memcpy(rows + m + 1, vals, (size_t)n * sizeof(float));
    free(in[0].host);
    in[0].host = rows;
    char what[80];
    snprintf(what, sizeof what, "float8 %s exactness %s (%d values)", sat ? "saturating cast" : "cast",
             kf_dtype_name(f8[q]), n);
    run_case_tol(f, in, 1, what, 1.0, 0);
    free_inputs(in, 1);
    kf_fusion_release(f);
    }
  }
  end_test("float8");
}

/* int8 / uint8: wrapping arithmetic chains, casts from float past the
 * range, promotion with int32, row sums (int64) and maxima, on the vector
 * path (last dim a multiple of 16) and odd widths. Written after session
 * 8's last device run: not yet run on a GPU. */
static const char* const kInt8[] = {
    "input a: tensor<%1$s, 2>\n"
    "input b: tensor<%1$s, 2>\n"
    "s = add(a, b)\n"
    "m = mul(s, b)\n"
    "const k: int64 = 100\n"
    "d = sub(m, k)\n"
    "output d\n",
    "input a: tensor<%1$s, 2>\n"
    "input b: tensor<%1$s, 2>\n"
    "af = cast(a) {dtype=float32}\n"
    "const big: float32 = 97.5\n"
    "x = mul(af, big)\n"
    "q = cast(x) {dtype=%1$s}\n"
    "w = cast(b) {dtype=int32}\n"
    "y = add(q, w)\n"
    "output q\n"
    "output y\n",
    "input a: tensor<%1$s, 2>\n"
    "input b: tensor<%1$s, 2>\n"
    "s = sum(a) {axes=[1], keepdim=false}\n"
    "m = max(b) {axes=[0], keepdim=true}\n"
    "output s\n"
    "output m\n",
};

static void test_int8(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_INT8, KF_UINT8};
  const int64_t shapes[][2] = {{64, 512}, {33, 100}, {1, 17}, {1000, 3}};
  for (int k = 0; k < 3; ++k)
    for (int d = 0; d < 2; ++d)
      for (int si = 0; si < 4; ++si) {
        char text[2048];
        snprintf(text, sizeof text, kInt8[k], kf_dtype_name(dts[d]));
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[2];
        in[0] = input(dts[d], 2, shapes[si]);
        in[1] = input(dts[d], 2, shapes[si]);
        fill(&in[0], dts[d] == KF_INT8 ? -128 : 0, dts[d] == KF_INT8 ? 127 : 255, 0);
        fill(&in[1], dts[d] == KF_INT8 ? -128 : 0, dts[d] == KF_INT8 ? 127 : 255, 0);
        char what[160];
        snprintf(what, sizeof what, "int8 case %d %s [%lld,%lld]", k, kf_dtype_name(dts[d]), (long long)shapes[si][0],
                 (long long)shapes[si][1]);
        run_case(f, in, 2, what);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  end_test("int8");
}

/* argmax / argmin (decomposed when defined: core/simplify/decompose.h):
 * rows of every width class (a few, a cached row, a row longer than the
 * registers hold), inner and outer axes, float32, bfloat16 with values on a
 * coarse grid (ties, where the first index must win) and int32. */
static void test_arg_reductions(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_INT32};
  const int64_t shapes[][2] = {{64, 1000}, {33, 7}, {4, 50304}, {1000, 3}, {1, 1}};
  const char* const ops[] = {"argmax", "argmin"};
  for (int d = 0; d < 3; ++d)
    for (int o = 0; o < 2; ++o)
      for (int axis = 0; axis < 2; ++axis)
        for (int si = 0; si < 5; ++si) {
          char text[512];
          snprintf(text, sizeof text, "input x: tensor<%s, 2>\ny = %s(x) {axes=[%d], keepdim=%s}\noutput y\n",
                   kf_dtype_name(dts[d]), ops[o], axis, axis ? "false" : "true");
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in[1];
          in[0] = input(dts[d], 2, shapes[si]);
          fill(&in[0], -4, 4, 0);
          if (dts[d] == KF_BFLOAT16) { /* a coarse grid: many ties */
            uint16_t* h = (uint16_t*)in[0].host;
            for (int64_t i = 0; i < in[0].storage; ++i) h[i] &= 0xFF00;
          }
          char what[160];
          snprintf(what, sizeof what, "%s axis %d %s [%lld,%lld]", ops[o], axis, kf_dtype_name(dts[d]),
                   (long long)shapes[si][0], (long long)shapes[si][1]);
          run_case(f, in, 1, what);
          free_inputs(in, 1);
          kf_fusion_release(f);
        }
  end_test("arg_reductions");
}

/* scatter and index_reduce: the sorted path (deterministic) must equal the
 * CPU bit for bit (both combine in src order in float64); the atomic path
 * within the dtype's tolerance (integers and amax/amin exactly). Indices
 * collide (several updates per target), inputs are strided, index_reduce
 * src broadcasts a size-1 dim; sizes 0 and 1 and more updates than one
 * sort block holds (the global merge steps). Then out-of-range indices on
 * the GPU: skipped, the result is the input, nothing else is written. */
static void scatter_case(const char* op, kf_dtype dt, int dim, const char* attrs, const int64_t* xs,
                         const int64_t* is, int irank, const int64_t* ss, int transposed, double tol) {
  char text[512];
  snprintf(text, sizeof text,
           "input x: tensor<%1$s, 2>\ninput i: tensor<int64, %2$d>\ninput s: tensor<%1$s, 2>\n"
           "y = %3$s(x, i, s) {dim=%4$d, %5$s}\noutput y\n",
           kf_dtype_name(dt), irank, op, dim, attrs);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  tin in[3];
  in[0] = input(dt, 2, xs);
  if (transposed) {
    const int64_t st[2] = {1, xs[0]};
    with_strides(&in[0], st, 0);
  }
  in[1] = input(KF_INT64, irank, is);
  in[2] = input(dt, 2, ss);
  const int prod = strstr(attrs, "prod") != NULL;
  fill(&in[0], prod ? 0.5 : -4, prod ? 1.5 : 4, 0);
  fill(&in[1], 0, (double)xs[dim] - 1, 0);
  fill(&in[2], prod ? 0.5 : -4, prod ? 1.5 : 4, 0);
  char what[300];
  snprintf(what, sizeof what, "%s dim %d %s {%s} x [%lld,%lld]%s", op, dim, kf_dtype_name(dt), attrs, (long long)xs[0],
           (long long)xs[1], transposed ? " transposed" : "");
  /* bfloat16 atomics round every add: the bound scales with the summands
   * (|value| <= 4, a few per target), not with the result. */
  run_case_tol(f, in, 3, what, dt == KF_BFLOAT16 && tol > 0 ? 8.0 : 1.0, tol);
  free_inputs(in, 3);
  kf_fusion_release(f);
}

static void scatter_out_of_range(void) {
  const char* text =
      "input x: tensor<float32, 2>\ninput i: tensor<int64, 1>\ninput s: tensor<float32, 2>\n"
      "y = index_reduce(x, i, s) {dim=0, reduce=sum}\noutput y\n";
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const int64_t xs[2] = {8, 64}, is[1] = {6}, ss[2] = {6, 64};
  tin in[3] = {input(KF_FLOAT32, 2, xs), input(KF_INT64, 1, is), input(KF_FLOAT32, 2, ss)};
  fill(&in[0], -4, 4, 0);
  fill(&in[2], -4, 4, 0);
  in[1].host = calloc(6, 8);
  const int64_t bad[6] = {-1, 8, 1000000, -1000000, 9, (int64_t)1 << 40};
  memcpy(in[1].host, bad, sizeof bad);
  DLTensor t[3];
  const DLTensor* p[3];
  void* dev[3];
  for (int k = 0; k < 3; ++k) {
    size_t bytes = (size_t)in[k].storage * (size_t)dtype_bytes(in[k].dtype);
    dev[k] = gpu_alloc(bytes);
    gpu_to_device(dev[k], in[k].host, bytes);
    t[k] = view(&in[k], dev[k], 1);
    p[k] = &t[k];
  }
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, p, 3, &out, 1, &opts));
  GPU_CHECK(gpu.stream_sync(g_stream));
  float host[8 * 64];
  gpu_to_host(host, out->dl_tensor.data, sizeof host);
  if (memcmp(host, in[0].host, sizeof host) != 0) {
    printf("FAILED scatter out of range: the result differs from the input\n");
    ++g_failures;
  }
  out->deleter(out);
  for (int k = 0; k < 3; ++k) gpu_free(dev[k]);
  free_inputs(in, 3);
  kf_fusion_release(f);
}

/* A scatter whose index is a rank-1 index expanded over the other dim (as
 * graph libraries write message aggregation): each update is a slice, so
 * float amax/amin/prod take the sorted path for slices of 1024 or more
 * with at most 64 updates per selected slice on average
 * (ScatterParams::sorted_min_width, sorted_max_run) and the atomic kernels
 * otherwise; sums keep the atomics unless deterministic. xs: the input,
 * m: updates, ss: src; width > 0 expands the index to that many elements
 * along the other dim (fewer than the input has: the rest keep the
 * input), else to src's. */
static void scatter_expanded_case(kf_dtype dt, int dim, const char* attrs, const int64_t* xs, int64_t m,
                                  const int64_t* ss, int width, double tol) {
  char text[768], size_line[96];
  const int other = 1 - dim;
  if (width > 0) snprintf(size_line, sizeof size_line, "const w: int64 = %d\n", width);
  else snprintf(size_line, sizeof size_line, "w = size(s) {dim=%d}\n", other);
  snprintf(text, sizeof text,
           "input x: tensor<%1$s, 2>\ninput i: tensor<int64, 1>\ninput s: tensor<%1$s, 2>\n"
           "i2 = unsqueeze(i) {dim=%2$d}\nm = size(i) {dim=0}\n%3$s"
           "ie = expand(i2, [%4$s])\ny = scatter(x, ie, s) {dim=%5$d, %6$s}\noutput y\n",
           kf_dtype_name(dt), other, size_line, dim == 0 ? "m, w" : "w, m", dim, attrs);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const int prod = strstr(attrs, "prod") != NULL;
  tin in[3] = {input(dt, 2, xs), input(KF_INT64, 1, &m), input(dt, 2, ss)};
  fill(&in[0], prod ? 0.5 : -4, prod ? 1.5 : 4, 0);
  fill(&in[1], 0, (double)xs[dim] - 1, 0);
  fill(&in[2], prod ? 0.5 : -4, prod ? 1.5 : 4, 0);
  char what[300];
  snprintf(what, sizeof what, "scatter, expanded index, dim %d %s {%s} x [%lld,%lld] %lld updates%s", dim,
           kf_dtype_name(dt), attrs, (long long)xs[0], (long long)xs[1], (long long)m, width > 0 ? ", narrower index" : "");
  run_case_tol(f, in, 3, what, dt == KF_BFLOAT16 && tol > 0 ? 8.0 : 1.0, tol);
  free_inputs(in, 3);
  kf_fusion_release(f);
}

static void test_scatter_expanded_index(void** state) {
  (void)state;
  const kf_dtype fl[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64};
  for (int d = 0; d < 3; ++d) {
    const kf_dtype dt = fl[d];
    /* rows of 1100, 60 updates per target (the sorted path; runs cross its
     * 128-position chunks), of 300 (the atomics); 3000 updates into 50 */
    const int64_t wx[2] = {50, 1100}, ws[2] = {3000, 1100}, nx[2] = {50, 300}, ns[2] = {3000, 300};
    scatter_expanded_case(dt, 0, "reduce=amax, include_self=false", wx, 3000, ws, 0, 0);
    scatter_expanded_case(dt, 0, "reduce=amin", wx, 3000, ws, 0, 0);
    scatter_expanded_case(dt, 0, "reduce=amax, include_self=false", nx, 3000, ns, 0, 0);
    /* (runs that cross a chunk boundary are summed in two pieces: the dtype's tolerance) */
    scatter_expanded_case(dt, 0, "reduce=sum, deterministic=true", wx, 3000, ws, 0, -1);
    scatter_expanded_case(dt, 0, "reduce=sum, deterministic=true", nx, 3000, ns, 0, -1);
    if (dt != KF_BFLOAT16)  /* bfloat16 atomics round each of ~60 adds per target: no useful bound */
      scatter_expanded_case(dt, 0, "reduce=sum", nx, 3000, ns, 0, -1);
    /* prod: about 4 updates per target (in the sorted path's float64, once rounded) */
    const int64_t px[2] = {700, 1024}, ps[2] = {3000, 1024};
    scatter_expanded_case(dt, 0, "reduce=prod, include_self=false", px, 3000, ps, 0, -1);
    /* the index narrower than the input (1030 of 1100 columns) and src wider (1200) */
    const int64_t cx[2] = {50, 1100}, cs[2] = {3000, 1200};
    scatter_expanded_case(dt, 0, "reduce=amax, include_self=false", cx, 3000, cs, 1030, 0);
    /* mean on the atomic path counts per slice (emit_scatter.cpp
     * slice_counts): every column of a target row divided by the same
     * count, and with the index narrower than x (1030 of 1100 columns)
     * the columns it does not reach keep x's values (bfloat16 atomics:
     * no useful bound over ~60 adds) */
    if (dt != KF_BFLOAT16) {
      scatter_expanded_case(dt, 0, "reduce=mean, include_self=false", nx, 3000, ns, 0, -1);
      scatter_expanded_case(dt, 0, "reduce=mean", cx, 3000, cs, 1030, -1);
      scatter_expanded_case(dt, 0, "reduce=mean, include_self=false", cx, 3000, cs, 1030, -1);
    }
    /* dim 1: 700 updates into 30 columns of 1050 rows (sorted), of 40 rows (atomics) */
    const int64_t ex[2] = {1050, 30}, es[2] = {1050, 800}, fx[2] = {40, 30}, fs[2] = {40, 700};
    scatter_expanded_case(dt, 1, "reduce=amax", ex, 700, es, 0, 0);
    scatter_expanded_case(dt, 1, "reduce=amin, include_self=false", fx, 700, fs, 0, 0);
    /* 5000 updates into 3 rows of 1100: over 64 per row, the atomics */
    const int64_t lx[2] = {3, 1100}, ls[2] = {5000, 1100};
    scatter_expanded_case(dt, 0, "reduce=amax, include_self=false", lx, 5000, ls, 0, 0);
  }
  end_test("scatter_expanded_index");
}

static void test_scatter(void** state) {
  (void)state;
  const kf_dtype fl[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64};
  /* scatter along dim 1 and dim 0: targets in [0, size), several updates each */
  const int64_t x1[2] = {64, 300}, i1[2] = {64, 700}, s1[2] = {64, 800};
  const int64_t x0[2] = {50, 96}, i0[2] = {3000, 96}, s0[2] = {3000, 100};
  const int64_t x_one[2] = {1, 1}, i_one[2] = {1, 1};
  const int64_t x_empty[2] = {0, 5}, i_empty[2] = {0, 5};
  for (int d = 0; d < 3; ++d) {
    const kf_dtype dt = fl[d];
    const double atomic_tol = dt == KF_BFLOAT16 ? 0.05 : -1;
    for (int tr = 0; tr < 2; ++tr) {
      scatter_case("scatter", dt, 1, "reduce=sum, deterministic=true", x1, i1, 2, s1, tr, 0);
      scatter_case("scatter", dt, 0, "reduce=sum, include_self=false, deterministic=true", x0, i0, 2, s0, tr, 0);
      scatter_case("scatter", dt, 1, "reduce=none, deterministic=true", x1, i1, 2, s1, tr, 0);
      scatter_case("scatter", dt, 0, "reduce=mean, deterministic=true", x0, i0, 2, s0, tr, 0);
      scatter_case("scatter", dt, 1, "reduce=prod, include_self=false, deterministic=true", x1, i1, 2, s1, tr, 0);
      scatter_case("scatter", dt, 1, "reduce=sum", x1, i1, 2, s1, tr, atomic_tol);
      scatter_case("scatter", dt, 0, "reduce=mean, include_self=false", x0, i0, 2, s0, tr, atomic_tol);
      scatter_case("scatter", dt, 1, "reduce=prod", x1, i1, 2, s1, tr, atomic_tol);
      scatter_case("scatter", dt, 1, "reduce=amax", x1, i1, 2, s1, tr, 0);
      scatter_case("scatter", dt, 0, "reduce=amin, include_self=false", x0, i0, 2, s0, tr, 0);
    }
    scatter_case("scatter", dt, 1, "reduce=sum, deterministic=true", x_one, i_one, 2, i_one, 0, 0);
    scatter_case("scatter", dt, 1, "reduce=sum", x_empty, i_empty, 2, i_empty, 0, 0);
    /* index_reduce: embedding backward (dim 0, 5000 rows into 700), dim 1, src broadcast along dim 1 */
    const int64_t ex[2] = {700, 256}, ei[1] = {5000}, es[2] = {5000, 256}, eb[2] = {5000, 1};
    const int64_t cx[2] = {40, 30}, ci[1] = {90}, cs[2] = {40, 90};
    scatter_case("index_reduce", dt, 0, "reduce=sum, deterministic=true", ex, ei, 1, es, 0, 0);
    scatter_case("index_reduce", dt, 0, "reduce=sum", ex, ei, 1, es, 0, atomic_tol);
    scatter_case("index_reduce", dt, 0, "reduce=mean, include_self=false, deterministic=true", ex, ei, 1, eb, 1, 0);
    scatter_case("index_reduce", dt, 1, "reduce=sum, deterministic=true", cx, ci, 1, cs, 1, 0);
    scatter_case("index_reduce", dt, 1, "reduce=amax, include_self=false", cx, ci, 1, cs, 0, 0);
    scatter_case("index_reduce", dt, 1, "reduce=none, deterministic=true", cx, ci, 1, cs, 0, 0);
    /* Runs longer than the sorted path's chunk (128 positions): combined
     * from per-chunk partials, so within rounding of the CPU's order. */
    const int64_t lx[2] = {3, 200}, li[1] = {5000}, ls[2] = {5000, 200};
    const int64_t sx[2] = {2, 64}, si[2] = {3000, 64};
    scatter_case("index_reduce", dt, 0, "reduce=sum, deterministic=true", lx, li, 1, ls, 0, -1);
    scatter_case("index_reduce", dt, 0, "reduce=none, deterministic=true", lx, li, 1, ls, 0, 0);
    scatter_case("scatter", dt, 0, "reduce=mean, include_self=false, deterministic=true", sx, si, 2, si, 1, -1);
    if (dt != KF_BFLOAT16)  /* bfloat16 atomics round each of ~1500 adds: no useful bound */
      scatter_case("scatter", dt, 0, "reduce=sum", sx, si, 2, si, 0, 1e-4);
  }
  /* integers: atomics are exact */
  const kf_dtype in_[] = {KF_INT32, KF_INT64, KF_INT8};
  for (int d = 0; d < 3; ++d) {
    scatter_case("scatter", in_[d], 1, "reduce=sum", x1, i1, 2, s1, 0, 0);
    scatter_case("scatter", in_[d], 0, "reduce=amax, include_self=false", x0, i0, 2, s0, 1, 0);
    if (in_[d] != KF_INT8)  /* the atomic path sums in the dtype: int8 sums wrap before the division */
      scatter_case("scatter", in_[d], 1, "reduce=mean", x1, i1, 2, s1, 0, 0);
    scatter_case("scatter", in_[d], 1, "reduce=prod", x1, i1, 2, s1, 0, 0);
  }
  scatter_out_of_range();
  end_test("scatter");
}

/* Scans: a block per line (the scanned dim innermost: long lines over
 * several chunks, a line shorter than one chunk, odd lengths) and a thread
 * per line (dim 0, and a transposed input), inclusive and exclusive, the
 * operand computed inline (x * 2 - 1); float tolerance scaled by the
 * line's length (the block scan adds in another order than the CPU). */
static void test_scans(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16, KF_FLOAT64, KF_INT32, KF_INT64};
  const char* const ops[] = {"cumsum", "cumprod", "cummax"};
  const int64_t shapes[][2] = {{64, 5000}, {1000, 3}, {3, 1027}, {1, 1}, {0, 7}};
  for (int d = 0; d < 5; ++d)
    for (int o = 0; o < 3; ++o)
      for (int si = 0; si < 5; ++si)
        for (int dim = 0; dim < 2; ++dim) {
          const int exclusive = (si + dim + o) % 2;
          char text[512];
          snprintf(text, sizeof text,
                   "input x: tensor<%s, 2>\nconst two: int64 = 2\nconst one: int64 = 1\nt = mul(x, two)\nu = sub(t, one)\n"
                   "y = %s(u) {dim=%d, exclusive=%s}\noutput y\n",
                   kf_dtype_name(dts[d]), ops[o], dim, exclusive ? "true" : "false");
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in[1];
          in[0] = input(dts[d], 2, shapes[si]);
          if (si == 0 && dim == 0) {
            const int64_t st[2] = {1, shapes[si][0]};
            with_strides(&in[0], st, 0);
          }
          /* products stay near 1: values in [0.5, 1.5] after x * 2 - 1 */
          if (o == 1) fill(&in[0], 0.75, 1.25, 0);
          else fill(&in[0], -2, 2, 0);
          if (o == 1 && !(dts[d] == KF_FLOAT32 || dts[d] == KF_FLOAT64 || dts[d] == KF_BFLOAT16)) fill(&in[0], 1, 1, 0);
          char what[200];
          snprintf(what, sizeof what, "%s dim %d%s %s [%lld,%lld]", ops[o], dim, exclusive ? " exclusive" : "",
                   kf_dtype_name(dts[d]), (long long)shapes[si][0], (long long)shapes[si][1]);
          const double len = (double)shapes[si][dim];
          run_case_tol(f, in, 1, what, o == 0 ? (len > 1 ? len : 1) : 1.0, o == 2 ? 0 : -1);
          free_inputs(in, 1);
          kf_fusion_release(f);
        }
  end_test("scans");
}

/* Extents as values (size): a mean written as sum / size(x, -1), a scale
 * by the sum of two extents, and a flatten whose shape is
 * mul(size(x, 0), size(x, 1)). Not yet run on a device (session 7 had no
 * device time left when size landed): the next device run checks it. */
static const char* const kSizeValues[] = {
    "input x: tensor<%1$s, 3>\n"
    "input w: tensor<%1$s, 1>\n"
    "xf = cast(x) {dtype=float32}\n"
    "s = sum(xf) {axes=[2], keepdim=true}\n"
    "n = size(x) {dim=-1}\n"
    "m = div(s, n)\n"
    "a = size(x) {dim=0}\n"
    "k = size(w) {dim=0}\n"
    "ak = add(a, k)\n"
    "d = sub(xf, m)\n"
    "e = mul(d, ak)\n"
    "y = cast(e) {dtype=%1$s}\n"
    "output y\n",
    "input x: tensor<%1$s, 3>\n"
    "input w: tensor<%1$s, 1>\n"
    "a = size(x) {dim=0}\n"
    "b = size(x) {dim=1}\n"
    "c = size(w) {dim=0}\n"
    "ab = mul(a, b)\n"
    "r = reshape(x, [ab, c])\n"
    "y = add(r, w)\n"
    "output y\n",
};

/* Runs `f` on the GPU twice and checks that output 0 is the same bytes
 * both times (a result that must not depend on timing). */
static void gpu_twice_identical(kf_fusion f, tin* in, size_t nin, const char* what) {
  DLTensor gpu_t[MAX_IO];
  const DLTensor* gpu_p[MAX_IO];
  void* dev[MAX_IO] = {0};
  to_device(in, nin, gpu_t, gpu_p, dev);
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  void* host[2] = {NULL, NULL};
  size_t bytes = 0;
  for (int r = 0; r < 2; ++r) {
    DLManagedTensor* out[MAX_IO];
    size_t nout = 0;
    KF_CHECK(kf_fusion_num_outputs(f, &nout));
    KF_CHECK(kf_execute(f, gpu_p, nin, out, nout, &opts));
    GPU_CHECK(gpu.stream_sync(g_stream));
    DLTensor* b = &out[0]->dl_tensor;
    bytes = (size_t)span_of(b) * (size_t)dtype_bytes(dtype_of_dl(b->dtype));
    host[r] = malloc(bytes ? bytes : 1);
    gpu_to_host(host[r], (const char*)b->data + b->byte_offset, bytes);
    for (size_t o = 0; o < nout; ++o) out[o]->deleter(out[o]);
  }
  if (memcmp(host[0], host[1], bytes) != 0) {
    printf("MISMATCH %s: two GPU runs differ\n", what);
    ++g_failures;
  }
  free(host[0]);
  free(host[1]);
  for (size_t i = 0; i < nin; ++i) gpu_free(dev[i]);
}

/* Scans down dim 0 and down a middle dim (thread-per-line kernels), short
 * to long lines, many row segments, line counts that are not a multiple of
 * a 16-byte vector, inclusive and exclusive, sum, product and max, and the
 * float sums twice with the same bytes. ctest runs these again with
 * KFUSE_TUNE_SCAN_PASS_ROWS=8 (the single-pass kernel: 1, 2, 4 or 8 warps
 * stacked along a line, more blocks than the grid holds so that blocks
 * take several tickets, the element path where the vector one cannot run,
 * and a look-back whose prefix must not depend on timing). */
static void test_outer_scans(void** state) {
  (void)state;
  struct {
    kf_dtype dt;
    int rank, dim;
    int64_t shape[3];
  } cases[] = {
      {KF_FLOAT32, 2, 0, {20000, 300, 0}}, {KF_BFLOAT16, 2, 0, {20000, 300, 0}}, {KF_FLOAT64, 2, 0, {3001, 130, 0}},
      {KF_INT32, 2, 0, {3001, 132, 0}},    {KF_INT8, 2, 0, {1000, 64, 0}},       {KF_BFLOAT16, 2, 0, {70001, 1024, 0}},
      {KF_FLOAT32, 2, 0, {37, 1000, 0}},   {KF_FLOAT32, 2, 0, {5, 4096, 0}},     {KF_BFLOAT16, 2, 0, {9, 776, 0}},
      {KF_FLOAT32, 3, 1, {6, 777, 40}},    {KF_BFLOAT16, 3, 1, {3, 2000, 24}},
  };
  const char* const ops[] = {"cumsum", "cumprod", "cummax"};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c)
    for (int o = 0; o < 3; ++o) {
      const kf_dtype dt = cases[c].dt;
      const int exclusive = (int)(c + (size_t)o) % 2;
      if (o > 0 && cases[c].shape[0] > 20000) continue; /* the long case: sums only */
      char text[512];
      snprintf(text, sizeof text,
               "input x: tensor<%s, %d>\nconst two: int64 = 2\nconst one: int64 = 1\nt = mul(x, two)\nu = sub(t, one)\n"
               "y = %s(u) {dim=%d, exclusive=%s}\noutput y\n",
               kf_dtype_name(dt), cases[c].rank, ops[o], cases[c].dim, exclusive ? "true" : "false");
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      tin in[1];
      in[0] = input(dt, cases[c].rank, cases[c].shape);
      if (o == 1) fill(&in[0], 0.995, 1.005, 0); /* products of thousands of values near 1 */
      else fill(&in[0], -2, 2, 0);
      if (o == 1 && !is_float_dtype(dt)) fill(&in[0], 1, 1, 0);
      char what[200];
      snprintf(what, sizeof what, "outer %s dim %d%s %s [%lld,%lld,%lld]", ops[o], cases[c].dim,
               exclusive ? " exclusive" : "", kf_dtype_name(dt), (long long)cases[c].shape[0],
               (long long)cases[c].shape[1], (long long)cases[c].shape[2]);
      const double len = (double)cases[c].shape[cases[c].dim];
      run_case_tol(f, in, 1, what, o == 0 ? len : 1.0, o == 2 ? 0 : (o == 1 ? 1e-2 : -1));
      if (o == 0 && is_float_dtype(dt)) gpu_twice_identical(f, in, 1, what);
      free_inputs(in, 1);
      kf_fusion_release(f);
    }
  end_test("outer scans");
}

static void test_size_values(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  const int64_t shapes[][3] = {{3, 5, 7}, {2, 33, 4096}, {1, 1, 1}, {17, 8, 128}};
  for (int k = 0; k < 2; ++k)
    for (int d = 0; d < 2; ++d)
      for (int si = 0; si < 4; ++si) {
        char text[2048];
        snprintf(text, sizeof text, kSizeValues[k], kf_dtype_name(dts[d]));
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[2];
        const int64_t wshape[1] = {shapes[si][2]};
        in[0] = input(dts[d], 3, shapes[si]);
        in[1] = input(dts[d], 1, wshape);
        fill(&in[0], -2, 2, 0);
        fill(&in[1], -1, 1, 0);
        char what[160];
        snprintf(what, sizeof what, "size values %d %s [%lld,%lld,%lld]", k, kf_dtype_name(dts[d]),
                 (long long)shapes[si][0], (long long)shapes[si][1], (long long)shapes[si][2]);
        run_case(f, in, 2, what);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  end_test("size values");
}

static void test_shifted_lanes(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  /* 100 is a multiple of 4, not of 8: bfloat16 with float32 tables takes
   * vectors of 8 (the narrowest dtype), so it runs the scalar loop. The
   * last case offsets the table by 4 floats: 16-byte aligned rows that the
   * 32-byte float vectors of bfloat16 lanes load as two 16-byte halves. */
  const int64_t widths[] = {128, 96, 8, 100, 6, 130, 128};
  for (int k = 0; k < 2; ++k)
    for (int d = 0; d < 2; ++d)
      for (int wi = 0; wi < 7; ++wi) {
        const int64_t n = widths[wi];
        const int64_t shape[3] = {37, 3, n}, table[2] = {37, n}, table_strides[2] = {n + 8, 1};
        char text[2048];
        snprintf(text, sizeof text, kShifted[k], kf_dtype_name(dts[d]), (int)(n / 2), (int)(n / 2 + n / 4));
        kf_fusion f;
        KF_CHECK(kf_fusion_from_text(text, &f));
        tin in[2];
        in[0] = input(dts[d], 3, shape);
        in[1] = input(KF_FLOAT32, 2, table);
        if (wi == 6) with_strides(&in[1], table_strides, 4);
        fill(&in[0], -3, 3, 0);
        fill(&in[1], -1, 1, 0);
        char what[160];
        snprintf(what, sizeof what, "shifted lanes %d %s [37,3,%lld]%s", k, kf_dtype_name(dts[d]), (long long)n,
                 wi == 6 ? " table at +4" : "");
        run_case(f, in, 2, what);
        free_inputs(in, 2);
        kf_fusion_release(f);
      }
  end_test("shifted lanes");
}

/* Vectors read at a shift (VectorPlan entries kShiftedIndex): every
 * operand of a cat and a pad's input, loaded as 16-byte vectors guarded by
 * their bound where the shift keeps a vector whole: a cat along an outer
 * dim (the KV-cache append, a class-1 operand too), a cat along the last
 * dim whose bounds are multiples of the width (the host checks them; 36
 * and 3 wide are not for 8 lanes: the scalar twin), a pad along an outer
 * dim, a pad of the last dim by a multiple of the width (8; the input's
 * width checked too: 60 is not a multiple of 8), and by 1 or 4 (not a
 * multiple of 8 lanes: read per element), with a fused op before the pad,
 * pointers at an offset of 1 element (scalar twin). */
static const char* const kShiftedVectors[] = {
    /* 0: cat along dim 1 of [B, S, D] (outer): a fused scale on the second */
    "input past: tensor<%1$s, 3>\n"
    "input new: tensor<%1$s, 3>\n"
    "nf = cast(new) {dtype=float32}\n"
    "const h: float32 = 0.5\n"
    "ns = mul(nf, h)\n"
    "nc = cast(ns) {dtype=%1$s}\n"
    "kv = cat(past, nc) {dim=1}\n"
    "output kv\n",
    /* 1: cat of three along the last dim */
    "input a: tensor<%1$s, 2>\n"
    "input b: tensor<%1$s, 2>\n"
    "input c: tensor<%1$s, 2>\n"
    "y = cat(a, b, c) {dim=1}\n"
    "output y\n",
    /* 2: pad of [B, S, H] along S (and along H when the pads say) with a silu before it */
    "input x: tensor<%1$s, 3>\n"
    "const zero: %1$s = 0.0\n"
    "xf = cast(x) {dtype=float32}\n"
    "a = silu(xf)\n"
    "ac = cast(a) {dtype=%1$s}\n"
    "y = pad(ac, zero) {pads=[0, 0, %2$d, %3$d, %4$d, %5$d]}\n"
    "output y\n",
};

static void test_shifted_vectors(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT32, KF_BFLOAT16};
  for (int d = 0; d < 2; ++d) {
    const kf_dtype dt = dts[d];
    /* cat along the outer dim: D 128 / 100 / 6; the new part 1 (a class-1 operand), 3 or 40 rows;
     * offset 1: the first operand misaligned */
    const int64_t ds[] = {128, 100, 6}, news[] = {1, 3, 40};
    for (int di = 0; di < 3; ++di)
      for (int ni = 0; ni < 3; ++ni)
        for (int off = 0; off < 2; ++off) {
          if (off == 1 && (di != 0 || ni != 1)) continue;
          const int64_t past_shape[3] = {3, 17, ds[di]}, new_shape[3] = {3, news[ni], ds[di]};
          const int64_t past_strides[3] = {17 * ds[di], ds[di], 1};
          char text[2048];
          snprintf(text, sizeof text, kShiftedVectors[0], kf_dtype_name(dt));
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in[2];
          in[0] = input(dt, 3, past_shape);
          in[1] = input(dt, 3, new_shape);
          if (off) with_strides(&in[0], past_strides, 1);
          fill(&in[0], -3, 3, 0);
          fill(&in[1], -3, 3, 0);
          char what[160];
          snprintf(what, sizeof what, "shifted vectors: cat outer %s D=%lld new=%lld%s", kf_dtype_name(dt),
                   (long long)ds[di], (long long)news[ni], off ? " past at +1" : "");
          run_case(f, in, 2, what);
          free_inputs(in, 2);
          kf_fusion_release(f);
        }
    /* cat along the last dim: widths (all multiples of 8), (a 36: a multiple of 4 only), (3, 61) */
    const int64_t widths[4][3] = {{64, 128, 8}, {16, 36, 8}, {3, 61, 8}, {8, 8, 1}};
    for (int wi = 0; wi < 4; ++wi) {
      char text[2048];
      snprintf(text, sizeof text, kShiftedVectors[1], kf_dtype_name(dt));
      kf_fusion f;
      KF_CHECK(kf_fusion_from_text(text, &f));
      tin in[3];
      for (int k = 0; k < 3; ++k) {
        const int64_t shape[2] = {29, widths[wi][k]};
        in[k] = input(dt, 2, shape);
        fill(&in[k], -3, 3, 0);
      }
      char what[160];
      snprintf(what, sizeof what, "shifted vectors: cat inner %s widths %lld,%lld,%lld", kf_dtype_name(dt),
               (long long)widths[wi][0], (long long)widths[wi][1], (long long)widths[wi][2]);
      run_case(f, in, 3, what);
      free_inputs(in, 3);
      kf_fusion_release(f);
    }
    /* pads: {lo S, hi S, lo H, hi H} x H */
    const int pads[6][4] = {{0, 5, 0, 0}, {3, 5, 0, 0}, {0, 0, 8, 8}, {2, 1, 8, 0}, {0, 0, 1, 1}, {1, 1, 4, 4}};
    const int64_t hs[] = {256, 60, 7};
    for (int pi = 0; pi < 6; ++pi)
      for (int hi = 0; hi < 3; ++hi)
        for (int off = 0; off < 2; ++off) {
          if (off == 1 && hi != 0) continue;
          const int64_t shape[3] = {2, 19, hs[hi]}, strides[3] = {19 * hs[hi], hs[hi], 1};
          char text[2048];
          snprintf(text, sizeof text, kShiftedVectors[2], kf_dtype_name(dt), pads[pi][0], pads[pi][1], pads[pi][2],
                   pads[pi][3]);
          kf_fusion f;
          KF_CHECK(kf_fusion_from_text(text, &f));
          tin in[1];
          in[0] = input(dt, 3, shape);
          if (off) with_strides(&in[0], strides, 1);
          fill(&in[0], -3, 3, 0);
          char what[160];
          snprintf(what, sizeof what, "shifted vectors: pad [%d,%d,%d,%d] %s H=%lld%s", pads[pi][0], pads[pi][1],
                   pads[pi][2], pads[pi][3], kf_dtype_name(dt), (long long)hs[hi], off ? " x at +1" : "");
          run_case(f, in, 1, what);
          free_inputs(in, 1);
          kf_fusion_release(f);
        }
  }
  end_test("shifted vectors");
}

/* The number of segments kfuse makes of `f` for GPU tensors shaped and
 * laid out as `in` (device buffers of their storage, contents unset). */
static size_t gpu_segment_count(kf_fusion f, const tin* in, size_t n) {
  void* dev[MAX_IO];
  DLTensor t[MAX_IO];
  const DLTensor* p[MAX_IO];
  assert_true(n <= MAX_IO);
  for (size_t k = 0; k < n; ++k) {
    dev[k] = gpu_alloc((size_t)in[k].storage * (size_t)dtype_bytes(in[k].dtype) + 1);
    t[k] = view(&in[k], dev[k], 1);
    p[k] = &t[k];
  }
  kf_concrete c;
  kf_segmentation seg;
  size_t count = 0;
  KF_CHECK(kf_concretize(f, p, n, &c));
  KF_CHECK(kf_segment(c, &seg));
  KF_CHECK(kf_segmentation_count(seg, &count));
  kf_segmentation_release(seg);
  kf_concrete_release(c);
  for (size_t k = 0; k < n; ++k) gpu_free(dev[k]);
  return count;
}

/* Plain loops that no value joins share one kernel (segmentation.md step
 * 5): two results of the same inputs and a third of another size in one
 * segment of two loops; eight independent negations of eight shapes in one
 * segment of eight loops (run_case takes up to MAX_IO tensors each way).
 * Odd sizes put every loop's tail in play. */
static void test_sideways_loops(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_BFLOAT16, KF_FLOAT32};
  char text[2048], what[160];
  for (int d = 0; d < 2; ++d) {
    const char* dn = kf_dtype_name(dts[d]);
    snprintf(text, sizeof text,
             "input a: tensor<%s, 2>\ninput b: tensor<%s, 2>\ninput c: tensor<%s, 2>\n"
             "y = mul(a, b)\nz = sub(a, b)\ne = exp(c)\noutput y\noutput z\noutput e\n",
             dn, dn, dn);
    kf_fusion f;
    KF_CHECK(kf_fusion_from_text(text, &f));
    const int64_t sa[2] = {37, 130}, sc[2] = {5, 1001};
    tin in[3] = {input(dts[d], 2, sa), input(dts[d], 2, sa), input(dts[d], 2, sc)};
    for (int k = 0; k < 3; ++k) fill(&in[k], -2, 2, 0);
    assert_int_equal(gpu_segment_count(f, in, 3), 1);  /* one segment for GPU inputs */
    snprintf(what, sizeof what, "sideways loops %s: a*b, a-b [37,130], exp(c) [5,1001]", dn);
    run_case(f, in, 3, what);
    free_inputs(in, 3);
    kf_fusion_release(f);

    /* eight negations of eight shapes */
    int n = 0;
    for (int k = 0; k < MAX_IO; ++k) n += snprintf(text + n, sizeof text - (size_t)n, "input x%d: tensor<%s, 2>\n", k, dn);
    for (int k = 0; k < MAX_IO; ++k) n += snprintf(text + n, sizeof text - (size_t)n, "y%d = neg(x%d)\noutput y%d\n", k, k, k);
    KF_CHECK(kf_fusion_from_text(text, &f));
    tin eight[MAX_IO];
    for (int k = 0; k < MAX_IO; ++k) {
      const int64_t sh[2] = {3 + 7 * k, 65 + 129 * k};
      eight[k] = input(dts[d], 2, sh);
      fill(&eight[k], -2, 2, 0);
    }
    snprintf(what, sizeof what, "sideways loops %s: eight negations of eight shapes", dn);
    run_case(f, eight, MAX_IO, what);
    free_inputs(eight, MAX_IO);
    kf_fusion_release(f);
  }
  end_test("sideways loops");
}

static void test_two_segments(void** state) {
  (void)state;
  kf_builder b;
  int64_t x, y, e, t, z, axis = 1, s;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &y));
  KF_CHECK(kf_unary(b, KF_OP_EXP, x, &e));
  KF_CHECK(kf_segment_set(b, e, &t));
  KF_CHECK(kf_binary(b, KF_OP_ADD, t, y, &z));
  KF_CHECK(kf_reduce(b, KF_OP_SUM, z, &axis, 1, 0, &s));
  KF_CHECK(kf_add_output(b, s, NULL, 0, -1));
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  int64_t shape[2] = {40, 300};
  tin in[2] = {input(KF_FLOAT32, 2, shape), input(KF_FLOAT32, 2, shape)};
  fill(&in[0], -2, 2, 0);
  fill(&in[1], -2, 2, 0);
  run_case_tol(f, in, 2, "exp | segment_set | add, sum", 40, -1);

  /* The segmentation has more than one segment for GPU inputs too. */
  assert_true(gpu_segment_count(f, in, 2) >= 2);
  void* dev = gpu_alloc(40 * 300 * sizeof(float));
  DLTensor ti[2] = {view(&in[0], dev, 1), view(&in[1], dev, 1)};
  const DLTensor* pin[2] = {&ti[0], &ti[1]};

  /* Caller allocator: every allocation is freed, output included. */
  counting_allocator counter = {0, 0};
  kf_allocator alloc = {sizeof alloc, &counter, counting_alloc, counting_free};
  kf_exec_options opts = {sizeof opts, g_stream, &alloc, NULL};
  void* dev_y = gpu_alloc(40 * 300 * sizeof(float));
  gpu_to_device(dev, in[0].host, 40 * 300 * sizeof(float));
  gpu_to_device(dev_y, in[1].host, 40 * 300 * sizeof(float));
  ti[1].data = dev_y;
  DLManagedTensor* out;
  KF_CHECK(kf_execute(f, pin, 2, &out, 1, &opts));
  GPU_CHECK(gpu.stream_sync(g_stream));
  assert_true(counter.allocs >= 2);  /* the output and the intermediate */
  assert_int_equal(counter.frees, counter.allocs - 1);
  out->deleter(out);
  assert_int_equal(counter.frees, counter.allocs);
  gpu_free(dev);
  gpu_free(dev_y);
  free_inputs(in, 2);
  kf_fusion_release(f);
}

/* Outputs that are inputs or repeated go through the backend's copy:
 * contiguous (cuMemcpyAsync) and strided (the generated copy kernel). */
static void test_copies(void** state) {
  (void)state;
  const kf_dtype dts[] = {KF_FLOAT64, KF_FLOAT32, KF_FLOAT16, KF_BOOL};
  const int64_t shape[2] = {45, 67};
  for (int d = 0; d < 4; ++d) {
    kf_builder b;
    int64_t x, y;
    kf_fusion f;
    KF_CHECK(kf_builder_create(&b));
    KF_CHECK(kf_define_tensor(b, 2, dts[d], &x));
    KF_CHECK(kf_unary(b, KF_OP_LOGICAL_NOT, x, &y));
    KF_CHECK(kf_add_output(b, x, NULL, 0, -1));
    KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
    KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
    KF_CHECK(kf_builder_finalize(b, &f));
    kf_builder_destroy(b);
    for (int l = 0; l < L_COUNT; ++l) {
      tin in = layout_input(dts[d], shape, (layout_kind)l);
      char what[96];
      snprintf(what, sizeof what, "copies %s %s", kf_dtype_name(dts[d]), kLayoutNames[l]);
      run_case(f, &in, 1, what);
      free_inputs(&in, 1);
    }
    kf_fusion_release(f);
  }
  end_test("copies");
}

/* The legacy default stream (options NULL) works too. */
static void test_default_stream(void** state) {
  (void)state;
  kf_fusion f = build_binary_rank(KF_OP_MUL, KF_FLOAT64, 2);
  int64_t shape[2] = {100, 100};
  tin in[2] = {input(KF_FLOAT64, 2, shape), input(KF_FLOAT64, 2, shape)};
  fill(&in[0], -3, 3, 0);
  fill(&in[1], -3, 3, 0);
  gpu_stream saved = g_stream;
  g_stream = NULL;
  run_case(f, in, 2, "mul f64 on the default stream");
  g_stream = saved;
  free_inputs(in, 2);
  kf_fusion_release(f);
  end_test("default stream");
}

/* More than 2^31 elements: 64-bit indexing. Opt-in (4+ GB of device memory). */
static void test_large(void** state) {
  (void)state;
  const char* on = getenv("KFUSE_TEST_LARGE");
  if (on == NULL || strcmp(on, "1") != 0) {
    skip();
    return;
  }
  const int64_t n = (1LL << 31) + 8;
  kf_fusion f = build_unary_rank(KF_OP_LOGICAL_NOT, KF_BOOL, 1);
  uint8_t* host = malloc((size_t)n);
  for (int64_t i = 0; i < n; ++i) host[i] = (uint8_t)(i % 7 == 0 || i > n - 5);
  void* din = gpu_alloc((size_t)n);
  gpu_to_device(din, host, (size_t)n);
  int64_t shape[1] = {n};
  DLTensor ti = kf_test_tensor(din, kf_test_bool(), 1, shape, NULL);
  ti.device.device_type = kDLCUDA;
  const DLTensor* pin[1] = {&ti};
  DLManagedTensor* out;
  kf_exec_options opts = {sizeof opts, g_stream, NULL, NULL};
  KF_CHECK(kf_execute(f, pin, 1, &out, 1, &opts));
  GPU_CHECK(gpu.stream_sync(g_stream));
  uint8_t* got = malloc((size_t)n);
  gpu_to_host(got, out->dl_tensor.data, (size_t)n);
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != !host[i]) fail_msg("large: element %lld is %d", (long long)i, got[i]);
  out->deleter(out);
  GPU_CHECK(gpu.stream_sync(g_stream));
  gpu_free(din);
  free(got);
  free(host);
  kf_fusion_release(f);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  GPU_CHECK(gpu.stream_create(&g_stream, 0));
  /* KF_TEST_TRACE=1 prints each case before it runs.
   * KF_TEST_FILTER=test_online_softmax (a cmocka pattern, * and ? wildcards)
   * runs some groups only: the whole suite takes minutes. */
  if (getenv("KF_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("KF_TEST_FILTER"));
  g_row_major_outputs = getenv("KF_TEST_OUTPUTS") != NULL && strcmp(getenv("KF_TEST_OUTPUTS"), "row-major") == 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_ops),     cmocka_unit_test(test_binary_ops),
      cmocka_unit_test(test_ternary_ops),   cmocka_unit_test(test_casts),
      cmocka_unit_test(test_reductions),    cmocka_unit_test(test_column_reductions), cmocka_unit_test(test_column_normalizations), cmocka_unit_test(test_column_any_alignment), cmocka_unit_test(test_short_columns), cmocka_unit_test(test_batch_norm_stats), cmocka_unit_test(test_split_rows), cmocka_unit_test(test_memory_order_reductions), cmocka_unit_test(test_relayout_inputs), cmocka_unit_test(test_rows_across), cmocka_unit_test(test_unaligned_rows), cmocka_unit_test(test_cluster_rows), cmocka_unit_test(test_short_rows), cmocka_unit_test(test_reshapes), cmocka_unit_test(test_online_softmax), cmocka_unit_test(test_online_column_softmax), cmocka_unit_test(test_fast_forms), cmocka_unit_test(test_shifted_lanes), cmocka_unit_test(test_shifted_vectors), cmocka_unit_test(test_size_values), cmocka_unit_test(test_float8), cmocka_unit_test(test_arg_reductions), cmocka_unit_test(test_int8), cmocka_unit_test(test_scatter), cmocka_unit_test(test_scatter_expanded_index), cmocka_unit_test(test_scans), cmocka_unit_test(test_outer_scans),
      cmocka_unit_test(test_layouts),
      cmocka_unit_test(test_strided_outputs),
      cmocka_unit_test(test_staged_outputs),
      cmocka_unit_test(test_cat_tiles),
      cmocka_unit_test(test_staged_tiles_from_inputs),
      cmocka_unit_test(test_computed_tiles),
      cmocka_unit_test(test_stored_tiles),
      cmocka_unit_test(test_tile_groups),
      cmocka_unit_test(test_random),
      cmocka_unit_test(test_fusions),       cmocka_unit_test(test_cross_entropy_forms),
      cmocka_unit_test(test_norm_backward),
      cmocka_unit_test(test_staged_mixed_rows),
      cmocka_unit_test(test_flat_vectors),
      cmocka_unit_test(test_sideways_loops),
      cmocka_unit_test(test_two_segments),
      cmocka_unit_test(test_copies),
      cmocka_unit_test(test_default_stream), cmocka_unit_test(test_large),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  gpu.stream_destroy(g_stream);
  return failed;
}
