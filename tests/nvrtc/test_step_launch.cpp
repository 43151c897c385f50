// The launch sequences of multi-step plans (core/runtime/cuda/step_launch.h),
// host code only: the scatter paths' kernels in order (the bitonic merge
// steps for a key count above one block's 2048, the scratch of keys,
// positions and chunk partials), and a scan cut into segments when its
// lines are too few to fill the device.
#include "core/codegen/kernel_plan.h"
#include "core/define/builder.h"
#include "core/runtime/cuda/loaded_kernel.h"
#include "core/runtime/cuda/step_launch.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include "tests/nvrtc/codegen_harness.h"

using namespace kf;
using kftest::Inputs;

namespace {

struct Case {
  std::shared_ptr<Fusion> fusion;
  KernelPlan plan;
  ValueSizes sizes;
};

// One op of `op` on a [rows, cols] float32 x (index and src as the op needs).
Case make(Op op, std::vector<int64_t> attrs, int64_t rows, int64_t cols, int64_t updates, const Tuning& tuning = Tuning{},
          DType dt = DType::F32) {
  Builder b;
  const int64_t x = b.tensor_input(2, dt);
  if (op == Op::INDEX_REDUCE) {
    const int64_t i = b.tensor_input(1, DType::I64), s = b.tensor_input(2, DType::F32);
    b.output(b.op(op, {x, i, s}, attrs)[0], {}, -1);
  } else {
    b.output(b.op(op, {x}, attrs)[0], {}, -1);
  }
  Case c;
  c.fusion = b.finalize();
  Inputs in;
  in.push_back(kftest::tensor(dt, {rows, cols}));
  if (op == Op::INDEX_REDUCE) {
    in.push_back(kftest::tensor(DType::I64, {updates}));
    in.push_back(kftest::tensor(DType::F32, {updates, cols}));
  }
  const std::shared_ptr<const ConcreteFusion> concrete = kftest::concretize(c.fusion, in);
  c.plan = emit_kernel(*concrete, root_task(*c.fusion), kftest::schedule(concrete, tuning));
  c.sizes.reset(*c.fusion);
  c.sizes.set(0, std::vector<int64_t>{rows, cols});
  if (op == Op::INDEX_REDUCE) {
    c.sizes.set(1, std::vector<int64_t>{updates});
    c.sizes.set(2, std::vector<int64_t>{updates, cols});
  }
  infer_sizes(*c.fusion, c.sizes);
  return c;
}

bool ends_with(const std::string& s, const char* tail) { return s.ends_with(tail); }

void test_sorted_scatter_steps(void** /*state*/) {
  // 5000 updates: 8192 keys, so two merge rounds (k = 4096, 8192) above the block sort.
  Case c = make(Op::INDEX_REDUCE, {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 1}, 700, 256, 5000);
  const cuda::StepLaunch l = cuda::scatter_launch(c.plan, c.sizes, 132, 1 << 30);
  assert_int_equal(l.padded, 8192);
  assert_int_equal(l.scratch_bytes, 8192 * 16 + 8192 / KernelPlan::kScatterSortedChunk * 16 * 256);
  std::vector<std::string> names;
  for (const cuda::LaunchStep& s : l.steps) names.push_back(*s.kernel);
  // copy, keys, block sort, (global 2048, block) for k = 4096, (global 4096, global 2048, block) for k = 8192, apply, combine
  assert_int_equal(names.size(), 10);
  assert_string_equal(names[0].c_str(), c.plan.name.c_str());
  assert_true(ends_with(names[1], "_s_keys"));
  assert_true(ends_with(names[2], "_s_sort_block") && l.steps[2].sort_k == 0 && l.steps[2].block == 1024);
  assert_true(ends_with(names[3], "_s_sort_global") && l.steps[3].sort_k == 4096 && l.steps[3].sort_j == 2048);
  assert_true(ends_with(names[4], "_s_sort_block") && l.steps[4].sort_k == 4096);
  assert_true(l.steps[5].sort_k == 8192 && l.steps[5].sort_j == 4096);
  assert_true(l.steps[6].sort_k == 8192 && l.steps[6].sort_j == 2048);
  assert_true(ends_with(names[7], "_s_sort_block") && l.steps[7].sort_k == 8192);
  assert_true(ends_with(names[8], "_s_apply"));
  assert_true(ends_with(names[9], "_s_combine"));
  assert_int_equal(l.steps[2].grid, 4);  // 8192 keys / 2048 per block
}

void test_atomic_scatter_and_empty(void** /*state*/) {
  Case c = make(Op::INDEX_REDUCE, {0, static_cast<int64_t>(ScatterReduce::Mean), 0, 0}, 700, 256, 5000);
  cuda::StepLaunch l = cuda::scatter_launch(c.plan, c.sizes, 132, 1 << 30);
  assert_int_equal(l.steps.size(), 4);  // copy, clear (include_self off), update, mean
  assert_int_equal(l.scratch_bytes, 700 * 256 * 4);  // an int count per result element
  assert_true(ends_with(*l.steps[1].kernel, "_s_clear"));
  assert_true(ends_with(*l.steps[3].kernel, "_s_mean"));
  Case e = make(Op::INDEX_REDUCE, {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 0}, 0, 256, 5);
  assert_int_equal(cuda::scatter_launch(e.plan, e.sizes, 132, 1 << 30).steps.size(), 0);  // empty result
  Case u = make(Op::INDEX_REDUCE, {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 0}, 7, 256, 0);
  assert_int_equal(cuda::scatter_launch(u.plan, u.sizes, 132, 1 << 30).steps.size(), 1);  // no updates: the copy
}

// Float amax over slices: sorted for speed, the atomic kernels compiled
// too; a call takes them whose slices are narrower than sorted_min_width
// (1024) or whose updates average more than sorted_max_run (64) per slice
// of the result. The sorted path's blocks are no wider than a slice needs.
void test_scatter_path_by_width(void** /*state*/) {
  const std::vector<int64_t> amax = {0, static_cast<int64_t>(ScatterReduce::Amax), 0, 0};
  Case wide = make(Op::INDEX_REDUCE, amax, 700, 1024, 5000);
  const cuda::StepLaunch w = cuda::scatter_launch(wide.plan, wide.sizes, 132, 1 << 30);
  assert_int_equal(wide.plan.scatter.sorted_min_width, 1024);
  assert_int_equal(wide.plan.scatter.sorted_max_run, 64);
  assert_true(ends_with(*w.steps[w.steps.size() - 2].kernel, "_s_apply"));
  assert_int_equal(w.steps[w.steps.size() - 2].block, 256);  // 1024 elements, 4 per thread
  assert_true(ends_with(*w.steps.back().kernel, "_s_combine"));
  const auto atomic = [](const cuda::StepLaunch& l) {
    return l.steps.size() == 3 && l.padded == 0 && ends_with(*l.steps[1].kernel, "_s_clear") &&
           ends_with(*l.steps[2].kernel, "_s_update");  // copy, clear (include_self off), update
  };
  Case narrow = make(Op::INDEX_REDUCE, amax, 700, 1000, 5000);
  assert_true(atomic(cuda::scatter_launch(narrow.plan, narrow.sizes, 132, 1 << 30)));
  Case crowded = make(Op::INDEX_REDUCE, amax, 78, 1024, 5000);  // 64.1 updates per row
  assert_true(atomic(cuda::scatter_launch(crowded.plan, crowded.sizes, 132, 1 << 30)));
  Case full = make(Op::INDEX_REDUCE, amax, 79, 1024, 5000);  // 63.3
  assert_int_equal(cuda::scatter_launch(full.plan, full.sizes, 132, 1 << 30).padded, 8192);
  // A call loads (and a first call compiles) its path's kernels only.
  const cuda::DeviceInfo dev;
  assert_true(kernel_variant(wide.plan, wide.sizes, dev) == KernelVariant::Main);
  assert_true(kernel_variant(narrow.plan, narrow.sizes, dev) == KernelVariant::ScatterAtomic);
  LoadedKernel loaded;
  loaded.plan = wide.plan;
  const std::vector<std::string> sorted = loaded.kernels_of(KernelVariant::Main);
  const std::vector<std::string> atomics = loaded.kernels_of(KernelVariant::ScatterAtomic);
  assert_int_equal(sorted.size(), 6);  // copy, keys, block sort, global sort, apply, combine
  assert_int_equal(atomics.size(), 3);  // copy, clear, update
  for (const std::string& n : sorted) assert_false(n.ends_with("_s_clear") || n.ends_with("_s_update"));
  assert_true(atomics[1].ends_with("_s_clear") && atomics[2].ends_with("_s_update"));
  // A threshold of 0 never sorts for speed.
  Tuning never;
  never.scatter_sorted_min_width = 0;
  Case off = make(Op::INDEX_REDUCE, amax, 700, 256, 5000, never);
  assert_true(off.plan.scatter.apply.empty());
  assert_int_equal(cuda::scatter_launch(off.plan, off.sizes, 132, 1 << 30).steps.size(), 3);
  // A deterministic sum is sorted at any width, its blocks at least a warp.
  Case thin = make(Op::INDEX_REDUCE, {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 1}, 700, 3, 5000);
  const cuda::StepLaunch t = cuda::scatter_launch(thin.plan, thin.sizes, 132, 1 << 30);
  assert_true(thin.plan.scatter.update.empty());
  assert_true(ends_with(*t.steps[t.steps.size() - 2].kernel, "_s_apply"));
  assert_int_equal(t.steps[t.steps.size() - 2].block, 32);
}

// A scatter whose index has extent 0 along another dim has no updates:
// the copy alone (its keys kernel would read the empty index).
void test_scatter_empty_slices(void** /*state*/) {
  Builder b;
  const int64_t x = b.tensor_input(2, DType::F32), i = b.tensor_input(2, DType::I64), s = b.tensor_input(2, DType::F32);
  b.output(b.op(Op::SCATTER, {x, i, s}, {0, static_cast<int64_t>(ScatterReduce::Sum), 1, 1})[0], {}, -1);
  std::shared_ptr<Fusion> f = b.finalize();
  Inputs in;
  in.push_back(kftest::tensor(DType::F32, {8, 4}));
  in.push_back(kftest::tensor(DType::I64, {5, 0}));
  in.push_back(kftest::tensor(DType::F32, {5, 4}));
  const std::shared_ptr<const ConcreteFusion> concrete = kftest::concretize(f, in);
  const KernelPlan plan = emit_kernel(*concrete, root_task(*f), kftest::schedule(concrete, Tuning{}));
  assert_true(plan.scatter.slices);  // (a Zero-class dim reads index 0)
  ValueSizes sizes;
  sizes.reset(*f);
  sizes.set(0, std::vector<int64_t>{8, 4});
  sizes.set(1, std::vector<int64_t>{5, 0});
  sizes.set(2, std::vector<int64_t>{5, 4});
  infer_sizes(*f, sizes);
  const cuda::StepLaunch l = cuda::scatter_launch(plan, sizes, 132, 1 << 30);
  assert_int_equal(l.steps.size(), 1);
  assert_int_equal(l.scratch_bytes, 0);
}

void test_scan_segments(void** /*state*/) {
  const Tuning three;  // the default: the three-kernel path
  // 8192 columns scanned down 32768 rows: 33 segments fill 132 x 2048 threads.
  Case c = make(Op::CUMSUM, {0, 0}, 32768, 8192, 0, three);
  cuda::StepLaunch l = cuda::scan_launch(c.plan, c.sizes, 132, 1 << 30);
  assert_int_equal(l.padded, (132 * 2048 + 8191) / 8192);
  assert_int_equal(l.steps.size(), 3);
  assert_true(ends_with(*l.steps[0].kernel, "_s_partials"));
  assert_true(ends_with(*l.steps[1].kernel, "_s_carry"));
  assert_string_equal(l.steps[2].kernel->c_str(), c.plan.name.c_str());
  assert_int_equal(l.scratch_bytes, l.padded * 8192 * 8);
  // Enough lines: one segment, the scan alone, no scratch.
  Case many = make(Op::CUMSUM, {0, 0}, 64, 1 << 20, 0, three);
  l = cuda::scan_launch(many.plan, many.sizes, 132, 1 << 30);
  assert_int_equal(l.padded, 1);
  assert_int_equal(l.steps.size(), 1);
  assert_int_equal(l.scratch_bytes, 0);
  // Short lines are not cut below 32 elements.
  Case short_lines = make(Op::CUMSUM, {0, 0}, 40, 16, 0, three);
  assert_int_equal(cuda::scan_launch(short_lines.plan, short_lines.sizes, 132, 1 << 30).padded, 1);
}

void test_scan_single_pass(void** /*state*/) {
  Tuning one;
  one.scan_pass_rows = 8;
  // float32: 4 lines per lane (a 16-byte vector), 8 elements per warp.
  Case c = make(Op::CUMSUM, {0, 0}, 32768, 8192, 0, one);
  assert_int_equal(c.plan.later.size(), 0);
  assert_int_equal(c.plan.launch.items_per_thread, 4);
  assert_int_equal(c.plan.launch.scan_pass_rows, 8);
  cuda::StepLaunch l = cuda::scan_launch(c.plan, c.sizes, 132, 1 << 30);
  assert_int_equal(l.steps.size(), 1);
  assert_string_equal(l.steps[0].kernel->c_str(), c.plan.name.c_str());
  // A long line: all 8 warps along the scan, segments of 64 elements; 64
  // column groups of 128 lines, one per block; at most 32 blocks per SM.
  assert_int_equal(l.steps[0].sort_k, 8);
  assert_int_equal(l.padded, 32768 / 64);
  assert_int_equal(l.steps[0].grid, 132 * 32);
  assert_int_equal(l.scratch_bytes, 8 + 2 * 512 * 64 * 128 * 8);  // a 64-bit word per value
  assert_int_equal(l.zero_bytes, l.scratch_bytes);
  // Short lines: one warp covers 8 elements, so 8 column groups per block.
  Case s = make(Op::CUMSUM, {0, 0}, 5, 4096, 0, one);
  l = cuda::scan_launch(s.plan, s.sizes, 132, 1 << 30);
  assert_int_equal(l.steps[0].sort_k, 1);
  assert_int_equal(l.padded, 1);
  assert_int_equal(l.steps[0].grid, (4096 / 128 + 7) / 8);
  assert_int_equal(l.scratch_bytes, 8 + 2 * 32 * 128 * 8);
  // 20 elements: the fewest warps (a power of two) that cover them, 4.
  Case m = make(Op::CUMSUM, {0, 0}, 20, 1000, 0, one);
  l = cuda::scan_launch(m.plan, m.sizes, 132, 1 << 30);
  assert_int_equal(l.steps[0].sort_k, 4);
  assert_int_equal(l.padded, 1);
  assert_int_equal(l.steps[0].grid, (1000 + 255) / 256);  // 8 column groups of 128 lines, 2 per block
  assert_int_equal(l.scratch_bytes, 8 + 2 * 8 * 128 * 8);
  // float64: two words per value (V = 2: 64 lines per column group); 100
  // elements take all 8 warps, 2 segments of 64.
  Case wide = make(Op::CUMSUM, {0, 0}, 100, 100, 0, one, DType::F64);
  l = cuda::scan_launch(wide.plan, wide.sizes, 132, 1 << 30);
  assert_int_equal(wide.plan.launch.items_per_thread, 2);
  assert_int_equal(l.padded, 2);
  assert_int_equal(l.scratch_bytes, 8 + 2 * 2 * 2 * 64 * 2 * 8);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sorted_scatter_steps),
      cmocka_unit_test(test_atomic_scatter_and_empty),
      cmocka_unit_test(test_scatter_path_by_width),
      cmocka_unit_test(test_scatter_empty_slices),
      cmocka_unit_test(test_scan_segments),
      cmocka_unit_test(test_scan_single_pass),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
