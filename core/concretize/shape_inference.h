// Sizes of every value from the sizes of the inputs and the values of shape
// scalars: one Expr at a time, so the same rules serve a whole fusion
// (concretization) and a single segment (kf_execute_segment). Errors name
// the op, the value ids and the sizes that disagree.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

using Sizes = std::vector<int64_t>;

// sizes_of(id): sizes of an already known value. scalar_of(id): value of an
// integer/float scalar (inputs and constants; shape args are integers).
struct SizeContext {
  std::function<const Sizes&(int64_t)> sizes_of;
  std::function<double(int64_t)> scalar_of;
};

// Sizes of each output of `e`, in e.outputs order.
std::vector<Sizes> infer_expr_sizes(const Fusion& fusion, const Expr& e, const SizeContext& ctx);

// Right-aligned broadcast of operand sizes, as PyTorch does; `who` names the
// op for messages.
Sizes broadcast_sizes(const std::vector<const Sizes*>& operands,
                      const std::vector<int64_t>& operand_ids, const char* who, int64_t value_id);

// Python slice on an extent: the (start, length) it selects.
struct SliceRange {
  int64_t start, length;
};
SliceRange slice_range(int64_t extent, int64_t start, int64_t stop, int64_t step);

int64_t numel(const Sizes& s);

}  // namespace kf
