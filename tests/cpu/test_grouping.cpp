// The segmentation algorithm (core/segment/grouping.h) with scheduler
// predicates written in the test, so each rule is checked on its own:
// top-down keeping, shattering, bottom-up merging order, acyclicity around
// library ops, and segment_set boundaries.
#include <memory>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/define/builder.h"
#include "core/segment/grouping.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

using Groups = std::vector<std::vector<int64_t>>;

// Concretizes with every input of shape [8, 8] (f32, compact).
std::shared_ptr<kf::ConcreteFusion> concretize_8x8(const std::shared_ptr<kf::Fusion>& f) {
  static int64_t shape[2] = {8, 8};
  static float data[64];
  std::vector<DLTensor> tensors(f->inputs.size());
  std::vector<const DLTensor*> ptrs;
  for (size_t i = 0; i < f->inputs.size(); ++i) {
    const kf::Value& v = f->value(f->inputs[i]);
    DLTensor& t = tensors[i];
    t.data = data;
    t.device = {kDLCPU, 0};
    t.ndim = v.rank;
    t.dtype = kf::to_dlpack(v.dtype);
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    ptrs.push_back(&t);
  }
  kf::Binding b = kf::bind_inputs(*f, ptrs.data(), ptrs.size());
  return kf::concretize(f, b);
}

std::shared_ptr<kf::Fusion> chain(int n) {
  kf::Builder b;
  int64_t v = b.tensor_input(2, kf::DType::F32);
  for (int i = 0; i < n; ++i) v = b.op(i % 2 ? kf::Op::NEG : kf::Op::EXP, {v}, {})[0];
  b.output(v, {}, -1);
  return b.finalize();
}

void test_accept_all_keeps_one_group(void**) {
  auto c = concretize_8x8(chain(10));
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  assert_int_equal(g.size(), 1);
  assert_int_equal(g[0].size(), 10);
}

void test_shatter_then_merge_in_order(void**) {
  auto c = concretize_8x8(chain(10));
  // A scheduler that takes at most 3 exprs: the chain of 10 is shattered
  // and merged back front to back into 3 + 3 + 3 + 1.
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>& e) { return e.size() <= 3; });
  Groups expected = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}};
  assert_true(g == expected);
}

void test_merge_prefers_largest_intermediate(void**) {
  // x [8,8] -> exp -> a (full size) ; s = sum(a, axis 1) [8] ; y = neg(s)
  // A scheduler that takes pairs only: merging exp+sum removes the [8,8]
  // intermediate, sum+neg only an [8] one, so exp+sum wins.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::EXP, {x}, {})[0];
  int64_t s = b.op(kf::Op::SUM, {a}, {0, 1})[0];
  int64_t y = b.op(kf::Op::NEG, {s}, {})[0];
  b.output(y, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>& e) { return e.size() <= 2; });
  Groups expected = {{0, 1}, {2}};
  assert_true(g == expected);
}

void test_library_op_alone_and_no_cycle(void**) {
  // a = neg(x); l = linear(a, w); y = add(a, l): {neg, add} would be one
  // connected group, but it would both feed and consume the linear.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t w = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::NEG, {x}, {})[0];
  int64_t l = b.op(kf::Op::LINEAR, {a, w}, {})[0];
  int64_t y = b.op(kf::Op::ADD, {a, l}, {})[0];
  b.output(y, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{0}, {1}, {2}};
  assert_true(g == expected);
}

void test_never_merges_across_segment_set(void**) {
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::NEG, {x}, {})[0];
  int64_t s = b.op(kf::Op::SEGMENT_SET, {a}, {})[0];
  int64_t y = b.op(kf::Op::RELU, {s}, {})[0];
  int64_t z = b.op(kf::Op::ADD, {y, a}, {})[0];
  b.output(z, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{0}, {1, 2, 3}};
  assert_true(g == expected);
}

void test_independent_branches_stay_separate_groups(void**) {
  // Two unconnected chains are two top-down groups; bottom-up merging only
  // follows producer -> consumer edges.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t y = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::NEG, {x}, {})[0];
  int64_t c2 = b.op(kf::Op::EXP, {y}, {})[0];
  b.output(a, {}, -1);
  b.output(c2, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{0}, {1}};
  assert_true(g == expected);
}

void test_dead_exprs_are_dropped(void**) {
  // exp(x) is never used: no segment computes it.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  b.op(kf::Op::EXP, {x}, {});
  int64_t y = b.op(kf::Op::NEG, {x}, {})[0];
  b.output(y, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{1}};
  assert_true(g == expected);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept_all_keeps_one_group),
      cmocka_unit_test(test_shatter_then_merge_in_order),
      cmocka_unit_test(test_merge_prefers_largest_intermediate),
      cmocka_unit_test(test_library_op_alone_and_no_cycle),
      cmocka_unit_test(test_never_merges_across_segment_set),
      cmocka_unit_test(test_independent_branches_stay_separate_groups),
      cmocka_unit_test(test_dead_exprs_are_dropped),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
