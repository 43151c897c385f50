// Byte counts of allocations, checked before anything is allocated: an
// element count times an element size that does not fit (a stride-0 input
// of 2^61 float64 elements broadcast to a full output, full([2^62])) is an
// out-of-memory error, never a wrapped size and a short buffer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/util/error.h"

namespace kf {

// Nothing allocates more than 2^62 bytes; the limit keeps later rounding
// (to 64 bytes, to pool classes) clear of wrapping too.
inline constexpr uint64_t kMaxAllocationBytes = uint64_t{1} << 62;

// Bytes of max(count, 1) elements of `elem` bytes (an empty tensor still
// gets a valid pointer). `what` names the tensor in the message.
template <typename Name>
size_t allocation_bytes(int64_t count, int64_t elem, const Name& what) {
  uint64_t bytes;
  const uint64_t n = count < 1 ? 1 : static_cast<uint64_t>(count);
  if (__builtin_mul_overflow(n, static_cast<uint64_t>(elem), &bytes) || bytes > kMaxAllocationBytes)
    fail(KF_ERR_OUT_OF_MEMORY, what, ": ", count, " elements of ", elem,
         " bytes exceed what can be allocated (at most 2^62 bytes)");
  return static_cast<size_t>(bytes);
}

}  // namespace kf
