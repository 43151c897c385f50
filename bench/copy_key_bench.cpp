// Host cost of finding a copy kernel on a warm call (issue 46), no GPU
// needed: what CudaBackend::copy did per call before the copy kernels were
// cached by variant (generate the kernel's source and name, SHA-256 it with
// kernel_key, as load_kernel does before its memory-cache lookup) against
// what it does now (copy_kernels.h: a map lookup of the variant), for the
// strided kernel and a permute kernel (a transpose). Also the per-call
// planning both paths share (collapse_copy, plan_permute_copy), for scale.
// NVRTC must load (kernel_key reads its version).
//   build/bench/copy_key_bench [--calls N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/runtime/cuda/copy_kernels.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/runtime/cuda/permute_copy.h"
#include "core/runtime/cuda/strided_copy.h"

using namespace kf::cuda;

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double ns_per_call(long calls, F&& f) {
  f();  // warm
  const auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(calls);
}

volatile uintptr_t sink;

}  // namespace

int main(int argc, char** argv) {
  long calls = 20000;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atol(argv[++i]);
  const int sm = 90;
  CopyKernels kernels([](int, const std::string&, const std::string&) { return reinterpret_cast<CUfunction>(1); });

  const StridedCopyVariant strided{4, 3};
  const CopyLayout transpose = collapse_copy({1024, 1024}, {1024, 1}, {1, 1024});
  const PermuteCopyPlan plan = *plan_permute_copy(transpose, 2, 132, int64_t{1} << 31);

  const double strided_before = ns_per_call(calls, [&] {
    const std::string name = strided_copy_name(strided.element_bytes, strided.rank);
    const Digest key = kernel_key(strided_copy_source(strided.element_bytes, strided.rank), sm);
    sink = static_cast<uintptr_t>(key[0]) + name.size();
  });
  const double strided_after =
      ns_per_call(calls, [&] { sink = reinterpret_cast<uintptr_t>(kernels.strided(0, strided).function); });
  const double permute_before = ns_per_call(calls, [&] {
    const std::string name = plan.name();
    const Digest key = kernel_key(permute_copy_source(plan), sm);
    sink = static_cast<uintptr_t>(key[0]) + name.size();
  });
  const double permute_after = ns_per_call(
      calls, [&] { sink = reinterpret_cast<uintptr_t>(kernels.permute(0, plan.variant()).function); });
  const double planning = ns_per_call(calls, [&] {
    const CopyLayout l = collapse_copy({1024, 1024}, {1024, 1}, {1, 1024});
    sink = static_cast<uintptr_t>(plan_permute_copy(l, 2, 132, int64_t{1} << 31)->grid);
  });

  std::printf("finding a warm copy kernel, ns per call (%ld calls):\n", calls);
  std::printf("  strided (4-byte, rank 3): source + SHA-256 key %.0f, variant lookup %.0f\n", strided_before,
              strided_after);
  std::printf("  permute (2-byte transpose): source + SHA-256 key %.0f, variant lookup %.0f\n", permute_before,
              permute_after);
  std::printf("  shared per-call planning (collapse_copy + plan_permute_copy): %.0f\n", planning);
  return 0;
}
