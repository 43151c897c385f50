// The CUDA library loader (core/runtime/cuda/dynlib.h), no GPU needed: the
// one search order (toolkit roots from $CUDA_HOME, $CUDA_PATH and
// /usr/local/cuda, then the default search; the driver from the default
// search only; NCCL by soname), what a failed attempt reports, and the
// missing-symbol message naming library and symbol. NVRTC and cuBLASLt load from the
// toolkit this build found.
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/cuda/cublaslt.h"
#include "core/runtime/cuda/dynlib.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include "nvrtc/nvrtc_skip.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace kf::cuda;

namespace {

// Sets (or with nullptr unsets) an environment variable for a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

const char* kMissing = "/nonexistent-kfuse-toolkit";

void test_roots_and_candidates(void**) {
  ScopedEnv home("CUDA_HOME", "/opt/cuda-a/");
  ScopedEnv path("CUDA_PATH", "/usr/local/cuda");
  assert_true(toolkit_roots() == (std::vector<std::string>{"/opt/cuda-a", "/usr/local/cuda"}));
  const std::vector<std::string> want = {
      "/opt/cuda-a/lib64/libcublasLt.so.13",
      "/opt/cuda-a/lib64/libcublasLt.so",
      "/opt/cuda-a/targets/x86_64-linux/lib/libcublasLt.so.13",
      "/opt/cuda-a/targets/x86_64-linux/lib/libcublasLt.so",
      "/usr/local/cuda/lib64/libcublasLt.so.13",
      "/usr/local/cuda/lib64/libcublasLt.so",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so",
      "libcublasLt.so.13",
      "libcublasLt.so",
  };
  assert_true(library_candidates(CudaLibrary::CublasLt) == want);
  assert_string_equal(library_candidates(CudaLibrary::Nvrtc).front().c_str(), "/opt/cuda-a/lib64/libnvrtc.so.13");
  assert_string_equal(library_candidates(CudaLibrary::Nvrtc).back().c_str(), "libnvrtc.so");
  // NCCL by its soname only: the unversioned name is a development link.
  const std::vector<std::string> nccl = library_candidates(CudaLibrary::Nccl);
  assert_int_equal(nccl.size(), 5);
  assert_string_equal(nccl.front().c_str(), "/opt/cuda-a/lib64/libnccl.so.2");
  assert_string_equal(nccl[3].c_str(), "/usr/local/cuda/targets/x86_64-linux/lib/libnccl.so.2");
  assert_string_equal(nccl.back().c_str(), "libnccl.so.2");
  // The driver belongs to the kernel module, never to a toolkit.
  assert_true(library_candidates(CudaLibrary::Driver) == std::vector<std::string>{"libcuda.so.1"});

  ScopedEnv empty_home("CUDA_HOME", "");
  ScopedEnv no_path("CUDA_PATH", nullptr);
  assert_true(toolkit_roots() == std::vector<std::string>{"/usr/local/cuda"});
}

// A toolkit root without NVRTC: each of its candidates is reported by
// dlerror (which names the file), then the next root or the default
// search finds the toolkit this build was configured with.
void test_failed_attempts_are_reported(void**) {
  const char* home = std::getenv("CUDA_HOME");
  const std::string configured = home ? home : "";
  ScopedEnv path("CUDA_PATH", configured.empty() ? nullptr : configured.c_str());
  ScopedEnv missing("CUDA_HOME", kMissing);
  const DynLib lib = open_library(CudaLibrary::Nvrtc);
  assert_non_null(lib.handle);
  assert_false(lib.path.empty());
  assert_true(lib.errors.size() >= 4);
  assert_non_null(std::strstr(lib.errors[0].c_str(), "/nonexistent-kfuse-toolkit/lib64/libnvrtc.so.13"));
  assert_non_null(std::strstr(lib.errors[3].c_str(), "/nonexistent-kfuse-toolkit/targets/x86_64-linux/lib/libnvrtc.so"));
  const std::string text = attempts_text(lib);
  assert_true(text.rfind("\n  ", 0) == 0);
  assert_non_null(std::strstr(text.c_str(), lib.errors[1].c_str()));
}

// The first missing symbol is the one reported, with library and file.
void test_missing_symbol_names_library_and_symbol(void**) {
  const DynLib lib = open_library(CudaLibrary::Nvrtc);
  assert_non_null(lib.handle);
  assert_non_null(find_symbol(lib, "nvrtcVersion"));
  std::string error;
  assert_null(find_symbol(lib, "nvrtcNoSuchFunction", &error));
  assert_null(find_symbol(lib, "nvrtcNorThisOne", &error));
  assert_string_equal(error.c_str(), ("NVRTC lacks nvrtcNoSuchFunction (" + lib.path + ")").c_str());
}

void test_cublaslt_loads(void**) {
  std::string why;
  if (!cublaslt_available(&why)) fail_msg("cuBLASLt not available: %s", why.c_str());
  assert_true(why.empty());
}

// Without a driver (this machine may have none) the one attempt names
// libcuda.so.1; with one, the file is known.
void test_driver_search(void**) {
  ScopedEnv missing("CUDA_HOME", kMissing);
  const DynLib lib = open_library(CudaLibrary::Driver);
  if (lib.handle) {
    assert_true(lib.errors.empty());
    assert_false(lib.path.empty());
  } else {
    assert_int_equal(lib.errors.size(), 1);
    assert_non_null(std::strstr(lib.errors[0].c_str(), "libcuda.so.1"));
  }
}

}  // namespace

int main() {
  kftest::skip_without_nvrtc();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roots_and_candidates),
      cmocka_unit_test(test_failed_attempts_are_reported),
      cmocka_unit_test(test_missing_symbol_names_library_and_symbol),
      cmocka_unit_test(test_cublaslt_loads),
      cmocka_unit_test(test_driver_search),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
