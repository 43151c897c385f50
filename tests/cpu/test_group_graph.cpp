// GroupGraph (core/segment/group_graph.h) against a plain model: random
// DAGs whose node ids are not in topological order, contracted edge by edge
// in random order. After every step the edge lists must match the model and
// other_path must agree with a full search of the model on every edge (a
// stale topological order or a stale remembered path would show up here).
#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "core/segment/group_graph.h"

extern "C" {
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
}

namespace {

using Model = std::vector<std::set<int64_t>>;  // successors per node

uint64_t next(uint64_t& rng) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return rng >> 33;
}

// Whether the model has a path a -> x -> ... -> b besides the edge a -> b.
bool model_other_path(const Model& succ, int64_t a, int64_t b) {
  std::vector<bool> seen(succ.size(), false);
  std::vector<int64_t> stack;
  for (int64_t s : succ[static_cast<size_t>(a)])
    if (s != b) stack.push_back(s);
  while (!stack.empty()) {
    int64_t g = stack.back();
    stack.pop_back();
    if (g == b) return true;
    if (seen[static_cast<size_t>(g)]) continue;
    seen[static_cast<size_t>(g)] = true;
    for (int64_t s : succ[static_cast<size_t>(g)]) stack.push_back(s);
  }
  return false;
}

void model_contract(Model& succ, int64_t a, int64_t b) {
  for (auto& s : succ)
    if (s.erase(b)) s.insert(a);
  for (int64_t s : succ[static_cast<size_t>(b)]) succ[static_cast<size_t>(a)].insert(s);
  succ[static_cast<size_t>(a)].erase(a);
  succ[static_cast<size_t>(b)].clear();
}

void check_same(kf::GroupGraph& graph, const Model& succ) {
  Model pred(succ.size());
  for (size_t a = 0; a < succ.size(); ++a)
    for (int64_t b : succ[a]) pred[static_cast<size_t>(b)].insert(static_cast<int64_t>(a));
  for (size_t g = 0; g < succ.size(); ++g) {
    const auto& s = graph.successors(static_cast<int64_t>(g));
    const auto& p = graph.predecessors(static_cast<int64_t>(g));
    assert_true(std::vector<int64_t>(succ[g].begin(), succ[g].end()) == s);
    assert_true(std::vector<int64_t>(pred[g].begin(), pred[g].end()) == p);
    for (int64_t b : succ[g])
      assert_int_equal(graph.other_path(static_cast<int64_t>(g), b), model_other_path(succ, static_cast<int64_t>(g), b));
  }
}

void test_random_contractions_match_model(void**) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    uint64_t rng = seed;
    const int64_t n = 5 + static_cast<int64_t>(next(rng) % 40);
    // Edges go forward in a hidden order; ids are a permutation of it.
    std::vector<int64_t> id(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) id[static_cast<size_t>(i)] = i;
    for (int64_t i = n - 1; i > 0; --i) std::swap(id[static_cast<size_t>(i)], id[next(rng) % static_cast<uint64_t>(i + 1)]);
    Model model(static_cast<size_t>(n));
    const uint64_t density = 1 + next(rng) % 4;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = i + 1; j < n; ++j)
        if (next(rng) % (2 + static_cast<uint64_t>(j - i) * density) == 0) model[static_cast<size_t>(id[static_cast<size_t>(i)])].insert(id[static_cast<size_t>(j)]);
    std::vector<std::vector<int64_t>> lists;
    for (const auto& s : model) lists.emplace_back(s.rbegin(), s.rend());  // unsorted on purpose
    kf::GroupGraph graph(lists);
    check_same(graph, model);
    for (int step = 0; step < 3 * n; ++step) {
      std::vector<std::pair<int64_t, int64_t>> edges;
      for (size_t a = 0; a < model.size(); ++a)
        for (int64_t b : model[a]) edges.emplace_back(static_cast<int64_t>(a), b);
      if (edges.empty()) break;
      auto [a, b] = edges[next(rng) % edges.size()];
      if (graph.other_path(a, b)) continue;
      graph.contract(a, b);
      model_contract(model, a, b);
      check_same(graph, model);
    }
  }
}

void test_path_through_merged_node_is_still_found(void**) {
  // 0 -> 1 -> 2 -> 3 and 0 -> 3: merging 1 into 2 keeps the path 0 -> 12 ->
  // 3; merging 0 and 12 then leaves 0 -> 3 without another path.
  kf::GroupGraph graph({{1, 3}, {2}, {3}, {}});
  assert_true(graph.other_path(0, 3));
  assert_false(graph.other_path(1, 2));
  graph.contract(1, 2);
  assert_true(graph.other_path(0, 3));
  assert_false(graph.other_path(0, 1));
  graph.contract(0, 1);
  assert_false(graph.other_path(0, 3));
  assert_true(graph.successors(0) == std::vector<int64_t>{3});
  assert_true(graph.predecessors(3) == std::vector<int64_t>{0});
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_random_contractions_match_model),
      cmocka_unit_test(test_path_through_merged_node_is_still_found),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
