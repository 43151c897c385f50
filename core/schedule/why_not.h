// How a scheduler says no: the reason goes to `why` (when asked for) and
// the result is empty.
#pragma once

#include <optional>
#include <string>

namespace kf {

inline std::nullopt_t reject(std::string* why, std::string reason) {
  if (why != nullptr) *why = std::move(reason);
  return std::nullopt;
}

}  // namespace kf
