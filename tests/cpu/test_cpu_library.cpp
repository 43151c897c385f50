// CPU reference: matmul (1-D operands, batch broadcasting, transposed and
// stride-0 operands, k = 0, float16 rounding once, promotion) and linear
// (rank-1 and rank-2 weights, bias of rank 0 and 1) against naive double
// loops written here.
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

// Deterministic values with a fractional part: x_i = ((i * 5) % 7 - 3) / 4.
TensorView filled(DType t, const Sizes& sizes, int salt) {
  std::vector<double> v(static_cast<size_t>(numel(sizes)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<double>((static_cast<int64_t>(i) * 5 + salt) % 7 - 3) / 4;
  return tensor(t, sizes, v);
}

TensorView matmul(const TensorView& a, const TensorView& b_) {
  Builder b;
  int64_t x = b.tensor_input(a.rank(), a.dtype);
  int64_t y = b.tensor_input(b_.rank(), b_.dtype);
  int64_t z = b.op(Op::MATMUL, {x, y}, {})[0];
  return run(b.draft(), {{x, a}, {y, b_}}).get(z);
}

double at(const TensorView& t, std::vector<int64_t> idx) { return load_f64(t.dtype, t.at(idx.data())); }

void test_matmul_shapes(void** state) {
  (void)state;
  const DType F = DType::F64;
  TensorView v3 = filled(F, {3}, 0), w3 = filled(F, {3}, 2), m34 = filled(F, {3, 4}, 1),
             m23 = filled(F, {2, 3}, 3);
  double dot = 0;
  for (int64_t k = 0; k < 3; ++k) dot += at(v3, {k}) * at(w3, {k});
  TensorView d = matmul(v3, w3);
  assert_int_equal(d.rank(), 0);
  expect_values(d, {dot}, "1-D @ 1-D");
  TensorView vm = matmul(v3, m34);
  assert_true(vm.sizes == (Sizes{4}));
  for (int64_t j = 0; j < 4; ++j) {
    double s = 0;
    for (int64_t k = 0; k < 3; ++k) s += at(v3, {k}) * at(m34, {k, j});
    assert_true(same(at(vm, {j}), s));
  }
  TensorView mv = matmul(m23, w3);
  assert_true(mv.sizes == (Sizes{2}));
  for (int64_t i = 0; i < 2; ++i) {
    double s = 0;
    for (int64_t k = 0; k < 3; ++k) s += at(m23, {i, k}) * at(w3, {k});
    assert_true(same(at(mv, {i}), s));
  }
  // k = 0: zeros.
  expect_values(matmul(allocate(F, {2, 0}), allocate(F, {0, 2})), {0, 0, 0, 0}, "k = 0");
}

void test_matmul_batched(void** state) {
  (void)state;
  // a [2, 1, 2, 3] (transposed last two dims in memory) @ b [3, 3, 4] with a
  // stride-0 batch dim -> [2, 3, 2, 4], float32.
  TensorView a = filled(DType::F32, {2, 1, 3, 2}, 1);
  std::swap(a.sizes[2], a.sizes[3]);
  std::swap(a.strides[2], a.strides[3]);
  TensorView b = filled(DType::F32, {1, 3, 4}, 4);
  b.sizes = {3, 3, 4};
  b.strides = {0, 4, 1};
  TensorView c = matmul(a, b);
  assert_true(c.sizes == (Sizes{2, 3, 2, 4}));
  for_each_index(c.sizes, [&](const int64_t* i) {
    double s = 0;
    for (int64_t k = 0; k < 3; ++k) s += at(a, {i[0], 0, i[2], k}) * at(b, {i[1], k, i[3]});
    assert_true(same(load_f64(c.dtype, c.at(i)), round_to(DType::F32, s)));
  });
}

void test_matmul_dtypes(void** state) {
  (void)state;
  // float16: 2048 + 1 + 1 accumulated in double, rounded once to 2050
  // (a float16 accumulator would stay at 2048).
  TensorView a = tensor(DType::F16, {1, 3}, {2048, 1, 1});
  TensorView b = tensor(DType::F16, {3, 1}, {1, 1, 1});
  TensorView c = matmul(a, b);
  assert_int_equal(c.dtype, DType::F16);
  expect_values(c, {2050}, "f16 matmul rounds once");
  // bf16 @ f16 promotes to float32; f32 @ f64 to float64.
  assert_int_equal(matmul(tensor(DType::BF16, {1}, {1}), tensor(DType::F16, {1}, {1})).dtype, DType::F32);
  TensorView m = matmul(tensor(DType::F32, {2}, {0.1f, 1}), tensor(DType::F64, {2}, {0.1, 1}));
  assert_int_equal(m.dtype, DType::F64);
  expect_values(m, {static_cast<double>(0.1f) * 0.1 + 1}, "f32 @ f64");
}

TensorView linear(const TensorView& x, const TensorView& w, const TensorView* bias) {
  Builder b;
  int64_t xi = b.tensor_input(x.rank(), x.dtype);
  int64_t wi = b.tensor_input(w.rank(), w.dtype);
  std::vector<int64_t> args = {xi, wi};
  Inputs in = {{xi, x}, {wi, w}};
  if (bias) {
    args.push_back(b.tensor_input(bias->rank(), bias->dtype));
    in.push_back({args.back(), *bias});
  }
  int64_t y = b.op(Op::LINEAR, args, {})[0];
  return run(b.draft(), in).get(y);
}

void test_linear(void** state) {
  (void)state;
  const DType F = DType::F32;
  TensorView x = filled(F, {2, 3, 4}, 0);
  TensorView w = filled(F, {5, 4}, 3);
  TensorView bias = filled(F, {5}, 6);
  TensorView y = linear(x, w, &bias);
  assert_true(y.sizes == (Sizes{2, 3, 5}));
  for_each_index(y.sizes, [&](const int64_t* i) {
    double s = 0;
    for (int64_t k = 0; k < 4; ++k) s += at(x, {i[0], i[1], k}) * at(w, {i[2], k});
    s += at(bias, {i[2]});
    assert_true(same(load_f64(F, y.at(i)), round_to(F, s)));
  });
  // Rank-1 weight, rank-0 bias: [2, 3, 4] -> [2, 3].
  TensorView w1 = filled(F, {4}, 2);
  TensorView b0 = tensor(F, {}, {0.5});
  TensorView y1 = linear(x, w1, &b0);
  assert_true(y1.sizes == (Sizes{2, 3}));
  for_each_index(y1.sizes, [&](const int64_t* i) {
    double s = 0.5;
    for (int64_t k = 0; k < 4; ++k) s += at(x, {i[0], i[1], k}) * at(w1, {k});
    assert_true(same(load_f64(F, y1.at(i)), round_to(F, s)));
  });
  // No bias, transposed weight (w^T stored), bias of size 1 broadcast.
  TensorView wt = filled(F, {4, 5}, 3);
  wt.sizes = {5, 4};
  wt.strides = {1, 5};
  TensorView b1 = tensor(F, {1}, {-1});
  TensorView y2 = linear(x, wt, &b1);
  TensorView y3 = linear(x, wt, nullptr);
  for_each_index(y2.sizes, [&](const int64_t* i) {
    double s = 0;
    for (int64_t k = 0; k < 4; ++k) s += at(x, {i[0], i[1], k}) * at(wt, {i[2], k});
    assert_true(same(load_f64(F, y3.at(i)), round_to(F, s)));
    assert_true(same(load_f64(F, y2.at(i)), round_to(F, s - 1)));
  });
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_shapes), cmocka_unit_test(test_matmul_batched),
      cmocka_unit_test(test_matmul_dtypes), cmocka_unit_test(test_linear),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
