// Wall time to generate and compile the kernels of a fusion of N segments
// (a chain of distinct unary ops cut by segment_set, so N distinct
// kernels), disk cache off: one kernel after another, then through the
// compile pool the CUDA backend uses on a segmentation's first run
// (segment_kernels.h, min(hardware threads, 8, N) threads). No GPU needed:
// NVRTC compiles for sm_90.
//   build/bench/compile_bench [--segments N]
// With --file, a fusion file's kernels instead (its tensor inputs given
// --shapes, e.g. "32768x8192, 8192, 8192"; scalar inputs take no shape):
// the wall time of the first run's compile step, then each unit alone.
//   build/bench/compile_bench --file bench/cases/layernorm.kf --shapes "32768x8192, 8192, 8192"
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/pipeline/plan.h"
#include "core/text/text_parser.h"
#include "core/runtime/cuda/nvrtc.h"
#include "core/runtime/cuda/segment_kernels.h"
#include "core/ir/dtype.h"
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

// "32768x8192, 8192" -> {{32768, 8192}, {8192}}
std::vector<std::vector<int64_t>> parse_shapes(const std::string& text) {
  std::vector<std::vector<int64_t>> shapes;
  std::stringstream all(text);
  std::string one;
  while (std::getline(all, one, ',')) {
    std::vector<int64_t> dims;
    std::stringstream ds(one);
    std::string d;
    while (std::getline(ds, d, 'x'))
      if (d.find_first_not_of(" ") != std::string::npos) dims.push_back(std::stoll(d));
    shapes.push_back(dims);
  }
  return shapes;
}

// The first run's compile step for a fusion file at `shapes`.
int compile_file(const char* file, const std::string& shape_text) {
  std::ifstream in(file);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto fusion = kf::parse_fusion(text.str());
  const std::vector<std::vector<int64_t>> shapes = parse_shapes(shape_text);
  std::vector<DLTensor> tensors;
  std::vector<std::vector<int64_t>> used;
  alignas(16) char data[64] = {};
  size_t next = 0;
  for (int64_t id : fusion->inputs) {
    const kf::Value& v = fusion->value(id);
    if (v.kind == kf::ValueKind::ScalarInput) {
      used.push_back({});
    } else {
      if (next >= shapes.size()) {
        std::fprintf(stderr, "--shapes: %zu shapes for more tensor inputs\n", shapes.size());
        return 1;
      }
      used.push_back(shapes[next++]);
    }
  }
  for (size_t i = 0; i < fusion->inputs.size(); ++i) {
    const kf::Value& v = fusion->value(fusion->inputs[i]);
    tensors.push_back(DLTensor{data, {v.kind == kf::ValueKind::ScalarInput ? kDLCPU : kDLCUDA, 0},
                               static_cast<int32_t>(used[i].size()), kf::to_dlpack(v.dtype), used[i].data(), nullptr, 0});
  }
  std::vector<const DLTensor*> ptrs;
  for (const DLTensor& t : tensors) ptrs.push_back(&t);
  kf::Binding b = kf::bind_inputs(*fusion, ptrs.data(), ptrs.size());
  auto p = kf::plan_for(*fusion, b);
  const kf::ConcreteFusion* c = p->concrete.get();
  const kf::Segmentation* s = &p->segmentation;
  std::vector<size_t> generated;
  for (size_t k = 0; k < s->segments.size(); ++k)
    if (s->segments[k].schedule && !s->segments[k].task.exprs.empty()) generated.push_back(k);
  // NVRTC's first use loads the library: not part of either figure.
  kf::cuda::kernel_image(kf::emit_segment_kernel(*c, s->segments[generated.at(0)]).units[0].source,
                         "warm", 90, kf::cuda::process_disk_cache());
  auto t0 = Clock::now();
  std::vector<kf::cuda::SegmentKernel> made = kf::cuda::make_segment_kernels(*c, *s, generated, 90, {});
  const double pooled = ms_since(t0);
  size_t units = 0;
  for (const auto& k : made) units += k.plan.units.size();
  std::printf("%s: %zu segments, %zu units: first run's compile step %.1f ms (pool of %zu threads)\n", file,
              generated.size(), units, pooled, kf::pool_size(units, kf::cuda::kMaxCompileThreads));
  for (const auto& k : made)
    for (const kf::KernelPlan::Unit& u : k.plan.units) {
      t0 = Clock::now();
      kf::cuda::kernel_image(u.source, u.kernel, 90, kf::cuda::process_disk_cache());
      std::printf("  %-40s %7.1f ms alone, %zu source bytes\n", u.kernel.c_str(), ms_since(t0), u.source.size());
    }
  for (const auto& k : made)
    if (k.plan.units.size() > 1) {  // for comparison: every kernel in one program, as before session 7
      t0 = Clock::now();
      kf::cuda::kernel_image(k.plan.source, k.plan.name, 90, kf::cuda::process_disk_cache());
      std::printf("  %-40s %7.1f ms as one program\n", k.plan.name.c_str(), ms_since(t0));
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 8;
  const char* file = nullptr;
  std::string shapes;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--segments") && i + 1 < argc) n = std::min(std::atoi(argv[++i]), 16);
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
    else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
  }
  if (!kf::cuda::nvrtc_available()) {
    std::fprintf(stderr, "NVRTC is not available\n");
    return 1;
  }
  setenv("KFUSE_CACHE_MAX_BYTES", "0", 1);  // every kernel compiles
  if (file != nullptr) {
    try {
      return compile_file(file, shapes);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "compile_bench: %s\n", e.what());
      return 1;
    }
  }
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
