// The copy kernels' cache (core/runtime/cuda/copy_kernels.h) without a
// GPU, through a loader that stands in for load_kernel: a second request
// for a variant on a device generates no source and gets the same entry;
// another device, element size, rank or permute plan is a miss; requests
// racing on one variant all get one function; the sources handed to the
// loader compile with NVRTC and define the kernel they name.
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/cuda/copy_kernels.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/permute_copy.h"
#include "core/runtime/cuda/strided_copy.h"

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include "nvrtc/nvrtc_skip.h"

using namespace kf::cuda;

namespace {

// A loader that counts its calls and hands out distinct fake functions.
struct FakeLoader {
  std::atomic<int> calls{0};
  std::vector<std::pair<std::string, std::string>> loaded;  // (source, name), single-threaded uses only
  bool record = true;
  CopyKernels::Loader loader() {
    return [this](int, const std::string& source, const std::string& name) {
      const int n = ++calls;
      if (record) loaded.emplace_back(source, name);
      return reinterpret_cast<CUfunction>(static_cast<uintptr_t>(0x1000 + n));
    };
  }
};

// A row-major source copied into its transpose's layout: a permute copy.
PermuteCopyVariant transpose_variant(int64_t rows, int64_t cols, int element_bytes) {
  const CopyLayout l = collapse_copy({rows, cols}, {cols, 1}, {1, rows});
  const auto p = plan_permute_copy(l, element_bytes, 132, int64_t{1} << 31);
  assert_true(p.has_value());
  return p->variant();
}

void test_strided_hits(void**) {
  FakeLoader fake;
  CopyKernels kernels(fake.loader());
  const CopyKernel& a = kernels.strided(0, {4, 3});
  assert_int_equal(kernels.sources_built(), 1);
  assert_string_equal(a.name.c_str(), strided_copy_name(4, 3).c_str());
  const CopyKernel& b = kernels.strided(0, {4, 3});
  assert_ptr_equal(&a, &b);
  assert_ptr_equal(a.function, b.function);
  assert_int_equal(kernels.sources_built(), 1);
  assert_int_equal(fake.calls.load(), 1);
  // Another device, element size or rank: a miss each, then hits.
  assert_ptr_not_equal(kernels.strided(1, {4, 3}).function, a.function);
  kernels.strided(0, {2, 3});
  kernels.strided(0, {4, 2});
  assert_int_equal(kernels.sources_built(), 4);
  for (int i = 0; i < 3; ++i) {
    kernels.strided(1, {4, 3});
    kernels.strided(0, {2, 3});
    kernels.strided(0, {4, 2});
  }
  assert_int_equal(kernels.sources_built(), 4);
  assert_int_equal(kernels.size(), 4);
  assert_int_equal(fake.calls.load(), 4);
}

void test_permute_hits(void**) {
  FakeLoader fake;
  CopyKernels kernels(fake.loader());
  // Two shapes of one variant (the kernel reads extents from its arguments).
  const PermuteCopyVariant v = transpose_variant(256, 512, 4);
  assert_true(transpose_variant(384, 512, 4) == v);
  const CopyKernel& a = kernels.permute(0, v);
  assert_string_equal(a.name.c_str(), v.kernel_plan().name().c_str());
  assert_ptr_equal(&kernels.permute(0, transpose_variant(384, 512, 4)), &a);
  assert_int_equal(kernels.sources_built(), 1);
  // Another element size: another kernel.
  const PermuteCopyVariant h = transpose_variant(256, 512, 2);
  assert_false(h == v);
  kernels.permute(0, h);
  kernels.permute(0, h);
  assert_int_equal(kernels.sources_built(), 2);
  // The strided kernels are apart from the permute ones.
  kernels.strided(0, {4, 2});
  assert_int_equal(kernels.sources_built(), 3);
  assert_int_equal(kernels.size(), 3);
}

void test_concurrent_requests(void**) {
  FakeLoader fake;
  fake.record = false;
  CopyKernels kernels(fake.loader());
  std::vector<std::thread> threads;
  std::vector<const CopyKernel*> got(8);
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] { got[t] = &kernels.strided(0, {8, 5}); });
  for (std::thread& t : threads) t.join();
  for (const CopyKernel* k : got) assert_ptr_equal(k, got[0]);
  assert_int_equal(kernels.size(), 1);
  assert_true(kernels.sources_built() >= 1 && kernels.sources_built() <= got.size());
  const uint64_t built = kernels.sources_built();
  kernels.strided(0, {8, 5});
  assert_int_equal(kernels.sources_built(), built);
}

void test_sources_compile(void**) {
  FakeLoader fake;
  CopyKernels kernels(fake.loader());
  kernels.strided(0, {2, 4});
  kernels.permute(0, transpose_variant(300, 200, 8));
  assert_int_equal(fake.loaded.size(), 2);
  for (const auto& [source, name] : fake.loaded) {
    assert_true(source.find("void " + name + "(") != std::string::npos ||
                source.find(") " + name + "(") != std::string::npos);
    const CompiledCode code = nvrtc_compile(source, name, 80);
    assert_false(code.image.empty());
  }
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strided_hits),
      cmocka_unit_test(test_permute_hits),
      cmocka_unit_test(test_concurrent_requests),
      cmocka_unit_test(test_sources_compile),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
