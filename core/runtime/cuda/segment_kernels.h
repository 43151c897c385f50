// The kernels of a segmentation, made together on its first run on a GPU:
// generating, hashing (the kernel cache key) and compiling (disk cache or
// NVRTC, 25-500 ms per kernel) run on a bounded pool of threads, since a
// fusion may have many segments. None of it needs a GPU; loading the
// images onto the device stays with the CUDA backend.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/segment/segmentation.h"

namespace kf::cuda {

// At most this many compile threads (and never more than the hardware has,
// nor more than there are kernels).
inline constexpr size_t kMaxCompileThreads = 8;

// A plan's units as compiled: per unit of plan.units, kernel_key(unit
// source, sm), and the compiled image, null when the unit was not asked
// for or `loaded` said the key needs none. Units with equal sources (in one
// call) share one image (compiled once).
struct CompiledUnits {
  std::vector<Digest> keys;
  std::vector<std::shared_ptr<const KernelImage>> images;
};

// Which units of a plan to compile: those defining `kernels` (all the
// plan's units when empty).
struct UnitRequest {
  const KernelPlan* plan = nullptr;
  std::vector<std::string> kernels;
};

// loaded(key): whether a kernel is in memory already (no image needed);
// may be empty.
using LoadedQuery = std::function<bool(const Digest&)>;

// The plans of segments `indices` (generated segments only), in that order,
// each generated on the pool.
std::vector<KernelPlan> make_segment_plans(const ConcreteFusion& c, const Segmentation& s,
                                           const std::vector<size_t>& indices);

// The units `requests` ask for, for architecture `sm`, from the process
// disk cache or NVRTC, every distinct unit a task of the pool; one result
// per request. Throws the first error in request order after every task
// has finished.
std::vector<CompiledUnits> compile_units(const std::vector<UnitRequest>& requests, int sm, const LoadedQuery& loaded);

// Every unit of one plan (a matmul epilogue, or a plan's variant loaded on
// first need: see UnitRequest).
CompiledUnits compile_plan(const KernelPlan& plan, int sm, const LoadedQuery& loaded,
                           const std::vector<std::string>& kernels = {});

struct SegmentKernel {
  KernelPlan plan;
  CompiledUnits units;
};

// make_segment_plans, then every unit of every plan (compile_units).
std::vector<SegmentKernel> make_segment_kernels(const ConcreteFusion& c, const Segmentation& s,
                                                const std::vector<size_t>& indices, int sm,
                                                const LoadedQuery& loaded);

}  // namespace kf::cuda
