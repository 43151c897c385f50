#include "core/runtime/cuda/segment_kernels.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "core/runtime/cuda/bundle.h"
#include "core/util/debug_log.h"
#include "core/util/parallel.h"

namespace kf::cuda {

std::vector<KernelPlan> make_segment_plans(const ConcreteFusion& c, const Segmentation& s,
                                           const std::vector<size_t>& indices) {
  std::vector<KernelPlan> plans(indices.size());
  parallel_for(indices.size(), pool_size(indices.size(), kMaxCompileThreads), [&](size_t i) {
    const DebugStep step("compile");
    plans[i] = emit_segment_kernel(c, s.segments[indices[i]]);
    if (step)
      step.done("generate segment " + std::to_string(indices[i]) + " (" + std::to_string(plans[i].units.size()) +
                " kernels)");
  });
  return plans;
}

// Keys every unit of every request's plan, then compiles one image per
// distinct key asked for that `loaded` does not have, on the pool, in
// (request, unit) order so that the first error reported is the first
// request's.
std::vector<CompiledUnits> compile_units(const std::vector<UnitRequest>& requests, int sm, const LoadedQuery& loaded) {
  struct Use {
    size_t request, unit;
  };
  std::vector<CompiledUnits> out(requests.size());
  // Units an installed bundle holds take its key and image: no NVRTC,
  // not even its version for kernel_key (bundle.h).
  std::vector<std::vector<const CachedImage*>> bundled(requests.size());
  std::map<Digest, size_t> compile_index;
  std::vector<Use> first_of;           // per compile: its first use
  std::vector<std::vector<Use>> uses;  // per compile: every use
  for (size_t r = 0; r < requests.size(); ++r) {
    const KernelPlan& plan = *requests[r].plan;
    const std::vector<std::string>& wanted = requests[r].kernels;
    for (const KernelPlan::Unit& u : plan.units) {
      Digest key;
      bundled[r].push_back(bundled_image(u.source, sm, &key));
      out[r].keys.push_back(bundled[r].back() != nullptr ? key : kernel_key(u.source, sm));
    }
    out[r].images.resize(plan.units.size());
    for (size_t u = 0; u < plan.units.size(); ++u) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), plan.units[u].kernel) == wanted.end()) continue;
      const Digest& key = out[r].keys[u];
      if (loaded && loaded(key)) continue;
      auto [it, added] = compile_index.try_emplace(key, first_of.size());
      if (added) {
        first_of.push_back({r, u});
        uses.emplace_back();
      }
      uses[it->second].push_back({r, u});
    }
  }
  const DiskCache& disk = process_disk_cache();
  parallel_for(first_of.size(), pool_size(first_of.size(), kMaxCompileThreads), [&](size_t n) {
    const Use& first = first_of[n];
    const KernelPlan::Unit& unit = requests[first.request].plan->units[first.unit];
    const CachedImage* from_bundle = bundled[first.request][first.unit];
    auto image = std::make_shared<const KernelImage>(
        from_bundle != nullptr ? KernelImage{*from_bundle, ImageOrigin::Bundle, false}
                               : kernel_image(out[first.request].keys[first.unit], unit.source, unit.kernel, sm, disk));
    for (const Use& use : uses[n]) out[use.request].images[use.unit] = image;  // distinct slots per task
  });
  return out;
}

CompiledUnits compile_plan(const KernelPlan& plan, int sm, const LoadedQuery& loaded,
                           const std::vector<std::string>& kernels) {
  return std::move(compile_units({UnitRequest{&plan, kernels}}, sm, loaded)[0]);
}

std::vector<SegmentKernel> make_segment_kernels(const ConcreteFusion& c, const Segmentation& s,
                                                const std::vector<size_t>& indices, int sm,
                                                const LoadedQuery& loaded) {
  std::vector<KernelPlan> plans = make_segment_plans(c, s, indices);
  std::vector<UnitRequest> requests;
  for (const KernelPlan& p : plans) requests.push_back({&p, {}});
  std::vector<CompiledUnits> units = compile_units(requests, sm, loaded);
  std::vector<SegmentKernel> kernels(plans.size());
  for (size_t i = 0; i < plans.size(); ++i) {
    kernels[i].plan = std::move(plans[i]);
    kernels[i].units = std::move(units[i]);
  }
  return kernels;
}

}  // namespace kf::cuda
