#include "core/util/env_switch.h"

#include <cstdlib>
#include <cstring>

namespace kf {

bool env_switch(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strcmp(v, "0") != 0;
}

}  // namespace kf
