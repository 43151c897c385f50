// A value an object computes on first use and keeps, safe to ask from many
// threads at once (std::call_once). Copying the owner copies nothing: the
// copy computes its own (a fusion copied from a builder's draft must not
// share the draft's caches). T may be incomplete where the owner is
// declared; it must be complete where get() is called.
#pragma once

#include <memory>
#include <mutex>

namespace kf {

template <class T>
class Lazy {
 public:
  Lazy() = default;
  Lazy(const Lazy&) {}
  Lazy& operator=(const Lazy&) { return *this; }

  // The value, made by make() (returning shared_ptr<T>) on the first call.
  template <class Make>
  T& get(Make&& make) const {
    std::call_once(once_, [&] { value_ = make(); });
    return *value_;
  }

 private:
  mutable std::once_flag once_;
  mutable std::shared_ptr<T> value_;
};

}  // namespace kf
