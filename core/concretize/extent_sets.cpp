#include "core/concretize/extent_sets.h"

#include <map>

#include "core/ir/op_attrs.h"
#include "core/util/env_switch.h"

namespace kf {

namespace {
constexpr int64_t kZeroAtom = 0, kOneAtom = 1;  // shared atoms of classes 0 and 1
}

bool reshape_target_extents() {
  static const bool on = env_switch("KFUSE_RESHAPE_EXTENTS", true);
  return on;
}

ExtentSets::ExtentSets(const ConcreteFusion& c, bool reshape_targets) : c_(c) {
  const Fusion& f = *c.fusion;
  first_.resize(f.values.size());
  int64_t n = 2;
  for (size_t v = 0; v < f.values.size(); ++v) {
    first_[v] = n;
    n += static_cast<int64_t>(c.size_classes[v].size());
  }
  // One more atom per constant a reshape takes as a target extent (above
  // 1): every extent given by that constant is that number in every call.
  std::map<int64_t, int64_t> constant_atoms;
  for (const Expr& e : f.exprs)
    if (reshape_targets && e.op == Op::RESHAPE)
      for (size_t i = 1; i < e.inputs.size(); ++i) {
        const Value& t = f.value(e.inputs[i]);
        if (t.kind == ValueKind::Constant && t.i64 > 1 && !constant_atoms.contains(t.i64)) constant_atoms[t.i64] = n++;
      }
  parent_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) parent_[static_cast<size_t>(i)] = i;
  for (size_t v = 0; v < f.values.size(); ++v)
    for (size_t d = 0; d < c.size_classes[v].size(); ++d) {
      SizeClass k = c.size_classes[v][d];
      if (k != SizeClass::Many) unite(atom(static_cast<int64_t>(v), d), k == SizeClass::One ? kOneAtom : kZeroAtom);
    }

  auto cls = [&](int64_t v, size_t d) { return c.size_classes[static_cast<size_t>(v)][d]; };
  auto rank = [&](int64_t v) { return c.size_classes[static_cast<size_t>(v)].size(); };
  // Unites out dim `od` with in dim `id` when the input extent is not a
  // broadcast (a class-1 input extent says nothing about the output's).
  auto map_dim = [&](int64_t out, size_t od, int64_t in, size_t id) {
    if (cls(in, id) == SizeClass::One && cls(out, od) != SizeClass::One) return;
    unite(atom(out, od), atom(in, id));
  };
  for (const Expr& e : f.exprs) {
    const int64_t out = e.outputs[0];
    const size_t r = rank(out);
    switch (op_info(e.op).category) {
      case OpCategory::Unary:
      case OpCategory::Binary:
      case OpCategory::Ternary:
      case OpCategory::Cast:
        for (int64_t in : e.inputs) {
          const size_t ri = rank(in);
          for (size_t j = 0; j < ri; ++j) map_dim(out, r - ri + j, in, j);
        }
        break;
      case OpCategory::Hint:
        for (size_t d = 0; d < r; ++d) map_dim(out, d, e.inputs[0], d);
        break;
      case OpCategory::Reduction: {
        const ReduceAttrs ra(e);
        const bool keepdim = ra.keepdim;
        const std::vector<bool> reduced = ra.reduced(rank(e.inputs[0]));
        for (int64_t o : e.outputs) {
          size_t k = 0;
          for (size_t d = 0; d < reduced.size(); ++d) {
            if (reduced[d]) {
              if (keepdim) ++k;
              continue;
            }
            map_dim(o, k++, e.inputs[0], d);
          }
        }
        break;
      }
      case OpCategory::Shape:
        switch (e.op) {
          case Op::BROADCAST_IN_DIM:
            for (size_t j = 0; j < DimsAttrs(e).dims.size(); ++j)
              map_dim(out, static_cast<size_t>(DimsAttrs(e).dims[j]), e.inputs[0], j);
            break;
          case Op::EXPAND: {
            const size_t ri = rank(e.inputs[0]);
            for (size_t j = 0; j < ri; ++j) map_dim(out, r - ri + j, e.inputs[0], j);
            break;
          }
          case Op::PERMUTE:
            for (size_t i = 0; i < r; ++i) map_dim(out, i, e.inputs[0], static_cast<size_t>(PermuteAttrs(e).perm[i]));
            break;
          case Op::SQUEEZE: {
            size_t k = 0, o = 0;
            for (size_t d = 0; d < rank(e.inputs[0]); ++d) {
              if (k < DimsAttrs(e).dims.size() && static_cast<size_t>(DimsAttrs(e).dims[k]) == d) {
                ++k;
                continue;
              }
              map_dim(out, o++, e.inputs[0], d);
            }
            break;
          }
          case Op::UNSQUEEZE: {
            size_t o = 0;
            for (size_t d = 0; d < rank(e.inputs[0]); ++d, ++o) {
              if (o == DimAttr(e).index()) ++o;
              map_dim(out, o, e.inputs[0], d);
            }
            break;
          }
          case Op::SLICE:
            for (size_t d = 0; d < r; ++d)
              if (d != static_cast<size_t>(SliceAttrs(e).dim)) map_dim(out, d, e.inputs[0], d);
            break;
          case Op::PAD:
            for (size_t d = 0; d < r; ++d)
              if (!PadAttrs(e).pads_dim(d)) map_dim(out, d, e.inputs[0], d);
            break;
          case Op::CAT:
            for (int64_t in : e.inputs)
              for (size_t d = 0; d < r; ++d)
                if (d != DimAttr(e).index()) map_dim(out, d, in, d);
            break;
          case Op::RESHAPE: {  // a dim kept whole (one dim on each side of its group)
            auto it = c.reshapes.find(static_cast<int64_t>(&e - f.exprs.data()));
            if (it == c.reshapes.end()) break;
            size_t id = 0, od = 0;
            for (const ReshapeGroup& g : it->second) {
              if (g.in_dims == 1 && g.out_dims == 1) map_dim(out, od, e.inputs[0], id);
              id += static_cast<size_t>(g.in_dims);
              od += static_cast<size_t>(g.out_dims);
            }
            // A target extent given by a constant, or by an extent query
            // (size), is that constant or that extent in every call: equal
            // to every extent given the same way (q and k rotated apart and
            // reshaped back to [b, s, h, d]: one loop, not two).
            for (size_t d = 0; reshape_targets && d < r && d + 1 < e.inputs.size(); ++d) {
              if (cls(out, d) != SizeClass::Many) continue;
              const Value& t = f.value(e.inputs[d + 1]);
              if (t.kind == ValueKind::Constant && t.i64 > 1) {
                unite(atom(out, d), constant_atoms.at(t.i64));
              } else if (t.producer >= 0 && f.exprs[static_cast<size_t>(t.producer)].op == Op::SIZE) {
                const Expr& q = f.exprs[static_cast<size_t>(t.producer)];
                unite(atom(out, d), atom(q.inputs[0], static_cast<size_t>(q.attrs[0])));
              }
            }
            break;
          }
          default: break;
        }
        break;
      case OpCategory::Indexing: {
        const size_t dim = DimAttr(e).index();
        if (e.op == Op::INDEX_SELECT) {
          for (size_t d = 0; d < r; ++d)
            if (d != dim) map_dim(out, d, e.inputs[0], d);
          map_dim(out, dim, e.inputs[1], 0);
        } else {
          for (size_t d = 0; d < r; ++d) map_dim(out, d, e.inputs[1], d);
        }
        break;
      }
      case OpCategory::Scan:
      case OpCategory::Scatter:  // the input's sizes
        for (size_t d = 0; d < r; ++d) map_dim(out, d, e.inputs[0], d);
        break;
      case OpCategory::Communication: {  // every dim but the one that is gathered or split
        const CommAttrs ca(e);
        for (size_t d = 0; d < r; ++d)
          if (e.op == Op::ALLREDUCE || d != static_cast<size_t>(ca.dim)) map_dim(out, d, e.inputs[0], d);
        break;
      }
      default: break;  // creation, library: sizes from scalars or not mapped
    }
  }
}

int64_t ExtentSets::find(int64_t a) const {
  if (frozen_) return parent_[static_cast<size_t>(a)];
  while (parent_[static_cast<size_t>(a)] != a) {
    parent_[static_cast<size_t>(a)] = parent_[static_cast<size_t>(parent_[static_cast<size_t>(a)])];
    a = parent_[static_cast<size_t>(a)];
  }
  return a;
}

void ExtentSets::unite(int64_t a, int64_t b) {
  a = find(a);
  b = find(b);
  if (a == b) return;
  if (a < b) parent_[static_cast<size_t>(b)] = a;  // the shared 0/1 atoms stay roots
  else parent_[static_cast<size_t>(a)] = b;
}

void ExtentSets::freeze() {
  for (size_t a = 0; a < parent_.size(); ++a) parent_[a] = find(static_cast<int64_t>(a));
  frozen_ = true;
}

const ExtentSets& extent_sets_of(const ConcreteFusion& c) { return *c.extent_sets; }

int64_t ExtentSets::set_of(int64_t value, int dim) const {
  return find(atom(value, static_cast<size_t>(dim)));
}

bool ExtentSets::same_sizes(int64_t a, int64_t b) const {
  const size_t r = c_.size_classes[static_cast<size_t>(a)].size();
  if (r != c_.size_classes[static_cast<size_t>(b)].size()) return false;
  for (size_t d = 0; d < r; ++d)
    if (!same(a, static_cast<int>(d), b, static_cast<int>(d))) return false;
  return true;
}

}  // namespace kf
