// Wall time to generate and compile the kernels of a fusion of N segments
// (a chain of distinct unary ops cut by segment_set, so N distinct
// kernels), disk cache off: one kernel after another, then through the
// compile pool the CUDA backend uses on a segmentation's first run
// (segment_kernels.h, min(hardware threads, 8, N) threads). No GPU needed:
// NVRTC compiles for sm_90.
//   build/bench/compile_bench [--segments N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/text/text_parser.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/util/parallel.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

const char* const kOps[] = {"exp", "neg", "sin", "cos", "tanh", "sigmoid", "relu", "abs",
                            "sqrt", "log1p", "erf", "silu", "atan", "sinh", "cosh", "expm1"};

std::string chain(int n) {
  std::string text = "input v0: tensor<float32, 2>\n";
  for (int i = 0; i < n; ++i) {
    const std::string in = "v" + std::to_string(i), out = "v" + std::to_string(i + 1);
    text += "t" + std::to_string(i) + " = " + kOps[i % 16] + "(" + in + ")\n";
    text += out + " = segment_set(t" + std::to_string(i) + ")\n";
  }
  return text + "output v" + std::to_string(n) + "\n";
}

}  // namespace

int main(int argc, char** argv) {
  int n = 8;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--segments") && i + 1 < argc) n = std::min(std::atoi(argv[++i]), 16);
  if (!kf::cuda::nvrtc_available()) {
    std::fprintf(stderr, "NVRTC is not available\n");
    return 1;
  }
  setenv("KFUSE_CACHE_MAX_BYTES", "0", 1);  // every kernel compiles
  auto fusion = kf::parse_fusion(chain(n));
  float data[1];
  int64_t shape[2] = {1024, 1024};
  DLTensor x{data, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  const DLTensor* in[1] = {&x};
  kf::Binding b = kf::bind_inputs(*fusion, in, 1);
  auto p = kf::plan_for(*fusion, b);
  const kf::ConcreteFusion* c = p->concrete.get();
  const kf::Segmentation* s = &p->segmentation;
  std::vector<size_t> all(s->segments.size());
  for (size_t k = 0; k < all.size(); ++k) all[k] = k;
  // NVRTC's first use loads the library: not part of either figure.
  kf::cuda::kernel_image(kf::emit_segment_kernel(*c, s->segments[0]).source, "warm", 90,
                         kf::cuda::process_disk_cache());

  auto t0 = Clock::now();
  for (size_t k : all) {
    kf::KernelPlan plan = kf::emit_segment_kernel(*c, s->segments[k]);
    kf::cuda::kernel_image(plan.source, plan.name, 90, kf::cuda::process_disk_cache());
  }
  const double serial = ms_since(t0);
  t0 = Clock::now();
  kf::cuda::make_segment_kernels(*c, *s, all, 90, {});
  const double pooled = ms_since(t0);
  std::printf("%zu segments: one at a time %.1f ms, compile pool (%zu threads) %.1f ms\n", all.size(),
              serial, kf::pool_size(all.size(), kf::cuda::kMaxCompileThreads), pooled);
  return 0;
}
