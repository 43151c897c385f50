// Output tensors: checking caller-provided ones (kf_execute_into) and
// allocating new ones (kf_execute) in the layout the concrete fusion chose.
#pragma once

#include <vector>

#include <dlpack/dlpack.h>

#include "core/concretize/concrete_fusion.h"
#include "core/runtime/exec_options.h"
#include "core/concretize/overlap.h"

namespace kf {

// Checks a caller-provided tensor for value `v` of `sizes` on `device`:
// rank, dtype, shape, device, strides (non-negative, reaching no further
// than int64 offsets and the address space), data, alignment to the element
// size, no self-overlap. Returns the memory it covers (base 0 if empty).
MemoryRegion check_output_tensor(const Value& v, std::span<const int64_t> sizes, const DLTensor* t, Device device,
                                 const TensorName& name);

// Throws unless `out` shares no memory with any of `earlier` (outputs
// checked before it, in order).
void check_disjoint_from(const MemoryRegion& out, std::span<const MemoryRegion> earlier, const TensorName& name);

// Checks output `index` of kf_execute_into as check_output_tensor does, then
// that it shares no element with an input other than the one it updates in
// place (that one it may only cover element for element), nor with the
// outputs in `regions`; appends its region to `regions`.
void check_output(const ConcreteFusion& c, const Binding& b, size_t index, const DLTensor* t,
                  std::vector<MemoryRegion>* regions);

// A new tensor for output `index` (its deleter frees it). An aliasing output
// is a view of its input's memory.
DLManagedTensor* allocate_output(const ConcreteFusion& c, const Binding& b, size_t index,
                                 const DLTensor* const* inputs, const ExecOptions& options);

}  // namespace kf
