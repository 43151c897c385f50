// PyTorch's result_type for kfuse operands: three tiers (tensors of rank >=
// 1, rank-0 tensors, scalars), where a lower tier only matters when its
// category (bool < integer < float) is higher than the tiers above it. A
// float scalar promotes an integer tensor to float32 (torch's default
// dtype); an integer scalar leaves an integer tensor's dtype alone.
#pragma once

#include <cstdint>
#include <span>

#include "core/ir/fusion.h"

namespace kf {

DType result_type(const Fusion& fusion, std::span<const int64_t> operands);

// The dtype a pointwise op's operands are converted to before it applies
// (a comparison's: their result_type; to-bool ops': the operand's).
DType compute_dtype(const Fusion& f, const Expr& e);

}  // namespace kf
