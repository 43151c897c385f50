// The addresses of the handles callers hold right now. Release and destroy
// functions look a handle up here before touching it, so a second release
// of the same handle (or a pointer that never was one) is reported instead
// of decrementing a count it does not own or freeing memory twice. Only
// retain, release, create and destroy take the lock: execute calls never
// do (they stay on the host-path budget).
//
// What this cannot catch: a stale handle whose address was reused by a new
// object of the same kind since it was released.
#pragma once

#include <mutex>

namespace kf::handles {

std::mutex& registry_mutex();

// All three with registry_mutex() held.
bool held(const void* handle);
void hold(const void* handle);
void drop(const void* handle);

// A plain object (created with new, freed with delete) becomes a handle.
void hold_locked(const void* handle);
// Drops it: false when it is not held (released already, or never made).
bool drop_locked(const void* handle);

}  // namespace kf::handles
