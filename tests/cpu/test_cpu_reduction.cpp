// CPU reference: reductions. Hand-derived cases (int32 sums widen to int64,
// var with correction 0/1, empty reductions, NaN in max/min, N <= correction)
// and a sweep of every reduction op x accepted dtype x axes x keepdim on a
// transposed input against naive double loops written here.
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

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

using namespace kf;
using namespace kf::cpu;

namespace {

// op(x) over `axes` (empty: all) with keepdim; returns the outputs.
std::vector<TensorView> reduce(Op op, DType t, const TensorView& in, std::vector<int64_t> axes,
                               bool keepdim, int64_t correction = 1) {
  Builder b;
  int64_t x = b.tensor_input(in.rank(), t);
  std::vector<int64_t> attrs = {keepdim ? 1 : 0};
  if (op == Op::VAR || op == Op::VAR_MEAN) attrs.push_back(correction);
  attrs.insert(attrs.end(), axes.begin(), axes.end());
  std::vector<int64_t> outs = b.op(op, {x}, attrs);
  Env env = run(b.draft(), {{x, in}});
  std::vector<TensorView> r;
  for (int64_t id : outs) r.push_back(env.get(id));
  return r;
}

void test_hand_cases(void** state) {
  (void)state;
  TensorView big = tensor(DType::I32, {2}, {2147483647, 1});
  TensorView s = reduce(Op::SUM, DType::I32, big, {}, false)[0];
  assert_int_equal(s.dtype, DType::I64);
  assert_int_equal(s.rank(), 0);
  expect_values(s, {2147483648.0}, "int32 sum widens to int64");
  TensorView flags = tensor(DType::Bool, {4}, {1, 0, 1, 1});
  expect_values(reduce(Op::SUM, DType::Bool, flags, {}, false)[0], {3}, "bool sum counts");
  expect_values(reduce(Op::MAX, DType::Bool, flags, {}, false)[0], {1}, "bool max");
  expect_values(reduce(Op::MIN, DType::Bool, flags, {}, false)[0], {0}, "bool min");
  expect_values(reduce(Op::PROD, DType::I32, tensor(DType::I32, {3}, {-2, 3, 65536}), {}, false)[0],
                {-393216}, "int prod");

  TensorView x = tensor(DType::F64, {4}, {1, 2, 3, 4});
  expect_values(reduce(Op::VAR, DType::F64, x, {}, false, 0)[0], {1.25}, "var correction 0");
  expect_values(reduce(Op::VAR, DType::F64, x, {}, false, 1)[0], {5.0 / 3}, "var correction 1");
  std::vector<TensorView> vm = reduce(Op::VAR_MEAN, DType::F64, x, {0}, true, 1);
  assert_int_equal(vm.size(), 2);
  assert_true(vm[0].sizes == (Sizes{1}));
  expect_values(vm[0], {5.0 / 3}, "var_mean var");
  expect_values(vm[1], {2.5}, "var_mean mean");
  expect_values(reduce(Op::MEAN, DType::F64, x, {}, false)[0], {2.5}, "mean");

  TensorView one = tensor(DType::F64, {1}, {7});
  expect_values(reduce(Op::VAR, DType::F64, one, {}, false, 1)[0], {kNaN}, "var of one, correction 1");
  TensorView two = tensor(DType::F64, {2}, {0, 1});
  expect_values(reduce(Op::VAR, DType::F64, two, {}, false, 3)[0], {kInf}, "N < correction: inf");

  TensorView nan = tensor(DType::F32, {4}, {1, kNaN, 3, -kInf});
  expect_values(reduce(Op::MAX, DType::F32, nan, {}, false)[0], {kNaN}, "max propagates NaN");
  expect_values(reduce(Op::MIN, DType::F32, nan, {}, false)[0], {kNaN}, "min propagates NaN");
  TensorView last_nan = tensor(DType::F32, {3}, {1, 3, kNaN});
  expect_values(reduce(Op::MAX, DType::F32, last_nan, {}, false)[0], {kNaN}, "max, NaN last");
  expect_values(reduce(Op::MIN, DType::F32, tensor(DType::F32, {2}, {2, -kInf}), {}, false)[0],
                {-kInf}, "min -inf");

  // Empty reductions: [0, 3] over dim 0.
  TensorView empty = allocate(DType::F32, {0, 3});
  expect_values(reduce(Op::SUM, DType::F32, empty, {0}, false)[0], {0, 0, 0}, "empty sum");
  expect_values(reduce(Op::PROD, DType::F32, empty, {0}, false)[0], {1, 1, 1}, "empty prod");
  expect_values(reduce(Op::MEAN, DType::F32, empty, {0}, false)[0], {kNaN, kNaN, kNaN}, "empty mean");
  expect_values(reduce(Op::VAR, DType::F32, empty, {0}, false)[0], {kNaN, kNaN, kNaN}, "empty var");
  // Reducing the other dim of an empty tensor gives an empty result.
  assert_true(reduce(Op::SUM, DType::F32, empty, {1}, true)[0].sizes == (Sizes{0, 1}));
  // Sum of float16 accumulates in double and rounds once: 2048 + 1 + 1 = 2050.
  expect_values(reduce(Op::SUM, DType::F16, tensor(DType::F16, {3}, {2048, 1, 1}), {}, false)[0],
                {2050}, "f16 sum rounds once");
}

// Naive reference over a rank-3 input: (sum, prod, max, min, mean, var)
// of the elements whose kept coordinates equal `key`.
struct Stats {
  double sum = 0, prod = 1, max = -kInf, min = kInf, sq = 0;
  int64_t n = 0;
  bool nan = false;
};

void test_sweep(void** state) {
  (void)state;
  const std::vector<std::vector<int64_t>> axis_sets = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}};
  const Op ops[] = {Op::SUM, Op::PROD, Op::MAX, Op::MIN, Op::MEAN, Op::VAR, Op::VAR_MEAN};
  const DType dtypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                          DType::I64, DType::I32, DType::Bool};
  int evaluated = 0;
  for (Op op : ops)
    for (DType t : dtypes)
      for (const auto& axes : axis_sets)
        for (bool keepdim : {false, true}) {
          // Input [2, 3, 4] stored as [4, 3, 2] transposed (strides 1, 2, 6).
          std::vector<double> data(24);
          for (size_t i = 0; i < data.size(); ++i)
            data[i] = is_bool(t) ? static_cast<double>(i % 3 != 0)
                                 : static_cast<double>((static_cast<int64_t>(i) * 7) % 11 - 5) * 0.5;
          if (!is_float(t))
            for (double& v : data) v = std::trunc(v);
          TensorView in = tensor(t, {4, 3, 2}, data);
          in.sizes = {2, 3, 4};
          in.strides = {1, 2, 6};
          std::vector<TensorView> outs;
          try {
            outs = reduce(op, t, in, axes, keepdim);
          } catch (const Error&) {
            continue;  // the type rule rejects the dtype
          }
          std::vector<bool> reduced(3, axes.empty());
          for (int64_t a : axes) reduced[static_cast<size_t>(a)] = true;
          Sizes kept_sizes;
          for (size_t d = 0; d < 3; ++d) {
            if (!reduced[d]) kept_sizes.push_back(in.sizes[d]);
            else if (keepdim) kept_sizes.push_back(1);
          }
          assert_true(outs[0].sizes == kept_sizes);
          // Accumulate per output element (row-major over kept dims).
          std::vector<Stats> stats(static_cast<size_t>(numel(kept_sizes)));
          auto key = [&](const int64_t* idx) {
            int64_t k = 0;
            for (size_t d = 0; d < 3; ++d)
              if (!reduced[d]) k = k * in.sizes[d] + idx[d];
            return static_cast<size_t>(k);
          };
          for_each_index(in.sizes, [&](const int64_t* idx) {
            const double v = load_f64(t, in.at(idx));
            Stats& s = stats[key(idx)];
            s.sum += v;
            s.prod *= v;
            s.max = std::max(s.max, v);
            s.min = std::min(s.min, v);
            ++s.n;
          });
          for_each_index(in.sizes, [&](const int64_t* idx) {
            Stats& s = stats[key(idx)];
            const double d = load_f64(t, in.at(idx)) - s.sum / static_cast<double>(s.n);
            s.sq += d * d;
          });
          const DType out_t = outs[0].dtype;
          std::vector<double> got = values(outs[0]);
          for (size_t i = 0; i < stats.size(); ++i) {
            const Stats& s = stats[i];
            double want = 0;
            switch (op) {
              case Op::SUM: want = s.sum; break;
              case Op::PROD: want = s.prod; break;
              case Op::MAX: want = s.max; break;
              case Op::MIN: want = s.min; break;
              case Op::MEAN: want = s.sum / static_cast<double>(s.n); break;
              default: want = s.sq / static_cast<double>(s.n - 1); break;
            }
            want = round_to(out_t, want);
            if (!same(got[i], want))
              fail_msg("%s %s axes %zu keepdim %d element %zu: got %.17g, expected %.17g",
                       op_name(op).data(), dtype_name(t).data(), axes.size(), keepdim, i, got[i],
                       want);
            if (op == Op::VAR_MEAN) {
              const double mean = round_to(out_t, s.sum / static_cast<double>(s.n));
              assert_true(same(values(outs[1])[i], mean));
            }
          }
          if (op == Op::SUM || op == Op::PROD)
            assert_int_equal(out_t, is_float(t) ? t : DType::I64);
          ++evaluated;
        }
  assert_true(evaluated >= 7 * 4 * 12);
}

// A reduction over an input whose kept dim is innermost in memory walks it
// in memory order (kept_inner in ops_reduction.cpp); over a row-major copy,
// output by output. Both must give the same bits, NaNs included: a float
// reduction's NaN result is the default quiet NaN whatever NaNs it read
// (signs and payloads mixed here), for sums, means, var_mean and prod; a
// max or min keeps NaN too. More kept positions than one chunk of the walk
// (65536) take several.
void test_walks_agree(void** state) {
  (void)state;
  const double neg_nan = -std::numeric_limits<double>::quiet_NaN();
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{7, 5}, {3, 70001}}) {
    TensorView col = allocate(DType::F32, {rows, cols}, {1, 0});  // column-major: dim 0 innermost
    TensorView row = allocate(DType::F32, {rows, cols});
    uint64_t h = 12345;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
        const int r = static_cast<int>((h >> 33) % 100);
        const double v = r < 5 ? kNaN : r < 10 ? neg_nan : r < 12 ? kInf : static_cast<double>(r) / 7 - 7;
        const int64_t idx[2] = {i, j};
        store_f64(DType::F32, col.at(idx), v);
        store_f64(DType::F32, row.at(idx), v);
      }
    for (Op op : {Op::SUM, Op::MEAN, Op::PROD, Op::MAX, Op::MIN, Op::VAR_MEAN})
      for (int64_t axis : {int64_t{0}, int64_t{1}}) {
        const std::vector<TensorView> a = reduce(op, DType::F32, col, {axis}, true, 1);
        const std::vector<TensorView> b = reduce(op, DType::F32, row, {axis}, true, 1);
        for (size_t k = 0; k < a.size(); ++k) {
          const size_t bytes = static_cast<size_t>(a[k].numel() * dtype_size(a[k].dtype));
          if (std::memcmp(a[k].data, b[k].data, bytes) != 0)
            fail_msg("%s over axis %lld of [%lld, %lld]: output %zu differs between the walks", op_name(op),
                     (long long)axis, (long long)rows, (long long)cols, k);
          for (double v : values(a[k]))
            if (std::isnan(v) && op != Op::MAX && op != Op::MIN && std::signbit(v))
              fail_msg("%s: a NaN result with its sign bit set", op_name(op));
        }
      }
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_hand_cases),
      cmocka_unit_test(test_sweep),
      cmocka_unit_test(test_walks_agree),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
