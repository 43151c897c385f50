#include "core/runtime/cuda/segment_kernels.h"

#include <cstdint>
#include <map>

#include "core/util/debug_log.h"
#include "core/util/parallel.h"

namespace kf::cuda {

namespace {

// Keys every unit of `kernels` (their plans made), then compiles one image
// per distinct key that `loaded` does not have, on the pool, in (kernel,
// unit) order so that the first error reported is the first kernel's.
void compile_units(std::vector<SegmentKernel>& kernels, int sm, const std::function<bool(const Digest&)>& loaded) {
  struct Use {
    size_t kernel, unit;
  };
  std::map<Digest, size_t> compile_index;
  std::vector<Use> first_of;          // per compile: its first use
  std::vector<std::vector<Use>> uses;  // per compile: every use
  for (size_t i = 0; i < kernels.size(); ++i)
    for (size_t u = 0; u < kernels[i].keys.size(); ++u) {
      const Digest& key = kernels[i].keys[u];
      if (loaded && loaded(key)) continue;
      auto [it, added] = compile_index.try_emplace(key, first_of.size());
      if (added) {
        first_of.push_back({i, u});
        uses.emplace_back();
      }
      uses[it->second].push_back({i, u});
    }
  const DiskCache& disk = process_disk_cache();
  parallel_for(first_of.size(), pool_size(first_of.size(), kMaxCompileThreads), [&](size_t n) {
    const SegmentKernel& k = kernels[first_of[n].kernel];
    const KernelPlan::Unit& unit = k.plan.units[first_of[n].unit];
    auto image = std::make_shared<const KernelImage>(kernel_image(k.keys[first_of[n].unit], unit.source, unit.kernel, sm, disk));
    for (const Use& use : uses[n]) kernels[use.kernel].images[use.unit] = image;  // distinct slots per task
  });
}

void key_units(SegmentKernel& k, int sm) {
  for (const KernelPlan::Unit& u : k.plan.units) k.keys.push_back(kernel_key(u.source, sm));
  k.images.resize(k.keys.size());
}

}  // namespace

std::vector<SegmentKernel> make_segment_kernels(const ConcreteFusion& c, const Segmentation& s,
                                                const std::vector<size_t>& indices, int sm,
                                                const std::function<bool(const Digest&)>& loaded) {
  std::vector<SegmentKernel> kernels(indices.size());
  parallel_for(indices.size(), pool_size(indices.size(), kMaxCompileThreads), [&](size_t i) {
    const DebugStep step("compile");
    SegmentKernel& k = kernels[i];
    k.plan = emit_segment_kernel(c, s.segments[indices[i]]);
    key_units(k, sm);
    if (step)
      step.done("generate segment " + std::to_string(indices[i]) + " (" + std::to_string(k.plan.units.size()) +
                " kernels)");
  });
  compile_units(kernels, sm, loaded);
  return kernels;
}

SegmentKernel compile_plan(KernelPlan plan, int sm, const std::function<bool(const Digest&)>& loaded) {
  std::vector<SegmentKernel> kernels(1);
  kernels[0].plan = std::move(plan);
  key_units(kernels[0], sm);
  compile_units(kernels, sm, loaded);
  return std::move(kernels[0]);
}

}  // namespace kf::cuda
