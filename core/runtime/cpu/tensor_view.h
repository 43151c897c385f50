// A strided view of host memory, the CPU backend's value representation.
// Views share their storage (a view of a view keeps the allocation alive).
// Strides are in elements and may be 0 (broadcast) or any other value >= 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/concretize/shape_inference.h"
#include "core/ir/dtype.h"

namespace kf::cpu {

struct TensorView {
  DType dtype = DType::F32;
  Sizes sizes;
  std::vector<int64_t> strides;  // elements
  std::byte* data = nullptr;     // first element (offset applied)
  std::shared_ptr<void> storage; // keeps owned memory alive; null for borrowed

  int rank() const { return static_cast<int>(sizes.size()); }
  int64_t numel() const { return kf::numel(sizes); }
  std::byte* at(const int64_t* index) const {
    int64_t off = 0;
    for (size_t d = 0; d < sizes.size(); ++d) off += index[d] * strides[d];
    return data + off * dtype_size(dtype);
  }
};

// A fresh compact tensor; `order` lists dims outermost first (empty: row-major).
TensorView allocate(DType dtype, const Sizes& sizes, const std::vector<int>& order = {});
std::vector<int64_t> compact_strides(std::span<const int64_t> sizes, std::span<const int> order = {});
// The same strides held inline (no allocation: the executor and the output
// checks use it on every call).
Extents compact_strides_inline(std::span<const int64_t> sizes, std::span<const int> order = {});

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

// Copies src into dst element by element (same sizes; dtype converted).
void copy_into(const TensorView& src, const TensorView& dst);

}  // namespace kf::cpu
