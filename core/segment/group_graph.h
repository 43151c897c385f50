// The graph of groups during bottom-up merging (grouping.cpp): a node per
// group, an edge a -> b where group b reads a value of group a. Merging two
// groups contracts their edge, which is only allowed when it closes no cycle.
//
// The graph keeps a topological order of its nodes up to date across
// contractions (after Pearce and Kelly, "A dynamic topological sort
// algorithm for directed acyclic graphs", 2006). Any path a -> ... -> b
// passes only through nodes ordered between a and b, so the cycle question
// searches that window instead of everything a reaches. A found path is
// remembered by one node on it, so asking again after unrelated merges costs
// no search. Without both, merging was superlinear on large shattered
// fusions (docs/perf-log.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kf {

class GroupGraph {
 public:
  GroupGraph() = default;
  // successors[g]: the nodes that read from node g, each once, without g
  // itself. The graph must be acyclic.
  explicit GroupGraph(std::vector<std::vector<int64_t>> successors);

  // Both sorted by node id; empty for a node merged away.
  const std::vector<int64_t>& successors(int64_t g) const { return succ_[static_cast<size_t>(g)]; }
  const std::vector<int64_t>& predecessors(int64_t g) const { return pred_[static_cast<size_t>(g)]; }
  bool has_edge(int64_t a, int64_t b) const;

  // Whether a path a -> x -> ... -> b exists besides the edge a -> b, i.e.
  // whether contracting that edge would close a cycle.
  bool other_path(int64_t a, int64_t b);

  // Merges b into a along the edge a -> b: a takes b's edges, b keeps none.
  // Requires !other_path(a, b).
  void contract(int64_t a, int64_t b);

 private:
  // Collects the nodes reachable from a through nodes ordered before b,
  // skipping the edge a -> b, into forward_. Returns the node through which
  // b is reached, or -1.
  int64_t search_forward(int64_t a, int64_t b);
  // Collects the nodes that reach b through nodes ordered after a, except
  // a, into backward_.
  void search_backward(int64_t a, int64_t b);
  bool mark(int64_t g);
  // The node that g was merged into, transitively (g itself while alive).
  int64_t merged_node(int64_t g);

  std::vector<std::vector<int64_t>> succ_, pred_;
  // A topological index per node: every edge a -> b has order_[a] <
  // order_[b]. Contractions leave gaps; only the relative order counts.
  std::vector<int64_t> order_;
  // Visited marks of one search, by generation: no clearing between searches.
  std::vector<uint64_t> visited_;
  uint64_t generation_ = 0;
  std::vector<int64_t> stack_, forward_, backward_, slots_;
  std::vector<int64_t> merged_into_;  // -1 while alive
  // (a, b) -> a node x of a found path a -> ... -> x -> b. While the node
  // holding x is neither a nor b, that path still exists: contractions map
  // paths to paths.
  std::unordered_map<uint64_t, int64_t> path_through_;
};

}  // namespace kf
