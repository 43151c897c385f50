#include "core/schedule/kernel_schedule.h"

#include <algorithm>

namespace kf {

std::vector<size_t> RowDomain::dims_in_order(bool reduced_dims) const {
  std::vector<size_t> dims;
  if (order.size() == reduced.size()) {
    for (size_t d : order)
      if (reduced[d] == reduced_dims) dims.push_back(d);
  } else {
    for (size_t d = 0; d < reduced.size(); ++d)
      if (reduced[d] == reduced_dims) dims.push_back(d);
  }
  return dims;
}

namespace {

std::string ids(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

std::string vectors(const VectorPlan& p) {
  if (p.width == 0) return "vector=none";
  std::vector<int64_t> in, shifted;
  for (const auto& [v, dims] : p.inputs) {
    in.push_back(v);
    if (std::any_of(dims.begin(), dims.end(), is_shifted)) shifted.push_back(v);
  }
  // (the inputs read at a shift, only where there are: older goldens stay)
  return "vector=" + std::to_string(p.width) + " vector_inputs=" + ids(in) +
         (shifted.empty() ? "" : " shifted_inputs=" + ids(shifted)) +
         (p.any_aligned.empty() ? "" : " any_aligned=" + ids(p.any_aligned)) + " vector_outputs=" + ids(p.outputs);
}

std::string rows(const RowDomain& r) {
  std::string reduced;
  for (size_t d = 0; d < r.reduced.size(); ++d)
    if (r.reduced[d]) reduced += (reduced.empty() ? "" : ",") + std::to_string(d);
  // The memory order only where it is not the logical one (older goldens
  // stay as they were).
  std::string order;
  bool logical = true;
  for (size_t k = 0; k < r.order.size(); ++k) {
    order += (k > 0 ? "," : "") + std::to_string(r.order[k]);
    logical = logical && r.order[k] == k;
  }
  return "domain=" + std::to_string(r.domain) + " reduced=[" + reduced + "]" + (logical ? "" : " order=[" + order + "]") +
         " phases=" + std::to_string(r.phases.size()) + " domain_outputs=" + ids(r.domain_outputs) +
         " row_outputs=" + ids(r.row_outputs);
}

// " online=[max:sum,...]" (max and sum expr ids), or "" for none.
std::string online_pairs(const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  if (pairs.empty()) return "";
  std::string s = " online=[";
  for (size_t i = 0; i < pairs.size(); ++i)
    s += (i > 0 ? "," : "") + std::to_string(pairs[i].first) + ":" + std::to_string(pairs[i].second);
  return s + "]";
}

struct Describe {
  std::string operator()(const PointwiseParams& p) const {
    std::string s = "pointwise block=" + std::to_string(p.block) + " unroll=" + std::to_string(p.unroll) +
                    " loops=" + std::to_string(p.loops.size());
    for (const PointwiseLoop& l : p.loops) {
      std::string order;
      for (size_t d : l.order) order += (order.empty() ? "" : ",") + std::to_string(d);
      s += " {outputs=" + ids(l.outputs) + " order=[" + order + "] " + vectors(l.vectors) +
           (l.unroll != p.unroll ? " unroll=" + std::to_string(l.unroll) : "") +
           (l.window > 0 ? " window=" + std::to_string(l.window) : "") + "}";
    }
    if (p.min_blocks > 0) s += " min_blocks=" + std::to_string(p.min_blocks);
    if (p.scalar_unroll > 1) s += " scalar_unroll=" + std::to_string(p.scalar_unroll);
    return s;
  }
  // A tiled group's further dims ("+1": dim a's group also holds dim 1).
  static std::string group(const std::vector<size_t>& dims) {
    std::string s;
    for (size_t d : dims) s += "+" + std::to_string(d);
    return s;
  }
  std::string operator()(const TiledParams& p) const {
    std::vector<int64_t> in;
    for (const TiledInput& t : p.inputs) in.push_back(t.value);
    return "tiled block=" + std::to_string(p.block) + " tile=" + std::to_string(p.tile) + "x" + std::to_string(p.tile) +
           " dim_a=" + std::to_string(p.dim_a) + group(p.group_a) + " dim_b=" + std::to_string(p.dim_b) + group(p.group_b) +
           " tiled_inputs=" + ids(in) +
           " outputs=" + ids(p.outputs) + (p.outputs_a.empty() ? "" : " outputs_a=" + ids(p.outputs_a)) +
           (p.outputs_staged.empty() ? "" : " outputs_staged=" + ids(p.outputs_staged)) + " " +
           vectors(p.vectors) +
           (p.order != 3 ? std::string(" order=") + (p.order == 2 ? "a" : "diagonal") : "") +
           (p.walk_b_with_a ? " walk_b_with_a" : "") + (p.vectors_without_fill ? " vectors_without_fill" : "");
  }
  std::string operator()(const RowParams& p) const {
    std::string s = "row block=" + std::to_string(p.block) + " " + rows(p.rows) + " " + vectors(p.vectors);
    if (p.vectors.width > 0) s += " cached_vectors_per_thread=" + std::to_string(p.vectors_per_thread);
    s += online_pairs(p.online);
    if (p.stream_rows) s += " stream_rows";
    if (!p.split_epilogue_reversed) s += " split_epilogue_forward";  // (reversed is the default)
    if (!p.staged.empty()) s += " staged=" + ids(p.staged) + (p.stage_outer ? " stage_outer" : "");
    if (p.has_outer())
      s += " outer={" + rows(p.outer) + "} outer_threads_per_sm=" + std::to_string(p.outer_threads_per_sm);
    if (p.edge_vectors.width > 0) s += " edges={" + vectors(p.edge_vectors) + "}";  // the Edges kernels' plan
    if (p.cluster_max > 0) s += " cluster_max=" + std::to_string(p.cluster_max) + " cluster_block=" + std::to_string(p.cluster_block);
    if (p.cluster_stageable) s += " cluster_stageable";
    if (!p.across.empty()) s += " across=" + ids(p.across) + " across_rows=" + std::to_string(p.across_rows);
    return s;
  }
  std::string operator()(const ScatterParams& p) const {
    return "scatter block=" + std::to_string(p.block) + " expr=" + std::to_string(p.expr) +
           " index=" + (p.slices ? "slices" : "elements") + (p.slices ? " index_dim=" + std::to_string(p.index_dim) : "") +
           " reduce=" + scatter_reduce_name(p.reduce) + (p.include_self ? "" : " exclude_self") +
           " path=" + (p.sorted ? "sorted" : "atomic") +
           (p.sorted_min_width > 0 ? " atomic_below_width=" + std::to_string(p.sorted_min_width) +
                                         " atomic_above_run=" + std::to_string(p.sorted_max_run) : "") +
           (p.sorted ? " lanes=" + std::to_string(p.lanes) + " unroll=" + std::to_string(p.unroll) : "") +
           (p.update_unroll > 1 ? " update_unroll=" + std::to_string(p.update_unroll) : "");
  }
  std::string operator()(const ScanParams& p) const {
    return "scan block=" + std::to_string(p.block) + " expr=" + std::to_string(p.expr) +
           (p.block_per_line ? " lines=blocks items=" + std::to_string(p.items) + " " + vectors(p.vectors) +
                                  (p.vectors.width > 0 ? " vector_steps=" + std::to_string(p.vector_steps) : "")
            : p.pass_rows > 0 ? " lines=threads single_pass pass_rows=" + std::to_string(p.pass_rows) + " " + vectors(p.vectors)
                              : " lines=threads line_steps=" + std::to_string(p.line_steps));
  }
  std::string operator()(const ColumnParams& p) const {
    return "column block=" + std::to_string(p.block) + " tile_cols=" + std::to_string(p.tile_cols()) +
           " row_groups=" + std::to_string(p.row_groups) + " " + rows(p.rows) + " " + vectors(p.vectors) +
           online_pairs(p.online) + (p.epilogue_blocks > 0 ? " epilogue_blocks=" + std::to_string(p.epilogue_blocks) : "") +
           (p.scalar_rows != 4 ? " scalar_rows=" + std::to_string(p.scalar_rows) : "") +
           (p.any_rows != 1 ? " any_rows=" + std::to_string(p.any_rows) : "") +
           (p.short_rows > 0 ? " short_rows=" + std::to_string(p.short_rows) : "");
  }
};

}  // namespace

SchedulerKind kind_of(const KernelSchedule& s) {
  if (const auto* r = std::get_if<RowParams>(&s))
    return r->rows.normalizes ? SchedulerKind::Normalization : SchedulerKind::Reduction;
  if (const auto* c = std::get_if<ColumnParams>(&s))
    return c->rows.normalizes ? SchedulerKind::Normalization : SchedulerKind::Reduction;
  if (std::holds_alternative<ScatterParams>(s)) return SchedulerKind::Scatter;
  if (std::holds_alternative<ScanParams>(s)) return SchedulerKind::Scan;
  return SchedulerKind::Pointwise;
}

std::string_view family_of(const KernelSchedule& s) {
  static constexpr std::string_view names[] = {"pointwise", "tiled", "row", "column", "scatter", "scan"};
  if (const auto* r = std::get_if<RowParams>(&s); r != nullptr && r->has_outer()) return "inner_outer";
  return names[s.index()];
}

std::string describe(const KernelSchedule& s) { return std::visit(Describe{}, s); }

}  // namespace kf
