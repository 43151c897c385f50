// Per-thread storage for per-call state. A call leases a T, fills it (its
// vectors keep the capacity of earlier calls, so after the first call on a
// thread nothing is allocated) and hands it back when the lease ends.
// Leases nest: a call that runs inside another on the same thread (a
// kf_allocator callback that executes a fusion) gets its own T. Leases must
// end in reverse order of their start, which scoped objects guarantee.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace kf {

template <typename T>
class Scratch {
 public:
  Scratch() : stack_(stack()) {
    if (stack_.depth == stack_.items.size()) stack_.items.push_back(std::make_unique<T>());
    item_ = stack_.items[stack_.depth++].get();
  }
  ~Scratch() { --stack_.depth; }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  T& operator*() const { return *item_; }
  T* operator->() const { return item_; }
  T* get() const { return item_; }

 private:
  struct Stack {
    std::vector<std::unique_ptr<T>> items;
    size_t depth = 0;
  };
  static Stack& stack() {
    thread_local Stack s;
    return s;
  }
  Stack& stack_;
  T* item_ = nullptr;
};

}  // namespace kf
