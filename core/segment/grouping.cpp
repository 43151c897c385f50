#include "core/segment/grouping.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/segment/group_graph.h"

#include "core/segment/matmul_pattern.h"

namespace kf {

namespace {

// Library, communication, scatter and scan ops (their kernels write the
// whole result before anything reads it) each head a group of their own.
bool is_library(const Expr& e) {
  const OpCategory c = op_info(e.op).category;
  return c == OpCategory::Library || c == OpCategory::Communication || c == OpCategory::Scatter ||
         c == OpCategory::Scan;
}

// Stage of each expr: a segment_set starts a new stage after its producer.
std::vector<int64_t> expr_stages(const Fusion& f) {
  std::vector<int64_t> value_stage(f.values.size(), 0), stage(f.exprs.size(), 0);
  for (size_t i = 0; i < f.exprs.size(); ++i) {
    const Expr& e = f.exprs[i];
    int64_t s = 0;
    for (int64_t in : e.inputs) s = std::max(s, value_stage[static_cast<size_t>(in)]);
    if (e.op == Op::SEGMENT_SET) ++s;
    stage[i] = s;
    for (int64_t out : e.outputs) value_stage[static_cast<size_t>(out)] = s;
  }
  return stage;
}

struct UnionFind {
  std::vector<int64_t> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int64_t find(int64_t x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  }
  void unite(int64_t a, int64_t b) {
    a = find(a), b = find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// Rough bytes of a value for merge priority: sizes are not known at
// concretization, so each dim of class >1 counts as 1024 elements.
double value_weight(const ConcreteFusion& c, int64_t id) {
  const Value& v = c.fusion->value(id);
  double w = dtype_size(v.dtype);
  for (SizeClass s : c.size_classes[static_cast<size_t>(id)])
    if (s == SizeClass::Many) w *= 1024;
  return w;
}

// Kahn's algorithm over nodes 0..n-1 (those `alive`), ties broken by the
// smallest `first` (each group's first expr), so the order is
// deterministic. `indegree` is consumed. Returns fewer nodes than are
// alive only if the edges hold a cycle.
template <class Successors>
std::vector<int64_t> run_order(const std::vector<bool>& alive, std::vector<size_t> indegree,
                               const std::vector<int64_t>& first, const Successors& successors) {
  std::priority_queue<std::pair<int64_t, int64_t>> ready;  // (-first, node)
  for (size_t g = 0; g < alive.size(); ++g)
    if (alive[g] && indegree[g] == 0) ready.emplace(-first[g], static_cast<int64_t>(g));
  std::vector<int64_t> order;
  while (!ready.empty()) {
    const int64_t g = ready.top().second;
    ready.pop();
    order.push_back(g);
    for (int64_t s : successors(g))
      if (--indegree[static_cast<size_t>(s)] == 0) ready.emplace(-first[static_cast<size_t>(s)], s);
  }
  return order;
}

class Grouper {
 public:
  Grouper(const ConcreteFusion& c, const AcceptsGroup& accepts, bool merge_reductions)
      : c_(c), f_(*c.fusion), accepts_(accepts), merge_reductions_(merge_reductions), stage_(expr_stages(f_)) {
    producer_.assign(f_.values.size(), -1);
    is_output_.assign(f_.values.size(), false);
    for (const Output& o : f_.outputs) is_output_[static_cast<size_t>(o.value)] = true;
    for (size_t i = 0; i < f_.exprs.size(); ++i)
      for (int64_t out : f_.exprs[i].outputs) producer_[static_cast<size_t>(out)] = static_cast<int64_t>(i);
    mark_live();
  }

  std::vector<std::vector<int64_t>> run() {
    find_library_groups();
    top_down();
    shatter_cycles();
    build_graph();
    merge_bottom_up();
    return merge_independent(in_run_order());
  }

 private:
  // Exprs whose results no output needs are dropped: a segment must have
  // outputs, and dead work is not worth a kernel.
  void mark_live() {
    live_.assign(f_.exprs.size(), false);
    std::vector<bool> needed(f_.values.size(), false);
    for (const Output& o : f_.outputs) needed[static_cast<size_t>(o.value)] = true;
    for (size_t i = f_.exprs.size(); i > 0; --i) {
      const Expr& e = f_.exprs[i - 1];
      for (int64_t out : e.outputs)
        if (needed[static_cast<size_t>(out)]) live_[i - 1] = true;
      if (live_[i - 1])
        for (int64_t in : e.inputs) needed[static_cast<size_t>(in)] = true;
    }
  }

  // Each live library op heads a library group: the op alone, or the
  // matmul pattern that starts at it when the scheduler accepts that.
  void find_library_groups() {
    SoleReaders sole(f_.values.size(), -1);
    std::vector<int> reads(f_.values.size(), 0);
    for (size_t i = 0; i < f_.exprs.size(); ++i) {
      if (!live_[i]) continue;
      for (int64_t in : f_.exprs[i].inputs)
        if (reads[static_cast<size_t>(in)]++ == 0) sole[static_cast<size_t>(in)] = static_cast<int64_t>(i);
    }
    for (size_t v = 0; v < sole.size(); ++v)
      if (reads[v] != 1) sole[v] = -1;
    for (const Output& o : f_.outputs) sole[static_cast<size_t>(o.value)] = -1;
    library_head_.assign(f_.exprs.size(), -1);
    for (size_t i = 0; i < f_.exprs.size(); ++i) {
      if (!live_[i] || !is_library(f_.exprs[i])) continue;
      const auto e = static_cast<int64_t>(i);
      std::vector<int64_t> pattern = {e};
      if (op_info(f_.exprs[i].op).category == OpCategory::Library) {
        pattern = match_matmul_pattern(c_, e, sole);
        if (pattern.size() == 1 || !accepts_(pattern)) pattern = {e};
      } else if (op_info(f_.exprs[i].op).category == OpCategory::Scatter ||
                 op_info(f_.exprs[i].op).category == OpCategory::Scan) {
        pattern = inline_producers(e);
        if (pattern.size() > 1 && !accepts_(pattern)) pattern = {e};
      }
      for (int64_t m : pattern) library_head_[static_cast<size_t>(m)] = e;
    }
  }

  // A scatter or scan and the producers its kernels can compute inline (casts,
  // broadcasts, a zero-filled start: value_at of any pointwise, shape,
  // creation, gather or size op) whose values nothing outside the group
  // reads: the cast source, the index expanded from a vector and the
  // `full` the result starts from are never written to memory.
  std::vector<int64_t> inline_producers(int64_t scatter) const {
    std::vector<bool> member(f_.exprs.size(), false);
    member[static_cast<size_t>(scatter)] = true;
    std::vector<int64_t> group = {scatter};
    // Values read by live exprs outside the group (or fusion outputs) stay materialized.
    const auto read_outside = [&](int64_t v) {
      for (const Output& o : f_.outputs)
        if (o.value == v) return true;
      for (size_t i = 0; i < f_.exprs.size(); ++i) {
        if (!live_[i] || member[i]) continue;
        for (int64_t in : f_.exprs[i].inputs)
          if (in == v) return true;
      }
      return false;
    };
    for (bool changed = true; changed;) {  // to a fixpoint: a value may have several readers in the group
      changed = false;
      for (size_t g = 0; g < group.size(); ++g) {
        for (int64_t in : f_.exprs[static_cast<size_t>(group[g])].inputs) {
          const int64_t p = producer_[static_cast<size_t>(in)];
          if (p < 0 || member[static_cast<size_t>(p)] || !live_[static_cast<size_t>(p)] ||
              library_head_[static_cast<size_t>(p)] >= 0 || stage_[static_cast<size_t>(p)] != stage_[static_cast<size_t>(scatter)])
            continue;
          const Op op = f_.exprs[static_cast<size_t>(p)].op;
          const OpCategory cat = op_info(op).category;
          if (!is_pointwise(op) && cat != OpCategory::Shape && cat != OpCategory::Creation &&
              cat != OpCategory::Indexing && cat != OpCategory::Query)
            continue;
          bool outside = false;
          for (int64_t out : f_.exprs[static_cast<size_t>(p)].outputs) outside = outside || read_outside(out);
          if (outside) continue;
          member[static_cast<size_t>(p)] = true;
          group.push_back(p);
          changed = true;
        }
      }
    }
    std::sort(group.begin(), group.end());
    return group;
  }

  bool in_library_group(int64_t expr) const { return library_head_[static_cast<size_t>(expr)] >= 0; }

  // 1 + 2: connected groups per stage, library groups alone; shatter the
  // groups no scheduler accepts.
  void top_down() {
    const size_t n = f_.exprs.size();
    UnionFind uf(n);
    for (size_t i = 0; i < n; ++i) {
      if (!live_[i]) continue;
      if (in_library_group(static_cast<int64_t>(i))) {
        uf.unite(library_head_[i], static_cast<int64_t>(i));
        continue;
      }
      for (int64_t in : f_.exprs[i].inputs) {
        int64_t p = producer_[static_cast<size_t>(in)];
        if (p >= 0 && !in_library_group(p) && stage_[static_cast<size_t>(p)] == stage_[i])
          uf.unite(p, static_cast<int64_t>(i));
      }
    }
    std::vector<int64_t> slot(n, -1);
    for (size_t i = 0; i < n; ++i) {
      if (!live_[i]) continue;
      int64_t root = uf.find(static_cast<int64_t>(i));
      if (slot[static_cast<size_t>(root)] < 0) {
        slot[static_cast<size_t>(root)] = static_cast<int64_t>(groups_.size());
        groups_.emplace_back();
      }
      groups_[static_cast<size_t>(slot[static_cast<size_t>(root)])].push_back(static_cast<int64_t>(i));
    }
    std::vector<std::vector<int64_t>> kept;
    for (auto& g : groups_) {
      if (g.size() == 1 || in_library_group(g.front()) || accepts_(g)) kept.push_back(std::move(g));
      else for (int64_t e : g) kept.push_back({e});
    }
    groups_ = std::move(kept);
  }

  void assign_group_of() {
    group_of_.assign(f_.exprs.size(), -1);
    for (size_t g = 0; g < groups_.size(); ++g)
      for (int64_t e : groups_[g]) group_of_[static_cast<size_t>(e)] = static_cast<int64_t>(g);
  }

  // Group-level successor lists from value flow, sorted.
  std::vector<std::vector<int64_t>> successors() {
    assign_group_of();
    std::vector<std::vector<int64_t>> succ(groups_.size());
    for (size_t i = 0; i < f_.exprs.size(); ++i)
      for (int64_t in : f_.exprs[i].inputs) {
        int64_t p = producer_[static_cast<size_t>(in)];
        if (p < 0) continue;
        int64_t a = group_of_[static_cast<size_t>(p)], b = group_of_[i];
        if (a >= 0 && b >= 0 && a != b) succ[static_cast<size_t>(a)].push_back(b);
      }
    for (auto& s : succ) {
      std::sort(s.begin(), s.end());
      s.erase(std::unique(s.begin(), s.end()), s.end());
    }
    return succ;
  }

  // A group that sits on a cycle of the group graph (possible when two parts
  // of one connected group talk through a library op) is shattered. Library
  // groups stay whole: no input of one depends on its output (its library
  // op's arguments come earlier in the fusion, and a pattern's bias cannot
  // depend on the product, whose chain of values each have one reader), so
  // no cycle passes through one once the other groups are single exprs.
  void shatter_cycles() {
    auto succ = successors();
    const size_t n = groups_.size();
    // Tarjan's SCC, iteratively.
    std::vector<int64_t> index(n, -1), low(n, 0), comp(n, -1), stack;
    std::vector<bool> on_stack(n, false);
    int64_t counter = 0, comps = 0;
    std::vector<size_t> comp_size;
    for (size_t root = 0; root < n; ++root) {
      if (index[root] >= 0) continue;
      std::vector<std::pair<size_t, size_t>> work{{root, 0}};  // (group, next successor)
      index[root] = low[root] = counter++;
      stack.push_back(static_cast<int64_t>(root));
      on_stack[root] = true;
      while (!work.empty()) {
        auto& [v, next] = work.back();
        if (next < succ[v].size()) {
          size_t w = static_cast<size_t>(succ[v][next++]);
          if (index[w] < 0) {
            index[w] = low[w] = counter++;
            stack.push_back(static_cast<int64_t>(w));
            on_stack[w] = true;
            work.emplace_back(w, 0);
          } else if (on_stack[w]) {
            low[v] = std::min(low[v], index[w]);
          }
          continue;
        }
        if (low[v] == index[v]) {
          size_t size = 0;
          while (true) {
            size_t w = static_cast<size_t>(stack.back());
            stack.pop_back();
            on_stack[w] = false;
            comp[w] = comps;
            ++size;
            if (w == v) break;
          }
          comp_size.push_back(size);
          ++comps;
        }
        size_t done = v;
        work.pop_back();
        if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
      }
    }
    std::vector<std::vector<int64_t>> kept;
    for (size_t g = 0; g < n; ++g) {
      if (comp_size[static_cast<size_t>(comp[g])] == 1 || in_library_group(groups_[g].front()))
        kept.push_back(std::move(groups_[g]));
      else for (int64_t e : groups_[g]) kept.push_back({e});
    }
    groups_ = std::move(kept);
  }

  void build_graph() {
    graph_ = GroupGraph(successors());
    alive_.assign(groups_.size(), true);
    min_expr_.resize(groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      std::sort(groups_[g].begin(), groups_[g].end());
      min_expr_[g] = groups_[g].front();
    }
    value_mark_.assign(f_.values.size(), 0);
    in_weight_.assign(groups_.size(), 0);
  }

  bool mergeable(int64_t a, int64_t b) const {
    const int64_t ea = groups_[static_cast<size_t>(a)].front();
    const int64_t eb = groups_[static_cast<size_t>(b)].front();
    return !in_library_group(ea) && !in_library_group(eb) &&
           stage_[static_cast<size_t>(ea)] == stage_[static_cast<size_t>(eb)];
  }

  // For every predecessor p of b, the bytes that stop being materialized
  // when p and b merge, into in_weight_[p]: one pass over b, however many
  // predecessors it has. The caller zeroes the entries.
  void in_weights(int64_t b) {
    // Each value counts once; marks by generation, no clearing per call.
    const uint64_t mark = ++value_generation_;
    for (int64_t e : groups_[static_cast<size_t>(b)]) {
      const Expr& x = f_.exprs[static_cast<size_t>(e)];
      for (size_t k = 0; k < x.inputs.size(); ++k) {
        const int64_t in = x.inputs[k];
        int64_t p = producer_[static_cast<size_t>(in)];
        if (p < 0 || value_mark_[static_cast<size_t>(in)] == mark) continue;
        // A fusion output is written anyway, and a gather (index_select)
        // reads its data operand only at the indices: the merge saves no
        // bytes there. Weighing it would merge the output's producer into
        // the gather's group first, where the gather recomputes the output
        // from the producer's inputs, which then stay materialized (a
        // log-softmax output gathered by cross-entropy: its shifted input
        // written and re-read, the log-softmax written by a second kernel).
        if (k == 0 && op_info(x.op).category == OpCategory::Indexing && is_output_[static_cast<size_t>(in)]) continue;
        int64_t g = group_of_[static_cast<size_t>(p)];
        if (g < 0 || g == b) continue;
        value_mark_[static_cast<size_t>(in)] = mark;
        in_weight_[static_cast<size_t>(g)] += value_weight(c_, in);
      }
    }
  }

  void merge_bottom_up() {
    using Candidate = std::tuple<double, int64_t, int64_t>;  // weight, -a, -b: deterministic order
    std::priority_queue<Candidate> queue;
    // A merge re-queues every edge of the merged group, mostly unchanged. An
    // entry equal to one still queued is left out: equal entries pop in a
    // row, and the repeat would meet the same graph and decide the same way.
    // An edge's weight only grows, so its newest entry is the one to compare.
    struct Newest {
      double weight;
      bool queued;
    };
    std::unordered_map<uint64_t, Newest> newest;  // by edge
    auto edge_key = [&](int64_t a, int64_t b) { return static_cast<uint64_t>(a) * groups_.size() + static_cast<uint64_t>(b); };
    auto push = [&](double w, int64_t a, int64_t b) {
      Newest& n = newest[edge_key(a, b)];
      if (n.queued && n.weight == w) return;
      n = {w, true};
      queue.emplace(w, -a, -b);
    };
    // Queues the edges into g, or only the one from `only`.
    auto push_into = [&](int64_t g, int64_t only) {
      in_weights(g);
      for (int64_t p : graph_.predecessors(g)) {
        if ((only < 0 || p == only) && mergeable(p, g)) push(in_weight_[static_cast<size_t>(p)], p, g);
        in_weight_[static_cast<size_t>(p)] = 0;
      }
    };
    for (size_t g = 0; g < groups_.size(); ++g) push_into(static_cast<int64_t>(g), -1);
    std::set<std::pair<int64_t, int64_t>> rejected;
    while (!queue.empty()) {
      auto [w, na, nb] = queue.top();
      queue.pop();
      int64_t a = -na, b = -nb;
      Newest& n = newest[edge_key(a, b)];
      if (n.weight == w) n.queued = false;
      if (!alive_[static_cast<size_t>(a)] || !alive_[static_cast<size_t>(b)]) continue;
      if (!graph_.has_edge(a, b) || rejected.count({a, b})) continue;
      if (graph_.other_path(a, b)) continue;
      std::vector<int64_t> merged = groups_[static_cast<size_t>(a)];
      merged.insert(merged.end(), groups_[static_cast<size_t>(b)].begin(), groups_[static_cast<size_t>(b)].end());
      std::sort(merged.begin(), merged.end());
      if (!accepts_(merged)) {
        rejected.insert({a, b});
        continue;
      }
      absorb(a, b, std::move(merged));
      for (int64_t s : graph_.successors(a)) push_into(s, a);
      push_into(a, -1);
    }
  }

  // b merges into a.
  void absorb(int64_t a, int64_t b, std::vector<int64_t> merged) {
    size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
    groups_[ua] = std::move(merged);
    groups_[ub].clear();
    alive_[ub] = false;
    for (int64_t e : groups_[ua]) group_of_[static_cast<size_t>(e)] = a;
    min_expr_[ua] = groups_[ua].front();
    graph_.contract(a, b);
  }

  // The groups in run order (run_order above).
  std::vector<std::vector<int64_t>> in_run_order() {
    std::vector<size_t> indegree(groups_.size(), 0);
    for (size_t g = 0; g < groups_.size(); ++g)
      if (alive_[g]) indegree[g] = graph_.predecessors(static_cast<int64_t>(g)).size();
    std::vector<std::vector<int64_t>> order;
    for (int64_t g : run_order(alive_, std::move(indegree), min_expr_, [&](int64_t x) -> const std::vector<int64_t>& {
           return graph_.successors(x);
         }))
      order.push_back(groups_[static_cast<size_t>(g)]);
    return order;
  }

  // Whether a group is plain loops (no reduction, scan, scatter or library
  // op) that updates no input in place: a kernel of several loops writes
  // no output straight into its input (in_place.h), so merging an
  // optimizer's steps over tensors of several shapes would send each
  // update through a temporary and a copy.
  bool pointwise_group(const std::vector<int64_t>& g) const {
    if (in_library_group(g.front())) return false;
    return std::none_of(g.begin(), g.end(), [&](int64_t e) {
      const Expr& x = f_.exprs[static_cast<size_t>(e)];
      if (op_info(x.op).category == OpCategory::Reduction || is_library(x)) return true;
      return std::any_of(x.outputs.begin(), x.outputs.end(), [&](int64_t v) {
        return std::any_of(f_.outputs.begin(), f_.outputs.end(),
                           [&](const Output& o) { return o.value == v && o.alias_input >= 0; });
      });
    });
  }

  // Whether a group holds a reduction (and no library op).
  bool reduction_group(const std::vector<int64_t>& g) const {
    if (in_library_group(g.front())) return false;
    return std::any_of(g.begin(), g.end(), [&](int64_t e) {
      return op_info(f_.exprs[static_cast<size_t>(e)].op).category == OpCategory::Reduction;
    });
  }

  // The tensors a group reads that it does not compute: fusion inputs and
  // other groups' results.
  std::set<int64_t> tensor_reads(const std::vector<int64_t>& g) const {
    std::set<int64_t> reads;
    for (int64_t e : g)
      for (int64_t in : f_.exprs[static_cast<size_t>(e)].inputs) {
        const Value& v = f_.value(in);
        if (v.is_scalar || v.kind == ValueKind::Constant || v.kind == ValueKind::ScalarInput) continue;
        const int64_t p = producer_[static_cast<size_t>(in)];
        if (p < 0 || !std::binary_search(g.begin(), g.end(), p)) reads.insert(in);
      }
    return reads;
  }

  // 4 (sideways): plain-loop groups that no path of values joins (neither reads the
  // other's results, directly or through other groups) merge into one
  // kernel of several loops, up to kMostMerged groups each, in run order,
  // where a scheduler accepts them together. Bottom-up merging only
  // follows values, so independent loops each kept a launch: GPT-2's
  // forward partition ran 24 [8, 1024, 1] divisions as 24 segments and its
  // gradient partition 98 casts (docs/perf-log.md, sessions 38-39).
  // `order`: the groups in run order; returns them merged, in run order.
  std::vector<std::vector<int64_t>> merge_independent(const std::vector<std::vector<int64_t>>& given) const {
    std::vector<std::vector<int64_t>> order = given;
    constexpr size_t kMostMerged = 8;  // loops per kernel (each adds its arguments)
    // The reachability walks visit at most this many groups in all; past
    // it, no more merges (a shattered DAG of thousands of groups would
    // otherwise cost a walk per group).
    size_t visits_left = size_t{1} << 20;
    const size_t n = order.size();
    if (n < 2) return given;
    std::vector<int64_t> group_of(f_.exprs.size(), -1);
    for (size_t g = 0; g < n; ++g)
      for (int64_t e : order[g]) group_of[static_cast<size_t>(e)] = static_cast<int64_t>(g);
    std::vector<std::set<int64_t>> succ(n), pred(n);
    for (size_t g = 0; g < n; ++g)
      for (int64_t e : order[g])
        for (int64_t in : f_.exprs[static_cast<size_t>(e)].inputs) {
          const int64_t p = producer_[static_cast<size_t>(in)];
          const int64_t a = p < 0 ? -1 : group_of[static_cast<size_t>(p)];
          if (a < 0 || a == static_cast<int64_t>(g)) continue;
          succ[static_cast<size_t>(a)].insert(static_cast<int64_t>(g));
          pred[g].insert(a);
        }
    std::vector<bool> alive(n, true);
    std::vector<size_t> merged(n, 1);
    std::vector<uint64_t> seen(n, 0);
    uint64_t walk = 0;
    // A path from -> ... -> to, or the budget spent (then: as if there were one).
    const auto reaches = [&](int64_t from, int64_t to) {
      std::vector<int64_t> stack{from};
      ++walk;
      while (!stack.empty()) {
        const int64_t x = stack.back();
        stack.pop_back();
        for (int64_t y : succ[static_cast<size_t>(x)]) {
          if (y == to || visits_left == 0) return true;
          if (seen[static_cast<size_t>(y)] == walk) continue;
          seen[static_cast<size_t>(y)] = walk;
          --visits_left;
          stack.push_back(y);
        }
      }
      return false;
    };
    // g into b (b takes g's exprs and edges) where no path joins them and
    // a scheduler takes them together.
    const auto merge_into = [&](size_t b, size_t g) {
      if (reaches(static_cast<int64_t>(b), static_cast<int64_t>(g)) || reaches(static_cast<int64_t>(g), static_cast<int64_t>(b)))
        return false;
      std::vector<int64_t> both = order[b];
      both.insert(both.end(), order[g].begin(), order[g].end());
      std::sort(both.begin(), both.end());
      if (!accepts_(both)) return false;
      order[b] = std::move(both);
      order[g].clear();
      alive[g] = false;
      merged[b] += merged[g];
      for (int64_t s : succ[g]) {
        pred[static_cast<size_t>(s)].erase(static_cast<int64_t>(g));
        pred[static_cast<size_t>(s)].insert(static_cast<int64_t>(b));
        succ[b].insert(s);
      }
      for (int64_t p : pred[g]) {
        succ[static_cast<size_t>(p)].erase(static_cast<int64_t>(g));
        succ[static_cast<size_t>(p)].insert(static_cast<int64_t>(b));
        pred[b].insert(p);
      }
      succ[g].clear();
      pred[g].clear();
      return true;
    };
    std::unordered_map<int64_t, int64_t> bucket;  // stage -> the group the next ones join
    for (size_t g = 0; g < n && visits_left > 0; ++g) {
      if (!pointwise_group(order[g])) continue;
      const int64_t stage = stage_[static_cast<size_t>(order[g].front())];
      auto it = bucket.find(stage);
      if (it == bucket.end() || merged[static_cast<size_t>(it->second)] >= kMostMerged) {
        bucket[stage] = static_cast<int64_t>(g);
        continue;
      }
      merge_into(static_cast<size_t>(it->second), g);
    }
    // Reductions that read one tensor (a fusion input or another group's
    // result) and that no path joins merge too, where a scheduler takes
    // them as one kernel: each read the tensor whole, so one kernel reads
    // it once. An argmax beside a max of the same logits ran as two row
    // kernels (seed 1857099843 c0022, c0074: 0.60-0.64x torch.compile;
    // docs/perf-log.md session 50); when they share an intermediate,
    // bottom-up merging already joins them.
    std::map<int64_t, std::vector<size_t>> readers;  // tensor -> the earlier reduction groups that read it
    for (size_t g = 0; g < n && visits_left > 0 && merge_reductions_; ++g) {
      if (!alive[g] || !reduction_group(order[g])) continue;
      const std::set<int64_t> reads = tensor_reads(order[g]);
      size_t into = g;
      for (auto v = reads.begin(); v != reads.end() && into == g; ++v)
        for (size_t b : readers[*v])
          if (alive[b] && merged[b] < kMostMerged &&
              stage_[static_cast<size_t>(order[b].front())] == stage_[static_cast<size_t>(order[g].front())] &&
              merge_into(b, g)) {
            into = b;
            break;
          }
      for (int64_t v : into == g ? reads : tensor_reads(order[into])) {
        std::vector<size_t>& r = readers[v];
        if (std::find(r.begin(), r.end(), into) == r.end()) r.push_back(into);
      }
    }
    // Run order again: a merged group waits for the predecessors of both.
    std::vector<size_t> indegree(n, 0);
    std::vector<int64_t> first(n, 0);
    for (size_t g = 0; g < n; ++g)
      if (alive[g]) indegree[g] = pred[g].size(), first[g] = order[g].front();
    const std::vector<int64_t> ran = run_order(alive, std::move(indegree), first, [&](int64_t x) -> const std::set<int64_t>& {
      return succ[static_cast<size_t>(x)];
    });
    // (Every merge checked both directions for a path, so no cycle can hold
    // a group back; should one, the groups as given are still a valid order.)
    if (ran.size() != static_cast<size_t>(std::count(alive.begin(), alive.end(), true))) return given;
    std::vector<std::vector<int64_t>> out;
    for (int64_t g : ran) out.push_back(std::move(order[static_cast<size_t>(g)]));
    return out;
  }

  const ConcreteFusion& c_;
  const Fusion& f_;
  const AcceptsGroup& accepts_;
  bool merge_reductions_;  // step 4's reductions that read one tensor
  std::vector<int64_t> stage_, producer_, group_of_;
  std::vector<int64_t> library_head_;  // per expr: the library op heading its group, or -1
  std::vector<std::vector<int64_t>> groups_;
  GroupGraph graph_;
  std::vector<bool> alive_, live_, is_output_;
  std::vector<uint64_t> value_mark_;
  std::vector<double> in_weight_;
  uint64_t value_generation_ = 0;
  std::vector<int64_t> min_expr_;
};

}  // namespace

std::vector<std::vector<int64_t>> group_exprs(const ConcreteFusion& c, const AcceptsGroup& accepts,
                                             bool merge_reductions) {
  return Grouper(c, accepts, merge_reductions).run();
}

}  // namespace kf
