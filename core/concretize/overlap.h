// Whether strided tensors share memory: a tensor with itself (an output
// that would write one element twice, an in-place input that repeats
// elements), and two tensors with each other (outputs with inputs they do
// not alias, outputs with outputs). Decided from metadata only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/concretize/input_meta.h"
#include "core/concretize/shape_inference.h"

namespace kf {

// The memory a strided tensor covers: the address of its first element, the
// element size, and sizes and strides in elements (strides >= 0).
struct MemoryRegion {
  uintptr_t base = 0;
  uintptr_t end = 0;  // one past the last byte reached; base where empty
  int64_t elem = 1;
  Extents sizes, strides;
  bool empty() const { return end == base; }
};

// The region of a tensor whose reach was checked (read_tensor, or
// check_output_tensor in core/runtime/outputs.h).
MemoryRegion region_of(const std::byte* data, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                       int64_t elem);
// The same where the checks computed its bytes [base, end) already.
MemoryRegion region_of(uintptr_t base, uintptr_t end, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                       int64_t elem);
// The region of a checked input, built only where its bytes meet `other`'s
// (the common, disjoint case costs two compares).
bool may_overlap_input(const MemoryRegion& other, const InputMeta& input, int64_t elem);

// Whether no element is reached twice (sufficient test: sorted by stride,
// each dim's stride covers the dims inside it).
bool no_self_overlap(std::span<const int64_t> sizes, std::span<const int64_t> strides);

// The first dim that makes a tensor reach an element twice (by the test
// above), or -1; `span` gets the elements its inner dims cover.
int64_t self_overlap_dim(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t* span);

// False only where no byte of `a` is a byte of `b`; true where they share
// one and where the test cannot tell. Exact for disjoint byte ranges, and
// for views that interleave without sharing an element when one stride
// period holds each view's elements in disjoint windows (column slices of
// one buffer: q and k of a fused qkv; the even and odd elements of a row).
bool may_overlap(const MemoryRegion& a, const MemoryRegion& b);

// Whether a and b address the same elements in the same order: the same
// first element, element size and sizes, and the same stride in every dim
// of more than one element.
bool same_view(const MemoryRegion& a, const MemoryRegion& b);

}  // namespace kf
