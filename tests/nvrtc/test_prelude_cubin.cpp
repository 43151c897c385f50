// A unit compiled with only the prelude it uses (prelude_parts.h) gives the
// same CUBIN, byte for byte, as with the whole prelude, for fusions that
// use float8 (to and from), bfloat16, Welford row statistics, a block reduction and a
// scan (every unit of each).
#include "core/codegen/prelude.h"
#include "core/codegen/prelude_parts.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/text/text_parser.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <string>
#include <vector>

#include "nvrtc/codegen_harness.h"

namespace {

const char* kQuantize = R"(input x: tensor<bfloat16, 2>
xf = cast(x) {dtype=float32}
ax = abs(xf)
amax = max(ax) {axes=[0, 1], keepdim=true}
const tiny: float32 = 1e-12
am = maximum(amax, tiny)
const fmax: float32 = 448
const fmin: float32 = -448
scale = div(fmax, am)
xs = mul(xf, scale)
xc = clamp(xs, fmin, fmax)
q = cast(xc) {dtype=float8_e4m3fn}
output q
)";

const char* kLayernorm = R"(input x: tensor<bfloat16, 2>
input w: tensor<bfloat16, 1>
const eps: float32 = 1e-5
h = cast(x) {dtype=float32}
wf = cast(w) {dtype=float32}
v, mu = var_mean(h) {axes=[1], keepdim=true, correction=0}
ve = add(v, eps)
r = rsqrt(ve)
hc = sub(h, mu)
n = mul(hc, r)
o = mul(n, wf)
y = cast(o) {dtype=bfloat16}
output y
)";

// The corpus's c0058_dequant_fp8_tensor: its part once put a #define after
// a "}" on the same line (tests/cpu/test_prelude_parts.cpp,
// test_directives_start_lines).
const char* kDequantFp8 = R"(input q: tensor<float8_e4m3fn, 2>
input scale: tensor<float32, 0>
qf = cast(q) {dtype=float32}
deq = mul(qf, scale)
y = cast(deq) {dtype=bfloat16}
output y
)";

const char* kCumsum = R"(input x: tensor<bfloat16, 2>
xf = cast(x) {dtype=float32}
y = cumsum(xf) {dim=1}
output y
)";

void same_cubins(const char* text, kftest::Inputs inputs) {
  auto fusion = kf::parse_fusion(text);
  auto plan = kftest::plan_for(fusion, inputs);
  std::vector<size_t> generated;
  for (size_t k = 0; k < plan->segmentation.segments.size(); ++k)
    if (plan->segmentation.segments[k].schedule && !plan->segmentation.segments[k].task.exprs.empty())
      generated.push_back(k);
  assert_false(generated.empty());
  const std::string whole(kf::cuda_prelude());
  for (const kf::KernelPlan& p : kf::cuda::make_segment_plans(*plan->concrete, plan->segmentation, generated))
    for (const kf::KernelPlan::Unit& u : p.units) {
      const size_t body = u.source.find("struct KfArgs");
      assert_true(body != std::string::npos);
      assert_true(body * 4 < whole.size());  // a part, not the whole prelude
      const auto part = kf::cuda::nvrtc_compile(u.source, u.kernel, 90);
      const auto all = kf::cuda::nvrtc_compile(whole + u.source.substr(body), u.kernel, 90);
      assert_false(part.image.empty());
      assert_true(part.image == all.image);
    }
}

void test_quantize_fp8(void**) {
  kftest::Inputs in;
  in.push_back(kftest::tensor(kf::DType::BF16, {64, 512}));
  same_cubins(kQuantize, std::move(in));
}

void test_layernorm(void**) {
  kftest::Inputs in;
  in.push_back(kftest::tensor(kf::DType::BF16, {64, 512}));
  in.push_back(kftest::tensor(kf::DType::BF16, {512}));
  same_cubins(kLayernorm, std::move(in));
}

void test_dequantize_fp8(void**) {
  kftest::Inputs in;
  in.push_back(kftest::tensor(kf::DType::F8E4M3, {64, 512}));
  in.push_back(kftest::tensor(kf::DType::F32, {}));
  same_cubins(kDequantFp8, std::move(in));
}

void test_cumsum(void**) {
  kftest::Inputs in;
  in.push_back(kftest::tensor(kf::DType::BF16, {64, 512}));
  same_cubins(kCumsum, std::move(in));
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_quantize_fp8),
      cmocka_unit_test(test_layernorm),
      cmocka_unit_test(test_dequantize_fp8),
      cmocka_unit_test(test_cumsum),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
