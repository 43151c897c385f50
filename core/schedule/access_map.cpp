#include "core/schedule/access_map.h"
#include "core/ir/index_rules.h"
#include "core/ir/op_table.h"

#include <algorithm>
#include <set>

namespace kf {

namespace {

class Tracer {
 public:
  Tracer(const ConcreteFusion& c, const Task& task, bool shifts, SliceReads slices, const AccessStops* stops)
      : c_(c), f_(*c.fusion), shifts_(shifts), slices_(shifts ? slices : SliceReads::Opaque), stops_(stops) {
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
    if (stops_ != nullptr && stops_->contains({v, map})) return;
    const Expr& e = f_.exprs[static_cast<size_t>(val.producer)];
    switch (op_info(e.op).category) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
      case OpCategory::Hint:
      case OpCategory::Shape:
        for (size_t k = 0; k < e.inputs.size(); ++k)
          if (has_index_rule(e, k)) next->push_back({e.inputs[k], operand_map(e, k, map)});
        return;
      case OpCategory::Indexing:  // the index first, then the input at it
        next->push_back({e.inputs[1], operand_map(e, 1, map)});
        next->push_back({e.inputs[0], operand_map(e, 0, map)});
        return;
      case OpCategory::Reduction:  // read by the reduction's own loop
      case OpCategory::Creation:   // reads scalars only
      case OpCategory::Query:      // reads sizes only
      case OpCategory::Library:
      case OpCategory::Scatter:  // a segment of its own
      case OpCategory::Scan:
      case OpCategory::Communication: return;
    }
  }

  const std::vector<SizeClass>& classes(int64_t v) const { return c_.size_classes[static_cast<size_t>(v)]; }

  // The map e reads its operand k at, for its output read at `map`: the
  // op's index rule (core/ir/index_rules.h) with each term as an IndexMap
  // entry. A computed index is opaque, except with shifts where a bound
  // guards it (a pad's input, a cat's operands along its dim); a reshape's
  // group of one dim each side passes its index through.
  IndexMap operand_map(const Expr& e, size_t k, const IndexMap& map) const {
    const int64_t in = e.inputs[k];
    const ReshapeGroups* groups = nullptr;
    if (e.op == Op::RESHAPE)
      if (auto g = c_.reshapes.find(static_cast<int64_t>(&e - f_.exprs.data())); g != c_.reshapes.end())
        groups = &g->second;
    const OperandIndex terms = operand_index(e, k, classes(e.outputs[0]), classes(in), groups);
    IndexMap sub(terms.size(), kZeroIndex);
    for (size_t d = 0; d < terms.size(); ++d) {
      const IndexTerm& t = terms[d];
      const int m = t.kind == IndexTerm::Kind::Zero ? kZeroIndex : map[static_cast<size_t>(t.dim)];
      switch (t.kind) {
        case IndexTerm::Kind::Zero: sub[d] = kZeroIndex; break;
        case IndexTerm::Kind::Out: sub[d] = m; break;
        case IndexTerm::Kind::Slice:  // start + i * step (a start from the end: known at run time only)
          sub[d] = t.b != 1 || slices_ == SliceReads::Opaque ? kOpaqueIndex
                   : slices_ == SliceReads::Unaligned        ? shifted(m, 1)
                   : t.a >= 0                                ? shifted(m, t.a)
                                                             : shifted(m, 0);
          break;
        case IndexTerm::Kind::Gathered: sub[d] = kOpaqueIndex; break;
        case IndexTerm::Kind::Pad:
          sub[d] = shifts_ && classes(in)[d] != SizeClass::One ? shifted(m, t.a) : kOpaqueIndex;
          break;
        case IndexTerm::Kind::CatPart:
          // Operands after the first read their part at an offset (known at
          // run time only); with shifts, the first too is read inside a bound.
          sub[d] = shifts_ ? shifted(m, 0) : t.a > 0 ? kOpaqueIndex : m;
          break;
        case IndexTerm::Kind::Regroup:
          sub[d] = t.b == 0 ? kZeroIndex : t.passes_through() ? m : kOpaqueIndex;
          break;
      }
    }
    return sub;
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
  const SliceReads slices_;
  const AccessStops* stops_;
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
                         const std::vector<std::pair<int64_t, IndexMap>>& roots, bool shifts, SliceReads slices,
                         const AccessStops* stops) {
  Tracer t(c, task, shifts, slices, stops);
  for (const auto& [v, map] : roots) t.visit(v, map);
  return std::move(t.out);
}

}  // namespace kf
