// Runs a communication segment (core/shard inserts them): the layout work
// around the communicator's contiguous collectives (an allgather along an
// inner dim is a gather into rank-major blocks and a strided copy into
// place; a rank's block of a replicated value is a strided copy), through
// the backend's copy and memory.
#pragma once

#include <dlpack/dlpack.h>

#include "core/ir/fusion.h"
#include "core/runtime/backend.h"

namespace kf {

// Checks that a fusion with a mesh got a communicator of the mesh's size
// for tensors of its kind (`who` names the API call in messages). A fusion
// without a mesh ignores a communicator.
void check_communicator(const Fusion& fusion, DeviceKind device, const ExecOptions& options, const char* who);

// e: the segment's one communication expr; in / out its tensors.
void run_collective(Backend& backend, const Fusion& fusion, const Expr& e, const DLTensor& in, const DLTensor& out,
                    const ExecOptions& options);

// Runs segment `index` of the plan: a communication segment here, any
// other on the backend.
void run_any_segment(Backend& backend, const Plan& plan, size_t index, const ValueSizes& sizes,
                     const DLTensor* const* inputs, DLTensor* const* outputs, const ExecOptions& options);

}  // namespace kf
