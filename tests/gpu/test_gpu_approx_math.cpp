// The fast forms codegen may use (core/ir/approx_math.h) over every
// float32 input: exp, sigmoid and silu as approximate_form writes them,
// on all 2^32 bit patterns, rounded to bfloat16 and to float16, against the
// correctly rounded float64 result: never more than 1 ulp apart (adjacent
// bit patterns at most, NaN where it is NaN). Where the float64 result is a
// normal float32, the relative error of the float32 fast result must stay
// under the bound the analysis assumes (kExpError, kSigmoidError). The
// shared division (kf_div_approx) is checked the same way on 2^32 pairs of
// a float32 and a hashed divisor against kDivError.
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/ir/approx_math.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/prelude.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/nvrtc.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {  // this cmocka's header has no C++ guard
#include <cmocka.h>
}

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace kf;

namespace {

// Per form: [bfloat16 results over 1 ulp, float16 results over 1 ulp,
// first such input + 1 (0: none)] as counters, and the largest relative
// error as float bits.
constexpr int kForms = 4;  // exp, sigmoid, silu, division
constexpr int kCounters = 3;

std::string test_source() {
  DType t;
  const std::string exp_fast = approximate_form(Op::EXP, {"x"}, &t);
  const std::string sigmoid_fast = approximate_form(Op::SIGMOID, {"x"}, &t);
  const std::string silu_fast = approximate_form(Op::SILU, {"x"}, &t);
  std::string s(cuda_prelude());
  s += R"(
// Ordered position of a 16-bit float's bits (-0 and +0 the same); NaN apart.
KF_DEV int kf_order16(unsigned short u, unsigned short sign, unsigned short mag) {
  return (u & sign) ? -(int)(u & mag) : (int)(u & mag);
}
// More than 1 ulp apart: further than the next bit pattern (the largest
// finite value and the infinity after it are neighbours: a result within
// 1 ulp of the overflow threshold rounds to either), or NaN against a number.
KF_DEV bool kf_far16(unsigned short a, unsigned short b, unsigned short inf) {
  const unsigned short mag = (unsigned short)(0x7fff);
  const bool an = (a & mag) > inf, bn = (b & mag) > inf;
  if (an || bn) return an != bn;
  const int d = kf_order16(a, 0x8000, mag) - kf_order16(b, 0x8000, mag);
  return d > 1 || d < -1;
}
KF_DEV void kf_check(int form, float fast, double exact, unsigned long long x, unsigned long long* counts, unsigned* worst) {
  unsigned long long* c = counts + form * )" + std::to_string(kCounters) + R"(;
  const bool bf = kf_far16(kf_f2bf(fast), kf_d2bf(exact), 0x7f80);
  const bool h = kf_far16(kf_f2h(fast), kf_d2h(exact), 0x7c00);
  if (bf) atomicAdd(c, 1ull);
  if (h) atomicAdd(c + 1, 1ull);
  if (bf || h) atomicCAS(c + 2, 0ull, x + 1);
  const double a = exact < 0 ? -exact : exact;
  if (a >= 0x1p-126 && a <= 3.4028234663852886e38 && fast == fast) {
    const double e = (fast - exact) / a;
    atomicMax(worst + form, __float_as_uint((float)(e < 0 ? -e : e)));
  }
}
extern "C" __global__ void kf_all_floats(unsigned long long* counts, unsigned* worst) {
  const unsigned long long n = 1ull << 32;
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
       i += (unsigned long long)gridDim.x * blockDim.x) {
    const float x = __uint_as_float((unsigned)i);
    const double xd = x, em = exp(-xd);
    kf_check(0, )" + exp_fast + R"(, exp(xd), i, counts, worst);
    kf_check(1, )" + sigmoid_fast + R"(, 1.0 / (1.0 + em), i, counts, worst);
    kf_check(2, )" + silu_fast + R"(, xd / (1.0 + em), i, counts, worst);
    // A divisor from a hash of i, finite and nonzero.
    unsigned h = (unsigned)i * 2654435761u;
    h ^= h >> 15;
    const float d = __uint_as_float((h & 0x807fffffu) | ((((h >> 23) & 0xff) % 254u + 1u) << 23));
    if (x == x && x - x == 0.0f) kf_check(3, kf_div_approx(x, d, kf_rcp_for_div(d)), xd / (double)d, i, counts, worst);
  }
}
)";
  return s;
}

void check(CUresult r, const char* what) { cuda::check(r, what); }

void every_float32_input(void**) {
  std::string why;
  if (!cuda::driver_available(&why) || !cuda::nvrtc_available(&why)) {
    std::printf("skipped: %s\n", why.c_str());
    skip();
  }
  const cuda::Driver& d = cuda::driver();
  const cuda::DeviceInfo& dev = cuda::device_info(0);
  cuda::ScopedContext scope(0);
  const cuda::CompiledCode code = cuda::nvrtc_compile(test_source(), "approx_math_range", dev.sm);
  CUmodule module = nullptr;
  check(d.cuModuleLoadData_(&module, code.image.data()), "cuModuleLoadData");
  CUfunction fn = nullptr;
  check(d.cuModuleGetFunction_(&fn, module, "kf_all_floats"), "cuModuleGetFunction");
  unsigned long long counts_host[kForms * kCounters] = {};
  unsigned worst_host[kForms] = {};
  CUdeviceptr counts = 0, worst = 0;
  check(d.cuMemAlloc_(&counts, sizeof counts_host), "cuMemAlloc");
  check(d.cuMemAlloc_(&worst, sizeof worst_host), "cuMemAlloc");
  check(d.cuMemcpyHtoDAsync_(counts, counts_host, sizeof counts_host, nullptr), "cuMemcpyHtoDAsync");
  check(d.cuMemcpyHtoDAsync_(worst, worst_host, sizeof worst_host, nullptr), "cuMemcpyHtoDAsync");
  void* params[] = {&counts, &worst};
  check(d.cuLaunchKernel_(fn, static_cast<unsigned>(dev.multiprocessors) * 8, 1, 1, 256, 1, 1, 0, nullptr, params, nullptr),
        "cuLaunchKernel");
  check(d.cuMemcpyAsync_(reinterpret_cast<CUdeviceptr>(counts_host), counts, sizeof counts_host, nullptr), "cuMemcpyAsync");
  check(d.cuMemcpyAsync_(reinterpret_cast<CUdeviceptr>(worst_host), worst, sizeof worst_host, nullptr), "cuMemcpyAsync");
  check(d.cuStreamSynchronize_(nullptr), "cuStreamSynchronize");
  d.cuMemFree_(counts);
  d.cuMemFree_(worst);
  const char* names[kForms] = {"exp", "sigmoid", "silu", "division"};
  const double bounds[kForms] = {kExpError, kSigmoidError, kSigmoidError, kDivError};
  for (int k = 0; k < kForms; ++k) {
    float e = 0;
    std::memcpy(&e, &worst_host[k], sizeof e);
    const unsigned long long* c = counts_host + k * kCounters;
    std::printf("%-8s bfloat16 over 1 ulp: %llu, float16 over 1 ulp: %llu, first at bits 0x%08llx; "
                "largest relative error %.3g (2^%.1f), bound 2^%.0f\n",
                names[k], c[0], c[1], c[2] == 0 ? 0ull : c[2] - 1, static_cast<double>(e),
                e > 0 ? std::log2(static_cast<double>(e)) : -1000.0, std::log2(bounds[k]));
  }
  for (int k = 0; k < kForms; ++k) {
    const unsigned long long* c = counts_host + k * kCounters;
    assert_int_equal(c[0], 0);
    assert_int_equal(c[1], 0);
    float e = 0;
    std::memcpy(&e, &worst_host[k], sizeof e);
    assert_true(static_cast<double>(e) <= bounds[k]);
  }
}

}  // namespace

int main() {
  std::string why;
  if (!cuda::driver_available(&why)) {
    std::printf("no CUDA device (%s): skipped\n", why.c_str());
    return 77;
  }
  const struct CMUnitTest tests[] = {cmocka_unit_test(every_float32_input)};
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
