// The C boundary: every exported function runs its body through guard(),
// which turns kf::Error and any other exception into a status code and the
// thread-local message. Nothing escapes into the caller's frames.
#pragma once

#include <cstring>
#include <new>
#include <string>

#include "core/util/error.h"
#include "kfuse/kfuse.h"

namespace kf::capi {

void set_error(kf_status status, const std::string& message);
void clear_error();

template <typename F>
kf_status guard(F&& body) noexcept {
  try {
    body();
    clear_error();
    return KF_OK;
  } catch (const Error& e) {
    set_error(e.status(), e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_error(KF_ERR_OUT_OF_MEMORY, "out of host memory");
    return KF_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_error(KF_ERR_INTERNAL, std::string("internal error: ") + e.what());
    return KF_ERR_INTERNAL;
  } catch (...) {
    set_error(KF_ERR_INTERNAL, "internal error: unknown exception");
    return KF_ERR_INTERNAL;
  }
}

// The int a caller passed for an enum parameter. C callers may pass any int,
// but C++ may only load an enum object whose value lies in the enum's range
// (UBSan checks this), so the parameter is read through its bytes and never
// loaded, copied or passed on as the enum.
template <typename E>
int code(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

template <typename T>
T* require(T* p, const char* function, const char* argument) {
  if (p == nullptr) fail(KF_ERR_INVALID_ARGUMENT, function, ": argument '", argument, "' is NULL");
  return p;
}

// struct_size check for caller-provided structs that grow at the end.
template <typename T>
void require_struct(const T* s, size_t min_size, const char* function, const char* argument) {
  require(s, function, argument);
  if (s->struct_size < min_size)
    fail(KF_ERR_INVALID_ARGUMENT, function, ": ", argument, "->struct_size is ", s->struct_size,
         ", expected at least ", min_size, " (set it to sizeof)");
}

}  // namespace kf::capi
