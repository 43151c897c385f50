// The process-wide definition cache: a prefix trie of Records. Finalizing a
// definition walks the trie along its records; if the last node holds a
// fusion, that same fusion is returned (a hit), otherwise the draft becomes
// the fusion of that node (a miss), simplified once (core/simplify: its
// exprs are rewritten, its records and value ids stay). Bounded by an LRU
// limit on fusions; evicting a fusion prunes the trie nodes only it used.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/ir/fusion.h"

namespace kf {

struct DefinitionStats {
  uint64_t definitions = 0, hits = 0, misses = 0, evictions = 0, fusions = 0;
};

class DefinitionCache {
 public:
  static DefinitionCache& global();

  std::shared_ptr<Fusion> find_or_insert(const Fusion& draft);
  DefinitionStats stats() const;
  void set_limit(size_t max_fusions);
  void clear();

 private:
  struct Node {
    Node* parent = nullptr;
    const Record* key = nullptr;  // the record leading here (owned by parent's map)
    std::unordered_map<Record, std::unique_ptr<Node>, RecordHash> children;
    std::shared_ptr<Fusion> fusion;
    std::list<Node*>::iterator lru_pos;
    Node() = default;
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    // Frees the subtree with a work list: the trie is as deep as a
    // definition has records, which a recursive teardown would take as
    // stack frames.
    ~Node();
  };
  void evict_one();
  void prune(Node* node);

  mutable std::mutex mutex_;
  Node root_;
  std::list<Node*> lru_;  // front: most recently used
  size_t limit_ = 1024;
  DefinitionStats stats_;
};

}  // namespace kf
