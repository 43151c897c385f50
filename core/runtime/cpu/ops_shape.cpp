// Shape ops on the CPU. Results that torch returns as views are views here
// too (they share the input's storage, or a deferred input's source):
// broadcast_in_dim, expand, permute, squeeze, unsqueeze, slice, and reshape
// where torch's view would succeed (a compact input; merged dims laid out as
// one, such as broadcast dims). Any other reshape, pad and cat copy.
#include <optional>

#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"
#include "core/ir/op_attrs.h"
#include "core/util/dl_layout.h"

namespace kf::cpu {

namespace {

// Strides derived from others (sizes, strides and steps are >= 0) saturate
// (mul_saturating, core/util/dl_layout.h).
TensorView broadcast_in_dim(const TensorView& a, const Sizes& sizes,
                            std::span<const int64_t> dims) {
  TensorView v = a;
  v.sizes = sizes;
  v.strides.assign(sizes.size(), 0);
  for (size_t j = 0; j < dims.size(); ++j) {
    const size_t d = static_cast<size_t>(dims[j]);
    v.strides[d] = (a.sizes[j] == 1 && sizes[d] != 1) ? 0 : a.strides[j];
  }
  return v;
}

// The strides that let a view of `a` have `sizes` (same element count), or
// nullopt where none can: torch's rule (ATen's computeStride), which views a
// compact input and any input whose merged dims are laid out as one, stride 0
// included (a broadcast [m, n] flattens to [m * n] with stride 0).
std::optional<std::vector<int64_t>> view_strides(const TensorView& a, const Sizes& sizes) {
  std::vector<int64_t> out(sizes.size(), 0);
  if (a.numel() <= 1 || a.sizes.empty()) {  // one element or none: any strides address it
    out = compact_strides(sizes);
    return out;
  }
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = a.strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t tensor_d = static_cast<int64_t>(a.sizes.size()) - 1; tensor_d >= 0; --tensor_d) {
    const size_t t = static_cast<size_t>(tensor_d);
    tensor_numel *= a.sizes[t];
    // The end of a chunk of dims laid out as one: the view's dims must cover it.
    if (tensor_d == 0 ||
        (a.sizes[t - 1] != 1 && a.strides[t - 1] != mul_saturating(tensor_numel, chunk_base_stride))) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[static_cast<size_t>(view_d)] == 1)) {
        out[static_cast<size_t>(view_d)] = mul_saturating(view_numel, chunk_base_stride);
        view_numel *= sizes[static_cast<size_t>(view_d)];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (tensor_d > 0) {
        chunk_base_stride = a.strides[t - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

TensorView reshape(const TensorView& a, const Sizes& sizes) {
  TensorView v = a;
  if (auto strides = view_strides(a, sizes)) {
    v.strides = std::move(*strides);
  } else {
    v = allocate(a.dtype, a.sizes);
    copy_into(a, v);
    v.strides = compact_strides(sizes);
  }
  v.sizes = sizes;
  return v;
}

TensorView permute(const TensorView& a, std::span<const int64_t> perm) {
  TensorView v = a;
  for (size_t i = 0; i < perm.size(); ++i) {
    v.sizes[i] = a.sizes[static_cast<size_t>(perm[i])];
    v.strides[i] = a.strides[static_cast<size_t>(perm[i])];
  }
  return v;
}

// dims: sorted (op_rules normalizes them).
TensorView squeeze(const TensorView& a, std::span<const int64_t> dims) {
  TensorView v = a;
  for (size_t k = dims.size(); k > 0; --k) {
    v.sizes.erase(v.sizes.begin() + dims[k - 1]);
    v.strides.erase(v.strides.begin() + dims[k - 1]);
  }
  return v;
}

TensorView unsqueeze(const TensorView& a, int64_t dim) {
  TensorView v = a;
  const size_t d = static_cast<size_t>(dim);
  // Any stride is valid for a size-1 dim; this one keeps compact views compact.
  const int64_t stride = d < a.sizes.size() ? mul_saturating(a.strides[d], a.sizes[d]) : 1;
  v.sizes.insert(v.sizes.begin() + dim, 1);
  v.strides.insert(v.strides.begin() + dim, stride);
  return v;
}

TensorView slice(const TensorView& a, const SliceAttrs& attrs) {
  const size_t d = static_cast<size_t>(attrs.dim);
  const SliceRange r = slice_range(a.sizes[d], attrs.start, attrs.stop, attrs.step);
  TensorView v = a;
  v.sizes[d] = r.length;
  if (r.length > 0) v.advance(r.start * a.strides[d]);
  v.strides[d] = mul_saturating(a.strides[d], attrs.step);
  return v;
}

// The part of `out` that starts at `begin` along every dim and has `sizes`.
TensorView window(const TensorView& out, const std::vector<int64_t>& begin, const Sizes& sizes) {
  TensorView v = out;
  v.sizes = sizes;
  if (numel(sizes) > 0) v.data = out.at(begin.data());
  return v;
}

TensorView pad(const TensorView& a, const TensorView& value, const Sizes& sizes,
               const PadAttrs& pads) {
  TensorView out = allocate(a.dtype, sizes);
  copy_into(broadcast_to(value, sizes), out);
  std::vector<int64_t> begin(a.sizes.size());
  for (size_t d = 0; d < begin.size(); ++d) begin[d] = pads.low(d);
  copy_into(a, window(out, begin, a.sizes));
  return out;
}

TensorView cat(const std::vector<TensorView>& ins, DType dtype, const Sizes& sizes, size_t dim) {
  TensorView out = allocate(dtype, sizes);
  std::vector<int64_t> begin(sizes.size(), 0);
  for (const TensorView& t : ins) {
    copy_into(t, window(out, begin, t.sizes));
    begin[dim] += t.sizes[dim];
  }
  return out;
}

}  // namespace

void eval_shape(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const TensorView& a = env.get(e.inputs[0]);
  TensorView out;
  switch (e.op) {
    case Op::BROADCAST_IN_DIM: out = broadcast_in_dim(a, sizes, DimsAttrs(e).dims); break;
    case Op::EXPAND: out = broadcast_to(a, sizes); break;
    case Op::RESHAPE: out = reshape(a, sizes); break;
    case Op::PERMUTE: out = permute(a, PermuteAttrs(e).perm); break;
    case Op::SQUEEZE: out = squeeze(a, DimsAttrs(e).dims); break;
    case Op::UNSQUEEZE: out = unsqueeze(a, DimAttr(e).dim); break;
    case Op::SLICE: out = slice(a, SliceAttrs(e)); break;
    case Op::PAD: out = pad(a, env.get(e.inputs[1]), sizes, PadAttrs(e)); break;
    case Op::CAT: {
      std::vector<TensorView> ins;
      for (int64_t id : e.inputs) ins.push_back(env.get(id));
      out = cat(ins, fusion.value(e.outputs[0]).dtype, sizes, DimAttr(e).index());
      break;
    }
    default: fail(KF_ERR_INTERNAL, "cpu backend: ", op_name(e.op), " is not a shape op");
  }
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
