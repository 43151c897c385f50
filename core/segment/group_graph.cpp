#include "core/segment/group_graph.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace kf {

namespace {

// In a list sorted by id: b becomes a (once).
void rename_in(std::vector<int64_t>& list, int64_t b, int64_t a) {
  list.erase(std::lower_bound(list.begin(), list.end(), b));
  auto at = std::lower_bound(list.begin(), list.end(), a);
  if (at == list.end() || *at != a) list.insert(at, a);
}

// Sorted union of x and y without `drop`.
std::vector<int64_t> union_without(const std::vector<int64_t>& x, const std::vector<int64_t>& y, int64_t drop) {
  std::vector<int64_t> out;
  out.reserve(x.size() + y.size());
  std::set_union(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
  out.erase(std::remove(out.begin(), out.end(), drop), out.end());
  return out;
}

}  // namespace

GroupGraph::GroupGraph(std::vector<std::vector<int64_t>> successors)
    : succ_(std::move(successors)),
      pred_(succ_.size()),
      order_(succ_.size(), 0),
      visited_(succ_.size(), 0),
      merged_into_(succ_.size(), -1) {
  std::vector<int64_t> indegree(succ_.size(), 0);
  for (size_t g = 0; g < succ_.size(); ++g) {
    std::sort(succ_[g].begin(), succ_[g].end());
    for (int64_t s : succ_[g]) {
      pred_[static_cast<size_t>(s)].push_back(static_cast<int64_t>(g));
      ++indegree[static_cast<size_t>(s)];
    }
  }
  // Kahn's algorithm gives the first topological order (pred_ lists come
  // out sorted, as g ascends).
  std::vector<int64_t> ready;
  for (size_t g = 0; g < succ_.size(); ++g)
    if (indegree[g] == 0) ready.push_back(static_cast<int64_t>(g));
  int64_t next = 0;
  while (!ready.empty()) {
    int64_t g = ready.back();
    ready.pop_back();
    order_[static_cast<size_t>(g)] = next++;
    for (int64_t s : succ_[static_cast<size_t>(g)])
      if (--indegree[static_cast<size_t>(s)] == 0) ready.push_back(s);
  }
}

bool GroupGraph::has_edge(int64_t a, int64_t b) const {
  const std::vector<int64_t>& s = successors(a);
  return std::binary_search(s.begin(), s.end(), b);
}

bool GroupGraph::mark(int64_t g) {
  uint64_t& v = visited_[static_cast<size_t>(g)];
  if (v == generation_) return false;
  v = generation_;
  return true;
}

int64_t GroupGraph::merged_node(int64_t g) {
  while (merged_into_[static_cast<size_t>(g)] >= 0) {
    int64_t up = merged_into_[static_cast<size_t>(g)];
    if (merged_into_[static_cast<size_t>(up)] >= 0) merged_into_[static_cast<size_t>(g)] = merged_into_[static_cast<size_t>(up)];  // path halving
    g = up;
  }
  return g;
}

int64_t GroupGraph::search_forward(int64_t a, int64_t b) {
  ++generation_;
  forward_.clear();
  stack_.clear();
  const int64_t limit = order_[static_cast<size_t>(b)];
  for (int64_t s : successors(a))
    if (s != b && order_[static_cast<size_t>(s)] < limit && mark(s)) stack_.push_back(s);
  while (!stack_.empty()) {
    int64_t g = stack_.back();
    stack_.pop_back();
    forward_.push_back(g);
    for (int64_t s : successors(g)) {
      if (s == b) return g;
      if (order_[static_cast<size_t>(s)] < limit && mark(s)) stack_.push_back(s);
    }
  }
  return -1;
}

void GroupGraph::search_backward(int64_t a, int64_t b) {
  ++generation_;
  backward_.clear();
  stack_.assign(1, b);
  const int64_t limit = order_[static_cast<size_t>(a)];
  while (!stack_.empty()) {
    int64_t g = stack_.back();
    stack_.pop_back();
    if (g != b) backward_.push_back(g);
    for (int64_t p : predecessors(g))
      if (order_[static_cast<size_t>(p)] > limit && mark(p)) stack_.push_back(p);
  }
}

bool GroupGraph::other_path(int64_t a, int64_t b) {
  const uint64_t key = static_cast<uint64_t>(a) * succ_.size() + static_cast<uint64_t>(b);
  auto known = path_through_.find(key);
  if (known != path_through_.end()) {
    int64_t x = merged_node(known->second);
    if (x != a && x != b) return true;
  }
  int64_t through = search_forward(a, b);
  if (through < 0) return false;
  path_through_[key] = through;
  return true;
}

void GroupGraph::contract(int64_t a, int64_t b) {
  // Between a and b in the order lie the nodes a reaches (forward_), the
  // nodes that reach b (backward_, disjoint from forward_ as no other path
  // exists) and unrelated ones. The merged node must come after the
  // backward_ nodes and before the forward_ ones: those two sets are
  // reordered within the slots they and a, b held, the rest stay.
  search_forward(a, b);
  search_backward(a, b);
  auto by_order = [&](int64_t x, int64_t y) { return order_[static_cast<size_t>(x)] < order_[static_cast<size_t>(y)]; };
  std::sort(forward_.begin(), forward_.end(), by_order);
  std::sort(backward_.begin(), backward_.end(), by_order);
  slots_.clear();
  for (int64_t g : backward_) slots_.push_back(order_[static_cast<size_t>(g)]);
  for (int64_t g : forward_) slots_.push_back(order_[static_cast<size_t>(g)]);
  slots_.push_back(order_[static_cast<size_t>(a)]);
  slots_.push_back(order_[static_cast<size_t>(b)]);
  std::sort(slots_.begin(), slots_.end());
  size_t slot = 0;
  for (int64_t g : backward_) order_[static_cast<size_t>(g)] = slots_[slot++];
  order_[static_cast<size_t>(a)] = slots_[slot++];
  ++slot;  // the slot b leaves
  for (int64_t g : forward_) order_[static_cast<size_t>(g)] = slots_[slot++];

  const size_t ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
  for (int64_t s : succ_[ub]) rename_in(pred_[static_cast<size_t>(s)], b, a);
  for (int64_t p : pred_[ub])
    if (p != a) rename_in(succ_[static_cast<size_t>(p)], b, a);
  succ_[ua] = union_without(succ_[ua], succ_[ub], b);
  pred_[ua] = union_without(pred_[ua], pred_[ub], a);
  succ_[ub] = {};
  pred_[ub] = {};
  merged_into_[ub] = a;
}

}  // namespace kf
