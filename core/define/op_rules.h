// Define-time rules of every op: checks the arguments and attributes of an
// op record, normalizes its attributes (negative axes, default axes) and
// gives the dtype, rank and scalar-ness of its outputs. The builder and the
// text parser both go through here, so a fusion is valid by construction.
#pragma once

#include <cstdint>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

struct OutputType {
  DType dtype;
  int rank;
  bool is_scalar;
};

// Throws kf::Error naming the offending argument. `attrs` is normalized in
// place. Communication ops are kfuse's own (core/shard): accepted only with
// `communication` (segment text replays them), rejected for callers.
std::vector<OutputType> infer_op(const Fusion& fusion, Op op, const std::vector<int64_t>& args,
                                 std::vector<int64_t>& attrs, bool communication = false);

}  // namespace kf
