// The compile pool without a GPU: its size bound, concurrency and error
// order, and the kernels of a multi-segment fusion generated and compiled
// through it (NVRTC, then the disk cache), equal sources compiled once.
// Project headers first: cmocka defines a fail() macro.
#include "core/text/text_parser.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/util/error.h"
#include "core/util/parallel.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "nvrtc/codegen_harness.h"

using namespace kf::cuda;

namespace {

void test_pool_size(void**) {
  const size_t hardware = std::max<size_t>(std::thread::hardware_concurrency(), 1);
  assert_int_equal(kf::pool_size(0, 8), 1);
  assert_int_equal(kf::pool_size(1, 8), 1);
  assert_int_equal(kf::pool_size(100, 8), std::min<size_t>(hardware, 8));
  assert_int_equal(kf::pool_size(3, 8), std::min<size_t>(hardware, 3));
}

void test_parallel_for_runs_each_index_once(void**) {
  std::vector<std::atomic<int>> runs(200);
  kf::parallel_for(runs.size(), 4, [&](size_t i) { runs[i].fetch_add(1); });
  for (const auto& r : runs) assert_int_equal(r.load(), 1);
  kf::parallel_for(0, 4, [&](size_t) { fail_msg("no index to run"); });
}

// Two tasks on two threads are in flight at once: each waits (up to 10 s)
// for the other to start.
void test_parallel_for_is_concurrent(void**) {
  if (std::thread::hardware_concurrency() < 2) {
    skip();
    return;
  }
  std::atomic<int> started{0};
  std::atomic<int> saw_both{0};
  kf::parallel_for(2, 2, [&](size_t) {
    started.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    if (started.load() == 2) saw_both.fetch_add(1);
  });
  assert_int_equal(saw_both.load(), 2);
}

// Every task runs; the error of the lowest index comes out.
void test_parallel_for_rethrows_lowest_error(void**) {
  std::atomic<int> ran{0};
  try {
    kf::parallel_for(16, 4, [&](size_t i) {
      ran.fetch_add(1);
      if (i == 5 || i == 11) throw std::runtime_error("task " + std::to_string(i));
    });
    fail_msg("expected an exception");
  } catch (const std::runtime_error& e) {
    assert_string_equal(e.what(), "task 5");
  }
  assert_int_equal(ran.load(), 16);
}

// Four segments (segment_set cuts), three distinct kernel plans: segments 0 and
// 1 are both exp of a [M, N] float tensor, so their sources are equal.
const char* kFourSegments =
    "input x: tensor<float32, 2>\n"
    "a = exp(x)\ns1 = segment_set(a)\nb = exp(s1)\ns2 = segment_set(b)\n"
    "c = neg(s2)\ns3 = segment_set(c)\nd = sum(s3) {axes=[1], keepdim=true}\noutput d\n";

std::shared_ptr<kf::Plan> four_segments() {
  kftest::Inputs inputs;
  inputs.push_back(kftest::tensor(kf::DType::F32, {8, 64}));
  return kftest::plan_for(kf::parse_fusion(kFourSegments), inputs);
}

void test_segments_compile_through_the_pool(void**) {
  auto p = four_segments();
  const kf::ConcreteFusion* c = p->concrete.get();
  const kf::Segmentation* s = &p->segmentation;
  assert_int_equal(s->segments.size(), 4);
  std::vector<size_t> all = {0, 1, 2, 3};

  const KernelCacheStats before = kernel_cache_stats();
  std::vector<SegmentKernel> kernels = make_segment_kernels(*c, *s, all, 90, {});
  const KernelCacheStats after = kernel_cache_stats();
  assert_int_equal(kernels.size(), 4);
  // One unit per kernel, each a whole program: a pointwise plan has its
  // vector kernel and that kernel's scalar twin, the row reduction its
  // main kernel, that kernel's twin, its tight kernel (48 registers), the
  // long-row kernel, the Edges kernels (rows of any length and start:
  // held in registers, or long), the short-row kernel (several rows per
  // block) and its scalar twin (short rows at an odd width or start).
  assert_int_equal(kernels[0].plan.units.size(), 2);
  assert_int_equal(kernels[3].plan.units.size(), 8);
  assert_string_equal(kernels[3].plan.units[0].kernel.c_str(), kernels[3].plan.name.c_str());
  assert_string_equal(kernels[3].plan.units[1].kernel.c_str(), kernels[3].plan.scalar_of(kernels[3].plan.name).c_str());
  assert_string_equal(kernels[3].plan.units[2].kernel.c_str(), kernels[3].plan.tight_name.c_str());
  assert_string_equal(kernels[3].plan.units[3].kernel.c_str(), kernels[3].plan.long_row_name.c_str());
  assert_int_equal(kernels[3].plan.unit_of(kernels[3].plan.long_row_name), 3);
  assert_string_equal(kernels[3].plan.units[4].kernel.c_str(), kernels[3].plan.edges_name.c_str());
  assert_string_equal(kernels[3].plan.units[5].kernel.c_str(), kernels[3].plan.long_edges_name.c_str());
  assert_string_equal(kernels[3].plan.units[6].kernel.c_str(), kernels[3].plan.short_rows_name.c_str());
  assert_string_equal(kernels[3].plan.units[7].kernel.c_str(), kernels[3].plan.scalar_of(kernels[3].plan.short_rows_name).c_str());
  assert_string_not_equal(kernels[3].plan.units[7].kernel.c_str(), kernels[3].plan.short_rows_name.c_str());
  assert_int_equal(kernels[3].plan.edge_row_pad, 16 + 2 * 4 - 2);  // 16-byte stage rows; float32: 4 lanes
  assert_int_equal(kernels[3].plan.launch.tight_registers, 48);
  assert_true(kernels[3].plan.units[2].source.find("KF_MAXNREG(1024, 48) " + kernels[3].plan.tight_name) !=
              std::string::npos);
  std::set<std::string> sources;
  for (const SegmentKernel& k : kernels) {
    assert_int_equal(k.units.keys.size(), k.plan.units.size());
    for (size_t u = 0; u < k.units.keys.size(); ++u) {
      assert_non_null(k.units.images[u].get());
      assert_false(k.units.images[u]->code.image.empty());
      assert_false(k.units.images[u]->code.is_ptx);  // NVRTC 13 knows sm_90: a CUBIN
      assert_true(k.units.keys[u] == kernel_key(k.plan.units[u].source, 90));
      assert_true(k.plan.units[u].source.find(k.plan.units[u].kernel + "(") != std::string::npos);
      sources.insert(k.plan.units[u].source);
    }
  }
  assert_int_equal(sources.size(), 12);
  assert_ptr_equal(kernels[0].units.images[0].get(), kernels[1].units.images[0].get());  // one compile for both
  assert_int_equal(after.compiles - before.compiles, 12);

  // Again: every image from the disk cache; none when all are loaded.
  kernels = make_segment_kernels(*c, *s, all, 90, {});
  const KernelCacheStats again = kernel_cache_stats();
  assert_int_equal(again.compiles, after.compiles);
  assert_int_equal(again.disk_hits - after.disk_hits, 12);
  kernels = make_segment_kernels(*c, *s, all, 90, [](const Digest&) { return true; });
  for (const SegmentKernel& k : kernels)
    for (const auto& image : k.units.images) assert_null(image.get());
  assert_int_equal(kernel_cache_stats().disk_hits, again.disk_hits);
}

// A request names the kernels it wants: only their units compile (a row
// reduction's long-row kernel alone, as a call with long rows loads it),
// every unit is still keyed, and a plan asked for twice compiles once.
void test_request_compiles_only_named_kernels(void**) {
  auto p = four_segments();
  std::vector<kf::KernelPlan> plans = make_segment_plans(*p->concrete, p->segmentation, {3, 0});
  assert_int_equal(plans.size(), 2);
  const kf::KernelPlan& row = plans[0];
  assert_int_equal(row.units.size(), 8);
  const size_t long_unit = row.unit_of(row.long_row_name), main_unit = row.unit_of(row.name),
               tight_unit = row.unit_of(row.tight_name);
  // A source nobody compiled in this process (the disk cache is per test run).
  kf::KernelPlan fresh = row;
  for (kf::KernelPlan::Unit& u : fresh.units) u.source += "\n// request test\n";
  compile_plan(plans[1], 90, {});  // in the disk cache from here on
  const KernelCacheStats before = kernel_cache_stats();
  std::vector<CompiledUnits> got =
      compile_units({UnitRequest{&fresh, {fresh.long_row_name}}, UnitRequest{&plans[1], {}},
                     UnitRequest{&fresh, {fresh.long_row_name}}},
                    90, {});
  assert_int_equal(got.size(), 3);
  assert_int_equal(got[0].keys.size(), 8);
  assert_true(got[0].keys[main_unit] == kernel_key(fresh.units[main_unit].source, 90));
  assert_null(got[0].images[main_unit].get());
  assert_null(got[0].images[tight_unit].get());
  assert_non_null(got[0].images[long_unit].get());
  assert_ptr_equal(got[0].images[long_unit].get(), got[2].images[long_unit].get());
  assert_non_null(got[1].images[0].get());
  assert_int_equal(kernel_cache_stats().compiles - before.compiles, 1);  // the pointwise plan from the disk cache
  const CompiledUnits main_only = compile_plan(fresh, 90, {}, {fresh.name});
  assert_non_null(main_only.images[main_unit].get());
  assert_null(main_only.images[long_unit].get());
}

// When every compile fails (sm_1 does not exist), the error is that of
// the first segment asked for.
void test_compile_error_names_the_first_segment(void**) {
  auto p = four_segments();
  const kf::ConcreteFusion* c = p->concrete.get();
  const kf::Segmentation* s = &p->segmentation;
  const std::string first = kf::emit_segment_kernel(*c, s->segments[3]).name;
  try {
    make_segment_kernels(*c, *s, {3, 0}, 1, {});
    fail_msg("expected KF_ERR_BACKEND");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_BACKEND);
    assert_non_null(std::strstr(e.what(), first.c_str()));
  }
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  // A fresh disk cache, so the first round really compiles.
  char dir[] = "/tmp/kfuse-segment-kernels-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  setenv("KFUSE_CACHE_DIR", dir, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_size),
      cmocka_unit_test(test_parallel_for_runs_each_index_once),
      cmocka_unit_test(test_parallel_for_is_concurrent),
      cmocka_unit_test(test_parallel_for_rethrows_lowest_error),
      cmocka_unit_test(test_segments_compile_through_the_pool),
      cmocka_unit_test(test_request_compiles_only_named_kernels),
      cmocka_unit_test(test_compile_error_names_the_first_segment),
  };
  int failed = cmocka_run_group_tests(tests, nullptr, nullptr);
  std::system((std::string("rm -rf '") + dir + "'").c_str());
  return failed;
}
