#include "core/util/deep_stack.h"

#include <pthread.h>

#include <cstring>
#include <exception>

#include "core/util/error.h"

namespace kf {

namespace {

struct Call {
  const std::function<void()>* fn;
  std::exception_ptr error;
};

void* run_call(void* arg) {
  Call* call = static_cast<Call*>(arg);
  try {
    (*call->fn)();
  } catch (...) {
    call->error = std::current_exception();
  }
  return nullptr;
}

}  // namespace

void run_with_stack(size_t bytes, const std::function<void()>& fn) {
  Call call{&fn, nullptr};
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc == 0) {
    rc = pthread_attr_setstacksize(&attr, bytes);
    pthread_t thread;
    if (rc == 0) rc = pthread_create(&thread, &attr, run_call, &call);
    pthread_attr_destroy(&attr);
    if (rc == 0) rc = pthread_join(thread, nullptr);
  }
  if (rc != 0)
    fail(KF_ERR_OUT_OF_MEMORY, "cannot start a thread with a ", bytes >> 20,
         " MiB stack for a deep fusion: ", std::strerror(rc));
  if (call.error) std::rethrow_exception(call.error);
}

}  // namespace kf
