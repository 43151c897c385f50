// Typed views of an Expr's attributes: the one place that knows where each
// attribute sits in Expr::attrs (the define stage's rules write them in
// this layout, normalized: dims non-negative, default axes filled in; the
// text form's schema in core/text/text_printer.cpp names the same
// positions). Views borrow the expr's storage and allocate nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

// sum, prod, max, min, mean: [keepdim, axis...]; var, var_mean:
// [keepdim, correction, axis...].
struct ReduceAttrs {
  bool keepdim = false;
  int64_t correction = 0;  // var and var_mean only
  std::span<const int64_t> axes;
  explicit ReduceAttrs(const Expr& e) {
    const bool var = e.op == Op::VAR || e.op == Op::VAR_MEAN;
    keepdim = e.attrs[0] != 0;
    correction = var ? e.attrs[1] : 0;
    axes = std::span<const int64_t>(e.attrs).subspan(var ? 2 : 1);
  }
  // Per dim of the reduced input (of rank `rank`): whether it is reduced.
  std::vector<bool> reduced(size_t rank) const {
    std::vector<bool> r(rank, false);
    for (int64_t a : axes) r[static_cast<size_t>(a)] = true;
    return r;
  }
};

// permute: [perm...]: output dim i is input dim perm[i].
struct PermuteAttrs {
  std::span<const int64_t> perm;
  explicit PermuteAttrs(const Expr& e) : perm(e.attrs) {}
};

// broadcast_in_dim: [dim...]: input dim j becomes output dim dims[j].
// squeeze: [dim...]: the input dims removed (ascending).
struct DimsAttrs {
  std::span<const int64_t> dims;
  explicit DimsAttrs(const Expr& e) : dims(e.attrs) {}
};

// unsqueeze, cat, index_select, gather: [dim].
struct DimAttr {
  int64_t dim = 0;
  explicit DimAttr(const Expr& e) : dim(e.attrs[0]) {}
  size_t index() const { return static_cast<size_t>(dim); }
};

// slice: [dim, start, stop, step] (start and stop as written: Python
// clamping happens against the run-time extent; step > 0).
struct SliceAttrs {
  int64_t dim, start, stop, step;
  explicit SliceAttrs(const Expr& e) : dim(e.attrs[0]), start(e.attrs[1]), stop(e.attrs[2]), step(e.attrs[3]) {}
};

// pad: [low0, high0, low1, high1, ...] per dim.
struct PadAttrs {
  std::span<const int64_t> pads;
  explicit PadAttrs(const Expr& e) : pads(e.attrs) {}
  int64_t low(size_t d) const { return pads[2 * d]; }
  int64_t high(size_t d) const { return pads[2 * d + 1]; }
  bool pads_dim(size_t d) const { return low(d) != 0 || high(d) != 0; }
};

// scatter, index_reduce: [dim, reduce, include_self, deterministic]
// (reduce: kf_scatter_reduce; the C API's flags are stored as two bools).
enum class ScatterReduce : uint8_t { None, Sum, Prod, Mean, Amax, Amin };
struct ScatterAttrs {
  int64_t dim;
  ScatterReduce reduce;
  bool include_self, deterministic;
  explicit ScatterAttrs(const Expr& e)
      : dim(e.attrs[0]), reduce(static_cast<ScatterReduce>(e.attrs[1])), include_self(e.attrs[2] != 0),
        deterministic(e.attrs[3] != 0) {}
  size_t index() const { return static_cast<size_t>(dim); }
  // index_reduce: index is rank 1 and selects slices; scatter: index has
  // the input's rank and selects elements.
  static bool slices(const Expr& e) { return e.op == Op::INDEX_REDUCE; }
};
const char* scatter_reduce_name(ScatterReduce r);

// cumsum, cumprod, cummax: [dim, exclusive].
struct ScanAttrs {
  int64_t dim;
  bool exclusive;
  explicit ScanAttrs(const Expr& e) : dim(e.attrs[0]), exclusive(e.attrs[1] != 0) {}
  size_t index() const { return static_cast<size_t>(dim); }
};

// cast: [dtype].
struct CastAttrs {
  DType dtype;
  explicit CastAttrs(const Expr& e) : dtype(static_cast<DType>(e.attrs[0])) {}
};

}  // namespace kf
