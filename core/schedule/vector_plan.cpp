#include "core/schedule/vector_plan.h"

#include <algorithm>

namespace kf {

namespace {

SizeClass cls(const ConcreteFusion& c, int64_t v, size_t d) { return c.size_classes[static_cast<size_t>(v)][d]; }
size_t rank_of(const ConcreteFusion& c, int64_t v) { return c.size_classes[static_cast<size_t>(v)].size(); }

// For each dim of input `v`, the domain dim it reads (kZeroIndex: a size-1
// dim read at 0); empty when there is no single plain mapping.
IndexMap domain_dims(const ConcreteFusion& c, int64_t v, size_t rd, const AccessMap* reads) {
  const size_t rv = rank_of(c, v);
  if (reads == nullptr) {
    IndexMap dims(rv, kZeroIndex);
    if (rv > rd) return {};
    for (size_t j = 0; j < rv; ++j)
      if (cls(c, v, j) != SizeClass::One) dims[j] = static_cast<int>(rd - rv + j);
    return dims;
  }
  // The first plain map, else the best aligned with shifted dims (a cat's
  // or a pad's bounded reads, a slice's, traced with shifts): loads at
  // other maps simply stay scalar (a vector register serves only the loads
  // at its own lanes' indices).
  const std::vector<IndexMap>* maps = reads->find(v);
  if (maps == nullptr) return {};
  // The smallest alignment of a shifted entry (0: not a map of the kind).
  const auto alignment = [&](const IndexMap& m, bool shifted) {
    if (m.size() != rv) return 0;
    int align = 32;
    for (size_t j = 0; j < rv; ++j) {
      if (m[j] >= 0 || (m[j] == kZeroIndex && cls(c, v, j) == SizeClass::One)) continue;
      if (!shifted || !is_shifted(m[j])) return 0;
      align = std::min(align, shifted_align(m[j]));
    }
    return align;
  };
  for (const IndexMap& m : *maps)
    if (alignment(m, false) > 0) return m;
  const IndexMap* best = nullptr;
  int best_align = 0;
  for (const IndexMap& m : *maps)
    if (const int a = alignment(m, true); a > best_align) {
      best = &m;
      best_align = a;
    }
  return best == nullptr ? IndexMap{} : *best;
}

// Whether an input read at `dims` reads none of the row dims `rows` (a
// domain dim each; one at least of class >1): a weight, every row's the
// same. (A row input of a single row is no weight.)
bool over_rows(const ConcreteFusion& c, int64_t dom, const IndexMap& dims, const std::vector<bool>& rows) {
  const auto row_dim = [&](int m) {
    const int d = read_dim(m);
    return d >= 0 && static_cast<size_t>(d) < rows.size() && rows[static_cast<size_t>(d)] &&
           cls(c, dom, static_cast<size_t>(d)) == SizeClass::Many;
  };
  bool many_rows = false;
  for (size_t d = 0; d < rows.size() && d < rank_of(c, dom); ++d) many_rows = many_rows || row_dim(static_cast<int>(d));
  return many_rows && std::none_of(dims.begin(), dims.end(), row_dim);
}

// The largest (widest) or smallest dtype size among the plan's inputs and
// outputs; 1 for an empty plan.
int dtype_size_bound(const ConcreteFusion& c, const VectorPlan& p, bool widest) {
  const Fusion& f = *c.fusion;
  int bound = 0;
  auto take = [&](int64_t v) {
    const int s = dtype_size(f.value(v).dtype);
    bound = bound == 0 ? s : widest ? std::max(bound, s) : std::min(bound, s);
  };
  for (const auto& [v, dims] : p.inputs) take(v);
  for (int64_t o : p.outputs) take(o);
  return bound == 0 ? 1 : bound;
}

}  // namespace

VectorPlan plan_vectors(const ConcreteFusion& c, const Task& task, const std::vector<int64_t>& outs, int64_t dom,
                        size_t dim, const AccessMap* reads, const std::vector<int64_t>& exclude,
                        const std::vector<bool>* rows, int min_alignment) {
  VectorPlan p;
  p.dim = dim;
  const Fusion& f = *c.fusion;
  const size_t r = rank_of(c, dom);
  if (dim >= r || cls(c, dom, dim) != SizeClass::Many) return p;
  int widest = 1;
  for (int64_t v : task.inputs) {
    const Value& val = f.value(v);
    if (val.is_scalar) continue;
    const IndexMap dims = domain_dims(c, v, r, reads);
    auto lane_dim = std::find_if(dims.begin(), dims.end(), [&](int m) { return read_dim(m) == static_cast<int>(dim); });
    if (lane_dim == dims.end()) continue;
    const size_t pv = static_cast<size_t>(lane_dim - dims.begin());
    if (cls(c, v, pv) != SizeClass::Many) continue;
    bool fits = true;  // each dim broadcast or of its domain dim's class (shifted: of class >1, bounded)
    for (size_t j = 0; j < dims.size(); ++j)
      if (dims[j] >= 0 && cls(c, v, j) != cls(c, dom, static_cast<size_t>(dims[j]))) fits = false;
    if (!fits) continue;
    if (val.kind == ValueKind::TensorInput) {
      const InputLayout& l = c.input_layouts[static_cast<size_t>(val.input_index)];
      if (l.stride_order.empty() || l.stride_order.back() != static_cast<int>(pv)) continue;
      // Expanded along the lanes (stride 0): one element for all of them,
      // read as a broadcast (a vector load would fail the unit-stride test
      // and send the whole loop to its scalar path).
      if ((l.expanded >> pv) & 1u) continue;
      // A weight broadcast over the rows (`rows`) is taken at any
      // alignment (size_past_weights decides how it loads).
      if (l.alignment < min_alignment && (rows == nullptr || !over_rows(c, dom, dims, *rows))) continue;
    } else {
      const auto& order = c.stride_orders[static_cast<size_t>(v)];
      if (order.empty() || order.back() != static_cast<int>(pv)) continue;
    }
    p.inputs[v] = dims;
    widest = std::max(widest, dtype_size(val.dtype));
  }
  for (int64_t o : outs) {
    const auto& order = c.stride_orders[static_cast<size_t>(o)];
    if (c.size_classes[static_cast<size_t>(o)] != c.size_classes[static_cast<size_t>(dom)] || order.empty() ||
        order.back() != static_cast<int>(dim))
      continue;
    p.outputs.push_back(o);
    widest = std::max(widest, dtype_size(f.value(o).dtype));
  }
  if (p.inputs.empty() && p.outputs.empty()) return p;
  p.width = kVectorBytes / widest;
  // Excluded inputs still count for the width (the tiled path's measured
  // behaviour), they are just not loaded as vectors.
  for (int64_t v : exclude) p.inputs.erase(v);
  return p;
}

void size_past_weights(const ConcreteFusion& c, int64_t dom, const std::vector<bool>& rows, int vectors_per_thread,
                       int thread_bytes, VectorPlan* p) {
  p->any_aligned.clear();
  if (p->width == 0) return;
  const Fusion& f = *c.fusion;
  std::vector<int64_t> weights;
  int widest = 0;  // of the other inputs and the outputs
  bool row_inputs = false;
  int64_t row_bytes = 0;  // the row inputs' bytes per element
  for (const auto& [v, dims] : p->inputs) {
    if (over_rows(c, dom, dims, rows)) {
      weights.push_back(v);
    } else {
      widest = std::max(widest, dtype_size(f.value(v).dtype));
      row_inputs = true;
      row_bytes += dtype_size(f.value(v).dtype);
    }
  }
  for (int64_t o : p->outputs) widest = std::max(widest, dtype_size(f.value(o).dtype));
  // The weights whose address or rows cannot start a vector of `width`.
  const auto misaligned = [&](int width) {
    std::vector<int64_t> out;
    for (int64_t v : weights) {
      const Value& val = f.value(v);
      if (val.kind != ValueKind::TensorInput) continue;
      const InputLayout& l = c.input_layouts[static_cast<size_t>(val.input_index)];
      if (l.alignment < std::min(width * dtype_size(val.dtype), kVectorBytes) || l.row_alignment < width)
        out.push_back(v);
    }
    return out;
  };
  const bool few_bytes = row_bytes * p->width * vectors_per_thread < thread_bytes;
  if (weights.empty() || (!few_bytes && misaligned(p->width).empty())) return;
  if (row_inputs) p->width = kVectorBytes / widest;
  p->any_aligned = misaligned(p->width);
}

VectorPlan plan_element_loads(const ConcreteFusion& c, const Task& task, int64_t dom, size_t dim, const AccessMap& reads) {
  VectorPlan p;
  p.dim = dim;
  const Fusion& f = *c.fusion;
  const size_t r = rank_of(c, dom);
  for (int64_t v : task.inputs) {
    if (f.value(v).is_scalar) continue;
    const IndexMap dims = domain_dims(c, v, r, &reads);
    if (dims.empty() || std::any_of(dims.begin(), dims.end(), is_shifted)) continue;
    bool fits = true;  // each dim broadcast or of its domain dim's class
    for (size_t j = 0; j < dims.size(); ++j)
      if (dims[j] >= 0 && cls(c, v, j) != cls(c, dom, static_cast<size_t>(dims[j]))) fits = false;
    if (fits) p.inputs[v] = dims;
  }
  if (!p.inputs.empty()) p.width = 1;
  return p;
}

void drop_lane_invariant(const ConcreteFusion& c, const Task& task, const AccessMap& reads, VectorPlan* p) {
  if (p->width == 0) return;
  const Fusion& f = *c.fusion;
  // Whether value v is read at a map that indexes the lane dim (or one
  // that is not plain); untraced values count as read along it.
  const auto along_lanes = [&](int64_t v) {
    const std::vector<IndexMap>* maps = reads.find(v);
    if (maps == nullptr) return true;
    return std::any_of(maps->begin(), maps->end(), [&](const IndexMap& m) {
      return std::find(m.begin(), m.end(), static_cast<int>(p->dim)) != m.end() || m.size() != rank_of(c, v);
    });
  };
  // An untraced input: the values computed from its data directly decide
  // (a size query reads none: the labels whose sizes reshape the logits
  // in an AOTAutograd cross-entropy).
  const auto through_consumers = [&](int64_t in) {
    for (int64_t ei : task.exprs) {
      const Expr& e = f.exprs[static_cast<size_t>(ei)];
      if (op_info(e.op).category == OpCategory::Query ||
          std::find(e.inputs.begin(), e.inputs.end(), in) == e.inputs.end())
        continue;
      if (std::any_of(e.outputs.begin(), e.outputs.end(), along_lanes)) return true;
    }
    return false;
  };
  for (auto it = p->inputs.begin(); it != p->inputs.end();) {
    const bool lane = reads.find(it->first) != nullptr ? along_lanes(it->first) : through_consumers(it->first);
    it = lane ? std::next(it) : p->inputs.erase(it);
  }
  p->width = kVectorBytes / dtype_size_bound(c, *p, true);
}

void keep_aligned_shifts(VectorPlan* p) {
  if (p->width == 0) return;
  std::erase_if(p->inputs, [&](const auto& in) {
    for (int m : in.second)
      if (is_shifted(m) && shifted_dim(m) == static_cast<int>(p->dim) && shifted_align(m) % p->width != 0) return true;
    return false;
  });
}

void drop_misaligned(const ConcreteFusion& c, int64_t dom, const std::vector<int64_t>& in_place, VectorPlan* p) {
  if (p->width == 0) return;
  const Fusion& f = *c.fusion;
  // Can a vector of p's width start at every row of input i?
  const auto aligned = [&](size_t i, int64_t v) {
    const InputLayout& l = c.input_layouts[i];
    const int bytes = std::min(p->width * dtype_size(f.value(v).dtype), kVectorBytes);
    return l.alignment >= bytes && l.row_alignment >= p->width;
  };
  // Bytes per domain element: an input broadcast along a dim of class >1
  // moves few (its rows stay in cache), counted as none.
  const std::vector<SizeClass>& classes = c.size_classes[static_cast<size_t>(dom)];
  const auto input_bytes = [&](int64_t v, const IndexMap& dims) {
    for (size_t d = 0; d < classes.size(); ++d)
      if (classes[d] == SizeClass::Many &&
          std::none_of(dims.begin(), dims.end(), [&](int m) { return read_dim(m) == static_cast<int>(d); }))
        return 0;
    return dtype_size(f.value(v).dtype);
  };
  int kept = 0, dropped = 0;
  std::erase_if(p->inputs, [&](const auto& in) {
    const Value& val = f.value(in.first);
    const bool drop = val.kind == ValueKind::TensorInput && !aligned(static_cast<size_t>(val.input_index), in.first);
    (drop ? dropped : kept) += input_bytes(in.first, in.second);
    return drop;
  });
  std::erase_if(p->outputs, [&](int64_t o) {
    bool drop = false;
    for (const Output& out : f.outputs)
      if (out.value == o && out.alias_input >= 0) {
        const size_t i = static_cast<size_t>(out.alias_input);
        const bool into_input = std::find(in_place.begin(), in_place.end(), f.inputs[i]) != in_place.end();
        drop = drop || (into_input && !aligned(i, o));
      }
    (drop ? dropped : kept) += dtype_size(f.value(o).dtype);
    return drop;
  });
  // Lanes read or written one by one touch 16 bytes of a warp's span per
  // element they move, four to sixteen times the sectors of the scalar
  // loop's coalesced accesses: where they move most of the bytes, the
  // scalar loop is faster (seed 80188397 c0190, Lion in place into a
  // padded and an offset tensor: 0.183 ms scalar, 0.237 ms per lane;
  // docs/perf-log.md, session 35).
  if (dropped > kept) {
    VectorPlan none;
    none.dim = p->dim;
    *p = none;
  }
}

void narrow_vectors(const ConcreteFusion& c, VectorPlan* p) {
  if (p->width > 0) p->width = kVectorBytes / dtype_size_bound(c, *p, false);
}

VectorPlan inputs_reading(const ConcreteFusion& c, int64_t dom, const std::vector<bool>& dims, VectorPlan p) {
  const std::vector<SizeClass>& classes = c.size_classes[static_cast<size_t>(dom)];
  const Fusion& f = *c.fusion;
  std::erase_if(p.inputs, [&](const auto& in) {
    for (size_t d = 0; d < classes.size() && d < dims.size(); ++d)
      if (dims[d] && classes[d] == SizeClass::Many &&
          std::find(in.second.begin(), in.second.end(), static_cast<int>(d)) == in.second.end())
        return true;
    // An input expanded (stride 0) along one of those dims skips it in memory too.
    const Value& v = f.value(in.first);
    if (v.kind != ValueKind::TensorInput) return false;
    const uint32_t expanded = c.input_layouts[static_cast<size_t>(v.input_index)].expanded;
    for (size_t j = 0; j < in.second.size(); ++j) {
      const int d = in.second[j];
      if (d >= 0 && static_cast<size_t>(d) < dims.size() && dims[static_cast<size_t>(d)] &&
          classes[static_cast<size_t>(d)] == SizeClass::Many && ((expanded >> j) & 1u))
        return true;
    }
    return false;
  });
  return p;
}

}  // namespace kf
