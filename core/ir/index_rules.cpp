#include "core/ir/index_rules.h"

#include "core/ir/op_attrs.h"
#include "core/ir/op_table.h"
#include "core/util/error.h"

namespace kf {

namespace {

// Operand dim d read at output dim o's index: 0 where d is of size 1.
IndexTerm read(std::span<const SizeClass> in, size_t d, size_t o) {
  return in[d] == SizeClass::One ? IndexTerm::zero() : IndexTerm::out(o);
}

// Every dim read at the same output dim's index (equal ranks).
OperandIndex same_dims(size_t rank, std::span<const SizeClass> in) {
  OperandIndex sub(rank);
  for (size_t d = 0; d < rank; ++d) sub[d] = read(in, d, d);
  return sub;
}

OperandIndex shape(const Expr& e, size_t k, std::span<const SizeClass> out, std::span<const SizeClass> in,
                   const ReshapeGroups* groups) {
  const size_t ri = in.size(), r = out.size();
  OperandIndex sub(ri);
  switch (e.op) {
    case Op::BROADCAST_IN_DIM:
      for (size_t j = 0; j < ri; ++j) sub[j] = read(in, j, static_cast<size_t>(DimsAttrs(e).dims[j]));
      return sub;
    case Op::EXPAND: return right_aligned_index(r, in);
    case Op::PERMUTE:
      for (size_t i = 0; i < r; ++i) {
        const size_t d = static_cast<size_t>(PermuteAttrs(e).perm[i]);
        sub[d] = read(in, d, i);
      }
      return sub;
    case Op::SQUEEZE: {  // the squeezed dims (of size 1) read 0
      const DimsAttrs sq(e);
      size_t j = 0, o = 0;
      for (size_t d = 0; d < ri; ++d) {
        if (j < sq.dims.size() && static_cast<size_t>(sq.dims[j]) == d) {
          ++j;
          continue;
        }
        sub[d] = read(in, d, o++);
      }
      return sub;
    }
    case Op::UNSQUEEZE: {  // the new dim is read by none
      size_t o = 0;
      for (size_t d = 0; d < ri; ++d, ++o) {
        if (o == DimAttr(e).index()) ++o;
        sub[d] = read(in, d, o);
      }
      return sub;
    }
    case Op::SLICE: {
      const SliceAttrs sl(e);
      const size_t dim = static_cast<size_t>(sl.dim);
      sub = same_dims(r, in);
      if (in[dim] == SizeClass::Many) sub[dim] = {IndexTerm::Kind::Slice, static_cast<int>(dim), 0, sl.start, sl.step};
      return sub;
    }
    case Op::PAD: {
      const PadAttrs pad(e);
      for (size_t d = 0; d < r; ++d)
        sub[d] = pad.pads_dim(d) ? IndexTerm{IndexTerm::Kind::Pad, static_cast<int>(d), 0, pad.low(d)} : read(in, d, d);
      return sub;
    }
    case Op::CAT: {
      const size_t dim = DimAttr(e).index();
      sub = same_dims(r, in);
      if (in[dim] == SizeClass::Many)
        sub[dim] = {IndexTerm::Kind::CatPart, static_cast<int>(dim), 0, static_cast<int64_t>(k)};
      return sub;
    }
    case Op::RESHAPE: {
      const ReshapeGroups whole = {{static_cast<int>(ri), static_cast<int>(r)}};
      return reshape_index(groups ? *groups : whole, true, out, in);
    }
    default: break;
  }
  fail(KF_ERR_INTERNAL, "index rules: shape op ", op_name(e.op), " has no index rule");
}

OperandIndex indexing(const Expr& e, size_t k, std::span<const SizeClass> out, std::span<const SizeClass> in) {
  const size_t dim = DimAttr(e).index();
  if (k == 1) {
    // The index: index_select's (rank 1) at the output's index along dim;
    // a gather's, of the output's shape, at the output's index.
    if (e.op == Op::INDEX_SELECT) return {read(in, 0, dim)};
    OperandIndex sub(out.size());
    for (size_t d = 0; d < out.size(); ++d) sub[d] = IndexTerm::out(d);
    return sub;
  }
  OperandIndex sub = same_dims(out.size(), in);
  sub[dim] = in[dim] == SizeClass::Many ? IndexTerm{IndexTerm::Kind::Gathered, static_cast<int>(dim)} : IndexTerm::zero();
  return sub;
}

}  // namespace

bool has_index_rule(const Expr& e, size_t k) {
  if (k >= e.inputs.size()) return false;
  switch (op_info(e.op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return true;
    case OpCategory::Hint: return k == 0;
    case OpCategory::Shape: return e.op == Op::CAT || k == 0;
    case OpCategory::Indexing: return k < 2;
    default: return false;
  }
}

OperandIndex operand_index(const Expr& e, size_t k, std::span<const SizeClass> out, std::span<const SizeClass> in,
                           const ReshapeGroups* groups) {
  if (!has_index_rule(e, k)) fail(KF_ERR_INTERNAL, "index rules: ", op_name(e.op), " reads operand ", k, " at no index");
  switch (op_info(e.op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return right_aligned_index(out.size(), in);
    case OpCategory::Hint: {  // the same index
      OperandIndex sub(out.size());
      for (size_t d = 0; d < out.size(); ++d) sub[d] = IndexTerm::out(d);
      return sub;
    }
    case OpCategory::Shape: return shape(e, k, out, in, groups);
    default: return indexing(e, k, out, in);
  }
}

OperandIndex right_aligned_index(size_t out_rank, std::span<const SizeClass> in) {
  const size_t ri = in.size();
  OperandIndex sub(ri);
  for (size_t j = 0; j < ri; ++j) sub[j] = read(in, j, out_rank - ri + j);
  return sub;
}

OperandIndex reshape_index(const ReshapeGroups& groups, bool out_to_in, std::span<const SizeClass> from,
                           std::span<const SizeClass> to) {
  OperandIndex res(to.size());
  size_t fd = 0, td = 0;
  for (const ReshapeGroup& g : groups) {
    const size_t nf = static_cast<size_t>(out_to_in ? g.out_dims : g.in_dims);
    const size_t nt = static_cast<size_t>(out_to_in ? g.in_dims : g.out_dims);
    int64_t many = 0;
    for (size_t d = fd; d < fd + nf; ++d) many += from[d] == SizeClass::Many;
    for (size_t d = td; d < td + nt; ++d)
      if (to[d] == SizeClass::Many)
        res[d] = {IndexTerm::Kind::Regroup, static_cast<int>(fd), static_cast<int>(nf), static_cast<int64_t>(nt), many};
    fd += nf;
    td += nt;
  }
  return res;
}

}  // namespace kf
