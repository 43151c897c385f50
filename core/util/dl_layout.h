// The one rule for the geometry of a DLTensor: its strides (NULL strides
// made explicit), element count, address, element size, compactness, and
// the elements and bytes it reaches. The entry checks (read_tensor,
// check_output_tensor) validate with these, and everything after them
// (overlap tests, backends, collectives) derives with them, so that an
// empty tensor (huge other dims, NULL data), a size-1 dim with any stride
// and NULL strides read the same everywhere.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include <dlpack/dlpack.h>

namespace kf {

// Element offsets (and counts) a tensor may reach: leaves headroom for
// the index arithmetic of kernels and of the checks themselves.
constexpr int64_t kMaxElementOffset = int64_t{1} << 62;

// Strides derived from sizes saturate: they overflow only where no second
// element is addressed through them (an empty tensor with huge dims, a
// size-1 dim), and there any value is valid.
inline int64_t mul_saturating(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

// The compact stride of the dim just outside one of `size` elements with
// stride `inner`. A size-0 dim counts as 1, as torch lays out an empty
// tensor ([2, 0, 3] has strides [3, 3, 1]): NULL strides and the explicit
// strides a caller gets from torch give the same layout (and cache key).
inline int64_t compact_outer_stride(int64_t inner, int64_t size) {
  return mul_saturating(inner, std::max<int64_t>(size, 1));
}

// All strides of `t` in elements into `out[0, ndim)`: its own, or with
// NULL strides the compact row-major ones.
inline void dl_strides(const DLTensor& t, int64_t* out) {
  if (t.strides != nullptr) {
    std::copy(t.strides, t.strides + t.ndim, out);
    return;
  }
  int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    out[d] = s;
    s = compact_outer_stride(s, t.shape[d]);
  }
}

// The stride of `dim` alone (dl_strides' rule).
inline int64_t dl_stride(const DLTensor& t, int dim) {
  if (t.strides != nullptr) return t.strides[dim];
  int64_t s = 1;
  for (int d = t.ndim - 1; d > dim; --d) s = compact_outer_stride(s, t.shape[d]);
  return s;
}

// The element count of sizes that passed element_count below: exact (at
// most kMaxElementOffset), and 0 for an empty tensor whatever its other
// dims, whose product may pass int64: taken modulo 2^64, where anything
// times 0 is 0, it is never signed overflow.
inline int64_t checked_numel(std::span<const int64_t> sizes) {
  uint64_t n = 1;
  for (int64_t s : sizes) n *= static_cast<uint64_t>(s);
  return static_cast<int64_t>(n);
}

// The entry checks' count: of sizes >= 0, with the first dim at which a
// non-empty tensor's count passes kMaxElementOffset (-1 where none does;
// an empty tensor may have any other dims, in any order).
struct ElementCount {
  int64_t count = 0;
  int bad_dim = -1;
};
inline ElementCount element_count(std::span<const int64_t> sizes) {
  int64_t count = 1;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (__builtin_mul_overflow(count, sizes[d], &count) || count > kMaxElementOffset)  // unless a later dim is 0
      return std::find(sizes.begin() + d, sizes.end(), 0) != sizes.end() ? ElementCount{} : ElementCount{count, static_cast<int>(d)};
  return {count, -1};  // exact, 0 where a dim is 0
}

// The element count of a tensor that passed the entry checks.
inline int64_t dl_numel(const DLTensor& t) {
  return checked_numel(std::span<const int64_t>(t.shape, static_cast<size_t>(t.ndim)));
}

// Bytes of one element.
inline int64_t dl_element_bytes(const DLTensor& t) { return (t.dtype.bits * t.dtype.lanes + 7) / 8; }

// data + byte_offset as an integer: an empty tensor's data may be NULL, and
// NULL plus an offset is undefined as pointer arithmetic.
inline uintptr_t dl_address(const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data) + t.byte_offset; }

// The same, false where it wraps around the address space (a byte_offset
// near 2^64 is a negative offset in disguise).
inline bool dl_address_checked(const DLTensor& t, uintptr_t* address) {
  return !__builtin_add_overflow(reinterpret_cast<uintptr_t>(t.data), t.byte_offset, address);
}

// Whether every dim of more than one element has the compact row-major
// stride (compact_outer_stride's rule): the elements lie in order, without
// gaps, from the address on.
inline bool dl_is_compact(const DLTensor& t) {
  if (t.strides == nullptr) return true;
  int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    if (t.shape[d] > 1 && t.strides[d] != s) return false;
    s = compact_outer_stride(s, t.shape[d]);
  }
  return true;
}

// The largest element offset reached through `sizes` and non-negative
// `strides`, -1 where a dim is 0 (nothing is reached), and the first dim
// whose reach overflows or passes kMaxElementOffset (-1 where none does;
// max_offset is then INT64_MAX, never a wrapped value that could pass for
// an empty tensor's -1).
struct ElementReach {
  int64_t max_offset = -1;
  int bad_dim = -1;
};
inline ElementReach element_reach(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  int64_t reach = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return {};
    int64_t step;
    if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) || __builtin_add_overflow(reach, step, &reach) ||
        reach > kMaxElementOffset)  // unless a later dim is 0
      return std::find(sizes.begin() + d, sizes.end(), 0) != sizes.end() ? ElementReach{}
                                                                         : ElementReach{INT64_MAX, static_cast<int>(d)};
  }
  return {reach, -1};
}

// One past the last byte of elements of `elem` bytes reached up to
// `max_offset` from `start` (`start` itself for -1: nothing); false where
// that passes the end of the address space.
inline bool byte_end(uintptr_t start, int64_t max_offset, int64_t elem, uintptr_t* end) {
  uintptr_t bytes;
  // `|`, not `||`: *end is written either way.
  const bool wraps = __builtin_mul_overflow(static_cast<uintptr_t>(max_offset) + 1, static_cast<uintptr_t>(elem), &bytes) |
                     __builtin_add_overflow(start, bytes, end);
  return !wraps;
}

}  // namespace kf
