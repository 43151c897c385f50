#include "core/util/parallel.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace kf {

size_t pool_size(size_t tasks, size_t cap) {
  const size_t hardware = std::max<size_t>(std::thread::hardware_concurrency(), 1);
  return std::max<size_t>(std::min({hardware, cap, tasks}), 1);
}

void parallel_for(size_t count, size_t threads, const std::function<void(size_t)>& body) {
  std::vector<std::exception_ptr> errors(count);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
      try {
        body(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  {
    const size_t wanted = std::min(threads, count);
    std::vector<std::jthread> helpers;
    helpers.reserve(wanted);
    for (size_t t = 1; t < wanted; ++t) {
      try {
        helpers.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no more threads: the ones running (and this one) finish the work
      }
    }
    work();
  }  // joins the helpers
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace kf
