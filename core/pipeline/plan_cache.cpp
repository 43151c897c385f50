// plan_for: the per-fusion LRU of plans by concretization key.
#include <atomic>
#include <list>
#include <unordered_map>

#include "core/pipeline/plan.h"

namespace kf {

namespace {
std::atomic<size_t> g_limit{64};
std::atomic<uint64_t> g_built{0}, g_hits{0};

struct KeyHash {
  size_t operator()(const ConcreteKey& k) const { return static_cast<size_t>(k.hash); }
};
}  // namespace

struct PlanCache {
  std::mutex mutex;
  std::list<std::shared_ptr<Plan>> lru;  // front: most recent
  std::unordered_map<ConcreteKey, std::list<std::shared_ptr<Plan>>::iterator, KeyHash> index;

  // The cached plan for key, moved to the front; nullptr on a miss.
  std::shared_ptr<Plan> find(const ConcreteKey& key) {
    auto it = index.find(key);
    if (it == index.end()) return nullptr;
    lru.splice(lru.begin(), lru, it->second);
    return *it->second;
  }
};

std::shared_ptr<Plan> plan_for(const Fusion& fusion, const Binding& binding) {
  PlanCache& cache = fusion.plan_cache.get([] { return std::make_shared<PlanCache>(); });
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (auto hit = cache.find(binding.key)) {
      ++g_hits;
      return hit;
    }
  }
  // Built outside the lock: other classes of the same fusion keep running
  // while one is segmented. Two threads missing on one key both build; the
  // first to insert wins and the other's plan is dropped.
  std::shared_ptr<Plan> plan = build_plan(fusion, binding, default_tuning());
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (auto raced = cache.find(binding.key)) return raced;
  ++g_built;
  cache.lru.push_front(plan);
  cache.index.emplace(plan->concrete->key, cache.lru.begin());
  while (cache.lru.size() > g_limit.load()) {
    cache.index.erase(cache.lru.back()->concrete->key);
    cache.lru.pop_back();  // holders of a handle keep their reference
  }
  return plan;
}

std::shared_ptr<Plan> cached_plan(const Fusion& fusion, const Binding& binding) {
  PlanCache& cache = fusion.plan_cache.get([] { return std::make_shared<PlanCache>(); });
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.index.find(binding.key);
  return it == cache.index.end() ? nullptr : *it->second;
}

PlanStats plan_stats() { return {g_built.load(), g_hits.load()}; }
void set_plan_limit(size_t max_per_fusion) { g_limit = max_per_fusion; }
void reset_plan_stats() {
  g_built = 0;
  g_hits = 0;
}

}  // namespace kf
