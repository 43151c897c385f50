/* float16 rows near the float16 maximum, as T5 keeps them (issue 43 item
 * 16): a residual add that overflows to inf in float16, a clamp to
 * 65504 - 1000 wherever the tensor holds an inf, and T5's RMS norm with a
 * float16 weight. Once reported 12 float16 ulps from a float64 reference
 * on the GPU. Measured on an H200 (session 27, device run 1): the clamped
 * sum is bit-identical to the CPU backend, and the output within 2 ulps
 * (1 ulp in the normalized value before the weight: float32 rsqrtf and
 * the reduction's order against the CPU backend's float64). The rule here
 * allows 4. Inputs are float32 rounded to float16 inside the fusion, so
 * both backends see the same float16 values. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gpu/gpu_util.h"
#include "test_util.h"

static const char* const kT5 =
    "input xf32: tensor<float32, 2>\ninput rf32: tensor<float32, 2>\ninput wf32: tensor<float32, 1>\n"
    "x = cast(xf32) {dtype=float16}\nr = cast(rf32) {dtype=float16}\nw = cast(wf32) {dtype=float16}\n"
    "h = add(x, r)\ninf = isinf(h)\nfi = cast(inf) {dtype=float32}\nanyinf = max(fi)\n"
    "const big: float32 = 65504.0\nconst less: float32 = 64504.0\nd = sub(big, less)\n"
    "step = mul(anyinf, d)\ncv = sub(big, step)\nncv = neg(cv)\nhf0 = cast(h) {dtype=float32}\n"
    "hc = clamp(hf0, ncv, cv)\nh2 = cast(hc) {dtype=float16}\nh2f = cast(h2) {dtype=float32}\n"
    "sq = mul(h2f, h2f)\nvar = mean(sq) {axes=[1], keepdim=true}\nconst eps: float32 = 1e-6\n"
    "ve = add(var, eps)\nrs = rsqrt(ve)\nn = mul(h2f, rs)\nnh = cast(n) {dtype=float16}\n"
    "y = mul(w, nh)\nyf = cast(y) {dtype=float32}\noutput yf\noutput h2f\n";

/* A float16 ulp at |v| (normal range). */
static double half_ulp(double v) {
  const double a = fabs(v) < 6.103515625e-05 ? 6.103515625e-05 : fabs(v);
  return ldexp(1.0, (int)floor(log2(a)) - 10);
}

static float draw(uint64_t* s, float scale, float lo, float hi) {
  float sum = 0;
  for (int k = 0; k < 4; ++k) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    sum += (float)((*s >> 40) & 0xffffff) / 16777216.0f - 0.5f;
  }
  const float v = sum * scale;
  return v < lo ? lo : v > hi ? hi : v;
}

static void test_t5_rows_near_the_float16_maximum(void** state) {
  (void)state;
  enum { kRows = 1024, kCols = 4096 };
  const size_t n = (size_t)kRows * kCols;
  float* x = malloc(n * sizeof(float));
  float* r = malloc(n * sizeof(float));
  float* w = malloc(kCols * sizeof(float));
  uint64_t s = 27;
  for (size_t i = 0; i < n; ++i) x[i] = draw(&s, 40000.0f, -65000.0f, 65000.0f);
  for (size_t i = 0; i < n; ++i) r[i] = draw(&s, 40000.0f, -65000.0f, 65000.0f);
  for (size_t i = 0; i < kCols; ++i) w[i] = 1.0f + draw(&s, 1.0f, -0.5f, 0.5f);
  kf_fusion f;
  KF_CHECK(kf_fusion_from_text(kT5, &f));
  int64_t shape[2] = {kRows, kCols}, wshape[1] = {kCols};
  DLTensor cpu[3] = {kf_test_tensor(x, kf_test_f32(), 2, shape, NULL), kf_test_tensor(r, kf_test_f32(), 2, shape, NULL),
                     kf_test_tensor(w, kf_test_f32(), 1, wshape, NULL)};
  const DLTensor* cpu_in[3] = {&cpu[0], &cpu[1], &cpu[2]};
  DLManagedTensor* want[2];
  KF_CHECK(kf_execute(f, cpu_in, 3, want, 2, NULL));
  void* dev[3];
  DLTensor gpu_t[3];
  const DLTensor* gpu_in[3];
  const size_t bytes[3] = {n * sizeof(float), n * sizeof(float), kCols * sizeof(float)};
  const float* host[3] = {x, r, w};
  for (int i = 0; i < 3; ++i) {
    dev[i] = gpu_alloc(bytes[i]);
    gpu_to_device(dev[i], host[i], bytes[i]);
    gpu_t[i] = cpu[i];
    gpu_t[i].data = dev[i];
    gpu_t[i].device.device_type = kDLCUDA;
    gpu_in[i] = &gpu_t[i];
  }
  DLManagedTensor* got[2];
  KF_CHECK(kf_execute(f, gpu_in, 3, got, 2, NULL));
  GPU_CHECK(gpu.ctx_sync());
  float* g = malloc(n * sizeof(float));
  /* The clamped sum: exact on both. */
  gpu_to_host(g, got[1]->dl_tensor.data, n * sizeof(float));
  const float* h2 = (const float*)want[1]->dl_tensor.data;
  size_t clamped = 0;
  for (size_t i = 0; i < n; ++i) {
    if (g[i] != h2[i]) fail_msg("clamped sum element %zu: gpu %g, cpu %g", i, (double)g[i], (double)h2[i]);
    clamped += fabsf(h2[i]) == 64512.0f; /* 64504, rounded to float16 */
  }
  assert_true(clamped > 0); /* the sum overflows somewhere, so the clamp is at 64504 */
  gpu_to_host(g, got[0]->dl_tensor.data, n * sizeof(float));
  const float* y = (const float*)want[0]->dl_tensor.data;
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ulps = fabs((double)g[i] - (double)y[i]) / half_ulp(y[i]);
    if (!(ulps <= 4)) fail_msg("element %zu: gpu %.9g, cpu %.9g: %.1f float16 ulps", i, (double)g[i], (double)y[i], ulps);
    worst = ulps > worst ? ulps : worst;
  }
  printf("T5 rows near the float16 maximum: clamped sum bit-identical, output within %.1f float16 ulps\n", worst);
  for (int i = 0; i < 2; ++i) {
    got[i]->deleter(got[i]);
    want[i]->deleter(want[i]);
  }
  for (int i = 0; i < 3; ++i) gpu_free(dev[i]);
  free(g);
  free(x);
  free(r);
  free(w);
  kf_fusion_release(f);
}

int main(void) {
  GPU_REQUIRE_DEVICE();
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_t5_rows_near_the_float16_maximum)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
