// CPU reference: shape ops. Checks values against index arithmetic done
// here, and that view results (broadcast_in_dim, expand, permute, squeeze,
// unsqueeze, slice, reshape of a compact input) share the input's storage
// while reshape of a transposed input, pad and cat copy. Shape sizes come
// from constants and from scalar inputs.
// Project headers first: cmocka defines a fail() macro that kf::fail's
// declaration must not see.
#include "core/concretize/reshape_groups.h"
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

std::vector<double> iota_values(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<double>(i);
  return v;
}

bool shares(const TensorView& a, const TensorView& b) { return a.storage == b.storage; }

struct OneOp {
  TensorView in, out;
};

// One shape op on a [2, 3] float32 input holding 0..5 (or `in`).
OneOp shape_op(Op op, std::vector<int64_t> shape, std::vector<int64_t> attrs,
               TensorView in = tensor(DType::F32, {2, 3}, iota_values(6))) {
  Builder b;
  int64_t x = b.tensor_input(in.rank(), in.dtype);
  std::vector<int64_t> args = {x};
  for (int64_t s : shape) args.push_back(b.constant_i64(s, DType::I64));
  int64_t y = b.op(op, args, attrs)[0];
  return {in, run(b.draft(), {{x, in}}).get(y)};
}

void test_views(void** state) {
  (void)state;
  OneOp r = shape_op(Op::PERMUTE, {}, {1, 0});
  assert_true(shares(r.in, r.out));
  assert_true(r.out.sizes == (Sizes{3, 2}));
  expect_values(r.out, {0, 3, 1, 4, 2, 5}, "permute");

  r = shape_op(Op::BROADCAST_IN_DIM, {2, 4, 3}, {0, 2});
  assert_true(shares(r.in, r.out));
  assert_true(r.out.strides[1] == 0);
  std::vector<double> want;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(i * 3 + k);
  expect_values(r.out, want, "broadcast_in_dim");

  r = shape_op(Op::EXPAND, {4, -1, 3}, {}, tensor(DType::F32, {2, 1}, {7, 8}));
  assert_true(shares(r.in, r.out));
  assert_true(r.out.sizes == (Sizes{4, 2, 3}));
  want.clear();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(7 + j);
  expect_values(r.out, want, "expand");

  r = shape_op(Op::RESHAPE, {3, -1}, {});
  assert_true(shares(r.in, r.out));
  assert_true(r.out.sizes == (Sizes{3, 2}));
  expect_values(r.out, iota_values(6), "reshape compact is a view");

  r = shape_op(Op::UNSQUEEZE, {}, {1});
  assert_true(shares(r.in, r.out));
  assert_true(r.out.sizes == (Sizes{2, 1, 3}));
  expect_values(r.out, iota_values(6), "unsqueeze");
  r = shape_op(Op::UNSQUEEZE, {}, {2});
  assert_true(r.out.sizes == (Sizes{2, 3, 1}));

  r = shape_op(Op::SQUEEZE, {}, {0, 2}, tensor(DType::I32, {1, 3, 1}, {4, 5, 6}));
  assert_true(shares(r.in, r.out));
  assert_true(r.out.sizes == (Sizes{3}));
  expect_values(r.out, {4, 5, 6}, "squeeze");

  r = shape_op(Op::SLICE, {}, {1, 0, INT64_MAX, 2});
  assert_true(shares(r.in, r.out));
  expect_values(r.out, {0, 2, 3, 5}, "slice step 2");
  r = shape_op(Op::SLICE, {}, {1, -2, 3, 1});
  expect_values(r.out, {1, 2, 4, 5}, "slice negative start");
  r = shape_op(Op::SLICE, {}, {0, 5, 9, 1});
  assert_true(r.out.sizes == (Sizes{0, 3}));
  r = shape_op(Op::SLICE, {}, {1, -100, -1, 1});
  expect_values(r.out, {0, 1, 3, 4}, "slice clamped start");
}

void test_copies(void** state) {
  (void)state;
  // reshape of a transposed [3, 2] view: row-major order of the view.
  TensorView t = tensor(DType::F32, {2, 3}, iota_values(6));
  t.sizes = {3, 2};
  t.strides = {1, 3};
  OneOp r = shape_op(Op::RESHAPE, {6}, {}, t);
  assert_false(shares(r.in, r.out));
  expect_values(r.out, {0, 3, 1, 4, 2, 5}, "reshape of transposed copies");

  // reshape of a size-0 tensor.
  r = shape_op(Op::RESHAPE, {0, 5}, {}, allocate(DType::F32, {2, 0}));
  assert_true(r.out.sizes == (Sizes{0, 5}));

  // pad [2, 3] by (1, 0) rows and (0, 2) cols with an int value into float.
  Builder b;
  int64_t x = b.tensor_input(2, DType::F32);
  int64_t v = b.constant_i64(-1, DType::I64);
  int64_t y = b.op(Op::PAD, {x, v}, {1, 0, 0, 2})[0];
  Env env = run(b.draft(), {{x, tensor(DType::F32, {2, 3}, iota_values(6))}});
  expect_values(env.get(y), {-1, -1, -1, -1, -1, 0, 1, 2, -1, -1, 3, 4, 5, -1, -1}, "pad");

  // cat of int32 [2, 1], float32 [2, 2] and an empty [2, 0] along dim 1: float32.
  Builder c;
  int64_t a0 = c.tensor_input(2, DType::I32);
  int64_t a1 = c.tensor_input(2, DType::F32);
  int64_t a2 = c.tensor_input(2, DType::F32);
  int64_t z = c.op(Op::CAT, {a0, a1, a2}, {-1})[0];
  assert_int_equal(c.draft().value(z).dtype, DType::F32);
  TensorView f = tensor(DType::F32, {2, 2}, {0.5, 1.5, 2.5, 3.5});
  TensorView ft = f;  // transposed input
  ft.strides = {1, 2};
  Env env2 = run(c.draft(), {{a0, tensor(DType::I32, {2, 1}, {7, 8})},
                             {a1, ft},
                             {a2, allocate(DType::F32, {2, 0})}});
  expect_values(env2.get(z), {7, 0.5, 2.5, 8, 1.5, 3.5}, "cat");
}

// Shape sizes from a scalar input (the value decides the output size).
void test_scalar_shape_input(void** state) {
  (void)state;
  Builder b;
  int64_t x = b.tensor_input(1, DType::F64);
  int64_t n = b.scalar_input(DType::I64);
  int64_t two = b.constant_i64(2, DType::I64);
  int64_t y = b.op(Op::RESHAPE, {x, n, two}, {})[0];
  int64_t e = b.op(Op::EXPAND, {y, two, n, two}, {})[0];
  Env env = run(b.draft(), {{x, tensor(DType::F64, {6}, iota_values(6))},
                            {n, tensor(DType::I64, {}, {3})}});
  assert_true(env.get(y).sizes == (Sizes{3, 2}));
  assert_true(env.get(e).sizes == (Sizes{2, 3, 2}));
  std::vector<double> want = iota_values(6);
  want.insert(want.end(), want.begin(), want.end());
  expect_values(env.get(e), want, "expand of reshape");
}

// How a reshape groups dims (the concretization of reshapes): a dim kept
// whole is a group of one dim on each side.
std::string groups(std::vector<int64_t> in, std::vector<int64_t> out) {
  std::string s;
  for (const kf::ReshapeGroup& g : kf::reshape_groups(in, out))
    s += std::to_string(g.in_dims) + ":" + std::to_string(g.out_dims) + " ";
  return s;
}

void test_reshape_groups(void** state) {
  (void)state;
  assert_string_equal(groups({4, 320, 64}, {4, 32, 10, 64}).c_str(), "1:1 1:2 1:1 ");  // a split
  assert_string_equal(groups({6, 7, 130}, {6, 910}).c_str(), "1:1 2:1 ");              // a merge
  assert_string_equal(groups({6, 10}, {4, 15}).c_str(), "2:2 ");                        // no common factor
  assert_string_equal(groups({9, 1, 4000}, {9, 4000}).c_str(), "2:1 1:1 ");             // size 1 joins the group before
  assert_string_equal(groups({1, 6}, {6}).c_str(), "2:1 ");
  assert_string_equal(groups({5}, {5, 1, 1}).c_str(), "1:3 ");
  assert_string_equal(groups({3, 0}, {0, 7}).c_str(), "2:2 ");  // a zero extent: one group
  assert_string_equal(groups({}, {1}).c_str(), "0:1 ");
  std::vector<int64_t> key;
  kf::append_reshape_key(std::vector<int64_t>{4, 320, 64}, std::vector<int64_t>{4, 32, 10, 64}, &key);
  kf::append_reshape_key(std::vector<int64_t>{6, 10}, std::vector<int64_t>{4, 15}, &key);  // appends
  assert_true(key == (std::vector<int64_t>{3, 257, 258, 257, 1, 514}));
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views),
      cmocka_unit_test(test_copies),
      cmocka_unit_test(test_scalar_shape_input),
      cmocka_unit_test(test_reshape_groups),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
