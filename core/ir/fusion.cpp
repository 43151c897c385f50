#include "core/ir/fusion.h"

#include <algorithm>


namespace kf {

void Fusion::finish() {
  last_use.assign(values.size(), -1);
  for (size_t e = 0; e < exprs.size(); ++e)
    for (int64_t in : exprs[e].inputs) last_use[static_cast<size_t>(in)] = static_cast<int64_t>(e);

  first_extent_index.assign(inputs.size(), -1);
  num_extents = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = value(inputs[i]);
    if (v.is_scalar) continue;
    first_extent_index[i] = num_extents;
    num_extents += v.rank;
  }

  shape_scalars.clear();
  for (const Expr& e : exprs) {
    ShapeArgs sa = shape_args(e.op, e.inputs);
    for (size_t i = sa.begin; i < sa.end; ++i) {
      const Value& s = value(e.inputs[i]);
      if (s.kind == ValueKind::ScalarInput &&
          std::find(shape_scalars.begin(), shape_scalars.end(), s.id) == shape_scalars.end())
        shape_scalars.push_back(s.id);
    }
  }
  std::sort(shape_scalars.begin(), shape_scalars.end());

  size_offsets.resize(values.size());
  size_table_length = 0;
  for (size_t id = 0; id < values.size(); ++id) {
    size_offsets[id] = static_cast<uint32_t>(size_table_length);
    size_table_length += static_cast<size_t>(values[id].rank);
  }
}

}  // namespace kf
