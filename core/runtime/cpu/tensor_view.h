// A strided view of host memory, the CPU backend's value representation.
// Views share their storage (a view of a view keeps the allocation alive).
// Strides are in elements and may be 0 (broadcast) or any other value >= 0.
//
// A view may also be deferred: its elements are not stored but computed
// when read, by a Source (a pointwise op over its operands, iota, a random
// op). Strides then address the source's elements as they would address
// memory holding them in row-major order, so every view op (broadcast,
// permute, slice...) applies to both kinds alike. eval.h says which values
// are deferred and who may read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "core/concretize/shape_inference.h"
#include "core/ir/dtype.h"
#include "core/runtime/compact_strides.h"

namespace kf::cpu {

// The elements of a deferred value: `sizes` of `dtype`, computed on read.
// A read recurses through the deferred values it reads: `depth` counts
// them (1: reads none), and stays at most kMaxDepth.
class Source {
 public:
  static constexpr int kMaxDepth = 32;
  Source(DType dtype, Sizes sizes, int depth) : dtype(dtype), sizes(std::move(sizes)), depth(depth) {}
  virtual ~Source() = default;
  // Writes element `offset` (row-major over sizes) as dtype's bytes to out.
  virtual void load(int64_t offset, std::byte* out) const = 0;

  const DType dtype;
  const Sizes sizes;
  const int depth;
};

// Room for one element of any dtype, read from a deferred view.
struct ElementBuffer {
  alignas(8) std::byte bytes[8];
};

struct TensorView {
  DType dtype = DType::F32;
  Sizes sizes;
  std::vector<int64_t> strides;  // elements
  std::byte* data = nullptr;     // first element (offset applied); null when deferred
  std::shared_ptr<void> storage; // keeps owned memory alive; null for borrowed
  std::shared_ptr<const Source> source;  // set when deferred
  int64_t offset = 0;            // deferred: the source element of index 0

  int rank() const { return static_cast<int>(sizes.size()); }
  int64_t numel() const { return kf::numel(sizes); }
  bool deferred() const { return source != nullptr; }
  int depth() const { return source ? source->depth : 0; }  // Source::depth
  // Element offset of a multi-index (sum of index * stride).
  int64_t offset_of(const int64_t* index) const {
    int64_t off = 0;
    for (size_t d = 0; d < sizes.size(); ++d) off += index[d] * strides[d];
    return off;
  }
  // The element's address; the view must not be deferred.
  std::byte* at(const int64_t* index) const { return data + offset_of(index) * dtype_size(dtype); }
  // The bytes of the element `off` elements from the first: in memory, or
  // computed into `buf` when deferred.
  const std::byte* element(int64_t off, ElementBuffer& buf) const {
    if (!source) return data + off * dtype_size(dtype);
    source->load(offset + off, buf.bytes);
    return buf.bytes;
  }
  const std::byte* read(const int64_t* index, ElementBuffer& buf) const { return element(offset_of(index), buf); }
  // Moves the first element `n` elements on (a slice's start).
  void advance(int64_t n) {
    if (source) offset += n;
    else data += n * dtype_size(dtype);
  }
};

// A fresh compact tensor; `order` lists dims outermost first (empty: row-major).
TensorView allocate(DType dtype, const Sizes& sizes, const std::vector<int>& order = {});
// (compact_strides, compact_strides_inline: core/runtime/compact_strides.h)
using kf::compact_strides;
using kf::compact_strides_inline;

// Element access through double / int64 for any dtype (bool as 0/1).
double load_f64(DType t, const std::byte* p);
int64_t load_i64(DType t, const std::byte* p);
void store_f64(DType t, std::byte* p, double v);  // rounds to nearest even; ints: C++ conversion semantics as PyTorch (truncation)
void store_i64(DType t, std::byte* p, int64_t v); // ints wrap to the width; bool: != 0

// Calls fn(index) for every multi-index of `sizes` in row-major order.
template <typename Fn>
void for_each_index(const Sizes& sizes, Fn&& fn) {
  const size_t r = sizes.size();
  for (int64_t s : sizes)
    if (s == 0) return;
  std::vector<int64_t> index(r, 0);
  while (true) {
    fn(static_cast<const int64_t*>(index.data()));
    size_t d = r;
    while (d > 0) {
      --d;
      if (++index[d] < sizes[d]) break;
      index[d] = 0;
      if (d == 0) return;
    }
    if (r == 0) return;
  }
}

// The view of `t` broadcast (right-aligned) to `sizes`: stride 0 on
// stretched dims.
TensorView broadcast_to(const TensorView& t, const Sizes& sizes);

// Copies src (possibly deferred) into dst element by element (same sizes;
// dtype converted).
void copy_into(const TensorView& src, const TensorView& dst);

// `sizes` with every dim along which `strides` is 0 (a broadcast: every
// index reads one element) cut to 1: the distinct elements of a view.
Sizes distinct_sizes(const Sizes& sizes, const std::vector<int64_t>& strides);

// A copy of t's elements in memory of its own. Only the distinct elements
// are stored (distinct_sizes): stride-0 dims stay stride 0.
TensorView own_copy(const TensorView& t);
// A deferred view's elements in memory (own_copy); others as they are.
TensorView materialize(const TensorView& t);

// A row-major multi-index from an element offset into `sizes`.
void unravel(int64_t offset, const Sizes& sizes, int64_t* index);

}  // namespace kf::cpu
