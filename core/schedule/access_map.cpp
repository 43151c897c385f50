#include "core/schedule/access_map.h"
#include "core/ir/op_attrs.h"

#include <algorithm>
#include <set>

namespace kf {

namespace {

class Tracer {
 public:
  Tracer(const ConcreteFusion& c, const Task& task, bool shifts) : c_(c), f_(*c.fusion), shifts_(shifts) {
    for (int64_t ei : task.exprs)
      for (int64_t o : f_.exprs[static_cast<size_t>(ei)].outputs) produced_.insert(o);
  }

  // Depth first from (v, map), operands in order, each (value, map) once:
  // the order a recursive walk would record, by an explicit stack (a chain
  // of ops as long as the definition allows must not recurse per op).
  void visit(int64_t v, const IndexMap& map) {
    stack_.push_back({v, map});
    std::vector<std::pair<int64_t, IndexMap>> next;
    while (!stack_.empty()) {
      const auto [u, m] = std::move(stack_.back());
      stack_.pop_back();
      next.clear();
      step(u, m, &next);
      for (size_t k = next.size(); k-- > 0;) stack_.push_back(std::move(next[k]));
    }
  }

  AccessMap out;

 private:
  // Records (v, map) and appends the (operand, map) pairs it reads, in
  // operand order.
  void step(int64_t v, const IndexMap& map, std::vector<std::pair<int64_t, IndexMap>>* next) {
    const Value& val = f_.value(v);
    if (val.kind == ValueKind::Constant || val.is_scalar) return;
    if (!seen_.insert({v, map}).second) return;
    std::vector<IndexMap>& maps = out.reads[v];
    if (maps.empty()) out.order.push_back(v);
    maps.push_back(map);
    if (!produced_.contains(v)) return;  // a task input
    const Expr& e = f_.exprs[static_cast<size_t>(val.producer)];
    switch (op_info(e.op).category) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
        for (int64_t in : e.inputs) next->push_back({in, right_aligned(in, map)});
        return;
      case OpCategory::Hint: next->push_back({e.inputs[0], map}); return;
      case OpCategory::Shape: shape(e, map, next); return;
      case OpCategory::Indexing: indexing(e, map, next); return;
      case OpCategory::Reduction:  // read by the reduction's own loop
      case OpCategory::Creation:   // reads scalars only
      case OpCategory::Query:      // reads sizes only
      case OpCategory::Library:
      case OpCategory::Scatter:  // a segment of its own
      case OpCategory::Scan:
      case OpCategory::Communication: return;
    }
  }

  size_t rank(int64_t v) const { return c_.size_classes[static_cast<size_t>(v)].size(); }
  bool one(int64_t v, size_t d) const { return c_.size_classes[static_cast<size_t>(v)][d] == SizeClass::One; }
  // Dim d of `in` reads index i (a size-1 dim reads 0).
  int at(int64_t in, size_t d, int i) const { return one(in, d) ? kZeroIndex : i; }

  IndexMap right_aligned(int64_t in, const IndexMap& map) const {
    const size_t ri = rank(in), r = map.size();
    IndexMap sub(ri, kZeroIndex);
    for (size_t j = 0; j < ri; ++j) sub[j] = at(in, j, map[r - ri + j]);
    return sub;
  }

  bool any_many(int64_t v) const {
    for (size_t d = 0; d < rank(v); ++d)
      if (c_.size_classes[static_cast<size_t>(v)][d] == SizeClass::Many) return true;
    return false;
  }

  void shape(const Expr& e, const IndexMap& map, std::vector<std::pair<int64_t, IndexMap>>* next) {
    const int64_t in = e.inputs[0];
    const size_t ri = rank(in), r = map.size();
    IndexMap sub(ri, kZeroIndex);
    switch (e.op) {
      case Op::BROADCAST_IN_DIM:
        for (size_t j = 0; j < ri; ++j) sub[j] = at(in, j, map[static_cast<size_t>(DimsAttrs(e).dims[j])]);
        break;
      case Op::EXPAND: sub = right_aligned(in, map); break;
      case Op::PERMUTE:
        for (size_t i = 0; i < r; ++i) {
          const size_t d = static_cast<size_t>(PermuteAttrs(e).perm[i]);
          sub[d] = at(in, d, map[i]);
        }
        break;
      case Op::SQUEEZE: {
        size_t k = 0, o = 0;
        for (size_t d = 0; d < ri; ++d) {
          if (k < DimsAttrs(e).dims.size() && static_cast<size_t>(DimsAttrs(e).dims[k]) == d) {
            ++k;
            continue;
          }
          sub[d] = at(in, d, map[o++]);
        }
        break;
      }
      case Op::UNSQUEEZE: {
        size_t o = 0;
        for (size_t d = 0; d < ri; ++d, ++o) {
          if (o == DimAttr(e).index()) ++o;
          sub[d] = at(in, d, map[o]);
        }
        break;
      }
      case Op::SLICE: {
        const size_t dim = static_cast<size_t>(SliceAttrs(e).dim);
        for (size_t d = 0; d < r; ++d) sub[d] = at(in, d, map[d]);
        if (c_.size_classes[static_cast<size_t>(in)][dim] == SizeClass::Many) sub[dim] = kOpaqueIndex;  // start + i * step
        break;
      }
      case Op::RESHAPE: {
        // The output's linear index unravelled over the input's dims, group
        // by group (reshape_groups.h): a dim kept whole reads its output
        // dim's index.
        if (!any_many(e.outputs[0])) break;
        for (size_t d = 0; d < ri; ++d)
          if (c_.size_classes[static_cast<size_t>(in)][d] == SizeClass::Many) sub[d] = kOpaqueIndex;
        auto g = c_.reshapes.find(static_cast<int64_t>(&e - c_.fusion->exprs.data()));
        if (g == c_.reshapes.end()) break;
        size_t id = 0, od = 0;
        for (const ReshapeGroup& grp : g->second) {
          if (grp.in_dims == 1 && grp.out_dims == 1 && c_.size_classes[static_cast<size_t>(in)][id] == SizeClass::Many)
            sub[id] = at(in, id, map[od]);
          id += static_cast<size_t>(grp.in_dims);
          od += static_cast<size_t>(grp.out_dims);
        }
        break;
      }
      case Op::PAD:
        for (size_t d = 0; d < r; ++d)
          sub[d] = !PadAttrs(e).pads_dim(d) ? at(in, d, map[d])
                   : shifts_ && !one(in, d)  ? shifted(map[d], PadAttrs(e).low(d))
                                             : kOpaqueIndex;
        break;
      case Op::CAT: {
        const size_t dim = DimAttr(e).index();
        for (size_t k = 0; k < e.inputs.size(); ++k) {
          const int64_t a = e.inputs[k];
          IndexMap s(r, kZeroIndex);
          for (size_t d = 0; d < r; ++d) s[d] = at(a, d, map[d]);
          // Inputs after the first read their part at an offset (known at
          // run time only); with shifts, the first too is read inside a
          // bound.
          if (c_.size_classes[static_cast<size_t>(a)][dim] == SizeClass::Many) {
            if (shifts_) s[dim] = shifted(map[dim], 0);
            else if (k > 0) s[dim] = kOpaqueIndex;
          }
          next->push_back({a, s});
        }
        return;
      }
      default: return;
    }
    next->push_back({in, sub});
  }

  void indexing(const Expr& e, const IndexMap& map, std::vector<std::pair<int64_t, IndexMap>>* next) {
    const int64_t in = e.inputs[0], index = e.inputs[1];
    const size_t dim = DimAttr(e).index();
    if (e.op == Op::INDEX_SELECT) next->push_back({index, {at(index, 0, map[dim])}});
    else next->push_back({index, map});
    IndexMap sub(map.size(), kZeroIndex);
    for (size_t d = 0; d < map.size(); ++d) sub[d] = at(in, d, map[d]);
    sub[dim] = c_.size_classes[static_cast<size_t>(in)][dim] == SizeClass::Many ? kOpaqueIndex : kZeroIndex;
    next->push_back({in, sub});
  }

  // A dim read at entry `m`'s domain dim shifted by `offset` (0: bounded
  // only, or known at run time only) inside a bound: plain or shifted
  // entries become shifted ones (the alignments compose), others opaque.
  static int shifted(int m, int64_t offset) {
    int align = 16;
    if (offset != 0) {
      const uint64_t o = offset < 0 ? 0 - static_cast<uint64_t>(offset) : static_cast<uint64_t>(offset);
      align = static_cast<int>(std::min<uint64_t>(o & (~o + 1), 16));
    }
    if (m >= 0) return shifted_index(m, align);
    if (is_shifted(m)) return shifted_index(shifted_dim(m), std::min(align, shifted_align(m)));
    return kOpaqueIndex;
  }

  const ConcreteFusion& c_;
  const Fusion& f_;
  const bool shifts_;
  std::set<int64_t> produced_;
  std::set<std::pair<int64_t, IndexMap>> seen_;
  std::vector<std::pair<int64_t, IndexMap>> stack_;
};

}  // namespace

IndexMap identity_map(const ConcreteFusion& c, int64_t domain) {
  const auto& cls = c.size_classes[static_cast<size_t>(domain)];
  IndexMap m(cls.size(), kZeroIndex);
  for (size_t d = 0; d < cls.size(); ++d)
    if (cls[d] == SizeClass::Many) m[d] = static_cast<int>(d);
  return m;
}

AccessMap trace_accesses(const ConcreteFusion& c, const Task& task,
                         const std::vector<std::pair<int64_t, IndexMap>>& roots, bool shifts) {
  Tracer t(c, task, shifts);
  for (const auto& [v, map] : roots) t.visit(v, map);
  return std::move(t.out);
}

}  // namespace kf
