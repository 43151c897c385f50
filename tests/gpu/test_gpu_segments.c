/* Segment by segment on the GPU: running every segment in order with
 * kf_execute_segment (intermediates allocated by the caller, shapes from
 * kf_value_shape) gives exactly the bits of a plain kf_execute, for every
 * multi-segment example: segment_set, a reduction whose epilogue needs its
 * own segment, two reductions over different axes,
 * layernorm -> linear -> gelu -> linear (library segments), and
 * linear -> gelu_tanh / relu -> linear, whose activations run in the first
 * library segment (a matmul pattern: cuBLASLt epilogue), also with that
 * epilogue forced onto its fallback (KFUSE_EPILOGUE_FALLBACK=1). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gpu/gpu_util.h"
#include "test_util.h"

#define MAX_VALUES 64

typedef struct {
  void* dev;
  int64_t shape[4];
  DLTensor t;
} dev_tensor;

static size_t numel(const int64_t* shape, int rank) {
  size_t n = 1;
  for (int d = 0; d < rank; ++d) n *= (size_t)shape[d];
  return n;
}

/* A compact float32 device tensor of `shape`, filled from `host` if given. */
static void make(dev_tensor* d, const int64_t* shape, int rank, const float* host) {
  memset(d, 0, sizeof *d);
  memcpy(d->shape, shape, sizeof(int64_t) * (size_t)rank);
  size_t bytes = numel(shape, rank) * sizeof(float);
  d->dev = gpu_alloc(bytes);
  if (host) gpu_to_device(d->dev, host, bytes);
  d->t.data = d->dev;
  d->t.device.device_type = kDLCUDA;
  d->t.device.device_id = 0;
  d->t.ndim = rank;
  d->t.dtype = kf_test_f32();
  d->t.shape = d->shape;
  d->t.strides = NULL;
}

/* Runs `text` (all inputs float32 of the given shapes) both ways and
 * compares every output bit for bit; returns the number of segments. */
static size_t check(const char* text, const int64_t shapes[][4], const int* ranks, size_t n_in) {
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(text, &f));
  dev_tensor in[8];
  const DLTensor* in_p[8];
  for (size_t i = 0; i < n_in; ++i) {
    size_t n = numel(shapes[i], ranks[i]);
    float* host = malloc(n * sizeof(float));
    for (size_t k = 0; k < n; ++k) host[k] = (float)((int)((k * 7 + i * 3) % 19) - 9) / 8.0f;
    make(&in[i], shapes[i], ranks[i], host);
    free(host);
    in_p[i] = &in[i].t;
  }
  size_t n_out;
  KF_CHECK(kf_fusion_num_outputs(f, &n_out));
  DLManagedTensor* plain[4];
  KF_CHECK(kf_execute(f, in_p, n_in, plain, n_out, NULL));

  /* Segment by segment: value id -> its device tensor. */
  dev_tensor* where[MAX_VALUES] = {0};
  dev_tensor owned[MAX_VALUES];
  size_t n_owned = 0;
  for (size_t i = 0; i < n_in; ++i) {
    kf_value_info info;
    info.struct_size = sizeof info;
    KF_CHECK(kf_fusion_input(f, i, &info));
    where[info.id] = &in[i];
  }
  kf_concrete c;
  KF_CHECK(kf_concretize(f, in_p, n_in, &c));
  kf_segmentation s;
  KF_CHECK(kf_segment(c, &s));
  size_t n_seg;
  KF_CHECK(kf_segmentation_count(s, &n_seg));
  for (size_t k = 0; k < n_seg; ++k) {
    kf_segment_info seg;
    seg.struct_size = sizeof seg;
    KF_CHECK(kf_segmentation_get(s, k, &seg));
    const DLTensor* seg_in[16];
    size_t n_seg_in = 0;
    for (size_t j = 0; j < seg.num_inputs; ++j) {
      if (seg.inputs[j] < 0) continue; /* input extents: read from the tensors */
      assert_non_null(where[seg.inputs[j]]);
      seg_in[n_seg_in++] = &where[seg.inputs[j]]->t;
    }
    DLTensor* seg_out[8];
    for (size_t j = 0; j < seg.num_outputs; ++j) {
      int64_t id = seg.outputs[j];
      kf_value_info info;
    info.struct_size = sizeof info;
      KF_CHECK(kf_fusion_value(f, id, &info));
      assert_int_equal(info.dtype, KF_FLOAT32);
      int64_t shape[4];
      KF_CHECK(kf_value_shape(f, in_p, n_in, id, shape, (size_t)info.rank));
      make(&owned[n_owned], shape, info.rank, NULL);
      where[id] = &owned[n_owned++];
      seg_out[j] = &where[id]->t;
    }
    KF_CHECK(kf_execute_segment(s, k, seg_in, n_seg_in, seg_out, seg.num_outputs, NULL));
  }
  GPU_CHECK(gpu.ctx_sync());
  for (size_t o = 0; o < n_out; ++o) {
    kf_value_info info;
    info.struct_size = sizeof info;
    KF_CHECK(kf_fusion_output(f, o, &info));
    size_t n = numel(plain[o]->dl_tensor.shape, plain[o]->dl_tensor.ndim);
    float* a = malloc(n * sizeof(float));
    float* b = malloc(n * sizeof(float));
    /* Both sides are compact row-major: kf_execute follows these inputs'
     * (row-major) layout, and the caller's tensors have NULL strides. */
    const DLTensor* p = &plain[o]->dl_tensor;
    for (int d = p->ndim - 1, expect = 1; d >= 0 && p->strides; expect *= (int)p->shape[d], --d)
      if (p->shape[d] > 1) assert_int_equal(p->strides[d], expect);
    gpu_to_host(a, plain[o]->dl_tensor.data, n * sizeof(float));
    gpu_to_host(b, where[info.id]->dev, n * sizeof(float));
    assert_memory_equal(a, b, n * sizeof(float));
    free(a);
    free(b);
    plain[o]->deleter(plain[o]);
  }
  for (size_t i = 0; i < n_owned; ++i) gpu_free(owned[i].dev);
  for (size_t i = 0; i < n_in; ++i) gpu_free(in[i].dev);
  kf_segmentation_release(s);
  kf_concrete_release(c);
  kf_fusion_release(f);
  return n_seg;
}

/* kf_fusion_prepare compiles and loads every segment's kernels without
 * running: a two-segment fusion on CUDA tensors is not ready, then ready,
 * and its first call gives what the CPU backend gives. */
static void test_prepare(void** state) {
  (void)state;
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text("input x: tensor<float32, 2>\nconst two: float32 = 2\nm = mul(x, two)\n"
                               "e = exp(m)\ns = segment_set(e)\nz = sum(s) {axes=[1], keepdim=true}\n"
                               "y = div(s, z)\noutput y\n", &f));
  const int64_t shape[2] = {33, 1000};
  float* host = malloc(33 * 1000 * sizeof(float));
  for (size_t k = 0; k < 33 * 1000; ++k) host[k] = (float)((int)(k % 19) - 9) / 16.0f;
  dev_tensor x;
  make(&x, shape, 2, host);
  const DLTensor* in[1] = {&x.t};
  int ready = -1;
  KF_CHECK(kf_fusion_is_ready(f, in, 1, NULL, 0, &ready));
  assert_int_equal(ready, 0);
  KF_CHECK(kf_fusion_prepare(f, in, 1, NULL, 0));
  KF_CHECK(kf_fusion_is_ready(f, in, 1, NULL, 0, &ready));
  assert_int_equal(ready, 1);
  DLManagedTensor* out = NULL;
  KF_CHECK(kf_execute(f, in, 1, &out, 1, NULL));
  GPU_CHECK(gpu.ctx_sync());
  float* got = malloc(33 * 1000 * sizeof(float));
  gpu_to_host(got, out->dl_tensor.data, 33 * 1000 * sizeof(float));
  out->deleter(out);
  DLTensor cx = kf_test_tensor(host, kf_test_f32(), 2, (int64_t*)shape, NULL);
  const DLTensor* cin[1] = {&cx};
  KF_CHECK(kf_execute(f, cin, 1, &out, 1, NULL));
  const float* want = (const float*)out->dl_tensor.data;
  for (size_t k = 0; k < 33 * 1000; ++k)
    if (!(fabsf(got[k] - want[k]) <= 1e-5f * (1.0f + fabsf(want[k]))))
      fail_msg("element %zu: gpu %g, cpu %g", k, (double)got[k], (double)want[k]);
  out->deleter(out);
  free(got);
  free(host);
  gpu_free(x.dev);
  kf_fusion_release(f);
}

static void test_segment_set(void** state) {
  (void)state;
  const int64_t shapes[1][4] = {{64, 100}};
  const int ranks[1] = {2};
  size_t n = check("input x: tensor<float32, 2>\nconst two: float32 = 2\nm = mul(x, two)\n"
                   "e = exp(m)\ns = segment_set(e)\nz = sum(s) {axes=[1], keepdim=true}\n"
                   "y = div(s, z)\noutput y\n", shapes, ranks, 1);
  assert_int_equal(n, 2);
}

static void test_reduction_epilogue(void** state) {
  (void)state;
  const int64_t shapes[2][4] = {{33, 70}, {33, 70}};
  const int ranks[2] = {2, 2};
  size_t n = check("input x: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
                   "s = sum(x) {axes=[1], keepdim=true}\nz = add(s, y)\noutput z\n", shapes, ranks, 2);
  assert_int_equal(n, 2);
}

/* Two reductions of x over different axes: one segment since session 50
 * (grouping.h step 4: reductions that read one tensor merge where a
 * scheduler takes them together; here a row kernel whose column sum is
 * an outer reduction), which reads x once. */
static void test_two_reductions_two_axes(void** state) {
  (void)state;
  const int64_t shapes[1][4] = {{40, 24}};
  const int ranks[1] = {2};
  size_t n = check("input x: tensor<float32, 2>\na = sum(x) {axes=[0]}\nb = sum(x) {axes=[1]}\n"
                   "output a\noutput b\n", shapes, ranks, 1);
  assert_int_equal(n, 1);
}

static void test_layernorm_mlp(void** state) {
  (void)state;
  const int64_t shapes[5][4] = {{16, 32}, {48, 32}, {48}, {32, 48}, {32}};
  const int ranks[5] = {2, 2, 1, 2, 1};
  size_t n = check(
      "input x: tensor<float32, 2>\ninput w1: tensor<float32, 2>\ninput b1: tensor<float32, 1>\n"
      "input w2: tensor<float32, 2>\ninput b2: tensor<float32, 1>\nconst eps: float32 = 1e-5\n"
      "v, mu = var_mean(x) {axes=[1], keepdim=true, correction=0}\nxc = sub(x, mu)\n"
      "ve = add(v, eps)\nr = rsqrt(ve)\nn = mul(xc, r)\nh = linear(n, w1, b1)\ng = gelu(h)\n"
      "y = linear(g, w2, b2)\noutput y\n", shapes, ranks, 5);
  assert_int_equal(n, 4);
}

/* linear + bias + activation, then linear: two library segments. */
static size_t check_mlp(const char* act) {
  const int64_t shapes[5][4] = {{37, 64}, {96, 64}, {96}, {33, 96}, {33}};
  const int ranks[5] = {2, 2, 1, 2, 1};
  char text[512];
  snprintf(text, sizeof text,
           "input x: tensor<float32, 2>\ninput w1: tensor<float32, 2>\ninput b1: tensor<float32, 1>\n"
           "input w2: tensor<float32, 2>\ninput b2: tensor<float32, 1>\nh = linear(x, w1, b1)\n"
           "g = %s(h)\ny = linear(g, w2, b2)\noutput y\n", act);
  return check(text, shapes, ranks, 5);
}

static void test_matmul_patterns(void** state) {
  (void)state;
  assert_int_equal(check_mlp("gelu_tanh"), 2);
  assert_int_equal(check_mlp("relu"), 2);
  setenv("KFUSE_EPILOGUE_FALLBACK", "1", 1);
  assert_int_equal(check_mlp("gelu_tanh"), 2);
  assert_int_equal(check_mlp("relu"), 2);
  unsetenv("KFUSE_EPILOGUE_FALLBACK");
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prepare),
      cmocka_unit_test(test_segment_set),
      cmocka_unit_test(test_reduction_epilogue),
      cmocka_unit_test(test_two_reductions_two_axes),
      cmocka_unit_test(test_layernorm_mlp),
      cmocka_unit_test(test_matmul_patterns),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
