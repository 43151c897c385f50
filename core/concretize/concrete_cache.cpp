// The per-fusion LRU of concrete fusions, and concretize() itself.
#include <atomic>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/concretize/concrete_fusion.h"
#include "core/concretize/layout.h"

namespace kf {

namespace {
std::atomic<size_t> g_limit{64};
std::atomic<uint64_t> g_built{0}, g_hits{0};

struct KeyHash {
  size_t operator()(const ConcreteKey& k) const { return static_cast<size_t>(k.hash); }
};
}  // namespace

struct ConcreteCache {
  std::mutex mutex;
  std::list<std::shared_ptr<ConcreteFusion>> lru;  // front: most recent
  std::unordered_map<ConcreteKey, std::list<std::shared_ptr<ConcreteFusion>>::iterator, KeyHash> index;
};


std::shared_ptr<const void> ConcreteFusion::external_anchor() const {
  return const_cast<Fusion*>(fusion)->shared_from_this();
}

namespace {

std::shared_ptr<ConcreteFusion> build(const std::shared_ptr<const Fusion>& fusion, const Binding& b) {
  auto c = std::make_shared<ConcreteFusion>();
  c->fusion = fusion.get();
  c->key = b.key;
  c->device = b.device;
  c->index32 = b.index32;
  for (size_t i = 0; i < fusion->inputs.size(); ++i) c->input_layouts.push_back(analyze_layout(b.inputs[i]));
  c->size_classes.resize(fusion->values.size());
  for (size_t id = 0; id < fusion->values.size(); ++id)
    for (int64_t e : b.sizes[static_cast<int64_t>(id)]) c->size_classes[id].push_back(size_class(e));
  propagate_layouts(*c);
  propagate_extent_deps(*c);
  return c;
}

}  // namespace

std::shared_ptr<ConcreteFusion> concretize(const std::shared_ptr<const Fusion>& fusion,
                                           const Binding& binding) {
  const ConcreteKey& key = binding.key;
  ConcreteCache& cache = fusion->concrete_cache.get([] { return std::make_shared<ConcreteCache>(); });
  std::lock_guard<std::mutex> lock(cache.mutex);
  auto it = cache.index.find(key);
  if (it != cache.index.end()) {
    cache.lru.splice(cache.lru.begin(), cache.lru, it->second);
    ++g_hits;
    return *it->second;
  }
  auto c = build(fusion, binding);
  ++g_built;
  cache.lru.push_front(c);
  cache.index.emplace(key, cache.lru.begin());
  while (cache.lru.size() > g_limit.load()) {
    cache.index.erase(cache.lru.back()->key);
    cache.lru.pop_back();  // holders of a handle keep their reference
  }
  return c;
}

ConcreteStats concrete_stats() { return {g_built.load(), g_hits.load()}; }
void set_concrete_limit(size_t max_per_fusion) { g_limit = max_per_fusion; }
void reset_concrete_stats() {
  g_built = 0;
  g_hits = 0;
}

}  // namespace kf
