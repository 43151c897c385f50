#include "core/schedule/row_domain.h"

#include <algorithm>
#include <unordered_map>

#include "core/schedule/access_map.h"
#include "core/concretize/extent_sets.h"
#include "core/schedule/vector_plan.h"
#include "core/schedule/why_not.h"
#include "core/ir/op_attrs.h"

namespace kf {

namespace {

// Whether `v` is row-shaped: the domain's kept dims, with (keepdim) or
// without the reduced dims as size-1 dims.
bool is_row_shaped(const ConcreteFusion& c, const ExtentSets& sets, const RowDomain& s, int64_t v) {
  const auto& vc = c.size_classes[static_cast<size_t>(v)];
  const size_t r = s.reduced.size();
  size_t kept = 0;
  for (bool b : s.reduced) kept += !b;
  if (vc.size() == r) {
    for (size_t d = 0; d < r; ++d) {
      if (s.reduced[d] ? vc[d] != SizeClass::One
                       : !sets.same(v, static_cast<int>(d), s.domain, static_cast<int>(d)))
        return false;
    }
    return true;
  }
  if (vc.size() != kept) return false;
  size_t k = 0;
  for (size_t d = 0; d < r; ++d) {
    if (s.reduced[d]) continue;
    if (!sets.same(v, static_cast<int>(k), s.domain, static_cast<int>(d))) return false;
    ++k;
  }
  return true;
}

// The map at which a row-shaped value of rank `rank` is read in its own row.
IndexMap row_map(const ConcreteFusion& c, const RowDomain& s, size_t rank) {
  const IndexMap id = identity_map(c, s.domain);
  IndexMap m;
  for (size_t d = 0; d < s.reduced.size(); ++d) {
    if (rank == s.reduced.size()) m.push_back(s.reduced[d] ? kZeroIndex : id[d]);
    else if (!s.reduced[d]) m.push_back(id[d]);
  }
  return m;
}

}  // namespace

std::vector<bool> reduced_dims(const Expr& e, size_t rank) { return ReduceAttrs(e).reduced(rank); }

AccessMap row_accesses(const ConcreteFusion& c, const Task& task, const RowDomain& s,
                       const std::vector<int64_t>& domain_reads) {
  const Fusion& f = *c.fusion;
  const IndexMap id = identity_map(c, s.domain);
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : s.domain_outputs) roots.push_back({s.views.contains(o) ? s.views.at(o) : o, id});
  for (int64_t v : domain_reads) roots.push_back({v, id});
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (op_info(e.op).category == OpCategory::Reduction) roots.push_back({e.inputs[0], id});
  }
  for (int64_t o : s.row_outputs) roots.push_back({o, row_map(c, s, c.size_classes[static_cast<size_t>(o)].size())});
  return trace_accesses(c, task, roots);
}

namespace {

// The domain-shaped value that output `o` reshapes, when the task's only
// use of `o` is as an output (-1 otherwise).
int64_t reshaped_domain_value(const ConcreteFusion& c, const Task& task, const ExtentSets& sets, int64_t domain,
                              int64_t o) {
  const Fusion& f = *c.fusion;
  const int64_t producer = f.value(o).producer;
  if (producer < 0 || f.exprs[static_cast<size_t>(producer)].op != Op::RESHAPE || !c.reshapes.contains(producer)) return -1;
  if (std::find(task.exprs.begin(), task.exprs.end(), producer) == task.exprs.end()) return -1;
  const int64_t u = f.exprs[static_cast<size_t>(producer)].inputs[0];
  if (!sets.same_sizes(u, domain)) return -1;
  for (int64_t ei : task.exprs) {
    const auto& ins = f.exprs[static_cast<size_t>(ei)].inputs;
    if (std::find(ins.begin(), ins.end(), o) != ins.end()) return -1;
  }
  return u;
}

// The domain's memory order (RowDomain::order). The reference is one task
// input read at a plain map of the domain (each of its dims a domain dim,
// or a size-1 dim): the rows are walked in its layout, so that it, the
// input that costs most, is read at consecutive addresses. Sizes vary
// within a concretization class, so "the largest input" is decided
// statically, by what makes an input larger in every call: first an
// innermost dim of stride 1 (a stride-0 broadcast sorts innermost by
// stride and is never contiguous: following it would walk a broadcast),
// then the most domain dims of class >1 covered (a broadcast weight covers
// fewer), then the widest dtype; ties go to the first in the task's input
// order (deterministic). The order: the dims the reference does not
// cover (class 0/1, never walked; a broadcast) in logical order, then the
// reference's dims in its order. Without a reference, the logical order
// (what the kernels walked before).
std::vector<size_t> memory_order(const ConcreteFusion& c, const Task& task, const RowDomain& s, const AccessMap& reads) {
  const Fusion& f = *c.fusion;
  const auto& dom_cls = c.size_classes[static_cast<size_t>(s.domain)];
  const size_t r = dom_cls.size();
  std::vector<size_t> logical(r);
  for (size_t d = 0; d < r; ++d) logical[d] = d;
  std::vector<int> best_dims;  // the reference's dims of class >1 in its order, as domain dims
  int best_score[3] = {-1, -1, -1};
  for (int64_t v : task.inputs) {
    const Value& val = f.value(v);
    if (val.is_scalar) continue;
    const std::vector<IndexMap>* maps = reads.find(v);
    if (maps == nullptr) continue;
    const auto& cls = c.size_classes[static_cast<size_t>(v)];
    const IndexMap* plain = nullptr;
    for (const IndexMap& m : *maps) {
      bool ok = m.size() == cls.size();
      for (size_t j = 0; j < cls.size() && ok; ++j)
        ok = (m[j] >= 0 && (cls[j] != SizeClass::Many || dom_cls[static_cast<size_t>(m[j])] == SizeClass::Many)) ||
             (m[j] == kZeroIndex && cls[j] != SizeClass::Many);
      if (ok) {
        plain = &m;
        break;
      }
    }
    if (plain == nullptr) continue;
    const bool layout_known = val.kind == ValueKind::TensorInput;
    const std::vector<int>& order =
        layout_known ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order : c.stride_orders[static_cast<size_t>(v)];
    if (order.size() != cls.size()) continue;
    std::vector<int> dims;
    int inner = -1;
    for (int j : order)
      if (cls[static_cast<size_t>(j)] == SizeClass::Many) {
        const int d = (*plain)[static_cast<size_t>(j)];
        if (std::find(dims.begin(), dims.end(), d) != dims.end()) dims.clear(), inner = -2;  // a diagonal: not a layout
        if (inner == -2) break;
        dims.push_back(d);
        inner = j;
      }
    // Only an input that spans the domain (every dim of class >1) orders
    // it: a MoE combine's routing weights [T, K], broadcast over the
    // hidden dim, once ordered the domain [T, K, H] with K innermost and
    // sent it to the row kernel without vectors, while the expert rows
    // (read through a gather, no plain map) run along H.
    // (No dims: nothing to order by, or a diagonal, where `inner` is no dim.)
    if (dims.empty() || dims.size() != static_cast<size_t>(std::count(dom_cls.begin(), dom_cls.end(), SizeClass::Many)))
      continue;
    // Inputs written by an earlier kernel are dense in their layout.
    const bool unit_inner =
        !layout_known || c.input_layouts[static_cast<size_t>(val.input_index)].contiguous[static_cast<size_t>(inner)];
    const int score[3] = {unit_inner ? 1 : 0, static_cast<int>(dims.size()), dtype_size(val.dtype)};
    if (std::lexicographical_compare(best_score, best_score + 3, score, score + 3)) {
      std::copy(score, score + 3, best_score);
      best_dims = std::move(dims);
    }
  }
  if (best_dims.empty() || best_score[0] == 0) return logical;
  // The domain-shaped outputs vote too, against the reference, by the dim
  // innermost in their memory (the caller's layout with kf_execute_into).
  // A kernel reads or writes the losing side across its lines, and a
  // strided write costs more than a strided read: outputs count twice
  // their bytes, inputs spanning the domain once (H200, docs/perf-log.md
  // session 28: a residual add + RMSNorm of a transposed x into row-major
  // outputs took 3.24 ms walked in x's order, 0.56 ms in the outputs';
  // softmax over dim 0 of a transposed x into a row-major output 4.25
  // against 2.91).
  const int reference_inner = best_dims.back();
  int64_t votes_for = 0, votes_against = 0;
  auto vote = [&](const std::vector<int>& order, const std::vector<SizeClass>& cls, const IndexMap* map, int64_t w) {
    for (size_t k = order.size(); k-- > 0;) {
      const size_t j = static_cast<size_t>(order[k]);
      if (cls[j] != SizeClass::Many) continue;
      const int d = map != nullptr ? (*map)[j] : static_cast<int>(j);
      (d == reference_inner ? votes_for : votes_against) += w;
      return;
    }
  };
  for (int64_t v : task.inputs) {
    const Value& val = f.value(v);
    const std::vector<IndexMap>* maps = reads.find(v);
    if (val.is_scalar || maps == nullptr || val.kind != ValueKind::TensorInput) continue;
    const auto& cls = c.size_classes[static_cast<size_t>(v)];
    const int64_t spans = std::count(cls.begin(), cls.end(), SizeClass::Many);
    if (spans != std::count(dom_cls.begin(), dom_cls.end(), SizeClass::Many)) continue;  // (weights, stats)
    for (const IndexMap& m : *maps) {
      bool plain = m.size() == cls.size();
      for (size_t j = 0; j < cls.size() && plain; ++j) plain = m[j] >= 0 || cls[j] != SizeClass::Many;
      if (!plain) continue;
      vote(c.input_layouts[static_cast<size_t>(val.input_index)].stride_order, cls, &m, dtype_size(val.dtype));
      break;
    }
  }
  for (int64_t o : s.domain_outputs) {
    if (s.views.contains(o)) continue;
    const auto& order = c.stride_orders[static_cast<size_t>(o)];
    if (order.size() == dom_cls.size()) vote(order, dom_cls, nullptr, 2 * int64_t{dtype_size(f.value(o).dtype)});
  }
  // (A tie keeps the logical walk: c0115, an in-place add + RMSNorm of a
  // transposed x into x and a row-major residual, 64 x 5120, took the
  // column kernel at a tie: 0.022 -> 0.049 ms, run 4.)
  if (votes_against >= votes_for) return logical;
  std::vector<size_t> order;
  for (size_t d = 0; d < r; ++d)
    if (std::find(best_dims.begin(), best_dims.end(), static_cast<int>(d)) == best_dims.end()) order.push_back(d);
  for (int d : best_dims) order.push_back(static_cast<size_t>(d));
  // Where the class >1 dims come in logical order the walk is the logical
  // one (dims of class 0/1 are never walked): say so, the logical order.
  size_t prev = 0;
  bool logical_walk = true;
  for (size_t d : order)
    if (dom_cls[d] == SizeClass::Many) logical_walk = logical_walk && (d >= prev), prev = d;
  return logical_walk ? logical : order;
}

// Where the walk's innermost dim is reduced (the row kernels), the rows
// (the kept dims) follow the memory order of the widest domain output whose
// innermost dim of class >1 is a kept dim, the reduced dims staying where
// they are. Such an output takes one element of each column per row, so
// rows next to each other in its memory must run at the same time (blocks
// take consecutive rows) for the partial sectors they write to merge in L2
// before memory (a layernorm of [8, 2047, 12288] into an output laid out
// [1, 2, 0], seed 259726623's c0036, walked the 8 rows that share each
// sector 2047 rows apart). The walk of each row is unchanged.
std::vector<size_t> rows_in_output_order(const ConcreteFusion& c, const RowDomain& s, std::vector<size_t> order) {
  const Fusion& f = *c.fusion;
  const auto& dom_cls = c.size_classes[static_cast<size_t>(s.domain)];
  const size_t r = dom_cls.size();
  if (order.size() != r || s.reduced.size() != r) return order;
  auto innermost = [&](const auto& dims) -> int {
    for (size_t k = dims.size(); k-- > 0;)
      if (dom_cls[static_cast<size_t>(dims[k])] == SizeClass::Many) return static_cast<int>(dims[k]);
    return -1;
  };
  const int inner = innermost(order);
  if (inner < 0 || !s.reduced[static_cast<size_t>(inner)]) return order;
  const std::vector<int>* by = nullptr;
  int width = 0;
  for (int64_t o : s.domain_outputs) {
    if (s.views.contains(o) || c.size_classes[static_cast<size_t>(o)] != dom_cls) continue;
    const std::vector<int>& oo = c.stride_orders[static_cast<size_t>(o)];
    const int oi = oo.size() == r ? innermost(oo) : -1;
    if (oi < 0 || s.reduced[static_cast<size_t>(oi)] || dtype_size(f.value(o).dtype) <= width) continue;
    by = &oo;
    width = dtype_size(f.value(o).dtype);
  }
  if (by == nullptr) return order;
  std::vector<size_t> kept;
  for (int d : *by)
    if (!s.reduced[static_cast<size_t>(d)]) kept.push_back(static_cast<size_t>(d));
  size_t k = 0;
  for (size_t& d : order)
    if (!s.reduced[d]) d = kept[k++];
  return order;
}

}  // namespace

std::optional<size_t> innermost_dim(const ConcreteFusion& c, const RowDomain& rows) {
  const size_t r = rows.reduced.size();
  const auto& cls = c.size_classes[static_cast<size_t>(rows.domain)];
  for (size_t k = r; k-- > 0;) {  // (dims of class 0/1 are never walked: skipped)
    const size_t d = rows.order.size() == r ? rows.order[k] : k;
    if (cls[d] == SizeClass::Many) return d;
  }
  return std::nullopt;
}

std::vector<int64_t> plain_domain_outputs(const RowDomain& rows) {
  std::vector<int64_t> outs;
  for (int64_t o : rows.domain_outputs)
    if (!rows.views.contains(o)) outs.push_back(o);
  return outs;
}

void add_view_vectors(const ConcreteFusion& c, const RowDomain& rows, VectorPlan* vp) {
  const Fusion& f = *c.fusion;
  // (lanes along another dim than the last: a permuted domain's)
  if (vp->dim + 1 != c.size_classes[static_cast<size_t>(rows.domain)].size()) return;
  for (const auto& [o, u] : rows.views) {
    (void)u;
    const auto& groups = c.reshapes.at(f.value(o).producer);
    const size_t ro = c.size_classes[static_cast<size_t>(o)].size();
    const auto& order = c.stride_orders[static_cast<size_t>(o)];
    if (vp->width == 0 || groups.empty() || groups.back().in_dims != 1 || groups.back().out_dims != 1 || ro == 0 ||
        c.size_classes[static_cast<size_t>(o)][ro - 1] != SizeClass::Many || order.empty() ||
        order.back() != static_cast<int>(ro - 1) || dtype_size(f.value(o).dtype) * vp->width > kVectorBytes)
      continue;
    vp->outputs.push_back(o);
  }
}

std::optional<RowDomain> find_row_domain(const ConcreteFusion& c, const Task& task, std::string* why,
                                         const std::vector<int64_t>& domain_reads) {
  const Fusion& f = *c.fusion;
  const ExtentSets& sets = extent_sets_of(c);
  std::vector<int64_t> reductions;
  for (int64_t ei : task.exprs)
    if (op_info(f.exprs[static_cast<size_t>(ei)].op).category == OpCategory::Reduction) reductions.push_back(ei);

  // Every reduction reduces the same dims of a domain of the same sizes.
  RowDomain s;
  const Expr& first = f.exprs[static_cast<size_t>(reductions.at(0))];
  s.domain = first.inputs[0];
  s.reduced = reduced_dims(first, c.size_classes[static_cast<size_t>(s.domain)].size());
  for (int64_t ei : reductions) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    const int64_t in = e.inputs[0];
    if (!sets.same_sizes(in, s.domain) ||
        reduced_dims(e, c.size_classes[static_cast<size_t>(in)].size()) != s.reduced)
      return reject(why, "reductions over different domains: " + std::string(op_name(e.op)) + " of value " +
                             std::to_string(in) + " and " + std::string(op_name(first.op)) + " of value " +
                             std::to_string(s.domain) + " do not reduce the same dims of provably equal sizes");
  }

  // Phase of each reduction: how many reductions lie upstream of its input.
  // A map sized by the task, not the fusion: segmentation asks about many
  // small groups of one large fusion.
  std::unordered_map<int64_t, int64_t> level;
  level.reserve(task.exprs.size() * 2);
  auto level_of = [&level](int64_t v) {
    auto it = level.find(v);
    return it == level.end() ? int64_t{0} : it->second;
  };
  for (int64_t ei : task.exprs) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    int64_t l = 0;
    for (int64_t in : e.inputs) l = std::max(l, level_of(in));
    if (op_info(e.op).category == OpCategory::Reduction) {
      if (static_cast<size_t>(l) >= s.phases.size()) s.phases.resize(static_cast<size_t>(l) + 1);
      s.phases[static_cast<size_t>(l)].push_back(ei);
      ++l;
    }
    for (int64_t o : e.outputs) level[o] = l;
  }
  if (s.phases.size() > kMaxRowPhases)
    return reject(why, std::to_string(s.phases.size()) + " chained reductions (phases), over the limit of " +
                           std::to_string(kMaxRowPhases) + " per kernel");

  for (int64_t o : task.outputs) {
    if (sets.same_sizes(o, s.domain)) {
      s.domain_outputs.push_back(o);
      if (level_of(o) > 0) s.normalizes = true;
    } else if (level_of(o) > 0 && is_row_shaped(c, sets, s, o)) {
      s.row_outputs.push_back(o);
    } else if (const int64_t u = reshaped_domain_value(c, task, sets, s.domain, o); u >= 0) {
      s.domain_outputs.push_back(o);
      s.views[o] = u;
      if (level_of(o) > 0) s.normalizes = true;
    } else {
      return reject(why, "output value " + std::to_string(o) +
                             " has sizes that neither the reduction domain (value " + std::to_string(s.domain) +
                             ") nor its rows provably have");
    }
  }

  // Reduction results live in registers for the current row only.
  const AccessMap reads = row_accesses(c, task, s, domain_reads);
  s.order = rows_in_output_order(c, s, memory_order(c, task, s, reads));
  for (int64_t ei : reductions)
    for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) {
      const std::vector<IndexMap>* maps = reads.find(o);
      if (maps == nullptr) continue;
      const auto& cls = c.size_classes[static_cast<size_t>(o)];
      const IndexMap own = row_map(c, s, cls.size());
      for (const IndexMap& m : *maps)
        for (size_t d = 0; d < cls.size(); ++d)
          if (cls[d] == SizeClass::Many && (own.size() != cls.size() || m[d] != own[d]))
            return reject(why, "the reduction result value " + std::to_string(o) +
                                   " is read at an index other than its own row");
    }
  return s;
}

}  // namespace kf
