// Strides of a compact tensor in a given memory order: what the executor
// gives the outputs and intermediates it allocates, what the output checks
// compare a caller's tensor against, and the CPU backend's allocation.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/concretize/shape_inference.h"

namespace kf {

// `order` lists dims outermost first (empty: row-major). With the empty
// order these are dl_strides' strides for NULL (core/util/dl_layout.h).
std::vector<int64_t> compact_strides(std::span<const int64_t> sizes, std::span<const int> order = {});
// The same strides held inline (no allocation: the executor and the output
// checks use it on every call).
Extents compact_strides_inline(std::span<const int64_t> sizes, std::span<const int> order = {});

}  // namespace kf
