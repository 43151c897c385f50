#include "core/runtime/cuda/segment_kernels.h"

#include <cstdint>
#include <map>

#include "core/util/parallel.h"

namespace kf::cuda {

std::vector<SegmentKernel> make_segment_kernels(const ConcreteFusion& c, const Segmentation& s,
                                                const std::vector<size_t>& indices, int sm,
                                                const std::function<bool(const Digest&)>& loaded) {
  std::vector<SegmentKernel> kernels(indices.size());
  parallel_for(indices.size(), pool_size(indices.size(), kMaxCompileThreads), [&](size_t i) {
    kernels[i].plan = emit_segment_kernel(c, s.segments[indices[i]]);
    kernels[i].key = kernel_key(kernels[i].plan.source, sm);
  });
  // One compile per distinct key that is not loaded; first_of[u] is the
  // first kernel with key u.
  std::map<Digest, size_t> compile_index;
  std::vector<size_t> first_of;
  std::vector<size_t> compile_of(kernels.size(), SIZE_MAX);
  for (size_t i = 0; i < kernels.size(); ++i) {
    if (loaded && loaded(kernels[i].key)) continue;
    auto [it, added] = compile_index.try_emplace(kernels[i].key, first_of.size());
    if (added) first_of.push_back(i);
    compile_of[i] = it->second;
  }
  std::vector<std::shared_ptr<const KernelImage>> images(first_of.size());
  const DiskCache& disk = process_disk_cache();
  parallel_for(first_of.size(), pool_size(first_of.size(), kMaxCompileThreads), [&](size_t u) {
    const SegmentKernel& k = kernels[first_of[u]];
    images[u] = std::make_shared<const KernelImage>(kernel_image(k.key, k.plan.source, k.plan.name, sm, disk));
  });
  for (size_t i = 0; i < kernels.size(); ++i)
    if (compile_of[i] != SIZE_MAX) kernels[i].image = images[compile_of[i]];
  return kernels;
}

}  // namespace kf::cuda
