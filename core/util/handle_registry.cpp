#include "core/util/handle_registry.h"

#include <unordered_set>

namespace kf::handles {
namespace {
// Leaked on purpose: handles may be released from static destructors of
// the caller's program, after this translation unit's statics are gone.
std::unordered_set<const void*>& live() {
  static auto* set = new std::unordered_set<const void*>();
  return *set;
}
}  // namespace

std::mutex& registry_mutex() {
  static auto* mutex = new std::mutex();
  return *mutex;
}

bool held(const void* handle) { return live().count(handle) != 0; }
void hold(const void* handle) { live().insert(handle); }
void drop(const void* handle) { live().erase(handle); }

void hold_locked(const void* handle) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  hold(handle);
}

bool drop_locked(const void* handle) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  return live().erase(handle) != 0;
}

}  // namespace kf::handles
