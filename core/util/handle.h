// External references for objects owned by shared_ptr inside the core.
// A C handle is the object's own address; retain/release keep a self
// reference alive while callers hold handles, so the same object can be
// returned to many callers (the definition cache returns the same fusion)
// and still be evicted from a cache safely. The handles registry
// (handle_registry.h) knows which objects callers hold, so an extra
// release is refused before it touches the object.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "core/util/handle_registry.h"

namespace kf {

// T: the object type; Handle: the C handle type T derives from (the
// registry holds Handle addresses, the pointers callers have).
template <typename T, typename Handle>
class ExternallyHeld : public std::enable_shared_from_this<T> {
 public:
  ExternallyHeld() = default;
  // A copy is a new object: it starts with no external references.
  ExternallyHeld(const ExternallyHeld&) : std::enable_shared_from_this<T>() {}
  ExternallyHeld& operator=(const ExternallyHeld&) = delete;

  virtual ~ExternallyHeld() = default;

  void retain_external() {
    std::lock_guard<std::mutex> lock(handles::registry_mutex());
    if (external_refs_++ == 0) {
      self_ = this->shared_from_this();
      anchor_ = external_anchor();
      handles::hold(static_cast<const Handle*>(static_cast<const T*>(this)));
    }
  }
  // Returns false, touching nothing, when `handle` is not held by any
  // caller: released more often than retained. The object is only read
  // once the registry says it is alive.
  static bool release_external(const Handle* handle) {
    std::shared_ptr<T> last;
    std::shared_ptr<const void> anchor;
    {
      std::lock_guard<std::mutex> lock(handles::registry_mutex());
      if (!handles::held(handle)) return false;
      ExternallyHeld* self = static_cast<T*>(const_cast<Handle*>(handle));
      if (--self->external_refs_ == 0) {
        handles::drop(handle);
        last = std::move(self->self_);
        anchor = std::move(self->anchor_);
      }
    }
    // `last` may destroy the object here, after the lock is released.
    return true;
  }

 protected:
  // What must outlive this object while callers hold handles to it, when
  // that is not owned by the object itself (a concrete fusion's fusion).
  virtual std::shared_ptr<const void> external_anchor() const { return nullptr; }

 private:
  int64_t external_refs_ = 0;  // guarded by handles::registry_mutex()
  std::shared_ptr<T> self_;
  std::shared_ptr<const void> anchor_;
};

}  // namespace kf
