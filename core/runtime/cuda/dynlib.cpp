#include "core/runtime/cuda/dynlib.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>

namespace kf::cuda {

std::vector<std::string> toolkit_roots() {
  std::vector<std::string> roots;
  auto add = [&](std::string dir) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "/opt/cuda/" is "/opt/cuda"
    if (std::find(roots.begin(), roots.end(), dir) == roots.end()) roots.push_back(std::move(dir));
  };
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var); v && *v) add(v);
  add("/usr/local/cuda");
  return roots;
}

std::vector<std::string> library_candidates(CudaLibrary library) {
  std::vector<std::string> names;
  switch (library) {
    case CudaLibrary::Driver: return {"libcuda.so.1"};
    case CudaLibrary::Nvrtc: names = {"libnvrtc.so.13", "libnvrtc.so"}; break;
    case CudaLibrary::CublasLt: names = {"libcublasLt.so.13", "libcublasLt.so"}; break;
    case CudaLibrary::Nccl: names = {"libnccl.so.2"}; break;  // the ABI the headers promise: no unversioned link
  }
  std::vector<std::string> out;
  for (const auto& root : toolkit_roots())
    for (const char* dir : {"/lib64/", "/targets/x86_64-linux/lib/"})
      for (const auto& n : names) out.push_back(root + dir + n);
  out.insert(out.end(), names.begin(), names.end());
  return out;
}

DynLib open_library(CudaLibrary library) {
  DynLib lib;
  switch (library) {
    case CudaLibrary::Driver: lib.name = "CUDA driver"; break;
    case CudaLibrary::Nvrtc: lib.name = "NVRTC"; break;
    case CudaLibrary::CublasLt: lib.name = "cuBLASLt"; break;
    case CudaLibrary::Nccl: lib.name = "NCCL"; break;
  }
  for (const auto& candidate : library_candidates(library)) {
    lib.handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) break;
    const char* e = dlerror();  // names the file
    lib.errors.push_back(e ? e : candidate + ": not found");
  }
  if (link_map* map = nullptr; lib.handle && dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) == 0 && map)
    lib.path = map->l_name;
  return lib;
}

std::string attempts_text(const DynLib& lib) {
  std::string s;
  for (const auto& e : lib.errors) s += "\n  " + e;
  return s;
}

void* find_symbol(const DynLib& lib, const char* symbol, std::string* error) {
  void* p = lib.handle ? dlsym(lib.handle, symbol) : nullptr;
  if (p == nullptr && error && error->empty())
    *error = lib.name + " lacks " + symbol + " (" + (lib.path.empty() ? "not loaded" : lib.path) + ")";
  return p;
}

}  // namespace kf::cuda
