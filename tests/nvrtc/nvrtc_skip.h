// Every test of the nvrtc label needs NVRTC, which kfuse opens with dlopen
// at run time. On a machine without it (no CUDA toolkit) a test calls
// skip_without_nvrtc() first and exits 77, which CTest counts as skipped,
// after one line saying what is missing: without the check the first
// compile would end the test with an uncaught kf::Error.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef KFUSE_HAVE_CUDA_HEADERS
#include "core/runtime/cuda/dynlib.h"
#include "core/runtime/cuda/nvrtc.h"
#endif

namespace kftest {

// Where the tests look for NVRTC: the library's own search
// (core/runtime/cuda/dynlib.h) in builds with the CUDA backend; builds
// without it have no loader, and the codegen tests look in the default
// toolkit and the loader's path.
inline std::vector<std::string> nvrtc_candidates() {
#ifdef KFUSE_HAVE_CUDA_HEADERS
  return kf::cuda::library_candidates(kf::cuda::CudaLibrary::Nvrtc);
#else
  return {"/usr/local/cuda/lib64/libnvrtc.so.13", "libnvrtc.so.13"};
#endif
}

// Prints "skipped: <why>" as one line and exits 77.
[[noreturn]] inline void skip_test(const std::string& why) {
  std::fprintf(stderr, "skipped: %s\n", why.c_str());
  std::exit(77);
}

// Exits 77 when NVRTC cannot be loaded (or, with the CUDA backend, lacks a
// function kfuse needs); returns otherwise.
inline void skip_without_nvrtc() {
#ifdef KFUSE_HAVE_CUDA_HEADERS
  std::string why;
  if (kf::cuda::nvrtc_available(&why)) return;
  // `why` lists one dlerror per candidate, a line each; the roots say it shorter.
  if (why.rfind("NVRTC could not be loaded", 0) == 0) {
    std::string roots;
    for (const std::string& root : kf::cuda::toolkit_roots()) roots += (roots.empty() ? "" : " or ") + root;
    skip_test("NVRTC could not be loaded: libnvrtc.so.13 or libnvrtc.so is not under " + roots +
              " (lib64, targets/x86_64-linux/lib) nor on the loader's path");
  }
  skip_test(why);
#else
  for (const std::string& candidate : nvrtc_candidates())
    if (void* h = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      dlclose(h);
      return;
    }
  skip_test("NVRTC could not be loaded: libnvrtc.so.13 is not in /usr/local/cuda/lib64 nor on the "
            "loader's path");
#endif
}

}  // namespace kftest
