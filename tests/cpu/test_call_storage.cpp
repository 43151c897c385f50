// Per-call storage of the host path: Scratch leases (per thread, nested
// leases get their own object, storage survives between calls),
// FixedVector (inline, bounded: past its capacity is KF_ERR_INTERNAL), and
// the RunPlan that tells the executor where each segment's tensors live.
#include <memory>
#include <thread>
#include <vector>

#include "core/define/builder.h"
#include "core/pipeline/plan.h"
#include "core/util/error.h"
#include "core/util/fixed_vector.h"
#include "core/util/scratch.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

void test_scratch_nests_and_is_reused(void**) {
  std::vector<int>* outer_item = nullptr;
  {
    kf::Scratch<std::vector<int>> outer;
    outer_item = outer.get();
    outer->assign(100, 1);
    {
      kf::Scratch<std::vector<int>> inner;  // a nested call: its own object
      assert_ptr_not_equal(inner.get(), outer.get());
    }
  }
  kf::Scratch<std::vector<int>> again;  // the next call gets the same storage
  assert_ptr_equal(again.get(), outer_item);
  assert_true(again->capacity() >= 100);
  std::vector<int>* other_thread = nullptr;
  std::thread([&] {
    kf::Scratch<std::vector<int>> mine;
    other_thread = mine.get();
  }).join();
  assert_ptr_not_equal(other_thread, again.get());
}

void test_fixed_vector(void**) {
  kf::FixedVector<int64_t, 4> v{2, 3};
  v.insert(v.begin(), 1);
  v.push_back(4);
  assert_int_equal(v.size(), 4);
  for (int64_t i = 0; i < 4; ++i) assert_int_equal(v[static_cast<size_t>(i)], i + 1);
  assert_true(v == (kf::FixedVector<int64_t, 4>{1, 2, 3, 4}));
  try {
    v.push_back(5);
    fail_msg("expected KF_ERR_INTERNAL");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_INTERNAL);
  }
  const std::vector<int64_t> five = {1, 2, 3, 4, 5};
  try {
    v.assign(five.begin(), five.end());
    fail_msg("expected KF_ERR_INTERNAL");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_INTERNAL);
  }
}

// y = relu(x) | segment_set | z = exp(y); outputs z, x (an input) and z
// again: one intermediate (y), z written in place once, the rest copied.
void test_run_plan(void**) {
  kf::Builder b;
  const int64_t x = b.tensor_input(2, kf::DType::F32);
  const int64_t y = b.op(kf::Op::RELU, {x}, {})[0];
  const int64_t cut = b.op(kf::Op::SEGMENT_SET, {y}, {})[0];
  const int64_t z = b.op(kf::Op::EXP, {cut}, {})[0];
  b.output(z, {}, -1);
  b.output(x, {}, -1);
  b.output(z, {}, -1);
  auto f = b.finalize();
  int64_t shape[2] = {4, 4};
  float data[16] = {};
  DLTensor t{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  const DLTensor* in[1] = {&t};
  kf::Binding binding = kf::bind_inputs(*f, in, 1);
  auto p = kf::plan_for(*f, binding);
  const kf::RunPlan& plan = p->segmentation.run_plan;
  using Kind = kf::TensorRef::Kind;
  assert_int_equal(plan.segments.size(), 2);
  assert_int_equal(plan.intermediates.size(), 1);
  const kf::SegmentRun& first = plan.segments[0];
  const kf::SegmentRun& second = plan.segments[1];
  assert_int_equal(static_cast<int>(first.inputs.at(0).kind), static_cast<int>(Kind::Input));
  assert_int_equal(static_cast<int>(first.outputs.at(0).kind), static_cast<int>(Kind::Intermediate));
  assert_int_equal(static_cast<int>(second.inputs.at(0).kind), static_cast<int>(Kind::Intermediate));
  assert_int_equal(second.release_after.size(), 1);
  assert_int_equal(static_cast<int>(second.outputs.at(0).kind), static_cast<int>(Kind::Output));
  assert_int_equal(second.outputs.at(0).index, 0);
  assert_int_equal(static_cast<int>(plan.final_values[1].kind), static_cast<int>(Kind::Input));
  assert_int_equal(static_cast<int>(plan.final_values[2].kind), static_cast<int>(Kind::Output));
  assert_int_equal(plan.final_values[2].index, 0);  // copied from output 0
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scratch_nests_and_is_reused),
      cmocka_unit_test(test_fixed_vector),
      cmocka_unit_test(test_run_plan),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
