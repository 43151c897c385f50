#include "core/concretize/shape_inference.h"

#include <algorithm>
#include <array>
#include <limits>

#include "core/util/dl_layout.h"
#include "core/util/error.h"
#include "core/ir/op_attrs.h"

namespace kf {

int64_t numel(std::span<const int64_t> s) { return checked_numel(s); }

void ValueSizes::reset(const Fusion& fusion) {
  fusion_ = &fusion;
  extents_.assign(fusion.size_table_length, 0);
  scalars_.assign(fusion.values.size(), 0);
}

void ValueSizes::set(int64_t id, std::span<const int64_t> sizes) {
  const size_t rank = static_cast<size_t>(fusion_->values[static_cast<size_t>(id)].rank);
  if (sizes.size() != rank)
    fail(KF_ERR_INTERNAL, "value ", id, " has rank ", rank, ", its size rule gave ", sizes.size(),
         " sizes");
  std::copy(sizes.begin(), sizes.end(), extents_.begin() + fusion_->size_offsets[static_cast<size_t>(id)]);
}

int64_t ValueSizes::shape_scalar(int64_t id) const {
  const Value& v = fusion_->value(id);
  if (v.kind == ValueKind::Constant) return v.i64;
  return scalars_[static_cast<size_t>(id)];
}

Extents broadcast_sizes(std::span<const std::span<const int64_t>> operands,
                        std::span<const int64_t> operand_ids, const char* who, int64_t value_id) {
  size_t rank = 0;
  for (std::span<const int64_t> s : operands) rank = std::max(rank, s.size());
  Extents out(rank, 1);
  Extents from(rank, -1);
  for (size_t k = 0; k < operands.size(); ++k) {
    std::span<const int64_t> s = operands[k];
    for (size_t j = 0; j < s.size(); ++j) {
      size_t d = rank - s.size() + j;
      int64_t e = s[j];
      if (e == 1) continue;
      if (out[d] == 1) {
        out[d] = e;
        from[d] = operand_ids[k];
      } else if (out[d] != e) {
        fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", value_id, "): cannot broadcast dim ", d,
             ": size ", out[d], " (value ", from[d], ") against size ", e, " (value ",
             operand_ids[k], ")");
      }
    }
  }
  return out;
}

SliceRange slice_range(int64_t extent, int64_t start, int64_t stop, int64_t step) {
  auto clamp = [extent](int64_t i) {
    if (i < 0) i = (i < -extent) ? 0 : i + extent;
    return std::min(i, extent);
  };
  int64_t b = clamp(start), e = clamp(stop);
  // ceil((e - b) / step) without forming e - b + step - 1 (step may be INT64_MAX).
  int64_t len = e > b ? (e - b - 1) / step + 1 : 0;
  return {b, len};
}

namespace {

int64_t checked_mul(int64_t a, int64_t b, const char* who, int64_t id) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", id, "): element count overflows int64");
  return r;
}

// An extent grown by a pad or a cat: overflow and a negative result are
// errors, never a wrapped or negative size.
int64_t checked_extent_add(int64_t a, int64_t b, const char* who, int64_t id, size_t dim) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", id, "): size of dim ", dim, " overflows int64 (", a, " + ", b, ")");
  if (r < 0)
    fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", id, "): size of dim ", dim, " is ", r, ", expected >= 0");
  return r;
}

int64_t shape_value(const SizeContext& ctx, int64_t id, const char* who, size_t i) {
  const int64_t v = ctx.shape_scalar(id);
  if (v < -1)
    fail(KF_ERR_SHAPE_MISMATCH, who, ": size ", i, " (scalar value ", id, ") is ", v,
         ", expected >= 0 (or -1 where allowed)");
  return v;
}

}  // namespace

Extents infer_expr_sizes(const Fusion& fusion, const Expr& e, const SizeContext& ctx) {
  const OpInfo& info = op_info(e.op);
  const char* who = info.name.data();
  const int64_t out_id = e.outputs.at(0);
  auto in = [&](size_t i) { return ctx.sizes_of(e.inputs[i]); };
  switch (info.category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: {
      std::array<std::span<const int64_t>, 3> ops;  // at most ternary
      std::array<int64_t, 3> ids;
      size_t n = 0;
      for (int64_t id : e.inputs) {
        if (fusion.value(id).is_scalar) continue;
        if (n == ops.size()) fail(KF_ERR_INTERNAL, who, ": more than ", ops.size(), " tensor operands");
        ops[n] = ctx.sizes_of(id);
        ids[n++] = id;
      }
      return broadcast_sizes(std::span(ops.data(), n), std::span(ids.data(), n), who, out_id);
    }
    case OpCategory::Hint: return Extents(in(0));
    case OpCategory::Query: return Extents{};  // a scalar (its value: set_shape_scalar)
    case OpCategory::Communication: {
      const CommAttrs ca(e);
      Extents out(in(0));
      if (e.op == Op::ALLREDUCE) return out;
      int64_t& x = out[static_cast<size_t>(ca.dim)];
      if (e.op == Op::ALLGATHER) {
        x = checked_mul(x, ca.ranks, who, out_id);
        return out;
      }
      if (e.op == Op::SHARD_SLICE && x == 1) return out;  // a broadcast dim stays one
      if (x % ca.ranks != 0)
        fail(KF_ERR_SHAPE_MISMATCH, who, ": dim ", ca.dim, " has ", x, " entries, not a multiple of the mesh's ",
             ca.ranks, " ranks (value ", e.inputs[0], " is split evenly over the mesh)");
      x /= ca.ranks;
      return out;
    }
    case OpCategory::Reduction: {
      const std::span<const int64_t> a = in(0);
      const ReduceAttrs ra(e);
      const bool keepdim = ra.keepdim;
      std::array<bool, kMaxRank> reduced{};
      for (int64_t axis : ra.axes) reduced[static_cast<size_t>(axis)] = true;
      Extents out;
      for (size_t d = 0; d < a.size(); ++d) {
        if (reduced[d]) {
          if (a[d] == 0 && (e.op == Op::MAX || e.op == Op::MIN))
            fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", out_id, "): reducing dim ", d,
                 " of size 0 has no identity (value ", e.inputs[0], ")");
          if (keepdim) out.push_back(1);
        } else {
          out.push_back(a[d]);
        }
      }
      return out;
    }
    case OpCategory::Shape: break;
    case OpCategory::Indexing: {
      const std::span<const int64_t> a = in(0);
      const std::span<const int64_t> index = in(1);
      size_t dim = DimAttr(e).index();
      if (e.op == Op::INDEX_SELECT) {
        Extents out(a);
        out[dim] = index[0];
        return out;
      }
      for (size_t d = 0; d < a.size(); ++d)
        if (d != dim && index[d] > a[d])
          fail(KF_ERR_SHAPE_MISMATCH, "gather (value ", out_id, "): index size ", index[d],
               " exceeds input size ", a[d], " in dim ", d);
      return Extents(index);
    }
    case OpCategory::Scan: return Extents(in(0));
    case OpCategory::Scatter: {
      const std::span<const int64_t> a = in(0);
      const std::span<const int64_t> index = in(1);
      const std::span<const int64_t> src = in(2);
      const size_t dim = ScatterAttrs(e).index();
      const char* name = op_name(e.op).data();
      if (e.op == Op::INDEX_REDUCE) {
        for (size_t d = 0; d < a.size(); ++d) {
          const int64_t want = d == dim ? index[0] : a[d];
          if (src[d] != want && src[d] != 1)
            fail(KF_ERR_SHAPE_MISMATCH, name, " (value ", out_id, "): src (value ", e.inputs[2], ") has size ", src[d],
                 " in dim ", d, ", expected ", want, d == dim ? " (the index's length)" : " (the input's)", " or 1");
        }
        return Extents(a);
      }
      for (size_t d = 0; d < a.size(); ++d) {
        if (index[d] > src[d])
          fail(KF_ERR_SHAPE_MISMATCH, name, " (value ", out_id, "): index size ", index[d], " exceeds src size ",
               src[d], " in dim ", d);
        if (d != dim && index[d] > a[d])
          fail(KF_ERR_SHAPE_MISMATCH, name, " (value ", out_id, "): index size ", index[d], " exceeds input size ",
               a[d], " in dim ", d);
      }
      return Extents(a);
    }
    case OpCategory::Creation: {
      if (e.op == Op::IOTA) {
        int64_t n = shape_value(ctx, e.inputs[0], who, 0);
        if (n < 0) fail(KF_ERR_SHAPE_MISMATCH, "iota: length is ", n, ", expected >= 0");
        return Extents{n};
      }
      size_t n = e.op == Op::FULL ? e.inputs.size() - 1 : e.inputs.size() - 4;
      Extents out(n, 0);
      int64_t total = 1;
      for (size_t i = 0; i < n; ++i) {
        out[i] = shape_value(ctx, e.inputs[i], who, i);
        if (out[i] < 0) fail(KF_ERR_SHAPE_MISMATCH, who, ": size ", i, " is -1, expected >= 0");
        total = checked_mul(total, out[i], who, out_id);
      }
      return out;
    }
    case OpCategory::Library: {
      const std::span<const int64_t> a = in(0);
      const std::span<const int64_t> b = in(1);
      if (e.op == Op::LINEAR) {
        int64_t k = a.back();
        int64_t wk = b.back();
        if (k != wk)
          fail(KF_ERR_SHAPE_MISMATCH, "linear (value ", out_id, "): x has ", k,
               " features (last dim), w has ", wk);
        Extents out(a.begin(), a.end() - 1);
        if (b.size() == 2) out.push_back(b[0]);
        if (e.inputs.size() == 3) {
          const std::span<const int64_t> bias = in(2);
          int64_t n = b.size() == 2 ? b[0] : 1;
          if (bias.size() == 1 && bias[0] != n && bias[0] != 1)
            fail(KF_ERR_SHAPE_MISMATCH, "linear (value ", out_id, "): bias has ", bias[0],
                 " entries, expected ", n);
        }
        return out;
      }
      // matmul, torch semantics.
      Extents A(a), B(b);
      bool a1 = A.size() == 1, b1 = B.size() == 1;
      if (a1) A.insert(A.begin(), 1);
      if (b1) B.push_back(1);
      int64_t m = A[A.size() - 2], k = A.back(), k2 = B[B.size() - 2], n = B.back();
      if (k != k2)
        fail(KF_ERR_SHAPE_MISMATCH, "matmul (value ", out_id, "): inner sizes differ: ", k,
             " (value ", e.inputs[0], ") vs ", k2, " (value ", e.inputs[1], ")");
      const std::array<std::span<const int64_t>, 2> batches = {std::span(A.begin(), A.end() - 2),
                                                              std::span(B.begin(), B.end() - 2)};
      const std::array<int64_t, 2> ids = {e.inputs[0], e.inputs[1]};
      Extents out = broadcast_sizes(batches, ids, "matmul", out_id);
      if (!a1) out.push_back(m);
      if (!b1) out.push_back(n);
      return out;
    }
  }

  // Shape ops.
  const std::span<const int64_t> a = in(0);
  switch (e.op) {
    case Op::BROADCAST_IN_DIM: {
      size_t r = e.inputs.size() - 1;
      Extents out(r, 0);
      for (size_t i = 0; i < r; ++i) out[i] = shape_value(ctx, e.inputs[i + 1], who, i);
      for (size_t j = 0; j < a.size(); ++j) {
        size_t d = static_cast<size_t>(DimsAttrs(e).dims[j]);
        if (out[d] < 0) out[d] = a[j];
        if (a[j] != 1 && a[j] != out[d])
          fail(KF_ERR_SHAPE_MISMATCH, "broadcast_in_dim (value ", out_id, "): input dim ", j,
               " has size ", a[j], ", cannot broadcast to size ", out[d], " (output dim ", d, ")");
      }
      for (size_t i = 0; i < r; ++i)
        if (out[i] < 0)
          fail(KF_ERR_SHAPE_MISMATCH, "broadcast_in_dim: size ", i, " is -1 for a new dim");
      return out;
    }
    case Op::EXPAND: {
      size_t r = e.inputs.size() - 1;
      Extents out(r, 0);
      size_t lead = r - a.size();
      for (size_t i = 0; i < r; ++i) {
        int64_t s = shape_value(ctx, e.inputs[i + 1], who, i);
        if (i < lead) {
          if (s < 0) fail(KF_ERR_SHAPE_MISMATCH, "expand: size ", i, " is -1 for a new leading dim");
          out[i] = s;
          continue;
        }
        int64_t src = a[i - lead];
        if (s == -1) s = src;
        if (src != 1 && src != s)
          fail(KF_ERR_SHAPE_MISMATCH, "expand (value ", out_id, "): dim ", i, " has size ", src,
               " (value ", e.inputs[0], "), cannot expand to ", s);
        out[i] = s;
      }
      return out;
    }
    case Op::RESHAPE: {
      size_t r = e.inputs.size() - 1;
      Extents out(r, 0);
      int64_t known = 1, infer_at = -1;
      for (size_t i = 0; i < r; ++i) {
        out[i] = shape_value(ctx, e.inputs[i + 1], who, i);
        if (out[i] == -1) {
          if (infer_at >= 0) fail(KF_ERR_SHAPE_MISMATCH, "reshape: more than one size is -1");
          infer_at = static_cast<int64_t>(i);
        } else {
          known = checked_mul(known, out[i], who, out_id);
        }
      }
      int64_t total = numel(a);
      if (infer_at >= 0) {
        if (known == 0 || total % known != 0)
          fail(KF_ERR_SHAPE_MISMATCH, "reshape (value ", out_id, "): cannot infer size ",
               infer_at, ": ", total, " elements (value ", e.inputs[0],
               ") do not divide into blocks of ", known);
        out[static_cast<size_t>(infer_at)] = total / known;
      } else if (known != total) {
        fail(KF_ERR_SHAPE_MISMATCH, "reshape (value ", out_id, "): input has ", total,
             " elements (value ", e.inputs[0], "), target shape has ", known);
      }
      return out;
    }
    case Op::PERMUTE: {
      Extents out(a.size(), 0);
      for (size_t i = 0; i < a.size(); ++i) out[i] = a[static_cast<size_t>(PermuteAttrs(e).perm[i])];
      return out;
    }
    case Op::SQUEEZE: {
      Extents out;
      size_t k = 0;
      for (size_t d = 0; d < a.size(); ++d) {
        if (k < DimsAttrs(e).dims.size() && static_cast<size_t>(DimsAttrs(e).dims[k]) == d) {
          if (a[d] != 1)
            fail(KF_ERR_SHAPE_MISMATCH, "squeeze (value ", out_id, "): dim ", d, " has size ",
                 a[d], ", expected 1 (value ", e.inputs[0], ")");
          ++k;
          continue;
        }
        out.push_back(a[d]);
      }
      return out;
    }
    case Op::UNSQUEEZE: {
      Extents out(a);
      out.insert(out.begin() + DimAttr(e).dim, 1);
      return out;
    }
    case Op::SLICE: {
      Extents out(a);
      const SliceAttrs sl(e);
      size_t d = static_cast<size_t>(sl.dim);
      out[d] = slice_range(a[d], sl.start, sl.stop, sl.step).length;
      return out;
    }
    case Op::PAD: {
      Extents out(a);
      const PadAttrs pa(e);
      for (size_t d = 0; d < a.size(); ++d) {
        int64_t both;
        if (__builtin_add_overflow(pa.low(d), pa.high(d), &both))
          fail(KF_ERR_SHAPE_MISMATCH, who, " (value ", out_id, "): pads of dim ", d, " overflow int64 (", pa.low(d),
               " + ", pa.high(d), ")");
        out[d] = checked_extent_add(a[d], both, who, out_id, d);
      }
      return out;
    }
    case Op::CAT: {
      size_t dim = DimAttr(e).index();
      Extents out(a);
      out[dim] = 0;
      for (size_t i = 0; i < e.inputs.size(); ++i) {
        const std::span<const int64_t> s = in(i);
        for (size_t d = 0; d < s.size(); ++d)
          if (d != dim && s[d] != a[d])
            fail(KF_ERR_SHAPE_MISMATCH, "cat (value ", out_id, "): input ", i, " (value ",
                 e.inputs[i], ") has size ", s[d], " in dim ", d, ", expected ", a[d]);
        out[dim] = checked_extent_add(out[dim], s[dim], who, out_id, dim);
      }
      return out;
    }
    default: fail(KF_ERR_INTERNAL, "no size rule for ", who);
  }
}

namespace {

// The bind-time value of a shape scalar that `e` computes (is_shape_scalar
// in fusion.h): an extent, or shape arithmetic over known values.
void set_shape_scalar(const Fusion& fusion, const Expr& e, ValueSizes& sizes) {
  const int64_t out = e.outputs[0];
  if (e.op == Op::SIZE) {
    sizes.set_scalar(out, sizes[e.inputs[0]][static_cast<size_t>(e.attrs[0])]);
    return;
  }
  const Value& v = fusion.value(out);
  if (!is_shape_arithmetic(e.op) || !v.is_scalar || !is_integer(v.dtype)) return;
  const int64_t a = sizes.shape_scalar(e.inputs[0]);
  const int64_t b = sizes.shape_scalar(e.inputs[1]);
  int64_t r = 0;
  bool overflow = false;
  switch (e.op) {
    case Op::ADD: overflow = __builtin_add_overflow(a, b, &r); break;
    case Op::SUB: overflow = __builtin_sub_overflow(a, b, &r); break;
    case Op::MUL: overflow = __builtin_mul_overflow(a, b, &r); break;
    case Op::MAXIMUM: r = std::max(a, b); break;
    default: r = std::min(a, b); break;
  }
  if (overflow) fail(KF_ERR_SHAPE_MISMATCH, op_name(e.op), " (value ", out, "): ", a, " and ", b, " overflow int64");
  sizes.set_scalar(out, r);
}

// Every value's element count fits int64 with room for index arithmetic
// (2^62), whatever op made it (a broadcast of huge stride-0 inputs, a pad).
void check_element_count(const Expr& e, std::span<const int64_t> sizes) {
  if (element_count(sizes).bad_dim >= 0)
    fail(KF_ERR_SHAPE_MISMATCH, op_name(e.op), " (value ", e.outputs[0], "): element count overflows int64");
}

}  // namespace

void infer_sizes(const Fusion& fusion, std::span<const int64_t> exprs, ValueSizes& sizes) {
  for (int64_t ei : exprs) {
    const Expr& e = fusion.exprs[static_cast<size_t>(ei)];
    const Extents out = infer_expr_sizes(fusion, e, sizes);
    check_element_count(e, out);
    for (int64_t id : e.outputs) sizes.set(id, out);
    set_shape_scalar(fusion, e, sizes);
  }
}

void infer_sizes(const Fusion& fusion, ValueSizes& sizes) {
  for (const Expr& e : fusion.exprs) {
    const Extents out = infer_expr_sizes(fusion, e, sizes);
    check_element_count(e, out);
    for (int64_t id : e.outputs) sizes.set(id, out);
    set_shape_scalar(fusion, e, sizes);
  }
}

}  // namespace kf
