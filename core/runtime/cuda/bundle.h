// The CUDA side of kernel bundles (core/runtime/kernel_bundle.h): the file
// format, and the process's installed bundles that kernel lookups consult
// before the caches and NVRTC (segment_kernels.cpp, kernel_cache.cpp).
//
// File (integers little endian):
//   0   char[8]  magic "KFBUNDLE"
//   8   u32      format version (kBundleFormatVersion)
//   12  u32      sm (10 * major + minor)
//   16  u8[32]   generator digest: SHA-256 of this library's CUDA prelude
//                (generator_digest): a library that generates other code
//                would find none of its kernels here, so loading says so
//   48  u32, u32 the NVRTC version (major, minor) that compiled it
//   56  u64      entry count
//   64  entries: u8[32] key, u32 flags (bit 0: PTX), u32 0, u64 size, image
//   end u8[32]   SHA-256 of every byte before it
// key = bundle_key(unit source, sm): SHA-256 of the generated source
// itself, so an entry is only ever used for the kernel it was compiled
// from, and of no NVRTC version, so a lookup never loads NVRTC.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/cuda/disk_cache.h"
#include "core/runtime/cuda/sha256.h"
#include "core/runtime/kernel_bundle.h"

namespace kf {

struct KernelBundle {
  int sm = 0;
  int nvrtc_major = 0, nvrtc_minor = 0;  // what compiled its images (0: none yet)
  std::map<cuda::Digest, cuda::CachedImage> images;
};

namespace cuda {

inline constexpr uint32_t kBundleFormatVersion = 1;

Digest bundle_key(std::string_view source, int sm);
// SHA-256 of the CUDA prelude every generated kernel starts with.
const Digest& generator_digest();

std::vector<char> serialize_bundle(const KernelBundle& b);
// Throws KF_ERR_INVALID_ARGUMENT (not a bundle, damaged) or
// KF_ERR_VERSION_MISMATCH (another format, another generator), naming `what`.
KernelBundle parse_bundle(const std::vector<char>& bytes, const std::string& what);

// The image of `source` for `sm` in an installed bundle, or nullptr; *key
// gets its key (the memory cache's key for the loaded module). Cheap when
// no bundle for `sm` is installed (no hashing).
const CachedImage* bundled_image(std::string_view source, int sm, Digest* key);
// Lookups answered from bundles (for tests and KFUSE_DEBUG).
uint64_t bundle_hits();

}  // namespace cuda
}  // namespace kf
