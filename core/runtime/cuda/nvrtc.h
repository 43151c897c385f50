// NVRTC, loaded with dlopen on first use (where: dynlib.h), so a machine
// with a driver but no toolkit still loads libkfuse and can run kernels
// from the disk cache.
#pragma once

#include <string>
#include <vector>

namespace kf::cuda {

struct NvrtcVersion {
  int major = 0, minor = 0;
};

// Whether NVRTC can be loaded; `why` gets the reason when not.
bool nvrtc_available(std::string* why = nullptr);

// Throws KF_ERR_BACKEND when NVRTC cannot be loaded.
NvrtcVersion nvrtc_version();

// Architectures NVRTC can compile for (as 10 * major + minor), ascending.
std::vector<int> nvrtc_supported_archs();

// What a compile produces: a CUBIN for sm_XY, or PTX (for a device newer
// than this NVRTC knows; the driver compiles it at load).
struct CompiledCode {
  std::vector<char> image;
  bool is_ptx = false;
};

// The options kfuse compiles with for architecture `sm` (the same list that
// joins the kernel cache key).
std::vector<std::string> nvrtc_options(int sm);

// Compiles `source` (a whole translation unit) for `sm`: CUBIN when NVRTC
// supports sm_XY, otherwise PTX for the newest compute_XY it supports.
// Throws KF_ERR_BACKEND with NVRTC's log when compilation fails.
CompiledCode nvrtc_compile(const std::string& source, const std::string& name, int sm);

// The directory holding cuda_fp16.h and friends, or "" when none is found:
// <root>/include for each toolkit root (dynlib.h), then next to the loaded
// NVRTC (../include, ../../include).
std::string cuda_include_dir();

}  // namespace kf::cuda
