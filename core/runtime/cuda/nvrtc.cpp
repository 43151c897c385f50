#include "core/runtime/cuda/nvrtc.h"

#include <nvrtc.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>

#include "core/runtime/cuda/dynlib.h"
#include "core/util/debug_log.h"
#include "core/util/error.h"

namespace kf::cuda {

namespace {

#define KF_NVRTC_FUNCTIONS(X)                                                           \
  X(nvrtcGetErrorString) X(nvrtcVersion) X(nvrtcGetNumSupportedArchs)                   \
  X(nvrtcGetSupportedArchs) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)                \
  X(nvrtcCompileProgram) X(nvrtcGetPTXSize) X(nvrtcGetPTX) X(nvrtcGetCUBINSize)         \
  X(nvrtcGetCUBIN) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)

struct Nvrtc {
#define KF_NVRTC_MEMBER(name) decltype(&::name) name##_ = nullptr;
  KF_NVRTC_FUNCTIONS(KF_NVRTC_MEMBER)
#undef KF_NVRTC_MEMBER
  std::string path;  // the file that was loaded
  NvrtcVersion version;
  std::vector<int> archs;
  std::string error;  // why it could not be loaded ("" when loaded)
};

// Loads NVRTC and resolves its functions into n; n->error says why not.
Nvrtc* load_nvrtc(Nvrtc* n) {
  const DynLib lib = open_library(CudaLibrary::Nvrtc);
  if (lib.handle == nullptr) {
    n->error = "NVRTC could not be loaded:" + attempts_text(lib);
    return n;
  }
  n->path = lib.path;
#define KF_NVRTC_RESOLVE(name) resolve(lib, #name, n->name##_, n->error);
  KF_NVRTC_FUNCTIONS(KF_NVRTC_RESOLVE)
#undef KF_NVRTC_RESOLVE
  if (!n->error.empty()) return n;
  n->nvrtcVersion_(&n->version.major, &n->version.minor);
  int count = 0;
  if (n->nvrtcGetNumSupportedArchs_(&count) == NVRTC_SUCCESS && count > 0) {
    n->archs.resize(static_cast<size_t>(count));
    if (n->nvrtcGetSupportedArchs_(n->archs.data()) != NVRTC_SUCCESS) n->archs.clear();
  }
  return n;
}

const Nvrtc& nvrtc() {
  static const Nvrtc* lib = [] {
    const DebugStep step("compile");
    Nvrtc* n = load_nvrtc(new Nvrtc);  // never freed: kernels may be compiled until exit
    if (step) step.done("load NVRTC " + n->path);
    return n;
  }();
  return *lib;
}

const Nvrtc& require_nvrtc() {
  const Nvrtc& n = nvrtc();
  if (!n.error.empty()) throw Error(KF_ERR_BACKEND, n.error);
  return n;
}

void check_nvrtc(const Nvrtc& n, nvrtcResult r, const char* function) {
  if (r != NVRTC_SUCCESS)
    fail(KF_ERR_BACKEND, "NVRTC call failed: ", function, ": ", n.nvrtcGetErrorString_(r));
}

}  // namespace

bool nvrtc_available(std::string* why) {
  const Nvrtc& n = nvrtc();
  if (why) *why = n.error;
  return n.error.empty();
}

NvrtcVersion nvrtc_version() { return require_nvrtc().version; }

std::vector<int> nvrtc_supported_archs() { return require_nvrtc().archs; }

std::string cuda_include_dir() {
  static const std::string dir = [] {
    // The toolkit roots NVRTC was looked for in, in the same order; then
    // beside an NVRTC that the default search found elsewhere.
    std::vector<std::string> tries;
    for (const auto& root : toolkit_roots()) tries.push_back(root + "/include");
    if (const std::string& path = nvrtc().path; path.rfind('/') != std::string::npos) {
      const std::string libdir = path.substr(0, path.rfind('/'));
      tries.push_back(libdir + "/../include");
      tries.push_back(libdir + "/../../include");
    }
    for (const auto& d : tries) {
      struct stat st;
      if (stat((d + "/cuda_fp16.h").c_str(), &st) == 0 && S_ISREG(st.st_mode)) return d;
    }
    return std::string();
  }();
  return dir;
}

namespace {

// A device newer than this NVRTC gets PTX for the newest architecture it knows.
bool emits_ptx(int sm) {
  const auto& archs = nvrtc().archs;
  return !archs.empty() && sm > archs.back();
}

}  // namespace

std::vector<std::string> nvrtc_options(int sm) {
  std::vector<std::string> opts = {"-std=c++17", "-default-device"};
  bool cubin = !emits_ptx(sm);
  int arch = cubin ? sm : nvrtc().archs.back();
  opts.push_back((cubin ? "--gpu-architecture=sm_" : "--gpu-architecture=compute_") + std::to_string(arch));
  if (std::string inc = cuda_include_dir(); !inc.empty()) opts.push_back("--include-path=" + inc);
  // KFUSE_NVRTC_FAST_COMPILE=min|mid|max: NVRTC's fast-compile level
  // (-Ofc, NVRTC 12.8 and later), less compile time for a different and
  // possibly slower kernel; part of the kernel cache key like every option.
  if (const char* fc = std::getenv("KFUSE_NVRTC_FAST_COMPILE"); fc != nullptr) {
    const std::string level(fc);
    const NvrtcVersion v = nvrtc_version();
    if ((level == "min" || level == "mid" || level == "max") && (v.major > 12 || (v.major == 12 && v.minor >= 8)))
      opts.push_back("-Ofc=" + level);
  }
  return opts;
}

CompiledCode nvrtc_compile(const std::string& source, const std::string& name, int sm) {
  const Nvrtc& n = require_nvrtc();
  std::vector<std::string> opts = nvrtc_options(sm);
  std::vector<const char*> argv;
  for (const auto& o : opts) argv.push_back(o.c_str());
  nvrtcProgram prog = nullptr;
  check_nvrtc(n, n.nvrtcCreateProgram_(&prog, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr),
              "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) {
    nvrtc().nvrtcDestroyProgram_(p);
  });
  nvrtcResult r = n.nvrtcCompileProgram_(prog, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    std::string log;
    if (n.nvrtcGetProgramLogSize_(prog, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      n.nvrtcGetProgramLog_(prog, log.data());
      log.resize(size - 1);  // the terminating NUL
    }
    std::string joined;
    for (const auto& o : opts) joined += " " + o;
    fail(KF_ERR_BACKEND, "NVRTC could not compile kernel ", name, " (", n.nvrtcGetErrorString_(r),
         ", options:", joined, "):\n", log);
  }
  CompiledCode out;
  out.is_ptx = emits_ptx(sm);
  size_t size = 0;
  if (out.is_ptx) {
    check_nvrtc(n, n.nvrtcGetPTXSize_(prog, &size), "nvrtcGetPTXSize");
    out.image.resize(size);
    check_nvrtc(n, n.nvrtcGetPTX_(prog, out.image.data()), "nvrtcGetPTX");
  } else {
    check_nvrtc(n, n.nvrtcGetCUBINSize_(prog, &size), "nvrtcGetCUBINSize");
    out.image.resize(size);
    check_nvrtc(n, n.nvrtcGetCUBIN_(prog, out.image.data()), "nvrtcGetCUBIN");
  }
  return out;
}

}  // namespace kf::cuda
