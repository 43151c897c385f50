// The segmentation algorithm (core/segment/grouping.h) with scheduler
// predicates written in the test, so each rule is checked on its own:
// top-down keeping, shattering, bottom-up merging order, acyclicity around
// library ops, matmul patterns as library groups, and segment_set
// boundaries.
#include <memory>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/define/builder.h"
#include "core/segment/grouping.h"
#include "core/segment/recompute.h"

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
std::shared_ptr<const kf::ConcreteFusion> concretize_8x8(const std::shared_ptr<kf::Fusion>& f) {
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
  return kf::plan_for(*f, b)->concrete;
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

// y = neg(relu(linear(x, w, bias))): linear + relu is a matmul pattern,
// one library group that takes no other expr.
std::shared_ptr<kf::Fusion> linear_relu_neg() {
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t w = b.tensor_input(2, kf::DType::F32);
  int64_t bias = b.tensor_input(1, kf::DType::F32);
  int64_t l = b.op(kf::Op::LINEAR, {x, w, bias}, {})[0];
  int64_t r = b.op(kf::Op::RELU, {l}, {})[0];
  b.output(b.op(kf::Op::NEG, {r}, {})[0], {}, -1);
  return b.finalize();
}

void test_matmul_pattern_is_one_library_group(void**) {
  auto c = concretize_8x8(linear_relu_neg());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{0, 1}, {2}};
  assert_true(g == expected);
}

void test_refused_pattern_leaves_the_library_op_alone(void**) {
  // A scheduler that refuses the pattern: the linear runs alone and relu
  // merges with neg as usual.
  auto c = concretize_8x8(linear_relu_neg());
  Groups g = kf::group_exprs(*c, [&](const std::vector<int64_t>& e) {
    for (int64_t i : e)
      if (c->fusion->exprs[static_cast<size_t>(i)].op == kf::Op::LINEAR) return e.size() == 1;
    return true;
  });
  Groups expected = {{0}, {1, 2}};
  assert_true(g == expected);
}

void test_pattern_around_a_cycle(void**) {
  // a = neg(x); l = relu(linear(a, w)); y = add(a, l): {neg, add} would be
  // one connected group around the pattern {linear, relu}, which stays
  // whole while the other group is shattered.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t w = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::NEG, {x}, {})[0];
  int64_t l = b.op(kf::Op::LINEAR, {a, w}, {})[0];
  int64_t r = b.op(kf::Op::RELU, {l}, {})[0];
  b.output(b.op(kf::Op::ADD, {a, r}, {})[0], {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  Groups expected = {{0}, {1, 2}, {3}};
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

void test_independent_branches_merge_sideways(void**) {
  // Two unconnected chains are two top-down groups (bottom-up merging only
  // follows producer -> consumer edges); step 5 merges them sideways when
  // the scheduler takes both, and leaves them apart when it does not.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t y = b.tensor_input(2, kf::DType::F32);
  int64_t a = b.op(kf::Op::NEG, {x}, {})[0];
  int64_t c2 = b.op(kf::Op::EXP, {y}, {})[0];
  b.output(a, {}, -1);
  b.output(c2, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  assert_true(g == Groups({{0, 1}}));
  g = kf::group_exprs(*c, [](const std::vector<int64_t>& e) { return e.size() == 1; });
  assert_true(g == Groups({{0}, {1}}));
}

void test_sideways_needs_no_path_and_plain_loops(void**) {
  // r = neg(x) feeds a linear whose result z reads: r's and z's groups are
  // joined by a path through the library group and stay apart; q = exp(u),
  // joined to neither, joins r's group (the first of the stage); the row
  // sum s is no plain loop and stays alone.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32), w = b.tensor_input(2, kf::DType::F32);
  int64_t u = b.tensor_input(2, kf::DType::F32), v = b.tensor_input(2, kf::DType::F32);
  int64_t r = b.op(kf::Op::NEG, {x}, {})[0];                // 0
  int64_t l = b.op(kf::Op::LINEAR, {r, w}, {})[0];          // 1
  int64_t z = b.op(kf::Op::ADD, {l, l}, {})[0];             // 2
  int64_t q = b.op(kf::Op::EXP, {u}, {})[0];                // 3
  int64_t s = b.op(kf::Op::SUM, {v}, {1})[0];               // 4
  b.output(z, {}, -1);
  b.output(q, {}, -1);
  b.output(s, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  assert_true(g == Groups({{0, 3}, {1}, {2}, {4}}));
}

void test_sideways_leaves_in_place_updates(void**) {
  // y = neg(x) written into x: a kernel of several loops would send it
  // through a temporary (in_place.h), so its group merges with none.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32), u = b.tensor_input(2, kf::DType::F32);
  int64_t v = b.tensor_input(2, kf::DType::F32);
  b.output(b.op(kf::Op::NEG, {x}, {})[0], {}, 0);
  b.output(b.op(kf::Op::EXP, {u}, {})[0], {}, -1);
  b.output(b.op(kf::Op::ABS, {v}, {})[0], {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  assert_true(g == Groups({{0}, {1, 2}}));
}

void test_sideways_merges_at_most_eight(void**) {
  // Ten independent negations: eight to a kernel, then the last two.
  kf::Builder b;
  std::vector<int64_t> outs;
  for (int i = 0; i < 10; ++i) outs.push_back(b.op(kf::Op::NEG, {b.tensor_input(2, kf::DType::F32)}, {})[0]);
  for (int64_t o : outs) b.output(o, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>&) { return true; });
  assert_true(g == Groups({{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9}}));
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

void test_no_cycle_through_a_merged_group(void**) {
  // e0 = sum(x) [8,1]; e1 = exp(x); e2 = e0 + e1; e3 = neg(e0); e4 = e1 + e3.
  // The scheduler takes {e1, e4} (merged first: the heaviest edge) and
  // {e0, e2}. Merging e0 and e2 after {e1, e4} exists would close the cycle
  // {e0, e2} -> e3 -> {e1, e4} -> {e0, e2}: the path from e0 to e2 runs
  // through e3, which starts after e2 ends. A search that skipped such
  // groups merged them, and the run order then lost every group on the
  // cycle (here all of them).
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32);
  int64_t e0 = b.op(kf::Op::SUM, {x}, {1, 1})[0];
  int64_t e1 = b.op(kf::Op::EXP, {x}, {})[0];
  int64_t e2 = b.op(kf::Op::ADD, {e0, e1}, {})[0];
  int64_t e3 = b.op(kf::Op::NEG, {e0}, {})[0];
  int64_t e4 = b.op(kf::Op::ADD, {e1, e3}, {})[0];
  b.output(e2, {}, -1);
  b.output(e4, {}, -1);
  auto c = concretize_8x8(b.finalize());
  Groups g = kf::group_exprs(*c, [](const std::vector<int64_t>& e) {
    return e == std::vector<int64_t>{1, 4} || e == std::vector<int64_t>{0, 2};
  });
  Groups expected = {{0}, {3}, {1, 4}, {2}};
  assert_true(g == expected);
}

void test_sideways_merges_reductions_of_one_tensor(void**) {
  // e0 = max(x), e1 = sum(y), e2 = sum(x): the two reductions of x merge
  // (one kernel reads x once), the one of y stays apart; with the rule off
  // (Tuning::merge_sibling_reductions), or where no scheduler takes them
  // together, all three stay apart.
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32), y = b.tensor_input(2, kf::DType::F32);
  b.output(b.op(kf::Op::MAX, {x}, {1, 1})[0], {}, -1);
  b.output(b.op(kf::Op::SUM, {y}, {1, 1})[0], {}, -1);
  b.output(b.op(kf::Op::SUM, {x}, {1, 1})[0], {}, -1);
  auto c = concretize_8x8(b.finalize());
  const auto all = [](const std::vector<int64_t>&) { return true; };
  assert_true(kf::group_exprs(*c, all) == Groups({{0, 2}, {1}}));
  assert_true(kf::group_exprs(*c, all, false) == Groups({{0}, {1}, {2}}));
  assert_true(kf::group_exprs(*c, [](const std::vector<int64_t>& e) { return e.size() == 1; }) ==
              Groups({{0}, {1}, {2}}));
}

// e0 = neg(x), e1 = sum(e0), e2 = gather(e0, idx), e3 = sum(e2), as the
// groups {e0, e1} and {e2, e3}: the gather's group computes e0 again
// (recompute.h), unless e0 is an output itself (`e0_out`), x is updated
// in place (`x_in_place`, by a fifth expr abs(x)), or no scheduler takes
// the group with it.
Groups recomputed(bool e0_out, bool x_in_place, const kf::AcceptsRecomputing& accepts) {
  kf::Builder b;
  int64_t x = b.tensor_input(2, kf::DType::F32), idx = b.tensor_input(2, kf::DType::I64);
  int64_t e0 = b.op(kf::Op::NEG, {x}, {})[0];
  b.output(b.op(kf::Op::SUM, {e0}, {1, 1})[0], {}, -1);
  int64_t e2 = b.op(kf::Op::GATHER, {e0, idx}, {1})[0];
  b.output(b.op(kf::Op::SUM, {e2}, {1, 1})[0], {}, -1);
  if (e0_out) b.output(e0, {}, -1);
  if (x_in_place) b.output(b.op(kf::Op::ABS, {x}, {})[0], {}, 0);
  auto f = b.finalize();
  Groups g = {{0, 1}, {2, 3}};
  if (x_in_place) g.push_back({4});
  kf::recompute_gathered_operands(*f, accepts, &g);
  return g;
}

void test_gathered_operand_recomputed(void**) {
  const auto all = [](const std::vector<int64_t>&, const std::vector<int64_t>&) { return true; };
  assert_true(recomputed(false, false, all) == Groups({{0, 1}, {0, 2, 3}}));
  assert_true(recomputed(true, false, all) == Groups({{0, 1}, {2, 3}}));
  assert_true(recomputed(false, true, all) == Groups({{0, 1}, {2, 3}, {4}}));
  const auto none = [](const std::vector<int64_t>&, const std::vector<int64_t>&) { return false; };
  assert_true(recomputed(false, false, none) == Groups({{0, 1}, {2, 3}}));
  // What the scheduler is asked: the group with the chain, and the chain.
  std::vector<int64_t> asked_exprs, asked_chain;
  recomputed(false, false, [&](const std::vector<int64_t>& e, const std::vector<int64_t>& c) {
    asked_exprs = e;
    asked_chain = c;
    return true;
  });
  assert_true(asked_exprs == std::vector<int64_t>({0, 2, 3}));
  assert_true(asked_chain == std::vector<int64_t>({0}));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept_all_keeps_one_group),
      cmocka_unit_test(test_shatter_then_merge_in_order),
      cmocka_unit_test(test_merge_prefers_largest_intermediate),
      cmocka_unit_test(test_library_op_alone_and_no_cycle),
      cmocka_unit_test(test_matmul_pattern_is_one_library_group),
      cmocka_unit_test(test_refused_pattern_leaves_the_library_op_alone),
      cmocka_unit_test(test_pattern_around_a_cycle),
      cmocka_unit_test(test_never_merges_across_segment_set),
      cmocka_unit_test(test_independent_branches_merge_sideways),
      cmocka_unit_test(test_sideways_needs_no_path_and_plain_loops),
      cmocka_unit_test(test_sideways_leaves_in_place_updates),
      cmocka_unit_test(test_sideways_merges_at_most_eight),
      cmocka_unit_test(test_dead_exprs_are_dropped),
      cmocka_unit_test(test_no_cycle_through_a_merged_group),
      cmocka_unit_test(test_sideways_merges_reductions_of_one_tensor),
      cmocka_unit_test(test_gathered_operand_recomputed),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
