// Host-side latency of kfuse through its public C API (issue: a cached
// execute in microseconds, a cold start in milliseconds):
//  - cached execute of a small fusion (3 inputs of 16x16, one kernel): wall
//    time per call over N calls, and heap allocations per call (this binary
//    interposes malloc, which also counts libkfuse's allocations);
//  - a new shape in the same concretization class, alternating two shapes;
//  - cached execute of a fusion whose output is also a second output in
//    another layout (the backend's copy on every call): a pitched 16x16
//    (the strided-copy kernel) and a transposed 128x128 (the permute copy);
//  - cold start (define -> first execute, codegen + NVRTC included) of a
//    pointwise fusion and a layernorm, with an empty kernel cache directory,
//    and again in a new process with that cache warm.
// Runs on the GPU when the driver finds one (add --cpu to force the CPU).
// --dry-run: the CPU backend dispatches segments without computing them
// (KFUSE_CPU_DRY_RUN=1), so the figures are those of the host path shared
// with the GPU (binding, concretization lookup, executor), measurable
// without a GPU.
//   build/bench/host_latency_bench [--cpu | --dry-run] [--calls N]
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kfuse/kfuse.h"
#include "tools/cuda_driver.h"

namespace {

std::atomic<long> g_allocations{0};

}  // namespace

// Counting allocator: every malloc in the process goes through here.
extern "C" void* __libc_malloc(size_t);
extern "C" void* malloc(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void check(kf_status s, const char* what) {
  if (s != KF_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, kf_status_name(s), kf_last_error());
    std::exit(1);
  }
}

const char* kPointwise =
    "input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\ninput c: tensor<float32, 2>\n"
    "m = mul(a, b)\ny = add(m, c)\noutput y\n";
const char* kLayernorm =
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 1>\ninput b: tensor<float32, 1>\n"
    "const eps: float32 = 1e-5\nv, mu = var_mean(x) {axes=[1], keepdim=true, correction=0}\n"
    "xc = sub(x, mu)\nve = add(v, eps)\nr = rsqrt(ve)\nn = mul(xc, r)\nnw = mul(n, w)\no = add(nw, b)\noutput o\n";

struct Tensors {
  std::vector<DLTensor> in;
  std::vector<std::vector<int64_t>> shapes;
  DLTensor out{};
  std::vector<int64_t> out_shape;
};

// Inputs of `ranks` with rows x cols (rank 1 gets cols) in memory from `alloc`.
template <typename Alloc>
Tensors make(const std::vector<int>& ranks, int64_t rows, int64_t cols, DLDevice dev, Alloc alloc) {
  Tensors t;
  t.shapes.resize(ranks.size());
  t.in.resize(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) {
    t.shapes[i] = ranks[i] == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{cols};
    size_t n = static_cast<size_t>(rows * cols);
    t.in[i] = DLTensor{alloc(n * 4), dev, ranks[i], {kDLFloat, 32, 1}, t.shapes[i].data(), nullptr, 0};
  }
  t.out_shape = {rows, cols};
  t.out = DLTensor{alloc(static_cast<size_t>(rows * cols) * 4), dev, 2, {kDLFloat, 32, 1}, t.out_shape.data(), nullptr, 0};
  return t;
}

// Wall time per call of `calls` warm kf_execute_into calls, and the heap
// allocations they make.
double time_calls(kf_fusion f, const std::vector<const DLTensor*>& in, DLTensor** out, size_t num_outputs,
                  long calls, kfcli::CudaDriver* gpu, long* allocs) {
  check(kf_execute_into(f, in.data(), in.size(), out, num_outputs, nullptr), "warm-up");
  if (gpu) gpu->synchronize();
  long a0 = g_allocations.load();
  auto t0 = Clock::now();
  for (long i = 0; i < calls; ++i) kf_execute_into(f, in.data(), in.size(), out, num_outputs, nullptr);
  double us = us_since(t0);
  *allocs = g_allocations.load() - a0;
  if (gpu) gpu->synchronize();
  return us / static_cast<double>(calls);
}

double run_calls(kf_fusion f, Tensors& t, long calls, kfcli::CudaDriver* gpu, long* allocs) {
  std::vector<const DLTensor*> in;
  for (auto& x : t.in) in.push_back(&x);
  DLTensor* out[1] = {&t.out};
  return time_calls(f, in, out, 1, calls, gpu, allocs);
}

// y = a + b returned twice, the second in `strides` (rows x cols): the
// executor copies the first into it on every call (backend copy).
double run_copied_output(int64_t rows, int64_t cols, std::vector<int64_t> strides, int64_t span, long calls,
                         DLDevice dev, kfcli::CudaDriver* gpu, const std::function<void*(size_t)>& alloc,
                         long* allocs) {
  kf_fusion f;
  check(kf_fusion_from_text("input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\n"
                            "y = add(a, b)\noutput y\noutput y\n",
                            &f),
        "define");
  Tensors t = make({2, 2}, rows, cols, dev, [&](size_t n) { return alloc(n); });
  DLTensor second = t.out;
  second.data = alloc(static_cast<size_t>(span) * 4);
  second.strides = strides.data();
  std::vector<const DLTensor*> in;
  for (auto& x : t.in) in.push_back(&x);
  DLTensor* out[2] = {&t.out, &second};
  const double us = time_calls(f, in, out, 2, calls, gpu, allocs);
  kf_fusion_release(f);
  return us;
}

double cold_start_ms(const char* text, const std::vector<int>& ranks, DLDevice dev,
                     kfcli::CudaDriver* gpu, const std::function<void*(size_t)>& alloc) {
  Tensors t = make(ranks, 64, 256, dev, alloc);
  auto t0 = Clock::now();
  kf_fusion f;
  check(kf_fusion_from_text(text, &f), "define");
  std::vector<const DLTensor*> in;
  for (auto& x : t.in) in.push_back(&x);
  DLTensor* out[1] = {&t.out};
  check(kf_execute_into(f, in.data(), in.size(), out, 1, nullptr), "first execute");
  double ms = us_since(t0) / 1000;  // define -> first launch enqueued
  if (gpu) gpu->synchronize();
  kf_fusion_release(f);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  bool force_cpu = false, dry_run = false, child = false;
  long calls = 100000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--cpu")) force_cpu = true;
    else if (!std::strcmp(argv[i], "--dry-run")) force_cpu = dry_run = true;
    else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc) calls = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--cold-child")) child = true;
  }
  if (dry_run) setenv("KFUSE_CPU_DRY_RUN", "1", 1);
  std::string why;
  std::unique_ptr<kfcli::CudaDriver> gpu = force_cpu ? nullptr : kfcli::CudaDriver::open(&why);
  DLDevice dev = gpu ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
  std::function<void*(size_t)> alloc = [&](size_t n) -> void* {
    if (gpu) return gpu->allocate(n);
    return std::calloc(n, 1);
  };
  if (child) {  // a new process: the disk kernel cache is warm, memory caches are not
    std::printf("warm-disk cold start: pointwise %.2f ms, layernorm %.2f ms\n",
                cold_start_ms(kPointwise, {2, 2, 2}, dev, gpu.get(), alloc),
                cold_start_ms(kLayernorm, {2, 1, 1}, dev, gpu.get(), alloc));
    return 0;
  }
  std::printf("backend: %s\n", gpu       ? ("cuda:0 (" + gpu->device_name() + ")").c_str()
                               : dry_run ? "cpu, dry run (host path only)"
                                         : "cpu");

  // Cold start with an empty kernel cache directory.
  char dir[] = "/tmp/kfuse-latency-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("KFUSE_CACHE_DIR", dir, 1);
  std::printf("cold start (empty cache): pointwise %.2f ms, layernorm %.2f ms\n",
              cold_start_ms(kPointwise, {2, 2, 2}, dev, gpu.get(), alloc),
              cold_start_ms(kLayernorm, {2, 1, 1}, dev, gpu.get(), alloc));
  std::fflush(stdout);
  std::string cmd = std::string("\"") + argv[0] + "\" --cold-child" + (dry_run ? " --dry-run" : force_cpu ? " --cpu" : "");
  if (std::system(cmd.c_str()) != 0) return 1;

  kf_fusion f;
  check(kf_fusion_from_text(kPointwise, &f), "define");
  Tensors small = make({2, 2, 2}, 16, 16, dev, alloc);
  long allocs = 0;
  double us = run_calls(f, small, calls, gpu.get(), &allocs);
  std::printf("cached execute, 3 inputs of 16x16: %.2f us per call, %.2f heap allocations per call (%ld calls)\n",
              us, static_cast<double>(allocs) / static_cast<double>(calls), calls);
  // A new shape in the same class: alternate 16x16 and 24x20.
  Tensors other = make({2, 2, 2}, 24, 20, dev, alloc);
  std::vector<const DLTensor*> in_a, in_b;
  for (auto& x : small.in) in_a.push_back(&x);
  for (auto& x : other.in) in_b.push_back(&x);
  DLTensor* out_a[1] = {&small.out};
  DLTensor* out_b[1] = {&other.out};
  kf_cache_stats before{}, after{};
  before.struct_size = after.struct_size = sizeof(kf_cache_stats);
  check(kf_cache_get_stats(&before), "stats");
  long n = calls / 10;
  long a0 = g_allocations.load();
  auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    kf_execute_into(f, in_a.data(), 3, out_a, 1, nullptr);
    kf_execute_into(f, in_b.data(), 3, out_b, 1, nullptr);
  }
  double per = us_since(t0) / static_cast<double>(2 * n);
  double allocs_per = static_cast<double>(g_allocations.load() - a0) / static_cast<double>(2 * n);
  if (gpu) gpu->synchronize();
  check(kf_cache_get_stats(&after), "stats");
  std::printf("alternating shapes in one class: %.2f us per call, %.2f heap allocations per call, %llu new concretizations\n",
              per, allocs_per, static_cast<unsigned long long>(after.concretizations - before.concretizations));
  kf_fusion_release(f);

  // The copy path (issue 46: its kernel source was built and hashed per call).
  const long copies = calls / 10;
  double pitched = run_copied_output(16, 16, {20, 1}, 16 * 20, copies, dev, gpu.get(), alloc, &allocs);
  std::printf("cached execute + copy into a pitched 16x16 output: %.2f us per call, %.2f heap allocations per call\n",
              pitched, static_cast<double>(allocs) / static_cast<double>(copies));
  double transposed = run_copied_output(128, 128, {1, 128}, 128 * 128, copies, dev, gpu.get(), alloc, &allocs);
  std::printf("cached execute + copy into a transposed 128x128 output: %.2f us per call, %.2f heap allocations per call\n",
              transposed, static_cast<double>(allocs) / static_cast<double>(copies));
  return 0;
}
