// Sizes of every value from the sizes of the inputs and the values of shape
// scalars: one Expr at a time, so the same rules serve a whole fusion
// (concretization) and a single segment (kf_execute_segment). Errors name
// the op, the value ids and the sizes that disagree. Nothing here allocates:
// binding runs it on every execute.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ir/fusion.h"
#include "core/util/fixed_vector.h"

namespace kf {

using Sizes = std::vector<int64_t>;
// One value's sizes (or strides) without the heap.
using Extents = FixedVector<int64_t, kMaxRank>;

// What the size rules read: sizes of already known values, and values of
// shape scalars (integer inputs, constants and their arithmetic: every shape
// argument is an integer, is_shape_scalar in fusion.h), exact in int64.
class SizeContext {
 public:
  virtual std::span<const int64_t> sizes_of(int64_t id) const = 0;
  virtual int64_t shape_scalar(int64_t id) const = 0;

 protected:
  ~SizeContext() = default;
};

// The sizes of every value of one fusion for one call, in one flat table:
// value v's extents start at fusion.size_offsets[v] (ranks are fixed by the
// definition), so filling it only writes numbers. reset() keeps the
// storage: a ValueSizes reused across calls allocates only on the first.
class ValueSizes final : public SizeContext {
 public:
  // Sized for `fusion`; extents and scalars are then unset (zero).
  void reset(const Fusion& fusion);
  const Fusion& fusion() const { return *fusion_; }

  std::span<const int64_t> operator[](int64_t id) const {
    return {extents_.data() + fusion_->size_offsets[static_cast<size_t>(id)],
            static_cast<size_t>(fusion_->values[static_cast<size_t>(id)].rank)};
  }
  // Sets value id's sizes; their count must be its rank.
  void set(int64_t id, std::span<const int64_t> sizes);
  // An integer scalar's value (constants are read from the fusion).
  void set_scalar(int64_t id, int64_t value) { scalars_[static_cast<size_t>(id)] = value; }

  std::span<const int64_t> sizes_of(int64_t id) const override { return (*this)[id]; }
  int64_t shape_scalar(int64_t id) const override;

 private:
  const Fusion* fusion_ = nullptr;
  std::vector<int64_t> extents_;
  std::vector<int64_t> scalars_;  // per value id: integer scalars' values
};

// Sizes of the outputs of `e` (all outputs of an expr have the same sizes).
Extents infer_expr_sizes(const Fusion& fusion, const Expr& e, const SizeContext& ctx);

// Sizes of the outputs of every expr of `exprs` (indices into
// fusion.exprs, in run order), written into `sizes`.
void infer_sizes(const Fusion& fusion, std::span<const int64_t> exprs, ValueSizes& sizes);
// The same over all of the fusion's exprs.
void infer_sizes(const Fusion& fusion, ValueSizes& sizes);

// Right-aligned broadcast of operand sizes, as PyTorch does; `who` names the
// op for messages, operand_ids the operands' values.
Extents broadcast_sizes(std::span<const std::span<const int64_t>> operands,
                        std::span<const int64_t> operand_ids, const char* who, int64_t value_id);

// Python slice on an extent: the (start, length) it selects (step >= 1; no
// intermediate overflows, whatever start, stop and step are).
struct SliceRange {
  int64_t start, length;
};
SliceRange slice_range(int64_t extent, int64_t start, int64_t stop, int64_t step);

// The element count of sizes the checks passed (checked_numel,
// core/util/dl_layout.h: 0 for an empty tensor whatever its other dims).
int64_t numel(std::span<const int64_t> s);

}  // namespace kf
