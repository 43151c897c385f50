#include "core/runtime/cuda/copy_kernels.h"

#include "core/runtime/cuda/kernel_cache.h"

namespace kf::cuda {

namespace {

CUfunction load_from_kernel_cache(int device, const std::string& source, const std::string& name) {
  return load_kernel(device, source, name);
}

std::string source_of(const StridedCopyVariant& v) { return v.source(); }
std::string source_of(const PermuteCopyVariant& v) { return permute_copy_source(v); }
std::string name_of(const StridedCopyVariant& v) { return v.name(); }
std::string name_of(const PermuteCopyVariant& v) { return v.kernel_plan().name(); }

}  // namespace

CopyKernels::CopyKernels() : CopyKernels(load_from_kernel_cache) {}

CopyKernels::CopyKernels(Loader load) : load_(std::move(load)) {}

template <typename Variant>
const CopyKernel& CopyKernels::find(std::map<std::pair<int, Variant>, CopyKernel>& map, int device,
                                    const Variant& v) {
  const std::pair<int, Variant> key{device, v};
  {
    std::lock_guard lock(mutex_);
    if (auto it = map.find(key); it != map.end()) return it->second;
  }
  CopyKernel k;
  k.name = name_of(v);
  const std::string source = source_of(v);
  sources_built_.fetch_add(1, std::memory_order_relaxed);
  k.function = load_(device, source, k.name);
  std::lock_guard lock(mutex_);
  return map.try_emplace(key, std::move(k)).first->second;  // a racing miss's entry stays
}

const CopyKernel& CopyKernels::strided(int device, const StridedCopyVariant& v) { return find(strided_, device, v); }

const CopyKernel& CopyKernels::permute(int device, const PermuteCopyVariant& v) { return find(permute_, device, v); }

size_t CopyKernels::size() const {
  std::lock_guard lock(mutex_);
  return strided_.size() + permute_.size();
}

CopyKernels& copy_kernels() {
  static CopyKernels kernels;
  return kernels;
}

}  // namespace kf::cuda
