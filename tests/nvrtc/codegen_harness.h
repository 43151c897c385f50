// Shared by the nvrtc tests: NVRTC loaded with dlopen (the library never
// links it; nvrtc_skip.h skips the test without it), fake DLTensor metadata for concretization, and batching of
// many generated kernels into one NVRTC program per architecture.
// Include after the project headers and <cmocka.h>.
#pragma once

#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/schedule/registry.h"
#include "core/codegen/prelude.h"
#include "core/codegen/prelude_parts.h"
#include "core/pipeline/plan.h"
#include "core/define/builder.h"
#include "core/segment/segmentation.h"
#include "core/util/env_switch.h"
#include "nvrtc/nvrtc_skip.h"

namespace kftest {

using nvrtcProgram = void*;
struct Nvrtc {
  int (*create)(nvrtcProgram*, const char*, const char*, int, const char* const*, const char* const*);
  int (*compile)(nvrtcProgram, int, const char* const*);
  int (*log_size)(nvrtcProgram, size_t*);
  int (*log)(nvrtcProgram, char*);
  int (*destroy)(nvrtcProgram*);
};

// NVRTC, or nullptr when it cannot be loaded (main calls
// skip_without_nvrtc() first, which then exits 77).
inline const Nvrtc* nvrtc() {
  static std::unique_ptr<Nvrtc> lib = [] {
    void* h = nullptr;
    for (const std::string& candidate : nvrtc_candidates())
      if ((h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
    if (h == nullptr) return std::unique_ptr<Nvrtc>();
    auto n = std::make_unique<Nvrtc>();
    n->create = reinterpret_cast<decltype(n->create)>(dlsym(h, "nvrtcCreateProgram"));
    n->compile = reinterpret_cast<decltype(n->compile)>(dlsym(h, "nvrtcCompileProgram"));
    n->log_size = reinterpret_cast<decltype(n->log_size)>(dlsym(h, "nvrtcGetProgramLogSize"));
    n->log = reinterpret_cast<decltype(n->log)>(dlsym(h, "nvrtcGetProgramLog"));
    n->destroy = reinterpret_cast<decltype(n->destroy)>(dlsym(h, "nvrtcDestroyProgram"));
    return n;
  }();
  return lib.get();
}

// Compiles `source` to CUBIN for `arch` ("sm_90"); returns the log ("" when
// clean) and sets *ok.
inline std::string compile(const std::string& source, const char* arch, bool* ok) {
  const Nvrtc* n = nvrtc();
  nvrtcProgram prog = nullptr;
  n->create(&prog, source.c_str(), "kfuse.cu", 0, nullptr, nullptr);
  const std::string gpu = std::string("--gpu-architecture=") + arch;
  const char* opts[] = {gpu.c_str(), "-std=c++17"};
  *ok = n->compile(prog, 2, opts) == 0;
  size_t size = 0;
  n->log_size(prog, &size);
  std::string log(size, '\0');
  if (size > 0) n->log(prog, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  n->destroy(&prog);
  return log;
}

// Collects generated kernels and compiles them together: the part of the
// prelude they use once (prelude_parts.h), then each distinct kernel in a
// namespace of its own.
class Batch {
 public:
  void add(const kf::KernelPlan& plan) {
    if (!names_.insert(plan.name).second) return;
    const size_t at = plan.source.find("struct KfArgs");
    if (at == std::string::npos || plan.source.compare(0, at, kf::prelude_for(plan.source.substr(at))) != 0) {
      std::fprintf(stderr, "kernel %s does not start with the prelude it uses\n", plan.name.c_str());
      std::abort();
    }
    body_ += "namespace ns_" + plan.name + " {\n" + plan.source.substr(at) + "}\n";
    ++count_;
  }
  size_t size() const { return count_; }
  // Compiles for sm_80 and sm_90, the two at once (NVRTC compiles distinct
  // programs on separate threads); returns "" or the first failure.
  // KFUSE_TEST_NVRTC_COMPILE=0 stops after generating (the sanitizer stage
  // of CI: NVRTC is not instrumented, and the main stage compiles them).
  std::string compile_all() const {
    if (!kf::env_switch("KFUSE_TEST_NVRTC_COMPILE", true)) {
      std::fprintf(stderr, "%zu kernels generated; not compiled (KFUSE_TEST_NVRTC_COMPILE=0)\n", count_);
      return "";
    }
    const std::string src = kf::prelude_for(body_) + body_;
    const char* archs[] = {"sm_80", "sm_90"};
    std::string logs[2];
    bool ok[2] = {false, false};
    double seconds[2] = {0, 0};
    auto run = [&](int i) {
      const auto t0 = std::chrono::steady_clock::now();
      logs[i] = compile(src, archs[i], &ok[i]);
      seconds[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::thread other(run, 0);
    run(1);
    other.join();
    for (int i = 0; i < 2; ++i) {
      if (std::getenv("KFUSE_TEST_TIMING") != nullptr)
        std::fprintf(stderr, "%s: %zu kernels, %.2f s\n", archs[i], count_, seconds[i]);
      if (!ok[i] || !logs[i].empty()) {
        if (FILE* f = std::fopen("kfuse_failed.cu", "w")) {  // in the test's working dir
          std::fputs(src.c_str(), f);
          std::fclose(f);
        }
        return std::string(archs[i]) + ": " + (ok[i] ? "warnings" : "error") + " (source in kfuse_failed.cu):\n" + logs[i];
      }
    }
    return "";
  }
  const std::string& body() const { return body_; }

 private:
  std::set<std::string> names_;
  std::string body_;
  size_t count_ = 0;
};

// Runs `tests`, or only the one named argv[1]: CMake registers each test
// of the long sweeps as a ctest test of its own, so that `ctest -j` spreads
// them over the cores. An unknown name exits 2 rather than passing empty.
template <size_t N>
int run_selected_tests(const CMUnitTest (&tests)[N], int argc, char** argv) {
  if (argc < 2) return _cmocka_run_group_tests("tests", tests, N, nullptr, nullptr);
  std::vector<CMUnitTest> chosen;
  for (const CMUnitTest& t : tests)
    if (std::strcmp(t.name, argv[1]) == 0) chosen.push_back(t);
  if (chosen.empty()) {
    std::fprintf(stderr, "%s: no test named '%s'\n", argv[0], argv[1]);
    return 2;
  }
  return _cmocka_run_group_tests(argv[1], chosen.data(), chosen.size(), nullptr, nullptr);
}

// Fake metadata for one input. Data pointers of tensors are never read.
struct FakeInput {
  std::vector<int64_t> shape, strides;
  DLTensor t{};
  double scalar_storage[2] = {0, 0};
};

inline DLDataType dl(kf::DType t) { return kf::to_dlpack(t); }

// A CUDA tensor with `shape` and `strides` (empty: row-major) at a fake
// address with the given byte misalignment.
inline std::unique_ptr<FakeInput> tensor(kf::DType dtype, std::vector<int64_t> shape,
                                         std::vector<int64_t> strides = {}, uintptr_t misalign = 0) {
  auto in = std::make_unique<FakeInput>();
  in->shape = std::move(shape);
  if (strides.empty()) {
    strides.assign(in->shape.size(), 1);
    for (size_t d = in->shape.size(); d-- > 1;) strides[d - 1] = strides[d] * std::max<int64_t>(in->shape[d], 1);
  }
  in->strides = std::move(strides);
  in->t.data = reinterpret_cast<void*>(uintptr_t{0x7f0000000000} + misalign);
  in->t.device = {kDLCUDA, 0};
  in->t.ndim = static_cast<int>(in->shape.size());
  in->t.dtype = dl(dtype);
  in->t.shape = in->shape.data();
  in->t.strides = in->strides.data();
  return in;
}

// A 0-dim CPU tensor holding a scalar input's value.
inline std::unique_ptr<FakeInput> scalar(kf::DType dtype, double value) {
  auto in = std::make_unique<FakeInput>();
  in->t.data = in->scalar_storage;
  in->t.device = {kDLCPU, 0};
  in->t.ndim = 0;
  in->t.dtype = dl(dtype);
  switch (dtype) {
    case kf::DType::F64: { double v = value; std::memcpy(in->scalar_storage, &v, 8); break; }
    case kf::DType::F32: { float v = static_cast<float>(value); std::memcpy(in->scalar_storage, &v, 4); break; }
    case kf::DType::I64: { int64_t v = static_cast<int64_t>(value); std::memcpy(in->scalar_storage, &v, 8); break; }
    case kf::DType::I32: { int32_t v = static_cast<int32_t>(value); std::memcpy(in->scalar_storage, &v, 4); break; }
    case kf::DType::I8:
    case kf::DType::U8: { uint8_t v = static_cast<uint8_t>(static_cast<int64_t>(value)); std::memcpy(in->scalar_storage, &v, 1); break; }
    case kf::DType::Bool: { uint8_t v = value != 0; std::memcpy(in->scalar_storage, &v, 1); break; }
    case kf::DType::F16: { uint16_t v = kf::float_to_half(static_cast<float>(value)); std::memcpy(in->scalar_storage, &v, 2); break; }
    case kf::DType::BF16: { uint16_t v = kf::float_to_bf16(static_cast<float>(value)); std::memcpy(in->scalar_storage, &v, 2); break; }
    case kf::DType::F8E4M3: { uint8_t v = kf::double_to_e4m3fn(value); std::memcpy(in->scalar_storage, &v, 1); break; }
    case kf::DType::F8E5M2: { uint8_t v = kf::double_to_e5m2(value); std::memcpy(in->scalar_storage, &v, 1); break; }
  }
  return in;
}

using Inputs = std::vector<std::unique_ptr<FakeInput>>;

// The pipeline's plan of `fusion` for `inputs` (cached with the fusion).
inline std::shared_ptr<kf::Plan> plan_for(const std::shared_ptr<kf::Fusion>& fusion, const Inputs& inputs) {
  std::vector<const DLTensor*> ptrs;
  for (const auto& in : inputs) ptrs.push_back(&in->t);
  kf::Binding b = kf::bind_inputs(*fusion, ptrs.data(), ptrs.size());
  return kf::plan_for(*fusion, b);
}

// The concrete fusion of `fusion` for `inputs`.
inline std::shared_ptr<const kf::ConcreteFusion> concretize(const std::shared_ptr<kf::Fusion>& fusion,
                                                            const Inputs& inputs) {
  return plan_for(fusion, inputs)->concrete;
}

// The schedule the registry proposes for the whole fusion as one task
// (independent of how the segmenter would cut it); fails the test when no
// scheduler takes it.
inline kf::KernelSchedule schedule(const std::shared_ptr<const kf::ConcreteFusion>& c,
                                   const kf::Tuning& tuning = kf::Tuning{}) {
  kf::ScheduleProposal p = kf::propose_schedule(*c, kf::root_task(*c->fusion), tuning);
  if (!p.schedule) throw kf::Error(KF_ERR_UNSUPPORTED, "no schedule: " + p.why);
  return *p.schedule;
}

// The plan for the whole fusion as one task.
inline kf::KernelPlan plan(const std::shared_ptr<const kf::ConcreteFusion>& c) {
  return kf::emit_kernel(*c, kf::root_task(*c->fusion), schedule(c));
}

}  // namespace kftest
