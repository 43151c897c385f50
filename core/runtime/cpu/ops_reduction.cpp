// Reductions on the CPU: sum prod max min mean var var_mean over the
// normalized axes (attrs [keepdim, axes...] or [keepdim, correction,
// axes...]). Floats accumulate in double in row-major order of the reduced
// elements, ints in int64 (wrapping); one rounding to the output dtype.
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <vector>

#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"
#include "core/ir/op_attrs.h"

namespace kf::cpu {

namespace {

// The input split into kept dims (one output element each) and reduced
// dims. Elements are addressed by their offset from the input's first
// (TensorView::element), so a deferred input is read like a stored one and
// no pointer into an empty input is ever formed.
struct Split {
  TensorView in;
  Sizes kept_sizes, reduced_sizes;
  std::vector<int64_t> kept_strides, reduced_strides;
};

Split split_axes(const TensorView& a, const ReduceAttrs& attrs) {
  const std::vector<bool> reduced = attrs.reduced(a.sizes.size());
  Split s;
  s.in = a;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (reduced[d]) {
      s.reduced_sizes.push_back(a.sizes[d]);
      s.reduced_strides.push_back(a.strides[d]);
    } else {
      s.kept_sizes.push_back(a.sizes[d]);
      s.kept_strides.push_back(a.strides[d]);
    }
  }
  return s;
}

// Calls fn(element bytes) for each reduced element under the kept position
// at offset `base`.
template <typename Fn>
void for_each_reduced(const Split& s, int64_t base, Fn&& fn) {
  ElementBuffer buf;
  for_each_index(s.reduced_sizes, [&](const int64_t* idx) {
    int64_t off = base;
    for (size_t d = 0; d < s.reduced_sizes.size(); ++d) off += idx[d] * s.reduced_strides[d];
    fn(s.in.element(off, buf));
  });
}

// A float reduction's NaN result is the default quiet NaN: which operand's
// NaN an addition passes on is the compiler's choice (it may swap them), so
// two walks of the same elements in the same order (below and kept_inner's)
// could give NaNs of different signs, and kf_execute and kf_execute_into
// (which may take either) bits that differ (fuzz_execute, session 38).
double canonical(double r) { return std::isnan(r) ? std::numeric_limits<double>::quiet_NaN() : r; }

double reduce_float(Op op, const Split& s, int64_t base) {
  const DType t = s.in.dtype;
  double acc = op == Op::PROD ? 1.0 : 0.0;
  bool first = true;
  for_each_reduced(s, base, [&](const std::byte* p) {
    const double x = load_f64(t, p);
    switch (op) {
      case Op::SUM: acc += x; break;
      case Op::PROD: acc *= x; break;
      default:  // max, min: the first NaN is final
        if (!std::isnan(acc) && (first || std::isnan(x) || (op == Op::MAX ? x > acc : x < acc)))
          acc = x;
        break;
    }
    first = false;
  });
  return canonical(acc);
}

int64_t reduce_int(Op op, const Split& s, int64_t base) {
  const DType t = s.in.dtype;
  uint64_t acc = op == Op::PROD ? 1 : 0;  // wraps like torch's int64 sum
  int64_t best = 0;
  bool first = true;
  for_each_reduced(s, base, [&](const std::byte* p) {
    const int64_t x = load_i64(t, p);
    if (op == Op::SUM) acc += static_cast<uint64_t>(x);
    else if (op == Op::PROD) acc *= static_cast<uint64_t>(x);
    else if (first || (op == Op::MAX ? x > best : x < best)) best = x;
    first = false;
  });
  return (op == Op::MAX || op == Op::MIN) ? best : static_cast<int64_t>(acc);
}

// Empty: 0/0 = NaN, as torch.
double mean_of(const Split& s, int64_t base) {
  return reduce_float(Op::SUM, s, base) / static_cast<double>(numel(s.reduced_sizes));
}

struct Moments {
  double mean, var;
};

// Two passes (mean, then squared deviations); var divides by
// max(0, N - correction), giving inf/NaN where that is 0, as torch.
Moments moments(const Split& s, int64_t base, int64_t correction) {
  const DType t = s.in.dtype;
  const int64_t n = numel(s.reduced_sizes);
  const double mean = mean_of(s, base);
  double sq = 0;
  for_each_reduced(s, base, [&](const std::byte* p) {
    const double d = load_f64(t, p) - mean;
    sq += d * d;
  });
  const double dof = static_cast<double>(std::max<int64_t>(0, n - correction));
  return {mean, canonical(sq / dof)};
}

// The input's innermost dim in memory is a kept one (a column sum: a
// norm backward's dw and db). Reading each output's elements in turn then
// steps across the input's rows, and a deferred input recomputes every
// element from operands read at that stride: about a cache miss per
// element (3000 x 4096 float32: 5 s). Walking the input in memory order
// instead, reduced positions outer and kept ones inner, each output's
// accumulator still takes its elements in row-major order of the reduced
// dims, as reduce_float's: the same bits.
bool kept_inner(const Split& s) {
  if (s.kept_sizes.empty() || s.reduced_sizes.empty() || s.in.numel() == 0) return false;
  auto inner = [](const Sizes& sizes, const std::vector<int64_t>& strides) {
    int64_t best = INT64_MAX;
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] > 1 && strides[d] != 0) best = std::min(best, strides[d] < 0 ? -strides[d] : strides[d]);
    return best;
  };
  return inner(s.kept_sizes, s.kept_strides) < inner(s.reduced_sizes, s.reduced_strides);
}

// The offsets of kept positions [first, first + n), row-major over the
// kept dims, into `out`. kept_inner's walk takes the kept positions a chunk
// at a time (kKeptChunk), so that its offsets and accumulators stay small
// whatever the output's size (they are not host memory the limit of
// host_memory.h counts).
constexpr int64_t kKeptChunk = int64_t{1} << 16;

void kept_offsets(const Split& s, int64_t first, int64_t n, std::vector<int64_t>* out) {
  out->clear();
  const size_t r = s.kept_sizes.size();
  int64_t idx[kMaxRank];
  unravel(first, s.kept_sizes, idx);
  for (int64_t j = 0; j < n; ++j) {
    int64_t off = 0;
    for (size_t d = 0; d < r; ++d) off += idx[d] * s.kept_strides[d];
    out->push_back(off);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < s.kept_sizes[d]) break;
      idx[d] = 0;
    }
  }
}

// Calls fn(k, element bytes) for every element, reduced positions outer
// (row-major) and the kept positions k inner.
template <typename Fn>
void for_each_kept_inner(const Split& s, const std::vector<int64_t>& kept, Fn&& fn) {
  ElementBuffer buf;
  for_each_index(s.reduced_sizes, [&](const int64_t* idx) {
    int64_t off = 0;
    for (size_t d = 0; d < s.reduced_sizes.size(); ++d) off += idx[d] * s.reduced_strides[d];
    for (size_t k = 0; k < kept.size(); ++k) fn(k, s.in.element(off + kept[k], buf));
  });
}

// reduce_float, reduce_int, mean_of and moments for every kept position at
// once (kept_inner); each result as double (floats) or int64 (ints), the
// variance's mean into `means`.
std::vector<double> reduce_float_all(Op op, const Split& s, const std::vector<int64_t>& kept) {
  const DType t = s.in.dtype;
  const bool sum = op == Op::SUM || op == Op::MEAN || op == Op::VAR || op == Op::VAR_MEAN;
  std::vector<double> acc(kept.size(), op == Op::PROD ? 1.0 : 0.0);
  std::vector<char> seen(kept.size(), 0);
  for_each_kept_inner(s, kept, [&](size_t k, const std::byte* p) {
    const double x = load_f64(t, p);
    double& a = acc[k];
    if (sum) a += x;
    else if (op == Op::PROD) a *= x;
    else if (!std::isnan(a) && (!seen[k] || std::isnan(x) || (op == Op::MAX ? x > a : x < a))) a = x;
    seen[k] = 1;
  });
  for (double& a : acc) a = canonical(a);
  return acc;
}

std::vector<int64_t> reduce_int_all(Op op, const Split& s, const std::vector<int64_t>& kept) {
  const DType t = s.in.dtype;
  std::vector<uint64_t> acc(kept.size(), op == Op::PROD ? 1 : 0);
  std::vector<int64_t> best(kept.size(), 0);
  std::vector<char> seen(kept.size(), 0);
  for_each_kept_inner(s, kept, [&](size_t k, const std::byte* p) {
    const int64_t x = load_i64(t, p);
    if (op == Op::SUM) acc[k] += static_cast<uint64_t>(x);
    else if (op == Op::PROD) acc[k] *= static_cast<uint64_t>(x);
    else if (!seen[k] || (op == Op::MAX ? x > best[k] : x < best[k])) best[k] = x;
    seen[k] = 1;
  });
  std::vector<int64_t> out(kept.size());
  for (size_t k = 0; k < kept.size(); ++k)
    out[k] = (op == Op::MAX || op == Op::MIN) ? best[k] : static_cast<int64_t>(acc[k]);
  return out;
}

std::vector<Moments> moments_all(const Split& s, const std::vector<int64_t>& kept, int64_t correction) {
  const DType t = s.in.dtype;
  const int64_t n = numel(s.reduced_sizes);
  std::vector<double> mean = reduce_float_all(Op::SUM, s, kept);
  for (double& m : mean) m /= static_cast<double>(n);
  std::vector<double> sq(kept.size(), 0.0);
  for_each_kept_inner(s, kept, [&](size_t k, const std::byte* p) {
    const double d = load_f64(t, p) - mean[k];
    sq[k] += d * d;
  });
  const double dof = static_cast<double>(std::max<int64_t>(0, n - correction));
  std::vector<Moments> out(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) out[k] = {mean[k], canonical(sq[k] / dof)};
  return out;
}

}  // namespace

void eval_reduction(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const TensorView& a = env.get(e.inputs[0]);
  const bool is_var = e.op == Op::VAR || e.op == Op::VAR_MEAN;
  const ReduceAttrs attrs(e);
  Split s = split_axes(a, attrs);
  // Kept dims along which the input is broadcast (stride 0) give equal
  // results: each is computed once and broadcast. `distinct` is the output
  // at those sizes (its kept dims in order, keepdim's 1s where reduced).
  Sizes distinct = sizes;
  const std::vector<bool> reduced_dims = attrs.reduced(a.sizes.size());
  for (size_t d = 0, j = 0, o = 0; d < a.sizes.size(); ++d) {
    const bool reduced = reduced_dims[d];
    if (!reduced) {
      if (s.kept_strides[j] == 0 && s.kept_sizes[j] > 1) s.kept_sizes[j] = distinct[o] = 1;
      ++j;
    }
    if (!reduced || attrs.keepdim) ++o;
  }
  std::vector<TensorView> outs;
  for (int64_t id : e.outputs) outs.push_back(allocate(fusion.value(id).dtype, distinct));
  // Output elements in row-major order match kept positions in row-major order.
  int64_t k = 0;
  const int out_size = dtype_size(outs[0].dtype);
  // An empty input with kept positions (sum over a dim of size 0) is never
  // read; its offsets are not even computed.
  const bool empty = a.numel() == 0;
  if (kept_inner(s)) {
    const int64_t total = numel(s.kept_sizes);
    std::vector<int64_t> kept;
    for (int64_t first = 0; first < total; first += kKeptChunk) {
      kept_offsets(s, first, std::min(kKeptChunk, total - first), &kept);
      auto at = [&](const TensorView& o, size_t j) { return o.data + (first + static_cast<int64_t>(j)) * out_size; };
      if (is_var) {
        const std::vector<Moments> m = moments_all(s, kept, attrs.correction);
        for (size_t j = 0; j < kept.size(); ++j) {
          store_f64(outs[0].dtype, at(outs[0], j), m[j].var);
          if (e.op == Op::VAR_MEAN) store_f64(outs[1].dtype, at(outs[1], j), m[j].mean);
        }
      } else if (e.op == Op::MEAN || is_float(a.dtype)) {
        const std::vector<double> r = reduce_float_all(e.op, s, kept);
        const double n = static_cast<double>(numel(s.reduced_sizes));
        for (size_t j = 0; j < kept.size(); ++j) store_f64(outs[0].dtype, at(outs[0], j), e.op == Op::MEAN ? r[j] / n : r[j]);
      } else {
        const std::vector<int64_t> r = reduce_int_all(e.op, s, kept);
        for (size_t j = 0; j < kept.size(); ++j) store_i64(outs[0].dtype, at(outs[0], j), r[j]);
      }
    }
    for (size_t i = 0; i < outs.size(); ++i) env.set(e.outputs[i], broadcast_to(outs[i], sizes));
    return;
  }
  for_each_index(s.kept_sizes, [&](const int64_t* idx) {
    int64_t base = 0;
    if (!empty)
      for (size_t d = 0; d < s.kept_sizes.size(); ++d) base += idx[d] * s.kept_strides[d];
    std::byte* p = outs[0].data + k * out_size;
    if (is_var) {
      const Moments m = moments(s, base, attrs.correction);
      store_f64(outs[0].dtype, p, m.var);
      if (e.op == Op::VAR_MEAN) store_f64(outs[1].dtype, outs[1].data + k * out_size, m.mean);
    } else if (e.op == Op::MEAN) {
      store_f64(outs[0].dtype, p, mean_of(s, base));
    } else if (is_float(a.dtype)) {
      store_f64(outs[0].dtype, p, reduce_float(e.op, s, base));
    } else {
      store_i64(outs[0].dtype, p, reduce_int(e.op, s, base));
    }
    ++k;
  });
  for (size_t i = 0; i < outs.size(); ++i) env.set(e.outputs[i], broadcast_to(outs[i], sizes));
}

}  // namespace kf::cpu
