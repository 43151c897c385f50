/* Segment structure around library ops (matmul, linear) and minimal segment
 * counts, on the CPU through the public C API. Every fusion is also run
 * segment by segment (kf_execute_segment in run order, intermediates passed
 * along) and must equal kf_execute bit for bit.
 *
 * Expected minimal counts (the segmenter must reach them):
 *   layernorm -> linear -> gelu -> linear        4: normalization, library,
 *                                                   pointwise, library (erf
 *                                                   gelu is not absorbed)
 *   sum over dim 0 and sum over dim 1 of x      2 (two reductions, both outputs)
 *   sum(x, 1) -> broadcast -> + x -> sum(., 0)  2
 *   matmul -> matmul                            2 library
 *   matmul -> relu -> matmul                    2 library (relu absorbed)
 *   neg -> segment_set -> relu                  2
 *
 * Matmul patterns (a library segment with a nested task, its outputs the
 * activation's): linear -> gelu_tanh -> linear with every id written out;
 * matmul + bias add + relu; the bfloat16 form with casts to float32 and
 * back; and the cases that must stay apart: an intermediate read twice, a
 * fusion output in the middle, a bias that is not a row vector. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_util.h"

#define MAX_VALUES 64
#define MAX_RANK 6

/* ---- building ----------------------------------------------------------- */

static int64_t red(kf_builder b, kf_op op, int64_t x, int64_t axis, int keep) {
  int64_t y;
  KF_CHECK(kf_reduce(b, op, x, &axis, 1, keep, &y));
  return y;
}
static int64_t bin(kf_builder b, kf_op op, int64_t x, int64_t y) {
  int64_t z;
  KF_CHECK(kf_binary(b, op, x, y, &z));
  return z;
}
static int64_t un(kf_builder b, kf_op op, int64_t x) {
  int64_t y;
  KF_CHECK(kf_unary(b, op, x, &y));
  return y;
}
static int64_t cf(kf_builder b, double v) {
  int64_t c;
  KF_CHECK(kf_define_constant_f64(b, v, KF_FLOAT64, &c));
  return c;
}
static kf_fusion finish(kf_builder b) {
  kf_fusion f;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

/* layernorm(x; g, beta) over the last dim, then linear(w1, b1), gelu,
 * linear(w2, b2). Inputs: x [M,H], g [H], beta [H], w1 [F,H], b1 [F],
 * w2 [O,F], b2 [O]. */
static kf_fusion ln_mlp(kf_dtype dt) {
  kf_builder b;
  int64_t x, g, be, w1, b1, w2, b2, h, y;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, dt, &x));
  KF_CHECK(kf_define_tensor(b, 1, dt, &g));
  KF_CHECK(kf_define_tensor(b, 1, dt, &be));
  KF_CHECK(kf_define_tensor(b, 2, dt, &w1));
  KF_CHECK(kf_define_tensor(b, 1, dt, &b1));
  KF_CHECK(kf_define_tensor(b, 2, dt, &w2));
  KF_CHECK(kf_define_tensor(b, 1, dt, &b2));
  int64_t mean = red(b, KF_OP_MEAN, x, 1, 1);
  int64_t xc = bin(b, KF_OP_SUB, x, mean);
  int64_t var = red(b, KF_OP_MEAN, bin(b, KF_OP_MUL, xc, xc), 1, 1);
  int64_t inv = un(b, KF_OP_RSQRT, bin(b, KF_OP_ADD, var, cf(b, 1e-5)));
  int64_t ln = bin(b, KF_OP_ADD, bin(b, KF_OP_MUL, bin(b, KF_OP_MUL, xc, inv), g), be);
  KF_CHECK(kf_linear(b, ln, w1, b1, &h));
  KF_CHECK(kf_linear(b, un(b, KF_OP_GELU, h), w2, b2, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  return finish(b);
}

static kf_fusion two_sums(void) {
  kf_builder b;
  int64_t x;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_add_output(b, red(b, KF_OP_SUM, x, 0, 0), NULL, 0, -1));
  KF_CHECK(kf_add_output(b, red(b, KF_OP_SUM, x, 1, 0), NULL, 0, -1));
  return finish(b);
}

/* sum over dim 1, broadcast back to [M,N], + x, sum over dim 0. */
static kf_fusion sum_bcast_sum(void) {
  kf_builder b;
  int64_t x, m, n, bc;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_constant_i64(b, 6, KF_INT64, &m));
  KF_CHECK(kf_define_constant_i64(b, 5, KF_INT64, &n));
  int64_t s = red(b, KF_OP_SUM, x, 1, 0);
  int64_t shape[2] = {m, n}, dims[1] = {0};
  KF_CHECK(kf_broadcast_in_dim(b, s, shape, 2, dims, 1, &bc));
  KF_CHECK(kf_add_output(b, red(b, KF_OP_SUM, bin(b, KF_OP_ADD, bc, x), 0, 0), NULL, 0, -1));
  return finish(b);
}

/* (x @ w1) [relu] @ w2 */
static kf_fusion matmul_chain(int relu) {
  kf_builder b;
  int64_t x, w1, w2, h, y;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &w1));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &w2));
  KF_CHECK(kf_matmul(b, x, w1, &h));
  if (relu) h = un(b, KF_OP_RELU, h);
  KF_CHECK(kf_matmul(b, h, w2, &y));
  KF_CHECK(kf_add_output(b, y, NULL, 0, -1));
  return finish(b);
}

static kf_fusion neg_set_relu(void) {
  kf_builder b;
  int64_t x, c;
  KF_CHECK(kf_builder_create(&b));
  KF_CHECK(kf_define_tensor(b, 2, KF_FLOAT32, &x));
  KF_CHECK(kf_segment_set(b, un(b, KF_OP_NEG, x), &c));
  KF_CHECK(kf_add_output(b, un(b, KF_OP_RELU, c), NULL, 0, -1));
  return finish(b);
}

static kf_fusion from_text(const char* text) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  return f;
}

/* Ids: x 0, w1 1, b1 2, w2 3, b2 4, h 5, g 6, y 7. */
static const char* const kMlpGeluTanh =
    "input x: tensor<float32, 2>\ninput w1: tensor<float32, 2>\ninput b1: tensor<float32, 1>\n"
    "input w2: tensor<float32, 2>\ninput b2: tensor<float32, 1>\n"
    "h = linear(x, w1, b1)\ng = gelu_tanh(h)\ny = linear(g, w2, b2)\noutput y\n";

/* relu(bias + x @ w), the bias the add's first operand. */
static const char* const kMatmulBiasRelu =
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 2>\ninput c: tensor<float32, 1>\n"
    "h = matmul(x, w)\ns = add(c, h)\ny = relu(s)\noutput y\n";

/* Patterns the segmenter must not form; inputs x, w, c (shapes in
 * test_not_a_pattern). */
static const char* const kNotAPattern[] = {
    /* h read twice */
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 2>\ninput c: tensor<float32, 1>\n"
    "h = linear(x, w, c)\ng = gelu_tanh(h)\ny = add(g, h)\noutput y\n",
    /* h is an output */
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 2>\ninput c: tensor<float32, 1>\n"
    "h = linear(x, w, c)\ny = relu(h)\noutput h\noutput y\n",
    /* c [M,1] is no row vector */
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 2>\ninput c: tensor<float32, 2>\n"
    "h = matmul(x, w)\ns = add(h, c)\ny = relu(s)\noutput y\n",
    /* x @ v with a 1-D v has no N dim: c [M] runs along the rows */
    "input x: tensor<float32, 2>\ninput v: tensor<float32, 1>\ninput c: tensor<float32, 1>\n"
    "h = matmul(x, v)\ns = add(h, c)\ny = relu(s)\noutput y\n",
};

/* Mixed precision: float32 inputs cast to `dt`, h = linear in dt, then in
 * float32 gelu_tanh(cast(h) + cast(bias)), cast back to dt (without `back`
 * the float32 result is the output, which no pattern covers). */
static kf_fusion cast_pattern(const char* dt, int back) {
  char text[640];
  snprintf(text, sizeof text,
           "input x: tensor<float32, 2>\ninput w: tensor<float32, 2>\ninput c: tensor<float32, 1>\n"
           "xd = cast(x) {dtype=%s}\nwd = cast(w) {dtype=%s}\ncd = cast(c) {dtype=%s}\n"
           "h = linear(xd, wd)\nhf = cast(h) {dtype=float32}\ncf = cast(cd) {dtype=float32}\n"
           "s = add(hf, cf)\ng = gelu_tanh(s)\n%s%s%s\n",
           dt, dt, dt, back ? "y = cast(g) {dtype=" : "output g", back ? dt : "", back ? "}\noutput y" : "");
  return from_text(text);
}

/* ---- inputs ------------------------------------------------------------- */

typedef struct {
  int rank;
  int64_t shape[MAX_RANK];
  float* data;
  DLTensor t;
} host_in;

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float next_value(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((int)(g_rng % 33) - 16) / 16.0f; /* [-1, 1] on a 1/16 grid */
}

static void make_in(host_in* h, int rank, const int64_t* shape) {
  int64_t n = 1;
  h->rank = rank;
  for (int d = 0; d < rank; ++d) {
    h->shape[d] = shape[d];
    n *= shape[d];
  }
  h->data = malloc((size_t)(n ? n : 1) * sizeof(float));
  for (int64_t i = 0; i < n; ++i) h->data[i] = next_value();
  h->t = kf_test_tensor(h->data, kf_test_f32(), rank, h->shape, NULL);
}

/* ---- checks ------------------------------------------------------------- */

static size_t dtype_size_of(kf_dtype t) {
  return t == KF_FLOAT64 || t == KF_INT64 ? 8 : t == KF_FLOAT32 || t == KF_INT32 ? 4
         : t == KF_BOOL ? 1 : 2;
}

static int64_t stride_at(const DLTensor* t, int d) {
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int k = t->ndim - 1; k > d; --k) s *= t->shape[k];
  return s;
}

/* Bitwise equality of two tensors of equal shape (any strides). */
static void assert_same(const DLTensor* a, const DLTensor* b, size_t elem, const char* what) {
  assert_int_equal(a->ndim, b->ndim);
  int64_t n = 1;
  for (int d = 0; d < a->ndim; ++d) {
    assert_int_equal(a->shape[d], b->shape[d]);
    n *= a->shape[d];
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = a->ndim - 1; d >= 0; --d) {
      int64_t idx = rest % a->shape[d];
      rest /= a->shape[d];
      oa += idx * stride_at(a, d);
      ob += idx * stride_at(b, d);
    }
    const char* pa = (const char*)a->data + a->byte_offset + (size_t)oa * elem;
    const char* pb = (const char*)b->data + b->byte_offset + (size_t)ob * elem;
    if (memcmp(pa, pb, elem) != 0) fail_msg("%s: element %lld differs", what, (long long)i);
  }
}

/* The segmentation of `f` for `in` (release it and *c). */
static kf_segmentation segment_for(kf_fusion f, host_in* in, size_t nin, kf_concrete* c) {
  const DLTensor* pin[8];
  for (size_t i = 0; i < nin; ++i) pin[i] = &in[i].t;
  kf_segmentation s;
  KF_CHECK(kf_concretize(f, pin, nin, c));
  KF_CHECK(kf_segment(*c, &s));
  return s;
}

static void expect_ids(const int64_t* got, size_t n, const int64_t* want, size_t wn,
                       const char* what) {
  if (n != wn) fail_msg("%s: %zu ids, expected %zu", what, n, wn);
  for (size_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      fail_msg("%s: id %zu is %lld, expected %lld", what, i, (long long)got[i], (long long)want[i]);
}

/* The number of nested tasks of each segment, and the pattern of each
 * segment's first one ("" without). */
static size_t nested_tasks(kf_fusion f, host_in* in, size_t nin, size_t* children,
                           const char** patterns, size_t max) {
  kf_concrete c;
  kf_segmentation s = segment_for(f, in, nin, &c);
  size_t count = 0;
  KF_CHECK(kf_segmentation_count(s, &count));
  assert_true(count <= max);
  for (size_t i = 0; i < count; ++i) {
    kf_segment_info info;
    info.struct_size = sizeof info;
    KF_CHECK(kf_segmentation_get(s, i, &info));
    children[i] = info.num_children;
    patterns[i] = "";
    if (info.num_children) {
      kf_task_info t;
      t.struct_size = sizeof t;
      KF_CHECK(kf_segment_child(s, i, 0, &t));
      patterns[i] = t.pattern; /* static */
    }
  }
  kf_segmentation_release(s);
  kf_concrete_release(c);
  return count;
}

typedef struct {
  int64_t id;
  int64_t shape[MAX_RANK];
  void* owned;
  DLTensor t;
} value_slot;

/* Checks the segmentation of `f` for `in` (count, and schedulers when
 * `schedulers` is not NULL), then runs it segment by segment and compares
 * with kf_execute. */
static void check_fusion(kf_fusion f, host_in* in, size_t nin, size_t expected_count,
                         const char* const* schedulers, const char* what) {
  const DLTensor* pin[8];
  for (size_t i = 0; i < nin; ++i) pin[i] = &in[i].t;
  size_t nout = 0;
  KF_CHECK(kf_fusion_num_outputs(f, &nout));
  DLManagedTensor* whole[8];
  KF_CHECK(kf_execute(f, pin, nin, whole, nout, NULL));

  kf_concrete c;
  kf_segmentation s = segment_for(f, in, nin, &c);
  size_t count = 0;
  KF_CHECK(kf_segmentation_count(s, &count));
  if (count != expected_count) {
    for (size_t i = 0; i < count; ++i) {
      kf_segment_info info;
      info.struct_size = sizeof info;
      KF_CHECK(kf_segmentation_get(s, i, &info));
      printf("%s: segment %zu: %s\n", what, i, info.scheduler);
    }
    fail_msg("%s: %zu segments, expected %zu", what, count, expected_count);
  }

  value_slot vals[MAX_VALUES];
  size_t nvals = 0;
  for (size_t i = 0; i < nin; ++i) {
    kf_value_info vi;
    vi.struct_size = sizeof vi;
    KF_CHECK(kf_fusion_input(f, i, &vi));
    vals[nvals].id = vi.id;
    vals[nvals].owned = NULL;
    vals[nvals++].t = in[i].t;
  }
  for (size_t si = 0; si < count; ++si) {
    kf_segment_info info;
    info.struct_size = sizeof info;
    KF_CHECK(kf_segmentation_get(s, si, &info));
    assert_int_equal(info.run_order, si);
    if (schedulers) assert_string_equal(info.scheduler, schedulers[si]);
    /* Every segment with a kernel has a schedule (a matmul pattern: its
     * epilogue's); a library call alone has none, and says so. */
    char* schedule = NULL;
    const kf_status ss = kf_segment_schedule(s, si, &schedule);
    if (strcmp(info.scheduler, "library") == 0 && info.num_children == 0) {
      assert_int_equal(ss, KF_ERR_UNSUPPORTED);
      assert_non_null(strstr(kf_last_error(), "is a library call"));
    } else {
      assert_int_equal(ss, KF_OK);
      assert_true(strncmp(schedule, "pointwise", 9) == 0 || strncmp(schedule, "tiled", 5) == 0 ||
                  strncmp(schedule, "row", 3) == 0 || strncmp(schedule, "column", 6) == 0);
      /* The schedulers asked: each earlier one declined with a reason, and
       * the last line names the family of this schedule (a row schedule
       * with outer reductions is inner_outer's). */
      char* asked = NULL;
      const kf_status sa = kf_segment_schedulers(s, si, &asked);
      if (info.num_children > 0) {
        assert_int_equal(sa, KF_ERR_UNSUPPORTED);
      } else {
        assert_int_equal(sa, KF_OK);
        const char* last = asked;
        for (const char* line = asked; *line != '\0';) {
          const char* end = strchr(line, '\n');
          assert_non_null(end);
          last = line;
          if (end[1] != '\0') {
            const char* d = strstr(line, ": declined: ");
            assert_true(d != NULL && d < end && d + strlen(": declined: ") < end);
          }
          line = end + 1;
        }
        const char* family = strstr(schedule, " outer={") != NULL ? "inner_outer" : schedule;
        const size_t len = strstr(schedule, " outer={") != NULL ? strlen("inner_outer") : strcspn(schedule, " ");
        assert_true(strncmp(last, family, len) == 0);
        assert_string_equal(last + len, ": takes it\n");
        kf_string_free(asked);
      }
      kf_string_free(schedule);
    }
    const DLTensor* sin[16];
    size_t ns = 0;
    for (size_t j = 0; j < info.num_inputs; ++j) {
      if (info.inputs[j] < 0) continue; /* input extents */
      size_t k = 0;
      while (k < nvals && vals[k].id != info.inputs[j]) ++k;
      if (k == nvals) fail_msg("%s: segment %zu reads value %lld before it exists", what, si,
                               (long long)info.inputs[j]);
      sin[ns++] = &vals[k].t;
    }
    /* Output shapes from the segment as a standalone fusion. */
    char* text;
    kf_fusion sf;
    KF_CHECK(kf_segment_to_text(s, si, &text));
    KF_CHECK(kf_fusion_from_text(text, &sf));
    kf_string_free(text);
    DLTensor* sout[8];
    for (size_t o = 0; o < info.num_outputs; ++o) {
      kf_value_info vi;
      vi.struct_size = sizeof vi;
      KF_CHECK(kf_fusion_output(sf, o, &vi));
      value_slot* v = &vals[nvals++];
      v->id = info.outputs[o];
      KF_CHECK(kf_output_shape(sf, sin, ns, o, v->shape, (size_t)vi.rank));
      int64_t n = 1;
      for (int d = 0; d < vi.rank; ++d) n *= v->shape[d];
      v->owned = calloc((size_t)(n ? n : 1), dtype_size_of(vi.dtype));
      DLDataType dl = {kDLFloat, (uint8_t)(8 * dtype_size_of(vi.dtype)), 1};
      if (vi.dtype == KF_BFLOAT16) dl.code = kDLBfloat;
      v->t = kf_test_tensor(v->owned, dl, vi.rank, v->shape, NULL);
      sout[o] = &v->t;
    }
    kf_fusion_release(sf);
    KF_CHECK(kf_execute_segment(s, si, sin, ns, sout, info.num_outputs, NULL));
  }
  for (size_t o = 0; o < nout; ++o) {
    kf_value_info vi;
    vi.struct_size = sizeof vi;
    KF_CHECK(kf_fusion_output(f, o, &vi));
    size_t k = 0;
    while (k < nvals && vals[k].id != vi.id) ++k;
    assert_true(k < nvals);
    assert_same(&whole[o]->dl_tensor, &vals[k].t, dtype_size_of(vi.dtype), what);
    whole[o]->deleter(whole[o]);
  }
  for (size_t k = 0; k < nvals; ++k) free(vals[k].owned);
  kf_segmentation_release(s);
  kf_concrete_release(c);
}

static void free_in(host_in* in, size_t n) {
  for (size_t i = 0; i < n; ++i) free(in[i].data);
}

/* ---- tests -------------------------------------------------------------- */

static void test_layernorm_mlp(void** state) {
  (void)state;
  static const char* const expected[] = {"normalization", "library", "pointwise", "library"};
  kf_fusion f = ln_mlp(KF_FLOAT32);
  const int64_t M = 7, H = 16, F = 24, O = 5;
  const int64_t sx[2] = {M, H}, sh[1] = {H}, sw1[2] = {F, H}, sf[1] = {F}, sw2[2] = {O, F},
                so[1] = {O};
  host_in in[7];
  make_in(&in[0], 2, sx);
  make_in(&in[1], 1, sh);
  make_in(&in[2], 1, sh);
  make_in(&in[3], 2, sw1);
  make_in(&in[4], 1, sf);
  make_in(&in[5], 2, sw2);
  make_in(&in[6], 1, so);
  check_fusion(f, in, 7, 4, expected, "layernorm -> linear -> gelu -> linear");
  size_t children[4];
  const char* patterns[4];
  assert_int_equal(nested_tasks(f, in, 7, children, patterns, 4), 4);
  for (int i = 0; i < 4; ++i) assert_int_equal(children[i], 0); /* erf gelu stays apart */
  free_in(in, 7);
  kf_fusion_release(f);
}

/* One segment: reductions that read one tensor merge (grouping.h step 4;
 * here a row kernel with the column sum as an outer reduction). */
static void test_two_reductions_one_input(void** state) {
  (void)state;
  kf_fusion f = two_sums();
  const int64_t sx[2] = {6, 5};
  host_in in[1];
  make_in(&in[0], 2, sx);
  check_fusion(f, in, 1, 1, NULL, "sum(x, 0), sum(x, 1)");
  free_in(in, 1);
  kf_fusion_release(f);
}

static void test_reduce_broadcast_reduce(void** state) {
  (void)state;
  kf_fusion f = sum_bcast_sum();
  const int64_t sx[2] = {6, 5};
  host_in in[1];
  make_in(&in[0], 2, sx);
  check_fusion(f, in, 1, 2, NULL, "sum(x, 1) -> broadcast -> + x -> sum(., 0)");
  free_in(in, 1);
  kf_fusion_release(f);
}

static void test_matmul_chains(void** state) {
  (void)state;
  static const char* const plain[] = {"library", "library"};
  static const char* const relu[] = {"library", "library"};
  const int64_t sx[2] = {5, 8}, s1[2] = {8, 7}, s2[2] = {7, 3};
  for (int r = 0; r <= 1; ++r) {
    kf_fusion f = matmul_chain(r);
    host_in in[3];
    make_in(&in[0], 2, sx);
    make_in(&in[1], 2, s1);
    make_in(&in[2], 2, s2);
    check_fusion(f, in, 3, 2, r ? relu : plain, r ? "matmul -> relu -> matmul" : "matmul -> matmul");
    size_t children[2];
    const char* patterns[2];
    assert_int_equal(nested_tasks(f, in, 3, children, patterns, 2), 2);
    assert_int_equal(children[0], (size_t)r);
    assert_string_equal(patterns[0], r ? "matmul+relu" : "");
    assert_int_equal(children[1], 0);
    free_in(in, 3);
    kf_fusion_release(f);
  }
}

static void test_neg_segment_set_relu(void** state) {
  (void)state;
  static const char* const expected[] = {"pointwise", "pointwise"};
  kf_fusion f = neg_set_relu();
  const int64_t sx[2] = {3, 4};
  host_in in[1];
  make_in(&in[0], 2, sx);
  check_fusion(f, in, 1, 2, expected, "neg -> segment_set -> relu");
  free_in(in, 1);
  kf_fusion_release(f);
}

static void test_linear_gelu_tanh_linear(void** state) {
  (void)state;
  static const char* const expected[] = {"library", "library"};
  kf_fusion f = from_text(kMlpGeluTanh);
  const int64_t sx[2] = {7, 16}, sw1[2] = {24, 16}, sb1[1] = {24}, sw2[2] = {5, 24}, sb2[1] = {5};
  host_in in[5];
  make_in(&in[0], 2, sx);
  make_in(&in[1], 2, sw1);
  make_in(&in[2], 1, sb1);
  make_in(&in[3], 2, sw2);
  make_in(&in[4], 1, sb2);
  check_fusion(f, in, 5, 2, expected, "linear -> gelu_tanh -> linear");

  kf_concrete c;
  kf_segmentation s = segment_for(f, in, 5, &c);
  kf_segment_info info;
  info.struct_size = sizeof info;
  kf_task_info task;
  task.struct_size = sizeof task;
  /* Segment 0: linear + bias + gelu_tanh as one library segment; h (5) is
   * not materialized, g (6) is its output. Extents: x -1 -2, w1 -3 -4,
   * b1 -5, w2 -6 -7, b2 -8. */
  KF_CHECK(kf_segmentation_get(s, 0, &info));
  const int64_t in0[] = {0, 1, 2, -1, -2, -3, -4, -5}, out0[] = {6};
  expect_ids(info.inputs, info.num_inputs, in0, 8, "segment 0 inputs");
  expect_ids(info.outputs, info.num_outputs, out0, 1, "segment 0 outputs");
  expect_ids(info.dead_after, info.num_dead_after, NULL, 0, "segment 0 dead after");
  assert_int_equal(info.num_children, 1);
  KF_CHECK(kf_segment_child(s, 0, 0, &task));
  assert_string_equal(task.pattern, "linear+bias+gelu_tanh");
  const int64_t tin[] = {0, 1, 2}, tout[] = {6};
  expect_ids(task.inputs, task.num_inputs, tin, 3, "nested task inputs");
  expect_ids(task.outputs, task.num_outputs, tout, 1, "nested task outputs");
  char* text;
  KF_CHECK(kf_segment_to_text(s, 0, &text));
  assert_non_null(strstr(text, "gelu_tanh("));
  kf_string_free(text);
  /* Segment 1: the second linear alone (no activation after it). */
  KF_CHECK(kf_segmentation_get(s, 1, &info));
  const int64_t in1[] = {6, 3, 4, -1, -2, -3, -4, -5, -6, -7, -8}, out1[] = {7}, dead1[] = {6};
  expect_ids(info.inputs, info.num_inputs, in1, 11, "segment 1 inputs");
  expect_ids(info.outputs, info.num_outputs, out1, 1, "segment 1 outputs");
  expect_ids(info.dead_after, info.num_dead_after, dead1, 1, "segment 1 dead after");
  assert_int_equal(info.num_children, 0);
  /* Errors: no such nested task; a struct too small. */
  KF_EXPECT_ERROR(kf_segment_child(s, 1, 0, &task), KF_ERR_INVALID_ARGUMENT, "out of range");
  task.struct_size = 8;
  KF_EXPECT_ERROR(kf_segment_child(s, 0, 0, &task), KF_ERR_INVALID_ARGUMENT, "struct_size");
  /* A caller built against the shorter kf_segment_info still works. */
  info.struct_size = offsetof(kf_segment_info, num_children);
  info.num_children = 99;
  KF_CHECK(kf_segmentation_get(s, 0, &info));
  assert_int_equal(info.num_children, 99);
  kf_segmentation_release(s);
  kf_concrete_release(c);
  free_in(in, 5);
  kf_fusion_release(f);
}

static void test_matmul_bias_relu(void** state) {
  (void)state;
  static const char* const expected[] = {"library"};
  kf_fusion f = from_text(kMatmulBiasRelu);
  const int64_t sx[2] = {5, 8}, sw[2] = {8, 7}, sb[1] = {7};
  host_in in[3];
  make_in(&in[0], 2, sx);
  make_in(&in[1], 2, sw);
  make_in(&in[2], 1, sb);
  check_fusion(f, in, 3, 1, expected, "relu(bias + x @ w)");
  size_t children[1];
  const char* patterns[1];
  assert_int_equal(nested_tasks(f, in, 3, children, patterns, 1), 1);
  assert_int_equal(children[0], 1);
  assert_string_equal(patterns[0], "matmul+bias+relu");
  /* A bias of one element broadcast to every column is a row vector too. */
  free(in[2].data);
  const int64_t one[1] = {1};
  make_in(&in[2], 1, one);
  check_fusion(f, in, 3, 1, expected, "relu(bias[1] + x @ w)");
  free_in(in, 3);
  kf_fusion_release(f);
}

static void test_cast_pattern(void** state) {
  (void)state;
  /* With the cast back: the three casts of the inputs (one pointwise
   * segment of three loops: no value joins them), then the library
   * segment: linear + bias + gelu_tanh with both casts to float32 and the
   * cast back absorbed. Without it, the linear runs alone, x's and w's
   * casts share a segment and the bias's cast joins the float32 tail. */
  static const char* const closed[] = {"pointwise", "library"};
  static const char* const open_end[] = {"pointwise", "library", "pointwise"};
  const char* const dts[2] = {"bfloat16", "float16"};
  const int64_t sx[2] = {5, 8}, sw[2] = {7, 8}, sb[1] = {7};
  for (int d = 0; d < 2; ++d) {
    for (int back = 0; back <= 1; ++back) {
      kf_fusion f = cast_pattern(dts[d], back);
      host_in in[3];
      make_in(&in[0], 2, sx);
      make_in(&in[1], 2, sw);
      make_in(&in[2], 1, sb);
      check_fusion(f, in, 3, back ? 2 : 3, back ? closed : open_end,
                   back ? "cast pattern" : "cast pattern without the cast back");
      size_t children[4];
      const char* patterns[4];
      assert_int_equal(nested_tasks(f, in, 3, children, patterns, 4), back ? 2 : 3);
      const size_t library = 1;
      assert_int_equal(children[library], (size_t)back);
      assert_string_equal(patterns[library], back ? "linear+bias+gelu_tanh" : "");
      free_in(in, 3);
      kf_fusion_release(f);
    }
  }
}

static void test_not_a_pattern(void** state) {
  (void)state;
  static const char* const expected[] = {"library", "pointwise"};
  static const char* const names[] = {"intermediate read twice", "intermediate is an output",
                                      "bias [M,1]", "matmul without an N dim"};
  for (int kind = 0; kind < 4; ++kind) {
    kf_fusion f = from_text(kNotAPattern[kind]);
    const int64_t sx[2] = {5, 8}, sw_nk[2] = {7, 8}, sw_kn[2] = {8, 7}, sv[1] = {8}, sn[1] = {7},
                  sc_m1[2] = {5, 1}, sc_m[1] = {5};
    host_in in[3];
    make_in(&in[0], 2, sx);
    if (kind <= 1) make_in(&in[1], 2, sw_nk);
    else if (kind == 2) make_in(&in[1], 2, sw_kn);
    else make_in(&in[1], 1, sv);
    if (kind <= 1) make_in(&in[2], 1, sn);
    else if (kind == 2) make_in(&in[2], 2, sc_m1);
    else make_in(&in[2], 1, sc_m);
    check_fusion(f, in, 3, 2, expected, names[kind]);
    size_t children[2];
    const char* patterns[2];
    assert_int_equal(nested_tasks(f, in, 3, children, patterns, 2), 2);
    assert_int_equal(children[0], 0);
    assert_int_equal(children[1], 0);
    free_in(in, 3);
    kf_fusion_release(f);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layernorm_mlp),
      cmocka_unit_test(test_two_reductions_one_input),
      cmocka_unit_test(test_reduce_broadcast_reduce),
      cmocka_unit_test(test_matmul_chains),
      cmocka_unit_test(test_neg_segment_set_relu),
      cmocka_unit_test(test_linear_gelu_tanh_linear),
      cmocka_unit_test(test_matmul_bias_relu),
      cmocka_unit_test(test_cast_pattern),
      cmocka_unit_test(test_not_a_pattern),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
