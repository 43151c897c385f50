// cumsum, cumprod and cummax on the CPU: each line along `dim` combined in
// order, floats in float64 rounded once per element into the dtype,
// integers wrapping in int64 (cumsum/cumprod of ints and bool are int64, as
// torch); cummax propagates NaN. Exclusive scans start from the identity
// (0, 1, or the dtype's lowest value: -inf for floats).
#include <cmath>
#include <limits>

#include "core/ir/op_attrs.h"
#include "core/runtime/cpu/eval.h"

namespace kf::cpu {

namespace {

// cummax's identity for an integer or bool dtype: its lowest value.
int64_t lowest(DType t) {
  switch (t) {
    case DType::I64: return std::numeric_limits<int64_t>::min();
    case DType::I32: return std::numeric_limits<int32_t>::min();
    case DType::I8: return -128;
    default: return 0;  // uint8, bool
  }
}

}  // namespace

void eval_scan(const Fusion& fusion, const Expr& e, Env& env) {
  const TensorView& a = env.get(e.inputs[0]);
  const DType out_t = fusion.value(e.outputs[0]).dtype;
  const ScanAttrs attrs(e);
  const size_t dim = attrs.index();
  TensorView out = allocate(out_t, a.sizes);
  const bool floating = is_float(a.dtype);
  Sizes lines = a.sizes;
  const int64_t n = lines[dim];
  lines[dim] = 1;
  // An empty scan dim leaves nothing to write: its lines ([0, 2^63 - 1]
  // along dim 0 has 2^63 - 1 of them) are not visited.
  if (n == 0) lines.assign(lines.size(), 0);
  std::vector<int64_t> idx(a.sizes.size());
  for_each_index(lines, [&](const int64_t* line) {
    std::copy(line, line + idx.size(), idx.begin());
    double f = e.op == Op::CUMPROD ? 1.0 : e.op == Op::CUMMAX ? -std::numeric_limits<double>::infinity() : 0.0;
    uint64_t i = e.op == Op::CUMPROD ? 1 : 0;
    int64_t imax = lowest(out_t);
    for (int64_t k = 0; k < n; ++k) {
      idx[dim] = k;
      const std::byte* src = a.at(idx.data());
      std::byte* dst = out.at(idx.data());
      const auto store = [&] {
        if (floating) store_f64(out_t, dst, f);
        else if (e.op == Op::CUMMAX) store_i64(out_t, dst, imax);
        else store_i64(out_t, dst, static_cast<int64_t>(i));
      };
      if (attrs.exclusive) store();
      if (floating) {
        const double x = load_f64(a.dtype, src);
        if (e.op == Op::CUMSUM) f += x;
        else if (e.op == Op::CUMPROD) f *= x;
        else if (!std::isnan(f) && (std::isnan(x) || x > f)) f = x;
      } else {
        const int64_t x = load_i64(a.dtype, src);
        if (e.op == Op::CUMSUM) i += static_cast<uint64_t>(x);
        else if (e.op == Op::CUMPROD) i *= static_cast<uint64_t>(x);
        else imax = std::max(imax, x);
      }
      if (!attrs.exclusive) store();
    }
  });
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
