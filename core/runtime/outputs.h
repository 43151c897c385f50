// Output tensors: checking caller-provided ones (kf_execute_into) and
// allocating new ones (kf_execute) in the layout the concrete fusion chose.
#pragma once

#include <vector>

#include <dlpack/dlpack.h>

#include "core/concretize/concrete_fusion.h"
#include "core/runtime/exec_options.h"

namespace kf {

// Checks output `index` against its value: sizes, dtype, device, no
// self-overlap, no overlap with inputs other than the one it aliases.
void check_output(const ConcreteFusion& c, const Binding& b, size_t index, const DLTensor* t);

// A new tensor for output `index` (its deleter frees it). An aliasing output
// is a view of its input's memory.
DLManagedTensor* allocate_output(const ConcreteFusion& c, const Binding& b, size_t index,
                                 const DLTensor* const* inputs, const ExecOptions& options);

// Throws unless a tensor with these sizes/strides touches no element twice.
void check_no_self_overlap(std::span<const int64_t> sizes, std::span<const int64_t> strides,
                           const std::string& name);

}  // namespace kf
