/* In-place outputs on the GPU: an output that updates its input (alias)
 * gives the same values as the CPU backend, both where the run plan writes
 * it straight into the input (a pointwise kernel reading the input only
 * where it writes: optimizer steps, softmax-like rows, a residual add +
 * RMSNorm) and where it must not (the input read transposed or shifted):
 * a rule too loose would let threads overwrite elements other threads
 * still read, and these fusions would then differ. Scatters updated in
 * place skip their copy (test_scatters). Shapes with an odd width take the scalar kernels,
 * multiples of 4 the vector kernels. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gpu/gpu_util.h"
#include "test_util.h"

/* Runs `text` (float32 inputs of one rank-2 shape; output o aliases input
 * alias[o]) in place on the CPU and on the GPU, and compares every input
 * buffer afterwards (padding included: it must stay untouched); also
 * kf_execute_into with the inputs as the outputs. layout (NULL: all
 * compact): per input, {element offset, padding of the inner dim, 1 for
 * column-major}. */
static void check_in_place_at(const char* text, int64_t rows, int64_t cols, size_t n_in, const int* alias,
                              const int64_t (*layout)[3]) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  size_t n_out;
  KF_CHECK(kf_fusion_num_outputs(f, &n_out));
  int64_t shape[2] = {rows, cols};
  size_t n[4];
  float* host[4];
  void* dev[4];
  DLTensor cpu_t[4], gpu_t[4];
  int64_t strides[4][2];
  const DLTensor *cpu_in[4], *gpu_in[4];
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < n_in; ++i) {
      const int64_t off = layout != NULL ? layout[i][0] : 0, pad = layout != NULL ? layout[i][1] : 0;
      const int column_major = layout != NULL && layout[i][2] != 0;
      strides[i][0] = column_major ? 1 : cols + pad;
      strides[i][1] = column_major ? rows + pad : 1;
      n[i] = (size_t)(off + (column_major ? cols * (rows + pad) : rows * (cols + pad)));
      host[i] = malloc(n[i] * sizeof(float));
      for (size_t k = 0; k < n[i]; ++k) host[i][k] = (float)((int)((k * 7 + i * 3) % 19) - 9) / 8.0f;
      dev[i] = gpu_alloc(n[i] * sizeof(float));
      gpu_to_device(dev[i], host[i], n[i] * sizeof(float));
      cpu_t[i] = kf_test_tensor(host[i] + off, kf_test_f32(), 2, shape, strides[i]);
      gpu_t[i] = cpu_t[i];
      gpu_t[i].data = (float*)dev[i] + off;
      gpu_t[i].device.device_type = kDLCUDA;
      cpu_in[i] = &cpu_t[i];
      gpu_in[i] = &gpu_t[i];
    }
    DLManagedTensor* outs[4];
    KF_CHECK(kf_execute(f, cpu_in, n_in, outs, n_out, NULL));
    for (size_t o = 0; o < n_out; ++o) outs[o]->deleter(outs[o]);
    if (pass == 0) {
      KF_CHECK(kf_execute(f, gpu_in, n_in, outs, n_out, NULL));
      for (size_t o = 0; o < n_out; ++o) outs[o]->deleter(outs[o]);
    } else {
      /* kf_execute_into: output o is given as its input's own view. */
      DLTensor* into[4];
      for (size_t o = 0; o < n_out; ++o) into[o] = &gpu_t[alias[o]];
      KF_CHECK(kf_execute_into(f, gpu_in, n_in, into, n_out, NULL));
    }
    GPU_CHECK(gpu.ctx_sync());
    for (size_t i = 0; i < n_in; ++i) {
      float* got = malloc(n[i] * sizeof(float));
      gpu_to_host(got, dev[i], n[i] * sizeof(float));
      for (size_t k = 0; k < n[i]; ++k) {
        const float want = host[i][k];
        /* Reductions sum in another order on each backend; a wrong element
         * (read after another thread wrote it) is off by O(1). */
        if (!(fabsf(got[k] - want) <= 1e-4f * (1.0f + fabsf(want))))
          fail_msg("%s\ninput %zu element %zu (pass %d, %lldx%lld, offset %lld, row stride %lld): gpu %g, cpu %g", text,
                   i, k, pass, (long long)rows, (long long)cols, (long long)(layout != NULL ? layout[i][0] : 0),
                   (long long)strides[i][0], (double)got[k], (double)want);
      }
      free(got);
      gpu_free(dev[i]);
      free(host[i]);
    }
  }
  kf_fusion_release(f);
}

static void check_in_place(const char* text, int64_t rows, int64_t cols, size_t n_in, const int* alias) {
  check_in_place_at(text, rows, cols, n_in, alias, NULL);
}

/* Scatters updated in place (an embedding gradient's index_add_, a KV-cache
 * write): kf_execute_into with the scattered tensor as the result leaves
 * out the copy of the tensor onto itself. x [rows, cols] float32, an index
 * of n rows with repeats (and none of some rows), src [n, cols]: the GPU
 * result against the CPU backend's, both in place. */
static void check_scatter_in_place(const char* attrs, int64_t rows, int64_t cols, int64_t n) {
  char text[512];
  snprintf(text, sizeof text,
           "input x: tensor<float32, 2>\ninput i: tensor<int64, 1>\ninput s: tensor<float32, 2>\n"
           "y = index_reduce(x, i, s) {dim=0, %s}\noutput y {alias=0}\n", attrs);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  const size_t nx = (size_t)(rows * cols), ns = (size_t)(n * cols);
  float* x = malloc(nx * sizeof(float));
  float* src = malloc(ns * sizeof(float));
  float* got = malloc(nx * sizeof(float));
  int64_t* idx = malloc((size_t)n * sizeof(int64_t));
  for (size_t k = 0; k < nx; ++k) x[k] = (float)((int)((k * 7) % 19) - 9) / 8.0f;
  for (size_t k = 0; k < ns; ++k) src[k] = (float)((int)((k * 5) % 17) - 8) / 4.0f;
  for (int64_t k = 0; k < n; ++k) idx[k] = (k * 3) % (rows > 3 ? rows - 3 : rows); /* repeats; last rows untouched */
  int64_t xs[2] = {rows, cols}, is[1] = {n}, ss[2] = {n, cols};
  DLTensor cpu_t[3] = {kf_test_tensor(x, kf_test_f32(), 2, xs, NULL), kf_test_tensor(idx, kf_test_i64(), 1, is, NULL),
                       kf_test_tensor(src, kf_test_f32(), 2, ss, NULL)};
  const DLTensor* cpu_in[3] = {&cpu_t[0], &cpu_t[1], &cpu_t[2]};
  const size_t bytes[3] = {nx * sizeof(float), (size_t)n * sizeof(int64_t), ns * sizeof(float)};
  void* dev[3];
  DLTensor gpu_t[3];
  const DLTensor* gpu_in[3];
  for (int k = 0; k < 3; ++k) {
    dev[k] = gpu_alloc(bytes[k]);
    gpu_to_device(dev[k], cpu_t[k].data, bytes[k]);
    gpu_t[k] = cpu_t[k];
    gpu_t[k].data = dev[k];
    gpu_t[k].device.device_type = kDLCUDA;
    gpu_in[k] = &gpu_t[k];
  }
  /* Both in place (kf_execute updates an aliased output's input too). */
  DLManagedTensor* cpu_out;
  KF_CHECK(kf_execute(f, cpu_in, 3, &cpu_out, 1, NULL));
  cpu_out->deleter(cpu_out);
  DLTensor* into[1] = {&gpu_t[0]};
  KF_CHECK(kf_execute_into(f, gpu_in, 3, into, 1, NULL));
  GPU_CHECK(gpu.ctx_sync());
  gpu_to_host(got, dev[0], bytes[0]);
  const float* w = x;
  for (size_t k = 0; k < nx; ++k)
    if (!(fabsf(got[k] - w[k]) <= 1e-4f * (1.0f + fabsf(w[k])))) /* (sums in another order) */
      fail_msg("%s\nelement %zu (%lldx%lld, %lld updates): gpu %g, cpu %g", text, k, (long long)rows, (long long)cols,
               (long long)n, (double)got[k], (double)w[k]);
  for (int k = 0; k < 3; ++k) gpu_free(dev[k]);
  free(x);
  free(src);
  free(got);
  free(idx);
  kf_fusion_release(f);
}

static void test_scatters(void** state) {
  (void)state;
  const char* const attrs[] = {"reduce=sum", "reduce=sum, deterministic=true", "reduce=mean",
                               "reduce=mean, include_self=false", "reduce=amax", "reduce=none, deterministic=true"};
  for (size_t a = 0; a < sizeof attrs / sizeof attrs[0]; ++a) {
    check_scatter_in_place(attrs[a], 1000, 256, 300);  /* slices wide enough for the sorted path */
    check_scatter_in_place(attrs[a], 999, 7, 4000);    /* narrow slices, many repeats: the atomic path */
  }
}

static const char* const kAdam =
    "input p: tensor<float32, 2>\ninput g: tensor<float32, 2>\ninput m: tensor<float32, 2>\n"
    "const b1: float32 = 0.5\nconst lr: float32 = 0.25\n"
    "m1 = mul(m, b1)\nm2 = add(m1, g)\nu = mul(m2, lr)\np2 = sub(p, u)\n"
    "output p2 {alias=0}\noutput m2 {alias=2}\n";
static const int kAdamAlias[2] = {0, 2};
static const int kFirst[1] = {0};

static void test_pointwise_step(void** state) {
  (void)state;
  check_in_place(kAdam, 512, 1024, 3, kAdamAlias);  /* vector kernel */
  check_in_place(kAdam, 1023, 1001, 3, kAdamAlias); /* odd width: scalar kernel */
}

/* A step whose tensors do not all start 16-byte vectors: a parameter at
 * an odd offset updated in place, a padded moment, a gradient at an
 * offset. The vector loop reads and writes those per lane beside the
 * others' vectors (vector_plan.h, drop_misaligned), or, where they move
 * most of the bytes, the plan is the scalar loop, whose flat vectors run
 * past a head where all tensors share one misalignment (rows of 1001:
 * across rows). */
static void test_misaligned_step(void** state) {
  (void)state;
  static const int64_t layouts[][3][3] = {
      {{1, 0, 0}, {0, 0, 0}, {0, 0, 0}},  /* p at an offset of one element: its stores per lane */
      {{0, 0, 0}, {3, 0, 0}, {0, 0, 0}},  /* g at an offset of three: its loads per lane */
      {{0, 0, 0}, {0, 0, 0}, {0, 1, 0}},  /* m's rows padded by one: m per lane */
      {{0, 0, 0}, {0, 4, 0}, {0, 0, 0}},  /* g padded by a whole vector: all in vectors */
      {{1, 1, 0}, {2, 0, 0}, {0, 3, 0}},  /* all misaligned: the scalar loop */
      {{3, 0, 0}, {3, 0, 0}, {3, 0, 0}},  /* all at one offset: flat vectors past a head of one */
      {{1, 0, 0}, {5, 0, 0}, {9, 0, 0}},  /* offsets alike modulo a vector: the same */
      {{1, 0, 0}, {2, 0, 0}, {1, 0, 0}},  /* g unlike the others: the scalar loop */
  };
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; ++k) {
    check_in_place_at(kAdam, 512, 1024, 3, kAdamAlias, layouts[k]);
    check_in_place_at(kAdam, 37, 1001, 3, kAdamAlias, layouts[k]);
  }
}

/* A step whose tensors lie in two orders: the tiled kernel, its in-place
 * outputs written straight into their inputs (no phase-1 outputs), a
 * column-major output through a staged tile of its own (phase 3,
 * TiledParams::outputs_staged) or across its memory where no tile fits.
 * A rule too loose (a tile's reads after another thread's store) would
 * show here as elements off by O(1). */
static void test_tiled_step(void** state) {
  (void)state;
  static const int64_t layouts[][3][3] = {
      {{0, 0, 1}, {0, 0, 0}, {0, 0, 0}},  /* p column-major: tiled in, staged out */
      {{0, 0, 0}, {0, 0, 0}, {0, 0, 1}},  /* m column-major */
      {{0, 0, 1}, {0, 0, 0}, {0, 0, 1}},  /* p and m column-major, g across them */
      {{1, 0, 1}, {0, 3, 0}, {0, 0, 0}},  /* p column-major at an odd offset, g padded */
  };
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; ++k) {
    check_in_place_at(kAdam, 512, 1024, 3, kAdamAlias, layouts[k]);
    check_in_place_at(kAdam, 333, 1001, 3, kAdamAlias, layouts[k]);
  }
  /* g and m column-major beside row-major p and v (seed 1056028048
     c0197): m2 is stored along a in phase 1 into m, which phase 2 reads
     from its tile alone, after a barrier that follows the tiles' fill */
  static const char* const kAdamV =
      "input p: tensor<float32, 2>\ninput g: tensor<float32, 2>\ninput m: tensor<float32, 2>\n"
      "input v: tensor<float32, 2>\nconst b1: float32 = 0.5\nconst lr: float32 = 0.25\n"
      "m1 = mul(m, b1)\nm2 = add(m1, g)\nv1 = mul(v, b1)\ngg = mul(g, g)\nv2 = add(v1, gg)\n"
      "mv = mul(m2, v2)\nu = mul(mv, lr)\np2 = sub(p, u)\n"
      "output p2 {alias=0}\noutput m2 {alias=2}\noutput v2 {alias=3}\n";
  static const int kAdamVAlias[3] = {0, 2, 3};
  static const int64_t moments_column_major[][4][3] = {
      {{0, 0, 0}, {0, 0, 1}, {0, 0, 1}, {0, 0, 0}},
      {{0, 0, 0}, {0, 0, 1}, {1, 0, 1}, {3, 0, 0}}, /* m and v at odd offsets: no vectors */
  };
  for (size_t k = 0; k < 2; ++k) {
    check_in_place_at(kAdamV, 512, 1024, 4, kAdamVAlias, moments_column_major[k]);
    check_in_place_at(kAdamV, 333, 1001, 4, kAdamVAlias, moments_column_major[k]);
  }
}

static void test_transposed_read(void** state) {
  (void)state;
  const char* text = "input x: tensor<float32, 2>\nt = permute(x) {perm=[1, 0]}\ny = add(x, t)\noutput y {alias=0}\n";
  check_in_place(text, 512, 512, 1, kFirst);
  check_in_place(text, 333, 333, 1, kFirst);
}

static void test_shifted_read(void** state) {
  (void)state;
  const char* text =
      "input x: tensor<float32, 2>\nconst z: float32 = 0\n"
      "s = slice(x) {dim=1, start=1}\nq = pad(s, z) {pads=[0, 0, 0, 1]}\ny = add(x, q)\noutput y {alias=0}\n";
  check_in_place(text, 256, 4096, 1, kFirst);
  check_in_place(text, 255, 4095, 1, kFirst);
}

/* Rotary embeddings in place (rotate-half: each element reads its other
 * half). By default they write in place through windows of the head dim:
 * vectors (widths 128 and 80), the scalar twin (width 66), a partial
 * rotation (the first 32 of 128), and a window longer than a block
 * iteration (4096: the launch copies q first); q one element off (no
 * vector plan) and, under KFUSE_TUNE_POINTWISE_IN_PLACE_WINDOWS=0 (the
 * ctest entry gpu_test_gpu_in_place_deferred), all of them through an
 * intermediate. */
static void test_rotary(void** state) {
  (void)state;
  static const char* const kRope =
      "input q: tensor<float32, 2>\ninput c: tensor<float32, 2>\ninput s: tensor<float32, 2>\n"
      "q1 = slice(q) {dim=1, start=0, stop=%lld}\nq2 = slice(q) {dim=1, start=%lld, stop=end}\nn2 = neg(q2)\n"
      "r = cat(n2, q1) {dim=1}\nqc = mul(q, c)\nrs = mul(r, s)\ny = add(qc, rs)\noutput y {alias=0}\n";
  const int64_t widths[] = {128, 80, 66, 4096}, rows[] = {4096, 999, 1001, 64};
  char text[1024];
  for (size_t k = 0; k < 4; ++k) {
    snprintf(text, sizeof text, kRope, (long long)(widths[k] / 2), (long long)(widths[k] / 2));
    check_in_place(text, rows[k], widths[k], 3, kFirst);
  }
  static const int64_t q_off_by_one[3][3] = {{1, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  snprintf(text, sizeof text, kRope, 64LL, 64LL);
  check_in_place_at(text, 513, 128, 3, kFirst, q_off_by_one);
  const char* partial =
      "input q: tensor<float32, 2>\ninput c: tensor<float32, 2>\ninput s: tensor<float32, 2>\n"
      "qr = slice(q) {dim=1, start=0, stop=32}\nqp = slice(q) {dim=1, start=32, stop=end}\n"
      "q1 = slice(qr) {dim=1, start=0, stop=16}\nq2 = slice(qr) {dim=1, start=16, stop=end}\nn2 = neg(q2)\n"
      "r = cat(n2, q1) {dim=1}\ncr = slice(c) {dim=1, start=0, stop=32}\nsr = slice(s) {dim=1, start=0, stop=32}\n"
      "qc = mul(qr, cr)\nrs = mul(r, sr)\no = add(qc, rs)\ny = cat(o, qp) {dim=1}\noutput y {alias=0}\n";
  check_in_place(partial, 2048, 128, 3, kFirst);
}

/* Row kernels write in place: the register path, the staged and memory
 * paths of long rows, the cluster kernel (sm_90), the edges kernel of odd
 * widths. */
static void test_row_kernels(void** state) {
  (void)state;
  const char* text =
      "input x: tensor<float32, 2>\nm = max(x) {axes=[1], keepdim=true}\ny = sub(x, m)\noutput y {alias=0}\n";
  check_in_place(text, 1024, 4096, 1, kFirst);
  check_in_place(text, 37, 50257, 1, kFirst);
  check_in_place(text, 64, 65536, 1, kFirst);
  check_in_place(text, 4, 262144, 1, kFirst);
  check_in_place(text, 3, 1000001, 1, kFirst);
  /* A fused residual add + RMSNorm (vLLM's fused_add_rms_norm): y into x,
   * the new residual into r; two phases' worth of reads of both. */
  const char* add_norm =
      "input x: tensor<float32, 2>\ninput r: tensor<float32, 2>\nconst eps: float32 = 1e-6\n"
      "s = add(x, r)\nsq = mul(s, s)\nms = mean(sq) {axes=[1], keepdim=true}\nme = add(ms, eps)\n"
      "inv = rsqrt(me)\nsm = sub(s, ms)\ny = mul(sm, inv)\noutput y {alias=0}\noutput s {alias=1}\n";
  static const int both[2] = {0, 1};
  check_in_place(add_norm, 512, 4096, 2, both);
  check_in_place(add_norm, 33, 50257, 2, both);
  check_in_place(add_norm, 8, 131072, 2, both);
}

/* A row kernel reading its input shifted along the row: must be deferred. */
static void test_row_kernel_shifted_read(void** state) {
  (void)state;
  const char* text =
      "input x: tensor<float32, 2>\nconst z: float32 = 0\nm = max(x) {axes=[1], keepdim=true}\n"
      "s = slice(x) {dim=1, start=1}\nq = pad(s, z) {pads=[0, 0, 0, 1]}\ny = sub(q, m)\noutput y {alias=0}\n";
  check_in_place(text, 1024, 4096, 1, kFirst);
  check_in_place(text, 37, 50257, 1, kFirst);
}

/* A residual add + RMSNorm, both outputs in place. */
static const char* const kAddNorm =
    "input x: tensor<float32, 2>\ninput r: tensor<float32, 2>\nconst eps: float32 = 1e-6\n"
    "s = add(x, r)\nsq = mul(s, s)\nms = mean(sq) {axes=[1], keepdim=true}\nme = add(ms, eps)\n"
    "inv = rsqrt(me)\ny = mul(s, inv)\noutput y {alias=0}\noutput s {alias=1}\n";

/* A residual add + RMSNorm written in place into a column-major input
 * (rows across its memory): that input is copied into the other's layout
 * first, the output produced there and copied back at the end
 * (ConcreteFusion::relayout_outputs). */
static void test_rows_across_an_in_place_input(void** state) {
  (void)state;
  static const int both[2] = {0, 1};
  static const int64_t x_transposed[2][3] = {{0, 0, 1}, {0, 0, 0}};
  static const int64_t r_transposed_padded[2][3] = {{3, 0, 0}, {0, 5, 1}};
  check_in_place_at(kAddNorm, 1024, 2048, 2, both, x_transposed);
  check_in_place_at(kAddNorm, 333, 1001, 2, both, r_transposed_padded);
}

/* Short rows (the short-row kernel: several rows per block) in place: the
 * last block's groups past the last row compute that row again from an
 * input its own group may already have overwritten, so they must store
 * nothing. RMSNorm over QK-norm's head dims, and a residual add + RMSNorm;
 * row counts that are not multiples of the rows per block. */
static void test_short_rows(void** state) {
  (void)state;
  const char* rmsnorm =
      "input x: tensor<float32, 2>\nconst eps: float32 = 1e-6\n"
      "sq = mul(x, x)\nms = mean(sq) {axes=[1], keepdim=true}\nme = add(ms, eps)\n"
      "inv = rsqrt(me)\ny = mul(x, inv)\noutput y {alias=0}\n";
  static const int both[2] = {0, 1};
  const int64_t shapes[][2] = {{1000, 128}, {7, 64}, {100003, 64}, {333, 32}, {1001, 8}, {999, 256}, {77, 112}};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; ++k) {
    check_in_place(rmsnorm, shapes[k][0], shapes[k][1], 1, kFirst);
    check_in_place(kAddNorm, shapes[k][0], shapes[k][1], 2, both);
  }
}

int main(void) {
  if (!gpu_open()) {
    printf("no CUDA device: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_step),
      cmocka_unit_test(test_misaligned_step),
      cmocka_unit_test(test_tiled_step),
      cmocka_unit_test(test_transposed_read),
      cmocka_unit_test(test_shifted_read),
      cmocka_unit_test(test_row_kernels),
      cmocka_unit_test(test_row_kernel_shifted_read),
      cmocka_unit_test(test_short_rows),
      cmocka_unit_test(test_rows_across_an_in_place_input),
      cmocka_unit_test(test_scatters),
      cmocka_unit_test(test_rotary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
