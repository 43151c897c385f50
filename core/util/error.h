// Errors inside the core are exceptions carrying a kf_status; the C API layer
// (c_api/) is the only place that catches them and turns them into a status
// plus the thread-local message.
#pragma once

#include <stdexcept>
#include <string>

#include "kfuse/kfuse.h"

namespace kf {

class Error : public std::runtime_error {
 public:
  Error(kf_status status, std::string message)
      : std::runtime_error(std::move(message)), status_(status) {}
  kf_status status() const { return status_; }

 private:
  kf_status status_;
};

// Builds a message from pieces: fail(KF_ERR_SHAPE_MISMATCH, "input ", i, ": expected rank ", r)
template <typename... Args>
[[noreturn]] void fail(kf_status status, const Args&... args);

}  // namespace kf

#include <sstream>

namespace kf {
template <typename... Args>
[[noreturn]] void fail(kf_status status, const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(status, os.str());
}
}  // namespace kf
