// matmul (torch.matmul: 1-D operands, broadcast batch dims) and linear
// (x @ w^T + bias) on the CPU: operands converted to the promoted dtype,
// products accumulated in double in k order, bias added in double, one
// rounding to the output dtype.
#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"

namespace kf::cpu {

namespace {

double round_to(DType t, double x) {
  std::byte buf[8];
  store_f64(t, buf, x);
  return load_f64(t, buf);
}

double load_as(DType t, const TensorView& v, const int64_t* idx) {
  return round_to(t, load_f64(v.dtype, v.at(idx)));
}

// `t` with a size-1 dim of stride 0 inserted at `dim` (a 1-D operand as a
// row or column matrix).
TensorView with_unit_dim(const TensorView& t, size_t dim) {
  TensorView v = t;
  v.sizes.insert(v.sizes.begin() + static_cast<int64_t>(dim), 1);
  v.strides.insert(v.strides.begin() + static_cast<int64_t>(dim), 0);
  return v;
}

// The output as a row-major view of `sizes` (same element count; the 1-D
// cases only drop size-1 dims, which leaves row-major memory unchanged).
TensorView as_sizes(const TensorView& out, const Sizes& sizes) {
  TensorView v = out;
  v.sizes = sizes;
  v.strides = compact_strides(sizes);
  return v;
}

// out[b, i, j] = sum_k a[b, i, k] * b[b, k, j] over matrices a, b already
// broadcast to the batch dims of `out`.
void batched_matmul(const TensorView& a, const TensorView& b, const TensorView& out) {
  const size_t r = out.sizes.size();
  const int64_t k = a.sizes[r - 1];
  std::vector<int64_t> ia(r), ib(r);
  for_each_index(out.sizes, [&](const int64_t* idx) {
    std::copy(idx, idx + r, ia.begin());
    std::copy(idx, idx + r, ib.begin());
    double acc = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      ia[r - 1] = kk;
      ib[r - 2] = kk;
      acc += load_as(out.dtype, a, ia.data()) * load_as(out.dtype, b, ib.data());
    }
    store_f64(out.dtype, out.at(idx), acc);
  });
}

TensorView matmul(const TensorView& a_in, const TensorView& b_in, DType dtype, const Sizes& sizes) {
  const TensorView a = a_in.rank() == 1 ? with_unit_dim(a_in, 0) : a_in;
  const TensorView b = b_in.rank() == 1 ? with_unit_dim(b_in, 1) : b_in;
  const size_t ra = a.sizes.size(), rb = b.sizes.size();
  Sizes batch_a(a.sizes.begin(), a.sizes.end() - 2), batch_b(b.sizes.begin(), b.sizes.end() - 2);
  const std::span<const int64_t> batches[2] = {batch_a, batch_b};
  const int64_t ids[2] = {0, 1};
  Sizes full = broadcast_sizes(batches, ids, "matmul", 0).to_vector();
  Sizes sa = full, sb = full;
  full.insert(full.end(), {a.sizes[ra - 2], b.sizes[rb - 1]});
  sa.insert(sa.end(), {a.sizes[ra - 2], a.sizes[ra - 1]});
  sb.insert(sb.end(), {b.sizes[rb - 2], b.sizes[rb - 1]});
  TensorView out = allocate(dtype, sizes);
  batched_matmul(broadcast_to(a, sa), broadcast_to(b, sb), as_sizes(out, full));
  return out;
}

// out[..., j] = sum_k x[..., k] * w[j, k] + bias[j]; w as [n, k].
void linear_into(const TensorView& x, const TensorView& w, const TensorView* bias,
                 const TensorView& out) {
  const size_t r = out.sizes.size();
  const int64_t k = x.sizes.back();
  std::vector<int64_t> ix(r);
  int64_t iw[2];
  for_each_index(out.sizes, [&](const int64_t* idx) {
    std::copy(idx, idx + r, ix.begin());
    iw[0] = idx[r - 1];
    double acc = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      ix[r - 1] = kk;
      iw[1] = kk;
      acc += load_as(out.dtype, x, ix.data()) * load_as(out.dtype, w, iw);
    }
    if (bias) acc += load_as(out.dtype, *bias, &idx[r - 1]);
    store_f64(out.dtype, out.at(idx), acc);
  });
}

TensorView linear(const TensorView& x, const TensorView& w_in, const TensorView* bias_in,
                  DType dtype, const Sizes& sizes) {
  const TensorView w = w_in.rank() == 1 ? with_unit_dim(w_in, 0) : w_in;
  Sizes full(x.sizes.begin(), x.sizes.end() - 1);
  full.push_back(w.sizes[0]);
  TensorView out = allocate(dtype, sizes);
  if (bias_in) {
    const TensorView bias = broadcast_to(*bias_in, {w.sizes[0]});
    linear_into(x, w, &bias, as_sizes(out, full));
  } else {
    linear_into(x, w, nullptr, as_sizes(out, full));
  }
  return out;
}

}  // namespace

void eval_library(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const DType dtype = fusion.value(e.outputs[0]).dtype;
  const TensorView& a = env.get(e.inputs[0]);
  const TensorView& b = env.get(e.inputs[1]);
  TensorView out;
  if (e.op == Op::MATMUL) out = matmul(a, b, dtype, sizes);
  else if (e.op == Op::LINEAR)
    out = linear(a, b, e.inputs.size() == 3 ? &env.get(e.inputs[2]) : nullptr, dtype, sizes);
  else fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(e.op), " is not a library op");
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
