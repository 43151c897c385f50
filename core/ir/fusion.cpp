#include "core/ir/fusion.h"

#include <algorithm>
#include <unordered_set>


namespace kf {

void Fusion::finish() {
  last_use.assign(values.size(), -1);
  for (size_t e = 0; e < exprs.size(); ++e)
    for (int64_t in : exprs[e].inputs) last_use[static_cast<size_t>(in)] = static_cast<int64_t>(e);

  // Liveness, backwards from the outputs; then the live readers of each value.
  is_output.assign(values.size(), false);
  for (const Output& o : outputs) is_output[static_cast<size_t>(o.value)] = true;
  std::vector<bool> needed = is_output;
  live.assign(exprs.size(), false);
  for (size_t e = exprs.size(); e > 0; --e) {
    for (int64_t out : exprs[e - 1].outputs)
      if (needed[static_cast<size_t>(out)]) live[e - 1] = true;
    if (live[e - 1])
      for (int64_t in : exprs[e - 1].inputs) needed[static_cast<size_t>(in)] = true;
  }
  reader_begin.assign(values.size() + 1, 0);
  for (size_t e = 0; e < exprs.size(); ++e)
    if (live[e])
      for (int64_t in : exprs[e].inputs) ++reader_begin[static_cast<size_t>(in) + 1];
  for (size_t id = 0; id < values.size(); ++id) reader_begin[id + 1] += reader_begin[id];
  live_readers.assign(reader_begin.back(), 0);
  std::vector<uint32_t> next(reader_begin.begin(), reader_begin.end() - 1);
  for (size_t e = 0; e < exprs.size(); ++e)
    if (live[e])
      for (int64_t in : exprs[e].inputs) live_readers[next[static_cast<size_t>(in)]++] = static_cast<int64_t>(e);

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
    for (size_t i = sa.begin; i < sa.end; ++i) shape_scalar_inputs(*this, e.inputs[i], &shape_scalars);
  }
  std::sort(shape_scalars.begin(), shape_scalars.end());
  shape_scalars.erase(std::unique(shape_scalars.begin(), shape_scalars.end()), shape_scalars.end());
  reshapes.clear();
  for (size_t k = 0; k < exprs.size(); ++k)
    if (exprs[k].op == Op::RESHAPE) reshapes.push_back(static_cast<int64_t>(k));

  // Depth, over the exprs in order (each reads values made before it).
  std::vector<int64_t> level(values.size(), 0);
  depth = 0;
  for (const Expr& e : exprs) {
    int64_t l = 0;
    for (int64_t in : e.inputs) l = std::max(l, level[static_cast<size_t>(in)]);
    for (int64_t out : e.outputs) level[static_cast<size_t>(out)] = l + 1;
    depth = std::max(depth, l + 1);
  }

  size_offsets.resize(values.size());
  size_table_length = 0;
  for (size_t id = 0; id < values.size(); ++id) {
    size_offsets[id] = static_cast<uint32_t>(size_table_length);
    size_table_length += static_cast<size_t>(values[id].rank);
  }
}

bool Fusion::needed_outside(int64_t id, std::span<const int64_t> set) const {
  const size_t v = static_cast<size_t>(id);
  if (is_output[v]) return true;
  for (uint32_t r = reader_begin[v]; r < reader_begin[v + 1]; ++r)
    if (!std::binary_search(set.begin(), set.end(), live_readers[r])) return true;
  return false;
}

int64_t Fusion::add_computed(DType dtype, int rank, bool is_scalar) {
  Value v;
  v.id = static_cast<int64_t>(values.size());
  v.kind = ValueKind::Computed;
  v.dtype = dtype;
  v.rank = rank;
  v.is_scalar = is_scalar;
  values.push_back(v);
  return v.id;
}

int64_t Fusion::add_constant_i64(int64_t value) {
  const int64_t id = add_computed(DType::I64, 0, true);
  Value& v = values[static_cast<size_t>(id)];
  v.kind = ValueKind::Constant;
  v.i64 = value;
  v.f64 = static_cast<double>(value);
  return id;
}

CommAttrs::CommAttrs(const Expr& e) {
  switch (e.op) {
    case Op::ALLREDUCE:
      reduce = static_cast<int>(e.attrs.at(0));
      ranks = e.attrs.at(1);
      break;
    case Op::REDUCE_SCATTER:
      dim = static_cast<int>(e.attrs.at(0));
      reduce = static_cast<int>(e.attrs.at(1));
      ranks = e.attrs.at(2);
      break;
    default:  // allgather, shard_slice
      dim = static_cast<int>(e.attrs.at(0));
      ranks = e.attrs.at(1);
      break;
  }
}

// Both walk the shape arithmetic below `id` with an explicit stack, each
// value once: a chain of scalar ops must not recurse per op, and a DAG of
// them (s = add(s, s) repeated) must not be walked once per path.
namespace {

// How a walk of shape arithmetic goes on from a value.
enum class Walk { Descend, Leaf, Abort };

// Visits each value below `id` once, iteratively (chains of shape
// arithmetic may be deep): `visit(id, value)` says whether to go into the
// value's producer's inputs, stop there, or end the walk (false).
template <typename Visit>
bool walk_shape_arithmetic(const Fusion& f, int64_t id, Visit&& visit) {
  std::vector<int64_t> stack{id};
  std::unordered_set<int64_t> seen;  // (sized by the walk, not the fusion)
  while (!stack.empty()) {
    const int64_t u = stack.back();
    stack.pop_back();
    if (!seen.insert(u).second) continue;
    const Value& v = f.value(u);
    const Walk next = visit(u, v);
    if (next == Walk::Abort) return false;
    if (next == Walk::Leaf) continue;
    for (int64_t a : f.exprs[static_cast<size_t>(v.producer)].inputs) stack.push_back(a);
  }
  return true;
}

}  // namespace

bool is_shape_scalar(const Fusion& f, int64_t id) {
  return walk_shape_arithmetic(f, id, [&](int64_t, const Value& v) {
    if (!v.is_scalar || !is_integer(v.dtype)) return Walk::Abort;
    if (v.kind != ValueKind::Computed)
      return v.kind == ValueKind::Constant || v.kind == ValueKind::ScalarInput ? Walk::Leaf : Walk::Abort;
    const Op op = f.exprs[static_cast<size_t>(v.producer)].op;
    if (op == Op::SIZE) return Walk::Leaf;
    return is_shape_arithmetic(op) ? Walk::Descend : Walk::Abort;
  });
}

void shape_scalar_inputs(const Fusion& f, int64_t id, std::vector<int64_t>* out) {
  walk_shape_arithmetic(f, id, [&](int64_t u, const Value& v) {
    if (v.kind == ValueKind::ScalarInput) out->push_back(u);
    if (v.kind != ValueKind::Computed || v.producer < 0) return Walk::Leaf;
    return v.is_scalar && is_shape_arithmetic(f.exprs[static_cast<size_t>(v.producer)].op) ? Walk::Descend
                                                                                          : Walk::Leaf;
  });
}

}  // namespace kf
