// The copy kernels (strided_copy.h, permute_copy.h) loaded per device,
// under the variant their source is generated from: a warm copy finds its
// function with a map lookup of a few integers. Only a miss generates the
// source and takes it through the kernel cache (kernel_cache.h: SHA-256 of
// the source, memory and disk caches, NVRTC), which took microseconds of
// string building and hashing on every copy before.
//
// Entries live for the process, as the kernel cache's modules do (nothing
// unloads them), so the functions and names handed out stay valid.
// Thread-safe: one mutex over the maps, not held while a miss loads
// (load_kernel makes concurrent first uses of one source compile once; a
// racing miss generates the source again and finds the module loaded).
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "core/runtime/cuda/permute_copy.h"
#include "core/runtime/cuda/strided_copy.h"

namespace kf::cuda {

struct CopyKernel {
  CUfunction function = nullptr;
  std::string name;  // for launch errors
};

class CopyKernels {
 public:
  // Loads function `name` of `source` on `device`; load_kernel by default.
  using Loader = std::function<CUfunction(int device, const std::string& source, const std::string& name)>;
  CopyKernels();
  explicit CopyKernels(Loader load);

  const CopyKernel& strided(int device, const StridedCopyVariant& v);
  const CopyKernel& permute(int device, const PermuteCopyVariant& v);

  // Sources generated (misses), and entries held, for tests.
  uint64_t sources_built() const { return sources_built_.load(std::memory_order_relaxed); }
  size_t size() const;

 private:
  template <typename Variant>
  const CopyKernel& find(std::map<std::pair<int, Variant>, CopyKernel>& map, int device, const Variant& v);

  Loader load_;
  mutable std::mutex mutex_;
  std::map<std::pair<int, StridedCopyVariant>, CopyKernel> strided_;
  std::map<std::pair<int, PermuteCopyVariant>, CopyKernel> permute_;
  std::atomic<uint64_t> sources_built_{0};
};

// The process's copy kernels (the CUDA backend's).
CopyKernels& copy_kernels();

}  // namespace kf::cuda
