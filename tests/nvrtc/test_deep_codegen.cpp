// The CUDA kfuse generates for deep fusions and for long chains of
// reductions compiles (NVRTC, sm_80 and sm_90). A chain deeper than the
// depth codegen runs inline at (core/util/deep_stack.h) is emitted from a
// thread with a 1 MB stack, as a JVM thread would ask; a chain of 12
// reductions is split into kernels of at most kMaxRowPhases phases, whose
// row kernels (every variant) compile.
#include "core/codegen/kernel_plan.h"
#include "core/define/builder.h"
#include "core/schedule/row_domain.h"
#include "core/util/deep_stack.h"
#include "core/util/error.h"
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}
#include <functional>
#include "tests/nvrtc/codegen_harness.h"

using namespace kf;
using kftest::Inputs;

namespace {

// fn() on a thread with a 1 MB stack; returns the message of what it threw ("" if nothing).
std::string on_small_stack(const std::function<void()>& fn) {
  struct Job {
    const std::function<void()>* fn;
    std::string error;
  } job{&fn, ""};
  auto run = [](void* arg) -> void* {
    Job* j = static_cast<Job*>(arg);
    try {
      (*j->fn)();
    } catch (const std::exception& e) {
      j->error = e.what();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 20);
  pthread_t t;
  if (pthread_create(&t, &attr, run, &job) != 0) return "pthread_create failed";
  pthread_attr_destroy(&attr);
  pthread_join(t, nullptr);
  return job.error;
}

// Every segment's kernels (and split-row kernels) of `f` for `inputs`, emitted on a 1 MB stack.
void emit_all(const std::shared_ptr<Fusion>& f, const Inputs& inputs, kftest::Batch* batch, size_t* segments) {
  std::shared_ptr<Plan> plan = kftest::plan_for(f, inputs);
  *segments = plan->segmentation.segments.size();
  const std::string error = on_small_stack([&] {
    for (const Segment& seg : plan->segmentation.segments) {
      KernelPlan k = emit_segment_kernel(*plan->concrete, seg);
      batch->add(k);
      for (const KernelPlan& split : k.split_rows) batch->add(split);
    }
  });
  if (!error.empty()) fail_msg("emitting: %s", error.c_str());
}

void test_deep_chain(void** /*state*/) {
  Builder b;
  int64_t v = b.tensor_input(2, DType::F32);
  const int64_t one = b.constant_f64(1.0, DType::F32);
  // Deeper than codegen runs inline, and deeper than a 1 MB stack held
  // codegen's recursion (it died at 1,000 chained ops there).
  const int ops = 1500;
  static_assert(1500 > kInlineDepth);
  for (int k = 0; k < ops; ++k) {
    switch (k % 3) {
      case 0: v = b.op(Op::NEG, {v}, {})[0]; break;
      case 1: v = b.op(Op::ABS, {v}, {})[0]; break;
      default: v = b.op(Op::ADD, {v, one}, {})[0]; break;
    }
  }
  b.output(v, {}, -1);
  auto f = b.finalize();
  assert_true(f->depth == ops);
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {64, 256}));
  kftest::Batch batch;
  size_t segments = 0;
  emit_all(f, in, &batch, &segments);
  assert_int_equal(segments, 1);
  const std::string error = batch.compile_all();
  if (!error.empty()) fail_msg("%s", error.c_str());
}

void test_chained_reductions(void** /*state*/) {
  Builder b;
  int64_t y = b.tensor_input(2, DType::F32);
  for (int k = 0; k < 12; ++k) {
    const int64_t r = b.op(Op::SUM, {y}, {/*keepdim*/ 1, /*axes*/ 1})[0];
    y = b.op(Op::SUB, {y, r}, {})[0];
  }
  b.output(y, {}, -1);
  auto f = b.finalize();
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {64, 1024}));
  const std::shared_ptr<Plan> plan = kftest::plan_for(f, in);
  for (const Segment& seg : plan->segmentation.segments)
    if (seg.schedule)
      if (const auto* row = std::get_if<RowParams>(&*seg.schedule)) assert_true(row->rows.phases.size() <= kMaxRowPhases);
  kftest::Batch batch;
  size_t segments = 0;
  emit_all(f, in, &batch, &segments);
  assert_true(segments >= 2);
  const std::string error = batch.compile_all();
  if (!error.empty()) fail_msg("%s", error.c_str());
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_deep_chain),
      cmocka_unit_test(test_chained_reductions),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
