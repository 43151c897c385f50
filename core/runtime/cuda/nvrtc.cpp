#include "core/runtime/cuda/nvrtc.h"

#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>

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

bool is_dir(const std::string& p) {
  struct stat st;
  return !p.empty() && stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> library_candidates() {
  std::vector<std::string> names = {"libnvrtc.so.13", "libnvrtc.so"};
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64");
  dirs.push_back("/usr/local/cuda/lib64");
  std::vector<std::string> out = names;
  for (const auto& d : dirs)
    for (const auto& n : names) out.push_back(d + "/" + n);
  return out;
}

const Nvrtc& nvrtc() {
  static const Nvrtc* lib = [] {
    auto* n = new Nvrtc;  // never freed: kernels may be compiled until exit
    void* handle = nullptr;
    std::string errors;
    for (const auto& candidate : library_candidates()) {
      handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      const char* e = dlerror();
      errors += "\n  " + candidate + ": " + (e ? e : "not found");
    }
    if (handle == nullptr) {
      n->error = "NVRTC could not be loaded:" + errors;
      return n;
    }
    if (link_map* map = nullptr; dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map) n->path = map->l_name;
#define KF_NVRTC_RESOLVE(name)                                                     \
  n->name##_ = reinterpret_cast<decltype(n->name##_)>(dlsym(handle, #name));       \
  if (n->name##_ == nullptr && n->error.empty()) n->error = "NVRTC lacks " #name;
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
    std::vector<std::string> tries;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) tries.push_back(std::string(home) + "/include");
    const Nvrtc& n = nvrtc();
    if (auto slash = n.path.rfind('/'); slash != std::string::npos) {
      std::string libdir = n.path.substr(0, slash);
      tries.push_back(libdir + "/../include");
      tries.push_back(libdir + "/../../include");
    }
    tries.push_back("/usr/local/cuda/include");
    for (const auto& d : tries) {
      struct stat st;
      if (is_dir(d) && stat((d + "/cuda_fp16.h").c_str(), &st) == 0) return d;
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
