// CPU reference: index_select, gather (values, size-0 and out-of-range
// indices), full, iota, and the Philox random ops: the Random123 known-answer
// vectors, the element scheme of philox.h recomputed here bit for bit,
// reproducibility, and moments of uniform/normal samples.
#include "core/ir/portable_math.h"
#include "core/runtime/cpu/philox.h"
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/define/builder.h"
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {  // this cmocka's header has no C++ guard
#include <cmocka.h>
}

#include "cpu/cpu_eval_util.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace kf;
using namespace kf::cpu;

// The host side of the portable math the scheme names (as philox.cpp does).
#define KF_PM_MUL(a, b) ((a) * (b))
#define KF_PM_ADD(a, b) ((a) + (b))
#define KF_PM_SUB(a, b) ((a) - (b))
#define KF_PM_F2U(f) std::bit_cast<uint32_t>(f)
#define KF_PM_U2F(u) std::bit_cast<float>(static_cast<uint32_t>(u))
#define KF_PM_D2U(d) std::bit_cast<uint64_t>(d)
#define KF_PM_U2D(u) std::bit_cast<double>(static_cast<uint64_t>(u))
KF_PORTABLE_MATH(static inline)

namespace {

void expect_error(const std::function<void()>& fn, kf_status status,
                  const std::vector<std::string>& needles) {
  try {
    fn();
    fail_msg("expected an error");
  } catch (const Error& e) {
    assert_int_equal(e.status(), status);
    for (const std::string& n : needles)
      if (std::strstr(e.what(), n.c_str()) == nullptr)
        fail_msg("message \"%s\" does not mention \"%s\"", e.what(), n.c_str());
  }
}

// x [2, 3] = {{0, 1, 2}, {10, 11, 12}}.
TensorView sample() { return tensor(DType::F32, {2, 3}, {0, 1, 2, 10, 11, 12}); }

TensorView indexing(Op op, int64_t dim, const TensorView& x, const TensorView& index) {
  Builder b;
  int64_t a = b.tensor_input(x.rank(), x.dtype);
  int64_t i = b.tensor_input(index.rank(), index.dtype);
  int64_t y = b.op(op, {a, i}, {dim})[0];
  return run(b.draft(), {{a, x}, {i, index}}).get(y);
}

void test_index_select(void** state) {
  (void)state;
  TensorView idx = tensor(DType::I32, {4}, {2, 0, 2, 1});
  expect_values(indexing(Op::INDEX_SELECT, 1, sample(), idx), {2, 0, 2, 1, 12, 10, 12, 11},
                "index_select dim 1");
  TensorView rows = tensor(DType::I64, {3}, {1, 1, 0});
  expect_values(indexing(Op::INDEX_SELECT, -2, sample(), rows), {10, 11, 12, 10, 11, 12, 0, 1, 2},
                "index_select dim 0");
  TensorView none = allocate(DType::I64, {0});
  assert_true(indexing(Op::INDEX_SELECT, 0, sample(), none).sizes == (Sizes{0, 3}));
  // A transposed input.
  TensorView t = sample();
  t.sizes = {3, 2};
  t.strides = {1, 3};
  expect_values(indexing(Op::INDEX_SELECT, 0, t, tensor(DType::I64, {1}, {2})), {2, 12},
                "index_select of a transposed input");
  expect_error([&] { indexing(Op::INDEX_SELECT, 1, sample(), tensor(DType::I64, {2}, {0, 3})); },
               KF_ERR_INVALID_ARGUMENT, {"index_select (value 2)", "index 3", "[0, 3)"});
  expect_error([&] { indexing(Op::INDEX_SELECT, 0, sample(), tensor(DType::I32, {1}, {-1})); },
               KF_ERR_INVALID_ARGUMENT, {"index -1", "[0, 2)"});
}

void test_gather(void** state) {
  (void)state;
  TensorView idx = tensor(DType::I64, {2, 2}, {2, 0, 1, 1});
  expect_values(indexing(Op::GATHER, 1, sample(), idx), {2, 0, 11, 11}, "gather dim 1");
  TensorView idx0 = tensor(DType::I32, {1, 3}, {1, 0, 1});
  expect_values(indexing(Op::GATHER, 0, sample(), idx0), {10, 1, 12}, "gather dim 0");
  // A broadcast (stride 0) index.
  TensorView bidx = tensor(DType::I64, {1, 1}, {2});
  bidx.sizes = {2, 3};
  bidx.strides = {0, 0};
  expect_values(indexing(Op::GATHER, 1, sample(), bidx), {2, 2, 2, 12, 12, 12}, "gather stride 0");
  expect_values(indexing(Op::GATHER, 1, sample(), allocate(DType::I64, {2, 0})), {}, "gather empty");
  expect_error([&] { indexing(Op::GATHER, 0, sample(), tensor(DType::I64, {1, 1}, {2})); },
               KF_ERR_INVALID_ARGUMENT, {"gather (value 2)", "index 2", "[0, 2)"});
}

void test_full_and_iota(void** state) {
  (void)state;
  Builder b;
  int64_t two = b.constant_i64(2, DType::I64);
  int64_t n = b.scalar_input(DType::I64);
  int64_t fill = b.constant_f64(2.7, DType::F64);
  int64_t fi = b.op(Op::FULL, {two, n, fill}, {static_cast<int64_t>(DType::I32)})[0];
  int64_t fb = b.op(Op::FULL, {n, fill}, {static_cast<int64_t>(DType::Bool)})[0];
  int64_t start = b.constant_i64(3, DType::I64);
  int64_t step = b.constant_i64(-2, DType::I64);
  int64_t ii = b.op(Op::IOTA, {n, start, step}, {static_cast<int64_t>(DType::I64)})[0];
  int64_t fstart = b.constant_f64(0.5, DType::F64);
  int64_t fstep = b.constant_f64(0.1, DType::F64);
  int64_t fl = b.op(Op::IOTA, {n, fstart, fstep}, {static_cast<int64_t>(DType::F32)})[0];
  int64_t hf = b.op(Op::IOTA, {n, fstart, fstep}, {static_cast<int64_t>(DType::F16)})[0];
  Env env = run(b.draft(), {{n, tensor(DType::I64, {}, {3})}});
  expect_values(env.get(fi), {2, 2, 2, 2, 2, 2}, "full int32 truncates 2.7");
  assert_true(env.get(fi).sizes == (Sizes{2, 3}));
  expect_values(env.get(fb), {1, 1, 1}, "full bool");
  expect_values(env.get(ii), {3, 1, -1}, "iota int64");
  std::vector<double> want, want_h;
  for (int i = 0; i < 3; ++i) {
    want.push_back(round_to(DType::F32, 0.5 + i * 0.1));
    want_h.push_back(round_to(DType::F16, 0.5 + i * 0.1));
  }
  expect_values(env.get(fl), want, "iota float32");
  expect_values(env.get(hf), want_h, "iota float16");
  Env empty = run(b.draft(), {{n, tensor(DType::I64, {}, {0})}});
  assert_true(empty.get(ii).sizes == (Sizes{0}));
}

void test_philox_known_answers(void** state) {
  (void)state;
  PhiloxWords zero = philox4x32_10({0, 0, 0, 0}, {0, 0});
  assert_true(zero == (PhiloxWords{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  PhiloxWords ones = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                   {0xffffffffu, 0xffffffffu});
  assert_true(ones == (PhiloxWords{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  // The element mapping: key = seed halves, counter = (index halves, offset halves).
  const uint64_t seed = 0x0123456789abcdefULL, offset = 0xfedcba9876543210ULL;
  assert_true(philox_element(seed, offset, 0x100000002ULL) ==
              philox4x32_10({2, 1, 0x76543210u, 0xfedcba98u}, {0x89abcdefu, 0x01234567u}));
}

// A random op of `sizes` with constant parameters.
TensorView random(Op op, DType t, const Sizes& sizes, double a, double b_, int64_t seed,
                  int64_t offset) {
  Builder b;
  std::vector<int64_t> args;
  for (int64_t s : sizes) args.push_back(b.constant_i64(s, DType::I64));
  args.push_back(b.constant_f64(a, DType::F64));
  args.push_back(b.constant_f64(b_, DType::F64));
  args.push_back(b.constant_i64(seed, DType::I64));
  args.push_back(b.constant_i64(offset, DType::I64));
  int64_t y = b.op(op, args, {static_cast<int64_t>(t)})[0];
  return run(b.draft(), {}).get(y);
}

void test_uniform(void** state) {
  (void)state;
  const int64_t seed = 42, offset = 7;
  TensorView u = random(Op::UNIFORM, DType::F32, {100, 50}, -1, 3, seed, offset);
  std::vector<double> got = values(u);
  double sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    // The scheme of philox.h, recomputed: u = (w0 >> 8) * 2^-24 in float.
    PhiloxWords w = philox4x32_10({static_cast<uint32_t>(i), 0, offset, 0}, {seed, 0});
    float unit = static_cast<float>(w[0] >> 8) / 16777216.0f;
    float d = 3.0f - -1.0f;
    float p = d * unit;
    float want = -1.0f + p;
    assert_true(same(got[i], want));
    assert_true(got[i] >= -1 && got[i] <= 3);
    sum += got[i];
  }
  assert_true(std::fabs(sum / static_cast<double>(got.size()) - 1.0) < 0.05);
  // float64: 53 bits from (w0, w1).
  std::vector<double> g64 = values(random(Op::UNIFORM, DType::F64, {4}, 0, 1, seed, offset));
  for (size_t i = 0; i < g64.size(); ++i) {
    PhiloxWords w = philox4x32_10({static_cast<uint32_t>(i), 0, offset, 0}, {seed, 0});
    const uint64_t bits = ((static_cast<uint64_t>(w[0]) << 32) | w[1]) >> 11;
    assert_true(same(g64[i], static_cast<double>(bits) / 9007199254740992.0));
  }
  // Row-major element index: the same stream whatever the shape.
  expect_values(random(Op::UNIFORM, DType::F32, {50, 100}, -1, 3, seed, offset), got,
                "uniform depends on the linear index only");
  // bf16/f16: the float32 value rounded once.
  std::vector<double> h = values(random(Op::UNIFORM, DType::BF16, {100, 50}, -1, 3, seed, offset));
  for (size_t i = 0; i < h.size(); ++i) assert_true(same(h[i], round_to(DType::BF16, got[i])));
  // Another offset or seed gives other numbers.
  std::vector<double> other = values(random(Op::UNIFORM, DType::F32, {100, 50}, -1, 3, seed, offset + 1));
  std::vector<double> other_seed = values(random(Op::UNIFORM, DType::F32, {100, 50}, -1, 3, seed + 1, offset));
  assert_true(other != got && other_seed != got);
}

void test_normal(void** state) {
  (void)state;
  for (DType t : {DType::F32, DType::F64, DType::F16}) {
    std::vector<double> got = values(random(Op::NORMAL, t, {20000}, 2, 3, -5, 1));
    double sum = 0, sq = 0;
    for (double v : got) {
      assert_true(std::isfinite(v));
      sum += v;
      sq += v * v;
    }
    const double n = static_cast<double>(got.size());
    const double mean = sum / n, var = sq / n - mean * mean;
    if (std::fabs(mean - 2) > 0.1 || std::fabs(var - 9) > 0.4)
      fail_msg("normal %s: mean %g var %g", dtype_name(t).data(), mean, var);
  }
  // The float32 path, recomputed from the scheme.
  std::vector<double> got = values(random(Op::NORMAL, DType::F32, {8}, 0.5, 2, 3, 9));
  for (size_t i = 0; i < got.size(); ++i) {
    PhiloxWords w = philox_element(3, 9, i);
    float u1 = static_cast<float>((w[0] >> 8) + 1) * 0x1p-24f;
    float u2 = static_cast<float>(w[1] >> 8) * 0x1p-24f;
    float z = std::sqrt(-2.0f * kf_pm_logf(u1)) * kf_pm_cos_turns_f(u2);
    float p = 2.0f * z;
    assert_true(same(got[i], 0.5f + p));
  }
  // The portable log/cos stay within a few ulps of the true values.
  for (uint32_t n = 1; n <= (1u << 24); n += 97) {
    const float u = static_cast<float>(n) * 0x1p-24f;
    const double t = static_cast<double>(n - 1) * 0x1p-24;
    assert_true(std::fabs(kf_pm_logf(u) - std::log(static_cast<double>(u))) <=
                4e-7 * std::fabs(std::log(static_cast<double>(u))) + 1e-12);
    assert_true(std::fabs(kf_pm_cos_turns_f(static_cast<float>(t)) - std::cos(2 * M_PI * t)) <= 5e-7);
    assert_true(std::fabs(kf_pm_log(t + 0x1p-24) - std::log(t + 0x1p-24)) <=
                1e-15 * std::fabs(std::log(t + 0x1p-24)) + 1e-300);
    assert_true(std::fabs(kf_pm_cos_turns(t) - std::cos(2 * M_PI * t)) <= 2e-15);
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_index_select), cmocka_unit_test(test_gather),
      cmocka_unit_test(test_full_and_iota), cmocka_unit_test(test_philox_known_answers),
      cmocka_unit_test(test_uniform),       cmocka_unit_test(test_normal),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
