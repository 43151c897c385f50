// The CUDA backend's copy with its kernels cached by variant
// (core/runtime/cuda/copy_kernels.h): a permute copy (a transpose) and a
// strided copy (into a pitched destination) give the right elements, and
// a second copy of the same variant, also of another shape, generates no
// source (copy_kernels().sources_built() stays put). Exits 77 without a
// CUDA device.
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/backend.h"
#include "core/runtime/cuda/copy_kernels.h"
#include "core/runtime/cuda/driver.h"
#include "core/runtime/exec_options.h"

#include <cstdio>
#include <string>
#include <vector>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

using namespace kf;
using namespace kf::cuda;

namespace {

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { ptr = cuda_backend().allocate(n, 0, ExecOptions{}); }
  ~DeviceBuffer() { cuda_backend().release(ptr, bytes, 0, ExecOptions{}); }
};

// (The backend makes device 0's context current inside its own calls
// only: these driver calls need it too.)
void upload(void* dst, const std::vector<float>& v) {
  ScopedContext context(0);
  check(driver().cuMemcpyHtoDAsync_(reinterpret_cast<CUdeviceptr>(dst), v.data(), v.size() * 4, nullptr),
        "cuMemcpyHtoDAsync");
  check(driver().cuStreamSynchronize_(nullptr), "cuStreamSynchronize");
}

std::vector<float> download(const void* src, size_t n) {
  std::vector<float> v(n);
  ScopedContext context(0);
  // Unified addressing: the direction follows from the pointers.
  check(driver().cuMemcpyAsync_(reinterpret_cast<CUdeviceptr>(v.data()), reinterpret_cast<CUdeviceptr>(src), n * 4,
                                nullptr),
        "cuMemcpyAsync");
  check(driver().cuStreamSynchronize_(nullptr), "cuStreamSynchronize");
  return v;
}

// Copies a rows x cols row-major float32 tensor into one with strides
// `dst_strides` (elements, spanning `dst_span`) and checks every element.
void copy_and_check(int64_t rows, int64_t cols, std::vector<int64_t> dst_strides, int64_t dst_span) {
  std::vector<float> host(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i % 8191) + 0.5f;
  DeviceBuffer src(host.size() * 4), dst(static_cast<size_t>(dst_span) * 4);
  upload(src.ptr, host);
  int64_t shape[2] = {rows, cols};
  int64_t src_strides[2] = {cols, 1};
  DLTensor s{src.ptr, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, src_strides, 0};
  DLTensor d{dst.ptr, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, dst_strides.data(), 0};
  cuda_backend().copy(s, d, ExecOptions{});
  const std::vector<float> out = download(dst.ptr, static_cast<size_t>(dst_span));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      if (out[static_cast<size_t>(r * dst_strides[0] + c * dst_strides[1])] != host[static_cast<size_t>(r * cols + c)])
        fail_msg("%lldx%lld: element (%lld, %lld) is wrong", static_cast<long long>(rows),
                 static_cast<long long>(cols), static_cast<long long>(r), static_cast<long long>(c));
}

void test_transpose_builds_once(void**) {
  copy_and_check(256, 512, {1, 256}, 256 * 512);
  const uint64_t built = copy_kernels().sources_built();
  const size_t entries = copy_kernels().size();
  assert_true(built >= 1);
  copy_and_check(256, 512, {1, 256}, 256 * 512);
  copy_and_check(384, 512, {1, 384}, 384 * 512);  // the same variant
  assert_int_equal(copy_kernels().sources_built(), built);
  assert_int_equal(copy_kernels().size(), entries);
}

// The strided copy moves rows in the widest element that divides their
// bytes, pitches and addresses (strided_copy.h): rows of 400 bytes at a
// pitch of 512 and of 144 at 160 both go as 16-byte elements (one
// variant); rows of 280 bytes at 320 as 8-byte ones (a second variant,
// built once too).
void test_strided_builds_once(void**) {
  copy_and_check(64, 100, {128, 1}, 64 * 128);  // a pitched destination: the strided kernel
  const uint64_t built = copy_kernels().sources_built();
  copy_and_check(64, 100, {128, 1}, 64 * 128);
  copy_and_check(30, 36, {40, 1}, 30 * 40);
  assert_int_equal(copy_kernels().sources_built(), built);
  copy_and_check(30, 70, {80, 1}, 30 * 80);
  assert_int_equal(copy_kernels().sources_built(), built + 1);
  copy_and_check(12, 70, {80, 1}, 12 * 80);
  assert_int_equal(copy_kernels().sources_built(), built + 1);
}

}  // namespace

int main() {
  std::string why;
  if (!driver_available(&why)) {
    std::printf("no CUDA device (%s): skipped\n", why.c_str());
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transpose_builds_once),
      cmocka_unit_test(test_strided_builds_once),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
