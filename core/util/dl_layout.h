// Addresses, strides and element counts of DLTensors that passed the entry
// checks (read_tensor, check_output: sizes >= 0, no address wrap), for the
// runtime's backends. Shared so that each backend gets the edge cases the
// same way: empty tensors may have huge other dims and a NULL data pointer.
#pragma once

#include <cstdint>

#include <dlpack/dlpack.h>

namespace kf {

// Strides derived from sizes saturate: they overflow only where no second
// element is addressed through them (an empty tensor with huge dims, a
// size-1 dim), and there any value is valid.
inline int64_t mul_saturating(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

// The stride of `dim` in elements: the tensor's own, or with NULL strides
// the compact row-major one.
inline int64_t dl_stride(const DLTensor& t, int dim) {
  if (t.strides != nullptr) return t.strides[dim];
  int64_t s = 1;
  for (int d = t.ndim - 1; d > dim; --d) s = mul_saturating(s, t.shape[d]);
  return s;
}

// The element count; 0 as soon as a dim is 0, whatever the others are.
inline int64_t dl_numel(const DLTensor& t) {
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] == 0) return 0;
  int64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) n = mul_saturating(n, t.shape[d]);
  return n;
}

// data + byte_offset as an integer: an empty tensor's data may be NULL, and
// NULL plus an offset is undefined as pointer arithmetic.
inline uintptr_t dl_address(const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data) + t.byte_offset; }

}  // namespace kf
