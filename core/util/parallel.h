// A bounded pool for independent pieces of work (the CUDA backend compiles
// the kernels of a fusion's segments on it): threads that each take the
// next index until none is left, the calling thread among them.
#pragma once

#include <cstddef>
#include <functional>

namespace kf {

// Threads for `tasks` independent tasks: min(hardware threads, cap, tasks),
// at least 1.
size_t pool_size(size_t tasks, size_t cap);

// Runs body(i) for every i in [0, count) on up to `threads` threads and
// returns when all are done. If some throw, the exception of the lowest
// index is rethrown, after every task has finished. When a thread cannot
// be started, fewer threads do the work.
void parallel_for(size_t count, size_t threads, const std::function<void(size_t)>& body);

}  // namespace kf
