#include "core/define/definition_cache.h"

#include "core/shard/shard.h"
#include "core/simplify/decompose.h"
#include "core/simplify/simplify.h"
#include "core/util/deep_stack.h"
#include "core/util/error.h"

#include <vector>

namespace kf {

DefinitionCache& DefinitionCache::global() {
  static DefinitionCache* cache = new DefinitionCache();  // never destroyed: safe at exit
  return *cache;
}

std::shared_ptr<Fusion> DefinitionCache::find_or_insert(const Fusion& draft) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.definitions;
  Node* node = &root_;
  for (const Record& r : draft.records) {
    auto it = node->children.find(r);
    if (it == node->children.end()) {
      auto child = std::make_unique<Node>();
      child->parent = node;
      it = node->children.emplace(r, std::move(child)).first;
      it->second->key = &it->first;
    }
    node = it->second.get();
  }
  if (node->fusion) {
    ++stats_.hits;
    lru_.splice(lru_.begin(), lru_, node->lru_pos);
    return node->fusion;
  }
  ++stats_.misses;
  auto fusion = std::make_shared<Fusion>(draft);
  try {
    // Once per definition: the exprs every later stage sees (core/simplify);
    // the records, which the trie is keyed by, stay as defined. The shard
    // stage recurses along chains of ops: a deep definition runs these on
    // a stack sized for it (core/util/deep_stack.h).
    on_deep_stack(draft.depth, [&] {
      decompose(*fusion);  // ops defined by others (core/simplify/decompose.h), always
      if (simplify_enabled()) simplify(*fusion);
      shard(*fusion);  // a mesh's shardings and communication (core/shard)
      fusion->finish();
    });
    // The builder bounds the depth as defined; the rewrites may add levels.
    if (fusion->depth > kMaxGraphDepth)
      fail(KF_ERR_INVALID_ARGUMENT, "kf_builder_finalize: a chain of ", fusion->depth,
           " ops (as the definition-time rewrites leave it: argmax decomposes into several ops, a mesh adds communication) exceeds the limit of ", kMaxGraphDepth,
           " (KF_MAX_GRAPH_DEPTH); split the definition");
  } catch (...) {
    prune(node);  // the path only this draft made
    throw;
  }
  node->fusion = fusion;
  lru_.push_front(node);
  node->lru_pos = lru_.begin();
  ++stats_.fusions;
  while (lru_.size() > limit_) evict_one();
  return fusion;
}

DefinitionCache::Node::~Node() {
  std::vector<std::unique_ptr<Node>> doomed;
  for (auto& [record, child] : children) doomed.push_back(std::move(child));
  children.clear();
  while (!doomed.empty()) {
    std::unique_ptr<Node> n = std::move(doomed.back());
    doomed.pop_back();
    for (auto& [record, child] : n->children) doomed.push_back(std::move(child));
    n->children.clear();
  }  // each node is destroyed childless
}

void DefinitionCache::evict_one() {
  Node* victim = lru_.back();
  lru_.pop_back();
  victim->fusion.reset();  // callers' handles keep their own reference
  ++stats_.evictions;
  --stats_.fusions;
  prune(victim);
}

void DefinitionCache::prune(Node* node) {
  while (node != &root_ && node->children.empty() && !node->fusion) {
    Node* parent = node->parent;
    parent->children.erase(*node->key);  // destroys node
    node = parent;
  }
}

DefinitionStats DefinitionCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DefinitionCache::set_limit(size_t max_fusions) {
  std::lock_guard<std::mutex> lock(mutex_);
  limit_ = max_fusions;
  while (lru_.size() > limit_) evict_one();
}

void DefinitionCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  lru_.clear();
  root_.children.clear();
  stats_ = {};
}

}  // namespace kf
