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
// With --timeline, the cold first call's compile timeline of each fusion
// file (at its `#! shapes:`), each in fresh processes (see timeline()):
//   build/bench/compile_bench --timeline [--dump DIR] bench/cases/*.kf
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>
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

std::string read_file(const char* file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(std::string("cannot read ") + file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value of a file's `#! shapes:` line ("" when none).
std::string shapes_line(const std::string& text) {
  const std::string tag = "#! shapes:";
  const size_t at = text.find(tag);
  if (at == std::string::npos) return "";
  const size_t end = text.find('\n', at);
  return text.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size());
}

// A fusion file's plan at `shape_text` (tensor inputs on kDLCUDA, no data).
struct FilePlan {
  std::shared_ptr<const kf::Fusion> fusion;
  std::shared_ptr<kf::Plan> plan;
  std::vector<size_t> generated;  // the segments with a generated kernel
};

FilePlan plan_file(const std::string& text, const std::string& shape_text) {
  FilePlan out;
  out.fusion = kf::parse_fusion(text);
  const kf::Fusion& fusion = *out.fusion;
  const std::vector<std::vector<int64_t>> shapes = parse_shapes(shape_text);
  std::vector<DLTensor> tensors;
  std::vector<std::vector<int64_t>> used;
  alignas(16) static char data[64] = {};
  size_t next = 0;
  for (int64_t id : fusion.inputs) {
    const kf::Value& v = fusion.value(id);
    if (v.kind == kf::ValueKind::ScalarInput) {
      used.push_back({});
    } else {
      if (next >= shapes.size())
        throw std::runtime_error("--shapes: " + std::to_string(shapes.size()) + " shapes for more tensor inputs");
      used.push_back(shapes[next++]);
    }
  }
  for (size_t i = 0; i < fusion.inputs.size(); ++i) {
    const kf::Value& v = fusion.value(fusion.inputs[i]);
    tensors.push_back(DLTensor{data, {v.kind == kf::ValueKind::ScalarInput ? kDLCPU : kDLCUDA, 0},
                               static_cast<int32_t>(used[i].size()), kf::to_dlpack(v.dtype), used[i].data(), nullptr, 0});
  }
  std::vector<const DLTensor*> ptrs;
  for (const DLTensor& t : tensors) ptrs.push_back(&t);
  kf::Binding b = kf::bind_inputs(fusion, ptrs.data(), ptrs.size());
  out.plan = kf::plan_for(fusion, b);
  const kf::Segmentation& s = out.plan->segmentation;
  for (size_t k = 0; k < s.segments.size(); ++k)
    if (s.segments[k].schedule && !s.segments[k].task.exprs.empty()) out.generated.push_back(k);
  return out;
}

// The first run's compile step for a fusion file at `shapes`.
int compile_file(const char* file, const std::string& shape_text) {
  const FilePlan fp = plan_file(read_file(file), shape_text);
  const kf::ConcreteFusion* c = fp.plan->concrete.get();
  const kf::Segmentation* s = &fp.plan->segmentation;
  const std::vector<size_t>& generated = fp.generated;
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


// NVRTC 12.9 and later keep compiled programs in the driver's compute cache
// (CUDA_CACHE_PATH, default ~/.nv/ComputeCache): a child gets an empty one
// so that no compile is served from an earlier run.
std::string fresh_nvrtc_cache() {
  std::string dir = "/tmp/kfuse-compile-bench-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  setenv("CUDA_CACHE_PATH", dir.c_str(), 1);
  return dir;
}

// Runs body() in a child process (so NVRTC is loaded fresh) and waits.
void in_child(const std::function<void()>& body) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 0;
    const std::string cache = fresh_nvrtc_cache();
    try {
      body();
    } catch (const std::exception& e) {
      std::printf("| error: %s |\n", e.what());
      rc = 1;
    }
    std::fflush(stdout);
    std::system(("rm -rf '" + cache + "'").c_str());
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return path.substr(slash == std::string::npos ? 0 : slash + 1);
}

// The cold first call's compile timeline of each file, each in a fresh
// process: generate the segments' kernels, load NVRTC, compile every unit
// on the compile pool (what a first run does); then, in a second fresh
// process, every unit one at a time: the first compile of the process
// (NVRTC's own set-up included), the others, and the first unit again.
// With `dump`: each unit's source is written there as <kernel>.cu.
int timeline(const std::vector<std::string>& files, const char* dump) {
  std::printf("| fusion | segments | units | KB of source | generate ms | load NVRTC ms | compile pool ms (threads) "
              "| cold first total ms | first unit, cold ms | other units, mean ms | first unit again ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& file : files) {
    const std::string text = read_file(file.c_str());
    const std::string shapes = shapes_line(text);
    struct Pooled {
      size_t segments = 0, units = 0, bytes = 0, threads = 0;
      double generate = 0, load = 0, pool = 0, total = 0;
    };
    // The pooled run reports through a pipe; the serial one prints the row.
    int fds[2];
    if (pipe(fds) != 0) return 1;
    in_child([&] {
      Pooled r;
      const auto t0 = Clock::now();
      const FilePlan fp = plan_file(text, shapes);
      std::vector<kf::KernelPlan> plans =
          kf::cuda::make_segment_plans(*fp.plan->concrete, fp.plan->segmentation, fp.generated);
      r.generate = ms_since(t0);
      auto t = Clock::now();
      if (!kf::cuda::nvrtc_available()) throw std::runtime_error("NVRTC is not available");
      r.load = ms_since(t);
      std::vector<kf::cuda::UnitRequest> requests;
      for (const kf::KernelPlan& p : plans) {
        requests.push_back({&p, {}});
        r.units += p.units.size();
        for (const auto& u : p.units) r.bytes += u.source.size();
      }
      t = Clock::now();
      kf::cuda::compile_units(requests, 90, {});
      r.pool = ms_since(t);
      r.total = ms_since(t0);
      r.segments = fp.generated.size();
      r.threads = kf::pool_size(r.units, kf::cuda::kMaxCompileThreads);
      if (write(fds[1], &r, sizeof r) != sizeof r) _exit(1);
    });
    Pooled r;
    if (read(fds[0], &r, sizeof r) != sizeof r) r = Pooled{};
    close(fds[0]);
    close(fds[1]);
    in_child([&] {
      const FilePlan fp = plan_file(text, shapes);
      std::vector<kf::KernelPlan> plans =
          kf::cuda::make_segment_plans(*fp.plan->concrete, fp.plan->segmentation, fp.generated);
      std::vector<const kf::KernelPlan::Unit*> units;
      for (const kf::KernelPlan& p : plans)
        for (const auto& u : p.units) units.push_back(&u);
      if (dump != nullptr)
        for (const auto* u : units) std::ofstream(std::string(dump) + "/" + u->kernel + ".cu") << u->source;
      kf::cuda::nvrtc_available();
      auto t = Clock::now();
      kf::cuda::nvrtc_compile(units.at(0)->source, units[0]->kernel, 90);
      const double first = ms_since(t);
      double others = 0;
      for (size_t i = 1; i < units.size(); ++i) {
        t = Clock::now();
        kf::cuda::nvrtc_compile(units[i]->source, units[i]->kernel, 90);
        others += ms_since(t);
      }
      t = Clock::now();
      kf::cuda::nvrtc_compile(units[0]->source, units[0]->kernel, 90);
      const double again = ms_since(t);
      char mean[32] = "-";
      if (units.size() > 1) std::snprintf(mean, sizeof mean, "%.1f", others / static_cast<double>(units.size() - 1));
      std::printf("| %s | %zu | %zu | %.1f | %.1f | %.1f | %.1f (%zu) | %.1f | %.1f | %s | %.1f |\n",
                  base_name(file).c_str(), r.segments, r.units, static_cast<double>(r.bytes) / 1024.0, r.generate,
                  r.load, r.pool, r.threads, r.total, first, mean, again);
    });
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int n = 8;
  const char* file = nullptr;
  std::string shapes;
  bool timeline_mode = false;
  const char* dump = nullptr;
  std::vector<std::string> timeline_files;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--segments") && i + 1 < argc) n = std::min(std::atoi(argv[++i]), 16);
    else if (!std::strcmp(argv[i], "--file") && i + 1 < argc) file = argv[++i];
    else if (!std::strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
    else if (!std::strcmp(argv[i], "--timeline")) timeline_mode = true;
    else if (!std::strcmp(argv[i], "--dump") && i + 1 < argc) dump = argv[++i];
    else timeline_files.push_back(argv[i]);
  }
  if (!timeline_mode && !kf::cuda::nvrtc_available()) {  // the timeline loads it in each child
    std::fprintf(stderr, "NVRTC is not available\n");
    return 1;
  }
  setenv("KFUSE_CACHE_MAX_BYTES", "0", 1);  // every kernel compiles
  if (timeline_mode) return timeline(timeline_files, dump);
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
