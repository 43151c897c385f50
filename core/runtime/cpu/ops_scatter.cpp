// scatter and index_reduce on the CPU: the reference every other backend is
// compared with (docs/semantics.md#scatter). The result starts as a copy
// of the input; the updates are visited in row-major order of the update
// domain (the index's shape for scatter; the input's shape with the
// index's length along dim for index_reduce), so with duplicate indices
// plain scatter keeps the last update and the reductions combine in that
// order: floats in float64, rounded once into the dtype (what the GPU's
// deterministic mode computes), integers wrapping as torch.
#include <cmath>
#include <vector>

#include "core/ir/op_attrs.h"
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

struct Update {
  std::vector<int64_t> target, source;  // multi-indices of the result and of src
};

// Calls fn(update) for each update in order; every index is checked
// first, so a bad one is reported before anything is computed.
template <typename Fn>
void for_each_update(const Expr& e, const TensorView& a, const TensorView& index, const TensorView& src, Fn&& fn) {
  const ScatterAttrs attrs(e);
  const size_t dim = attrs.index();
  const bool slices = ScatterAttrs::slices(e);
  Sizes domain = slices ? a.sizes : index.sizes;
  if (slices) domain[dim] = index.sizes[0];
  const int64_t extent = a.sizes[dim];
  for (int pass = 0; pass < 2; ++pass) {
    Update u{std::vector<int64_t>(a.sizes.size()), std::vector<int64_t>(a.sizes.size())};
    for_each_index(domain, [&](const int64_t* idx) {
      const int64_t at_dim = idx[dim];
      const int64_t i = load_i64(index.dtype, slices ? index.at(&at_dim) : index.at(idx));
      if (pass == 0) {
        if (i < 0 || i >= extent)
          fail(KF_ERR_INVALID_ARGUMENT, op_name(e.op), " (value ", e.outputs[0], "): index ", i, " (value ",
               e.inputs[1], ") is out of range [0, ", extent, ") for dim ", dim, " of value ", e.inputs[0]);
        return;
      }
      for (size_t d = 0; d < u.target.size(); ++d) {
        u.target[d] = idx[d];
        u.source[d] = src.sizes[d] == 1 ? 0 : idx[d];  // index_reduce broadcasts src's size-1 dims
      }
      u.target[dim] = i;
      fn(u);
    });
  }
}

// One result element being combined: float64 for floats, int64 (wrapping)
// otherwise; `count` updates so far (the input's value counts as one).
struct Acc {
  double f = 0;
  int64_t i = 0;
  int64_t count = 0;
};

int64_t linear(const Sizes& sizes, const std::vector<int64_t>& idx) {
  int64_t l = 0;
  for (size_t d = 0; d < sizes.size(); ++d) l = l * sizes[d] + idx[d];
  return l;
}

void combine(ScatterReduce r, bool floating, Acc& acc, double xf, int64_t xi) {
  if (acc.count++ == 0 || r == ScatterReduce::None) {
    acc.f = xf;
    acc.i = xi;
    return;
  }
  if (floating) {
    switch (r) {
      case ScatterReduce::Sum:
      case ScatterReduce::Mean: acc.f += xf; break;
      case ScatterReduce::Prod: acc.f *= xf; break;
      case ScatterReduce::Amax:
        if (!std::isnan(acc.f) && (std::isnan(xf) || xf > acc.f)) acc.f = xf;
        break;
      case ScatterReduce::Amin:
        if (!std::isnan(acc.f) && (std::isnan(xf) || xf < acc.f)) acc.f = xf;
        break;
      case ScatterReduce::None: break;
    }
    return;
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  switch (r) {
    case ScatterReduce::Sum:
    case ScatterReduce::Mean: acc.i = static_cast<int64_t>(u(acc.i) + u(xi)); break;
    case ScatterReduce::Prod: acc.i = static_cast<int64_t>(u(acc.i) * u(xi)); break;
    case ScatterReduce::Amax: acc.i = std::max(acc.i, xi); break;
    case ScatterReduce::Amin: acc.i = std::min(acc.i, xi); break;
    case ScatterReduce::None: break;
  }
}

// Integer mean as torch: floor division.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

void eval_scatter(const Fusion& fusion, const Expr& e, Env& env) {
  const TensorView& a = env.get(e.inputs[0]);
  const TensorView& index = env.get(e.inputs[1]);
  const TensorView& src = env.get(e.inputs[2]);
  const Sizes sizes = output_sizes(fusion, e, env);
  const ScatterAttrs attrs(e);
  const bool floating = is_float(a.dtype);
  TensorView out = allocate(a.dtype, sizes);
  copy_into(a, out);
  std::vector<Acc> acc(static_cast<size_t>(out.numel()));
  std::vector<bool> touched(acc.size(), false);
  for_each_update(e, a, index, src, [&](const Update& u) {
    const size_t t = static_cast<size_t>(linear(sizes, u.target));
    Acc& slot = acc[t];
    if (!touched[t]) {
      touched[t] = true;
      if (attrs.include_self && attrs.reduce != ScatterReduce::None) {
        const std::byte* self = out.at(u.target.data());
        combine(attrs.reduce, floating, slot, floating ? load_f64(a.dtype, self) : 0,
                floating ? 0 : load_i64(a.dtype, self));
      }
    }
    const std::byte* s = src.at(u.source.data());
    combine(attrs.reduce, floating, slot, floating ? load_f64(a.dtype, s) : 0, floating ? 0 : load_i64(a.dtype, s));
  });
  for_each_index(sizes, [&](const int64_t* idx) {
    const size_t t = static_cast<size_t>(linear(sizes, std::vector<int64_t>(idx, idx + sizes.size())));
    if (!touched[t]) return;
    Acc& slot = acc[t];
    std::byte* p = out.at(idx);
    if (floating) store_f64(a.dtype, p, attrs.reduce == ScatterReduce::Mean ? slot.f / static_cast<double>(slot.count) : slot.f);
    else store_i64(a.dtype, p, attrs.reduce == ScatterReduce::Mean ? floor_div(slot.i, slot.count) : slot.i);
  });
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
