// index_select and gather on the CPU. Every index must lie in
// [0, size of the indexed dim): like torch, negative indices are rejected,
// and the first bad index is reported before anything is computed.
#include <algorithm>
#include <cstring>

#include "core/runtime/cpu/eval.h"
#include "core/util/error.h"
#include "core/ir/op_attrs.h"

namespace kf::cpu {

namespace {

void check_indices(const Expr& e, const TensorView& index, int64_t extent) {
  for_each_index(index.sizes, [&](const int64_t* idx) {
    const int64_t i = load_i64(index.dtype, index.at(idx));
    if (i < 0 || i >= extent)
      fail(KF_ERR_INVALID_ARGUMENT, op_name(e.op), " (value ", e.outputs[0], "): index ", i,
           " (value ", e.inputs[1], ") is out of range [0, ", extent, ") for dim ", DimAttr(e).dim,
           " of value ", e.inputs[0]);
  });
}

// out[..., j, ...] = a[..., index[j], ...] along `dim`.
void index_select(const TensorView& a, const TensorView& index, size_t dim, const TensorView& out) {
  std::vector<int64_t> src(a.sizes.size());
  for_each_index(out.sizes, [&](const int64_t* idx) {
    std::copy(idx, idx + src.size(), src.begin());
    src[dim] = load_i64(index.dtype, index.at(&idx[dim]));
    std::memcpy(out.at(idx), a.at(src.data()), static_cast<size_t>(dtype_size(a.dtype)));
  });
}

// out[i] = a[i with i[dim] replaced by index[i]] (take_along_axis).
void gather(const TensorView& a, const TensorView& index, size_t dim, const TensorView& out) {
  std::vector<int64_t> src(a.sizes.size());
  for_each_index(out.sizes, [&](const int64_t* idx) {
    std::copy(idx, idx + src.size(), src.begin());
    src[dim] = load_i64(index.dtype, index.at(idx));
    std::memcpy(out.at(idx), a.at(src.data()), static_cast<size_t>(dtype_size(a.dtype)));
  });
}

}  // namespace

void eval_indexing(const Fusion& fusion, const Expr& e, Env& env) {
  const Sizes sizes = output_sizes(fusion, e, env);
  const TensorView& a = env.get(e.inputs[0]);
  const TensorView& index = env.get(e.inputs[1]);
  const size_t dim = DimAttr(e).index();
  check_indices(e, index, a.sizes[dim]);
  TensorView out = allocate(a.dtype, sizes);
  if (e.op == Op::INDEX_SELECT) index_select(a, index, dim, out);
  else gather(a, index, dim, out);
  env.set(e.outputs[0], std::move(out));
}

}  // namespace kf::cpu
