// The kernels of a segmentation, made together on its first run on a GPU:
// generating, hashing (the kernel cache key) and compiling (disk cache or
// NVRTC, 25-50 ms per kernel) run on a bounded pool of threads, since a
// fusion may have many segments. None of it needs a GPU; loading the
// images onto the device stays with the CUDA backend.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "core/codegen/kernel_plan.h"
#include "core/runtime/cuda/kernel_cache.h"
#include "core/segment/segmentation.h"

namespace kf::cuda {

// At most this many compile threads (and never more than the hardware has,
// nor more than there are kernels).
inline constexpr size_t kMaxCompileThreads = 8;

struct SegmentKernel {
  KernelPlan plan;
  // Per unit of plan.units: kernel_key(unit source, sm), and the compiled
  // image, null when `loaded` said the key needs none. Units with equal
  // sources (in this call) share one image (compiled once).
  std::vector<Digest> keys;
  std::vector<std::shared_ptr<const KernelImage>> images;
};

// The kernels of segments `indices` (generated segments only), in that
// order, for architecture `sm`, from the process disk cache or NVRTC:
// every unit of every segment is a task of the pool.
// loaded(key): whether a kernel is in memory already (no image needed);
// may be empty. Throws the first error in `indices` order after every task
// has finished.
std::vector<SegmentKernel> make_segment_kernels(const ConcreteFusion& c, const Segmentation& s,
                                                const std::vector<size_t>& indices, int sm,
                                                const std::function<bool(const Digest&)>& loaded);

// One plan made outside a segmentation's first run (a split-row plan or a
// matmul epilogue, loaded when first needed): its units compiled on the
// pool as above.
SegmentKernel compile_plan(KernelPlan plan, int sm, const std::function<bool(const Digest&)>& loaded);

}  // namespace kf::cuda
