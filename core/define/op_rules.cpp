#include "core/define/op_rules.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/ir/op_attrs.h"
#include "core/ir/type_promotion.h"
#include "core/util/error.h"

namespace kf {

namespace {

std::string describe(const Value& v) {
  std::string s = v.is_scalar ? "scalar " : "tensor ";
  s += std::string(dtype_name(v.dtype));
  if (!v.is_scalar) s += " of rank " + std::to_string(v.rank);
  return s;
}

const Value& arg_value(const Fusion& f, Op op, const std::vector<int64_t>& args, size_t i) {
  int64_t id = args[i];
  if (id < 0 || id >= static_cast<int64_t>(f.values.size()))
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": argument ", i, " is value id ", id,
         ", expected an id in [0, ", f.values.size(), ")");
  return f.values[static_cast<size_t>(id)];
}

const Value& tensor_arg(const Fusion& f, Op op, const std::vector<int64_t>& args, size_t i) {
  const Value& v = arg_value(f, op, args, i);
  if (v.is_scalar)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": argument ", i, " (value ", v.id,
         "): expected a tensor, got a ", describe(v));
  return v;
}

void int_scalar_arg(const Fusion& f, Op op, const std::vector<int64_t>& args, size_t i,
                    const char* what) {
  const Value& v = arg_value(f, op, args, i);
  if (!is_shape_scalar(f, v.id))
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": argument ", i, " (", what, ", value ", v.id,
         "): expected an integer constant, scalar input or extent (size), or add, sub, mul, maximum, "
         "minimum of those; got a ", describe(v), v.kind == ValueKind::Computed ? " computed by an op" : "");
}

void scalar_arg(const Fusion& f, Op op, const std::vector<int64_t>& args, size_t i,
                const char* what) {
  const Value& v = arg_value(f, op, args, i);
  if (!v.is_scalar)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": argument ", i, " (", what, ", value ", v.id,
         "): expected a scalar, got a ", describe(v));
}

int64_t normalize_dim(Op op, int64_t dim, int rank, const char* what) {
  int64_t d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": ", what, " ", dim, " is out of range for rank ",
         rank, " (expected [", -rank, ", ", rank - 1, "])");
  return d;
}

void expect_attrs(Op op, const std::vector<int64_t>& attrs, size_t n, const char* layout) {
  if (attrs.size() != n)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected ", n, " attributes (", layout,
         "), got ", attrs.size());
}

void expect_args(Op op, const std::vector<int64_t>& args, size_t n) {
  if (args.size() != n)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected ", n, " arguments, got ", args.size());
}

// Checks the dtype category a type rule allows. `t` is the result or input
// dtype the rule looks at.
void check_rule(Op op, TypeRule rule, DType t) {
  auto bad = [&](const char* expected) {
    fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": expected ", expected, " operands, got ",
         dtype_name(t));
  };
  switch (rule) {
    case TypeRule::SameNumeric:
    case TypeRule::PromoteNumeric:
      if (is_bool(t)) bad("numeric (not bool)");
      break;
    case TypeRule::IntegralOnly:
    case TypeRule::PromoteIntegral:
      if (is_float(t)) bad("integer or bool");
      break;
    case TypeRule::PromoteIntOnly:
      if (!is_integer(t)) bad("integer");
      break;
    case TypeRule::PromoteFloatOnly:
    case TypeRule::FloatOnly:
      if (!is_float(t)) bad("floating-point");
      break;
    default: break;
  }
}

DType float_of(DType t) { return is_float(t) ? t : DType::F32; }

std::vector<OutputType> pointwise(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                  std::vector<int64_t>& attrs) {
  const OpInfo& info = op_info(op);
  expect_args(op, args, static_cast<size_t>(info.num_inputs));
  int rank = 0;
  bool all_scalar = true;
  for (size_t i = 0; i < args.size(); ++i) {
    const Value& v = arg_value(f, op, args, i);
    if (!v.is_scalar) {
      all_scalar = false;
      rank = std::max(rank, v.rank);
    }
  }
  DType out;
  switch (info.type_rule) {
    case TypeRule::Same:
    case TypeRule::SameNumeric:
    case TypeRule::IntegralOnly:
      out = arg_value(f, op, args, 0).dtype;
      check_rule(op, info.type_rule, out);
      break;
    case TypeRule::ToFloat: out = float_of(arg_value(f, op, args, 0).dtype); break;
    case TypeRule::ToBool: out = DType::Bool; break;
    case TypeRule::Promote:
    case TypeRule::PromoteNumeric:
    case TypeRule::PromoteIntegral:
    case TypeRule::PromoteIntOnly:
    case TypeRule::PromoteFloatOnly:
      out = result_type(f, args);
      check_rule(op, info.type_rule, out);
      break;
    case TypeRule::PromoteToFloat: out = float_of(result_type(f, args)); break;
    case TypeRule::Compare: out = DType::Bool; break;
    case TypeRule::Where: {
      const Value& c = arg_value(f, op, args, 0);
      if (!is_bool(c.dtype))
        fail(KF_ERR_DTYPE_MISMATCH, "where: argument 0 (condition, value ", c.id,
             "): expected bool, got ", dtype_name(c.dtype));
      out = result_type(f, std::span<const int64_t>(args).subspan(1));
      break;
    }
    case TypeRule::Attr: {
      expect_attrs(op, attrs, 1, "dtype");
      if (!is_valid_dtype(static_cast<int>(attrs[0])))
        fail(KF_ERR_INVALID_ARGUMENT, "cast: attribute dtype ", attrs[0],
             " is not a kf_dtype (expected 0..", kNumDTypes - 1, ")");
      out = static_cast<DType>(attrs[0]);
      break;
    }
    default: fail(KF_ERR_INTERNAL, op_name(op), ": unexpected type rule");
  }
  if (info.type_rule != TypeRule::Attr) expect_attrs(op, attrs, 0, "none");
  return {{out, rank, all_scalar}};
}

std::vector<OutputType> reduction(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                  std::vector<int64_t>& attrs) {
  expect_args(op, args, 1);
  const Value& a = tensor_arg(f, op, args, 0);
  const bool is_var = op == Op::VAR || op == Op::VAR_MEAN;
  const size_t fixed = is_var ? 2 : 1;
  if (attrs.size() < fixed)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected attributes ",
         is_var ? "[keepdim, correction, axis...]" : "[keepdim, axis...]", ", got ",
         attrs.size(), " attributes");
  if (attrs[0] != 0 && attrs[0] != 1)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": keepdim must be 0 or 1, got ", attrs[0]);
  if (is_var && attrs[1] < 0)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": correction must be >= 0, got ", attrs[1]);
  std::set<int64_t> axes;
  for (size_t i = fixed; i < attrs.size(); ++i) {
    int64_t d = normalize_dim(op, attrs[i], a.rank, "axis");
    if (!axes.insert(d).second)
      fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": axis ", attrs[i], " is listed twice");
  }
  if (axes.empty())
    for (int d = 0; d < a.rank; ++d) axes.insert(d);
  attrs.resize(fixed);
  attrs.insert(attrs.end(), axes.begin(), axes.end());
  const OpInfo& info = op_info(op);
  DType out = a.dtype;
  if (info.type_rule == TypeRule::ReduceSum && !is_float(a.dtype)) out = DType::I64;
  if (op == Op::ARGMAX || op == Op::ARGMIN) {
    if (axes.size() != 1 || a.rank == 0)
      fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected exactly one axis of a tensor of rank >= 1, got ",
           axes.size(), " axes of a rank-", a.rank, " value");
    out = DType::I64;
  }
  check_rule(op, info.type_rule, a.dtype);
  int rank = attrs[0] ? a.rank : a.rank - static_cast<int>(axes.size());
  std::vector<OutputType> outs(static_cast<size_t>(info.num_outputs), {out, rank, false});
  return outs;
}

void check_shape_args(const Fusion& f, Op op, const std::vector<int64_t>& args, size_t begin,
                      size_t end) {
  for (size_t i = begin; i < end; ++i) int_scalar_arg(f, op, args, i, "shape");
}

std::vector<OutputType> shape_op(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                 std::vector<int64_t>& attrs) {
  if (args.empty()) fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected arguments, got none");
  if (op == Op::CAT) {
    if (attrs.size() != 1) expect_attrs(op, attrs, 1, "dim");
    const Value& first = tensor_arg(f, op, args, 0);
    for (size_t i = 1; i < args.size(); ++i) {
      const Value& v = tensor_arg(f, op, args, i);
      if (v.rank != first.rank)
        fail(KF_ERR_SHAPE_MISMATCH, "cat: argument ", i, " (value ", v.id, "): expected rank ",
             first.rank, ", got rank ", v.rank);
    }
    if (first.rank == 0) fail(KF_ERR_SHAPE_MISMATCH, "cat: expected tensors of rank >= 1");
    attrs[0] = normalize_dim(op, attrs[0], first.rank, "dim");
    return {{result_type(f, args), first.rank, false}};
  }
  const Value& a = tensor_arg(f, op, args, 0);
  switch (op) {
    case Op::BROADCAST_IN_DIM: {
      size_t out_rank = args.size() - 1;
      check_shape_args(f, op, args, 1, args.size());
      if (attrs.size() != static_cast<size_t>(a.rank))
        fail(KF_ERR_INVALID_ARGUMENT, "broadcast_in_dim: expected ", a.rank,
             " broadcast dims (one per input dim), got ", attrs.size());
      int64_t prev = -1;
      for (int64_t d : attrs) {
        if (d <= prev || d >= static_cast<int64_t>(out_rank))
          fail(KF_ERR_INVALID_ARGUMENT,
               "broadcast_in_dim: broadcast dims must increase and be < output rank ", out_rank,
               ", got ", d);
        prev = d;
      }
      return {{a.dtype, static_cast<int>(out_rank), false}};
    }
    case Op::EXPAND: {
      size_t out_rank = args.size() - 1;
      check_shape_args(f, op, args, 1, args.size());
      if (out_rank < static_cast<size_t>(a.rank))
        fail(KF_ERR_SHAPE_MISMATCH, "expand: expected at least ", a.rank, " sizes, got ",
             out_rank);
      expect_attrs(op, attrs, 0, "none");
      return {{a.dtype, static_cast<int>(out_rank), false}};
    }
    case Op::RESHAPE: {
      check_shape_args(f, op, args, 1, args.size());
      expect_attrs(op, attrs, 0, "none");
      int inferred = 0;
      for (size_t i = 1; i < args.size(); ++i) {
        const Value& s = f.value(args[i]);
        if (s.kind == ValueKind::Constant) {
          if (s.i64 == -1) ++inferred;
          else if (s.i64 < 0)
            fail(KF_ERR_INVALID_ARGUMENT, "reshape: size ", i - 1, " is ", s.i64,
                 ", expected >= 0 or -1");
        }
      }
      if (inferred > 1)
        fail(KF_ERR_INVALID_ARGUMENT, "reshape: only one size may be -1, got ", inferred);
      return {{a.dtype, static_cast<int>(args.size() - 1), false}};
    }
    case Op::PERMUTE: {
      expect_args(op, args, 1);
      if (attrs.size() != static_cast<size_t>(a.rank))
        fail(KF_ERR_INVALID_ARGUMENT, "permute: expected a permutation of ", a.rank,
             " dims, got ", attrs.size());
      std::vector<bool> seen(static_cast<size_t>(a.rank), false);
      for (auto& d : attrs) {
        d = normalize_dim(op, d, a.rank, "dim");
        if (seen[static_cast<size_t>(d)])
          fail(KF_ERR_INVALID_ARGUMENT, "permute: dim ", d, " appears twice");
        seen[static_cast<size_t>(d)] = true;
      }
      return {{a.dtype, a.rank, false}};
    }
    case Op::SQUEEZE: {
      expect_args(op, args, 1);
      if (attrs.empty()) fail(KF_ERR_INVALID_ARGUMENT, "squeeze: expected at least one dim");
      std::set<int64_t> dims;
      for (auto d : attrs)
        if (!dims.insert(normalize_dim(op, d, a.rank, "dim")).second)
          fail(KF_ERR_INVALID_ARGUMENT, "squeeze: dim ", d, " is listed twice");
      attrs.assign(dims.begin(), dims.end());
      return {{a.dtype, a.rank - static_cast<int>(dims.size()), false}};
    }
    case Op::UNSQUEEZE: {
      expect_args(op, args, 1);
      expect_attrs(op, attrs, 1, "dim");
      attrs[0] = normalize_dim(op, attrs[0], a.rank + 1, "dim");
      return {{a.dtype, a.rank + 1, false}};
    }
    case Op::SLICE: {
      expect_args(op, args, 1);
      expect_attrs(op, attrs, 4, "dim, start, stop, step");
      attrs[0] = normalize_dim(op, attrs[0], a.rank, "dim");
      if (attrs[3] <= 0)
        fail(KF_ERR_INVALID_ARGUMENT, "slice: step must be > 0, got ", attrs[3]);
      return {{a.dtype, a.rank, false}};
    }
    case Op::PAD: {
      expect_args(op, args, 2);
      scalar_arg(f, op, args, 1, "value");
      if (attrs.size() != 2 * static_cast<size_t>(a.rank))
        fail(KF_ERR_INVALID_ARGUMENT, "pad: expected ", 2 * a.rank,
             " pads (low, high per dim), got ", attrs.size());
      for (auto p : attrs)
        if (p < 0) fail(KF_ERR_UNSUPPORTED, "pad: negative pad ", p, " (cropping) is not supported; use slice");
      return {{a.dtype, a.rank, false}};
    }
    default: fail(KF_ERR_INTERNAL, "shape op ", op_name(op), " has no rule");
  }
}

std::vector<OutputType> indexing(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                 std::vector<int64_t>& attrs) {
  expect_args(op, args, 2);
  expect_attrs(op, attrs, 1, "dim");
  const Value& a = tensor_arg(f, op, args, 0);
  const Value& index = tensor_arg(f, op, args, 1);
  if (!is_integer(index.dtype))
    fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": argument 1 (index, value ", index.id,
         "): expected int64 or int32, got ", dtype_name(index.dtype));
  if (a.rank == 0) fail(KF_ERR_SHAPE_MISMATCH, op_name(op), ": expected a tensor of rank >= 1");
  attrs[0] = normalize_dim(op, attrs[0], a.rank, "dim");
  if (op == Op::INDEX_SELECT) {
    if (index.rank != 1)
      fail(KF_ERR_SHAPE_MISMATCH, "index_select: argument 1 (index): expected rank 1, got rank ",
           index.rank);
    return {{a.dtype, a.rank, false}};
  }
  if (index.rank != a.rank)
    fail(KF_ERR_SHAPE_MISMATCH, "gather: argument 1 (index): expected rank ", a.rank,
         " (same as the input), got rank ", index.rank);
  return {{a.dtype, a.rank, false}};
}

// scatter(x, index, src), index_reduce(x, index, src): attrs [dim, reduce,
// include_self, deterministic]; the result is x's type.
std::vector<OutputType> scatter(const Fusion& f, Op op, const std::vector<int64_t>& args, std::vector<int64_t>& attrs) {
  expect_args(op, args, 3);
  expect_attrs(op, attrs, 4, "dim, reduce, include_self, deterministic");
  const Value& a = tensor_arg(f, op, args, 0);
  const Value& index = tensor_arg(f, op, args, 1);
  const Value& src = tensor_arg(f, op, args, 2);
  if (!is_integer(index.dtype))
    fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": argument 1 (index, value ", index.id,
         "): expected int64 or int32, got ", dtype_name(index.dtype));
  if (src.dtype != a.dtype)
    fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": argument 2 (src, value ", src.id, "): expected ", dtype_name(a.dtype),
         " (the input's dtype), got ", dtype_name(src.dtype));
  if (a.rank == 0) fail(KF_ERR_SHAPE_MISMATCH, op_name(op), ": argument 0 (value ", a.id, "): expected a tensor of rank >= 1");
  attrs[0] = normalize_dim(op, attrs[0], a.rank, "dim");
  if (attrs[1] < 0 || attrs[1] > static_cast<int64_t>(ScatterReduce::Amin))
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": attribute reduce ", attrs[1], " is not a kf_scatter_reduce");
  attrs[2] = attrs[2] != 0;
  attrs[3] = attrs[3] != 0;
  const auto reduce = static_cast<ScatterReduce>(attrs[1]);
  if (is_bool(a.dtype) && (reduce == ScatterReduce::Sum || reduce == ScatterReduce::Prod || reduce == ScatterReduce::Mean))
    fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": reduce ", scatter_reduce_name(reduce),
         " on bool (value ", a.id, "); use amax (any) or amin (all)");
  const int index_rank = op == Op::INDEX_REDUCE ? 1 : a.rank;
  if (index.rank != index_rank)
    fail(KF_ERR_SHAPE_MISMATCH, op_name(op), ": argument 1 (index, value ", index.id, "): expected rank ", index_rank,
         op == Op::INDEX_REDUCE ? "" : " (the input's)", ", got rank ", index.rank);
  if (src.rank != a.rank)
    fail(KF_ERR_SHAPE_MISMATCH, op_name(op), ": argument 2 (src, value ", src.id, "): expected rank ", a.rank,
         " (the input's), got rank ", src.rank);
  return {{a.dtype, a.rank, false}};
}

DType creation_dtype(Op op, const std::vector<int64_t>& attrs) {
  expect_attrs(op, attrs, 1, "dtype");
  if (!is_valid_dtype(static_cast<int>(attrs[0])))
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": attribute dtype ", attrs[0],
         " is not a kf_dtype");
  return static_cast<DType>(attrs[0]);
}

std::vector<OutputType> creation(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                 std::vector<int64_t>& attrs) {
  DType t = creation_dtype(op, attrs);
  switch (op) {
    case Op::FULL: {
      if (args.empty()) fail(KF_ERR_INVALID_ARGUMENT, "full: expected [shape..., fill]");
      check_shape_args(f, op, args, 0, args.size() - 1);
      scalar_arg(f, op, args, args.size() - 1, "fill");
      return {{t, static_cast<int>(args.size() - 1), false}};
    }
    case Op::IOTA: {
      expect_args(op, args, 3);
      int_scalar_arg(f, op, args, 0, "length");
      scalar_arg(f, op, args, 1, "start");
      scalar_arg(f, op, args, 2, "step");
      if (is_bool(t)) fail(KF_ERR_DTYPE_MISMATCH, "iota: expected a numeric dtype, got bool");
      return {{t, 1, false}};
    }
    default: {  // uniform, normal
      if (args.size() < 4)
        fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": expected [shape..., a, b, seed, offset]");
      size_t n = args.size() - 4;
      check_shape_args(f, op, args, 0, n);
      scalar_arg(f, op, args, n, op == Op::UNIFORM ? "low" : "mean");
      scalar_arg(f, op, args, n + 1, op == Op::UNIFORM ? "high" : "std");
      // Seed and offset: integer scalars, or rank-0 integer tensors, which
      // the kernel reads from memory when it runs (so a captured CUDA
      // graph draws anew after the fusion advances its offset in place).
      for (size_t i = n + 2; i < n + 4; ++i) {
        const Value& v = arg_value(f, op, args, i);
        if (v.rank != 0 || !is_integer(v.dtype))
          fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": argument ", i,
               i == n + 2 ? " (seed" : " (offset", ", value ", v.id,
               "): expected an integer scalar or a rank-0 integer tensor, got a ", describe(v));
      }
      if (!is_float(t))
        fail(KF_ERR_DTYPE_MISMATCH, op_name(op), ": expected a floating dtype, got ",
             dtype_name(t));
      return {{t, static_cast<int>(n), false}};
    }
  }
}

std::vector<OutputType> library(const Fusion& f, Op op, const std::vector<int64_t>& args,
                                std::vector<int64_t>& attrs) {
  expect_attrs(op, attrs, 0, "none");
  if (op == Op::MATMUL) {
    expect_args(op, args, 2);
    const Value& a = tensor_arg(f, op, args, 0);
    const Value& b = tensor_arg(f, op, args, 1);
    if (a.rank == 0 || b.rank == 0)
      fail(KF_ERR_SHAPE_MISMATCH, "matmul: expected operands of rank >= 1, got ranks ", a.rank,
           " and ", b.rank);
    DType t = result_type(f, args);
    check_rule(op, TypeRule::PromoteFloatOnly, t);
    int rank;
    if (a.rank == 1 && b.rank == 1) rank = 0;
    else if (a.rank == 1) rank = b.rank - 1;
    else if (b.rank == 1) rank = a.rank - 1;
    else rank = std::max(a.rank, b.rank);
    return {{t, rank, false}};
  }
  if (args.size() != 2 && args.size() != 3)
    fail(KF_ERR_INVALID_ARGUMENT, "linear: expected arguments [x, w] or [x, w, bias], got ",
         args.size());
  const Value& x = tensor_arg(f, op, args, 0);
  const Value& w = tensor_arg(f, op, args, 1);
  if (x.rank < 1) fail(KF_ERR_SHAPE_MISMATCH, "linear: argument 0 (x): expected rank >= 1");
  if (w.rank != 1 && w.rank != 2)
    fail(KF_ERR_SHAPE_MISMATCH, "linear: argument 1 (w): expected rank 1 or 2, got rank ",
         w.rank);
  if (args.size() == 3) {
    const Value& bias = tensor_arg(f, op, args, 2);
    if (bias.rank > 1)
      fail(KF_ERR_SHAPE_MISMATCH, "linear: argument 2 (bias): expected rank 0 or 1, got rank ",
           bias.rank);
  }
  DType t = result_type(f, args);
  check_rule(op, TypeRule::PromoteFloatOnly, t);
  return {{t, w.rank == 2 ? x.rank : x.rank - 1, false}};
}

}  // namespace

namespace {

std::vector<OutputType> infer_by_category(const Fusion& fusion, Op op,
                                          const std::vector<int64_t>& args,
                                          std::vector<int64_t>& attrs, bool communication) {
  switch (op_info(op).category) {
    case OpCategory::Unary:
    case OpCategory::Binary:
    case OpCategory::Ternary:
    case OpCategory::Cast: return pointwise(fusion, op, args, attrs);
    case OpCategory::Reduction: return reduction(fusion, op, args, attrs);
    case OpCategory::Shape: return shape_op(fusion, op, args, attrs);
    case OpCategory::Indexing: return indexing(fusion, op, args, attrs);
    case OpCategory::Creation: return creation(fusion, op, args, attrs);
    case OpCategory::Library: return library(fusion, op, args, attrs);
    case OpCategory::Hint: {
      expect_args(op, args, 1);
      expect_attrs(op, attrs, 0, "none");
      const Value& a = tensor_arg(fusion, op, args, 0);
      return {{a.dtype, a.rank, false}};
    }
    case OpCategory::Communication: {
      if (!communication)
        fail(KF_ERR_UNSUPPORTED, op_name(op),
             ": communication is inserted by kfuse where a sharded value changes sharding; declare a mesh "
             "and shard inputs and outputs instead (docs/multidevice.md)");
      expect_args(op, args, 1);
      const Value& a = tensor_arg(fusion, op, args, 0);
      return {{a.dtype, a.rank, false}};
    }
    case OpCategory::Scatter: return scatter(fusion, op, args, attrs);
    case OpCategory::Scan: {
      expect_args(op, args, 1);
      expect_attrs(op, attrs, 2, "dim, exclusive");
      const Value& a = tensor_arg(fusion, op, args, 0);
      if (a.rank == 0) fail(KF_ERR_SHAPE_MISMATCH, op_name(op), ": argument 0 (value ", a.id, "): expected a tensor of rank >= 1");
      attrs[0] = normalize_dim(op, attrs[0], a.rank, "dim");
      attrs[1] = attrs[1] != 0;
      const DType t = op == Op::CUMMAX ? a.dtype : (is_float(a.dtype) ? a.dtype : DType::I64);
      return {{t, a.rank, false}};
    }
    case OpCategory::Query: {  // size
      expect_args(op, args, 1);
      expect_attrs(op, attrs, 1, "dim");
      const Value& a = tensor_arg(fusion, op, args, 0);
      if (a.rank == 0) fail(KF_ERR_SHAPE_MISMATCH, "size: argument 0 (value ", a.id, "): expected a tensor of rank >= 1");
      attrs[0] = normalize_dim(op, attrs[0], a.rank, "dim");
      return {{DType::I64, 0, true}};
    }
  }
  fail(KF_ERR_INTERNAL, "op ", op_name(op), " has no category");
}

}  // namespace

std::vector<OutputType> infer_op(const Fusion& fusion, Op op, const std::vector<int64_t>& args,
                                 std::vector<int64_t>& attrs, bool communication) {
  for (size_t i = 0; i < args.size(); ++i) arg_value(fusion, op, args, i);
  std::vector<OutputType> outs = infer_by_category(fusion, op, args, attrs, communication);
  for (const OutputType& t : outs)
    if (t.rank > kMaxRank)
      fail(KF_ERR_UNSUPPORTED, op_name(op), ": the result would have rank ", t.rank,
           "; kfuse supports ranks up to ", kMaxRank);
  return outs;
}

}  // namespace kf
