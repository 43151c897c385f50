// The index rules: for an op that reads an operand at an index computed from
// its output's index (pointwise ops, hints, shape ops, gathers), at which
// index it reads the operand, one term per dim of the operand. This is the
// one place each op's rule is written; the stages that follow indices apply
// it, each in its own algebra: codegen (KernelWriter) turns the terms into
// index expressions of the generated CUDA, the schedule's access map
// (core/schedule/access_map.cpp) into IndexMaps. Terms other than Zero and
// Out name a computed index whose arithmetic (a slice's start, a cat's
// bounds, a reshape's divisions) each consumer writes in its own form.
//
// The rules read only the op, its attributes and the size classes of the
// output's and the operand's dims (a dim of size class One is a broadcast:
// read at 0), and a reshape's grouping; they allocate only their result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/ir/fusion.h"
#include "core/ir/size_class.h"

namespace kf {

// How a reshape regroups dims (core/concretize/reshape_groups.h computes
// the grouping from one call's sizes): consecutive input dims and
// consecutive output dims of the same element count.
struct ReshapeGroup {
  int in_dims = 0;   // consecutive input dims
  int out_dims = 0;  // consecutive output dims with the same element count
};
using ReshapeGroups = std::vector<ReshapeGroup>;

// One dim of an operand's index, in terms of the output's index `out`.
struct IndexTerm {
  enum class Kind : uint8_t {
    Zero,     // 0: a size-1 dim (a broadcast), or a dim no output dim feeds
    Out,      // out[dim]
    Slice,    // start' + out[dim] * step, start' = the slice's start `a` (as
              // written, Python-style) clamped against the operand's extent
              // at run time (kf_slice_start); step `b`
    Pad,      // out[dim] - `a` (the low pad), read only inside [0, extent);
              // the pad value outside
    CatPart,  // out[dim] - (the cat extents of the operands before operand
              // `a`), read only inside operand a's part (operand 0: out[dim])
    Regroup,  // a reshape's: the linear index over the `dims` dims from
              // `dim` of the side read from (the output's, for an operand),
              // size-1 dims left out, unravelled over the group's `a` dims
              // of the side read; `b` of the former are of size class Many
              // (none: the index is 0)
    Gathered, // the index operand's value there, read only inside [0, extent)
              // (a gather's `dim`)
  };
  Kind kind = Kind::Zero;
  int dim = 0;
  int dims = 0;
  int64_t a = 0, b = 0;
  bool operator==(const IndexTerm&) const = default;

  static IndexTerm zero() { return {}; }
  static IndexTerm out(size_t d) { return {Kind::Out, static_cast<int>(d)}; }
  // A Regroup term whose group is one dim on each side: the index passes
  // through (the extents are equal), out[dim].
  bool passes_through() const { return kind == Kind::Regroup && dims == 1 && a == 1; }
};
using OperandIndex = std::vector<IndexTerm>;

// Whether e reads operand k at an index by the rules below: every operand
// of a pointwise op (unary, binary, ternary, cast) and of a cat, a hint's,
// a shape op's first, a gather's both; not a pad's value.
bool has_index_rule(const Expr& e, size_t k);

// The index at which `e` reads operand k (has_index_rule(e, k)), for an
// output with the size classes `out` and an operand with `in`. `groups`: a
// reshape's grouping (null: one group of every dim).
OperandIndex operand_index(const Expr& e, size_t k, std::span<const SizeClass> out, std::span<const SizeClass> in,
                           const ReshapeGroups* groups = nullptr);

// The rule pointwise ops and expand share: the operand's dims
// right-aligned with the output's, each read at its output dim's index
// (at 0 where it is of size 1).
OperandIndex right_aligned_index(size_t out_rank, std::span<const SizeClass> in);

// The reshape rule, either way: an index of `from` as an index of `to`
// (out_to_in: `from` is the reshape's output and `to` its input, the rule
// for its operand; otherwise the inverse, a stored view's). Per dim of
// `to`: Zero unless of size class Many, else the Regroup term of its group.
OperandIndex reshape_index(const ReshapeGroups& groups, bool out_to_in, std::span<const SizeClass> from,
                           std::span<const SizeClass> to);

}  // namespace kf
