// External references for objects owned by shared_ptr inside the core.
// A C handle is the object's own address; retain/release keep a self
// reference alive while callers hold handles, so the same object can be
// returned to many callers (the definition cache returns the same fusion)
// and still be evicted from a cache safely.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

namespace kf {

template <typename T>
class ExternallyHeld : public std::enable_shared_from_this<T> {
 public:
  ExternallyHeld() = default;
  // A copy is a new object: it starts with no external references.
  ExternallyHeld(const ExternallyHeld&) : std::enable_shared_from_this<T>() {}
  ExternallyHeld& operator=(const ExternallyHeld&) = delete;

  virtual ~ExternallyHeld() = default;

  void retain_external() {
    std::lock_guard<std::mutex> lock(handle_mutex_);
    if (external_refs_++ == 0) {
      self_ = this->shared_from_this();
      anchor_ = external_anchor();
    }
  }
  void release_external() {
    std::shared_ptr<T> last;
    std::shared_ptr<const void> anchor;
    {
      std::lock_guard<std::mutex> lock(handle_mutex_);
      if (external_refs_ == 0) return;
      if (--external_refs_ == 0) {
        last = std::move(self_);
        anchor = std::move(anchor_);
      }
    }
    // `last` may destroy *this here, after the lock is released.
  }

 protected:
  // What must outlive this object while callers hold handles to it, when
  // that is not owned by the object itself (a concrete fusion's fusion).
  virtual std::shared_ptr<const void> external_anchor() const { return nullptr; }

 private:
  std::mutex handle_mutex_;
  int64_t external_refs_ = 0;
  std::shared_ptr<T> self_;
  std::shared_ptr<const void> anchor_;
};

}  // namespace kf
