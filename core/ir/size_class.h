// The size class of an extent: {0, 1, >1}. Concretization keys on it per
// dim (core/concretize/concrete_fusion.h); the index rules
// (core/ir/index_rules.h) read it: a dim of size 1 is a broadcast, read at
// index 0.
#pragma once

#include <cstdint>

namespace kf {

enum class SizeClass : uint8_t { Zero = 0, One = 1, Many = 2 };
inline SizeClass size_class(int64_t extent) {
  return extent == 0 ? SizeClass::Zero : extent == 1 ? SizeClass::One : SizeClass::Many;
}

}  // namespace kf
