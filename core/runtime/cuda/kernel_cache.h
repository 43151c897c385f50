// Compiled kernels: from CUDA C++ source to a function loaded on a device.
//
//   key = SHA-256(format version, source, "sm_XY", NVRTC version, options)
//   memory cache: (device, key) -> loaded CUmodule, for the process's life
//   disk cache:   key -> CUBIN (disk_cache.h), shared between processes
//   miss:         NVRTC compile, then stored on disk (failures to store are
//                 ignored: the kernel is already in hand)
//
// Options are those of nvrtc_options() minus --include-path: the headers
// come with NVRTC, whose version is in the key, so moving the toolkit
// keeps the cache valid.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "core/runtime/cuda/disk_cache.h"
#include "core/runtime/cuda/sha256.h"

namespace kf::cuda {

Digest kernel_key(const std::string& source, int sm);

enum class ImageOrigin : uint8_t { Disk, Compiled, Bundle };

struct KernelImage {
  CachedImage code;
  ImageOrigin origin = ImageOrigin::Compiled;
  bool stored = false;  // Compiled: whether the disk cache took it
};

// The compiled image of `source` for `sm`: from `disk` when it holds a
// valid file, else compiled with NVRTC and stored in `disk`. Throws
// KF_ERR_BACKEND when compilation is needed and fails.
KernelImage kernel_image(const std::string& source, const std::string& name, int sm,
                         const DiskCache& disk);
// The same with the key computed already (kernel_key(source, sm)): hashing
// a large source takes a fraction of a millisecond.
KernelImage kernel_image(const Digest& key, const std::string& source, const std::string& name,
                         int sm, const DiskCache& disk);

// The process-wide disk cache (configured from the environment once).
const DiskCache& process_disk_cache();

// Function `name` of `source`, loaded on `device` (memory cache, then
// kernel_image with the process disk cache). Thread-safe; concurrent
// requests for one key compile once.
CUfunction load_kernel(int device, const std::string& source, const std::string& name);
// The same for `key` = kernel_key(source, the device's sm); on a memory
// miss `image` (when not null: kernel_image's result for that key) is
// loaded instead of calling kernel_image.
CUfunction load_kernel(int device, const Digest& key, const std::string& source,
                       const std::string& name, const KernelImage* image);

// Whether the kernel with `key` is loaded on `device` already (load_kernel
// then needs no image).
bool kernel_loaded(int device, const Digest& key);

struct KernelCacheStats {
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t compiles = 0;
  uint64_t disk_stores = 0;
};
KernelCacheStats kernel_cache_stats();

}  // namespace kf::cuda
