#include "core/concretize/overlap.h"

#include <algorithm>

#include "core/util/dl_layout.h"

namespace kf {

namespace {

// The window of byte residues modulo `period` that r's bytes fall in:
// [start, start + length) mod period. Dims whose byte stride is a multiple
// of the period add nothing; the others add their whole reach. `all`
// where the window covers every residue (the period proves nothing).
struct Window {
  uint64_t start, length;
  bool all;
};

Window residues(const MemoryRegion& r, uint64_t period) {
  uint64_t length = static_cast<uint64_t>(r.elem);
  for (size_t d = 0; d < r.sizes.size(); ++d) {
    if (r.sizes[d] <= 1) continue;
    const uint64_t stride = static_cast<uint64_t>(r.strides[d]) * static_cast<uint64_t>(r.elem);
    if (stride % period == 0) continue;
    length += static_cast<uint64_t>(r.sizes[d] - 1) * stride;
    if (length >= period) return {0, period, true};
  }
  return {static_cast<uint64_t>(r.base % period), length, false};
}

// Whether [a, a + la) and [b, b + lb), taken modulo `period`, intersect
// (both shorter than the period, starts reduced modulo it).
bool windows_meet(Window a, Window b, uint64_t period) {
  if (a.all || b.all) return true;
  // b's start seen from a's start, and a's from b's.
  const uint64_t ab = (b.start + period - a.start) % period;
  const uint64_t ba = (a.start + period - b.start) % period;
  return ab < a.length || ba < b.length;
}

}  // namespace

MemoryRegion region_of(const std::byte* data, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                       int64_t elem) {
  // Reaches were checked against int64 offsets (at most 2^62) and the
  // address space when the tensor was read; an empty one ends at its base.
  const auto base = reinterpret_cast<uintptr_t>(data);
  uintptr_t end;
  byte_end(base, element_reach(sizes, strides).max_offset, elem, &end);
  return region_of(base, end, sizes, strides, elem);
}

MemoryRegion region_of(uintptr_t base, uintptr_t end, std::span<const int64_t> sizes, std::span<const int64_t> strides,
                       int64_t elem) {
  MemoryRegion r;
  r.base = base;
  r.end = end;
  r.elem = elem;
  r.sizes.assign(sizes.begin(), sizes.end());
  r.strides.assign(strides.begin(), strides.end());
  return r;
}

bool may_overlap_input(const MemoryRegion& other, const InputMeta& input, int64_t elem) {
  if (other.empty() || input.count == 0) return false;
  const auto first = reinterpret_cast<uintptr_t>(input.data);
  uintptr_t last;
  byte_end(first, input.max_offset, elem, &last);  // checked by read_tensor
  if (other.end <= first || last <= other.base) return false;
  return may_overlap(other, region_of(first, last, input.sizes, input.strides, elem));
}

int64_t self_overlap_dim(std::span<const int64_t> sizes, std::span<const int64_t> strides, int64_t* span_out) {
  int64_t order[kMaxRank];
  size_t n = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return -1;  // empty: nothing is reached
    if (sizes[d] > 1) order[n++] = static_cast<int64_t>(d);
  }
  std::sort(order, order + n,
            [&](int64_t a, int64_t b) { return strides[static_cast<size_t>(a)] < strides[static_cast<size_t>(b)]; });
  int64_t span = 1;  // elements covered by the inner dims
  for (size_t k = 0; k < n; ++k) {
    const size_t d = static_cast<size_t>(order[k]);
    if (strides[d] < span) {
      if (span_out != nullptr) *span_out = span;
      return static_cast<int64_t>(d);
    }
    span = mul_saturating(strides[d], sizes[d]);  // the outermost dim's may pass int64: unused
  }
  return -1;
}

bool no_self_overlap(std::span<const int64_t> sizes, std::span<const int64_t> strides) {
  return self_overlap_dim(sizes, strides, nullptr) < 0;
}

bool may_overlap(const MemoryRegion& a, const MemoryRegion& b) {
  if (a.empty() || b.empty()) return false;
  if (a.end <= b.base || b.end <= a.base) return false;
  // Interleaved views: try each byte stride of either tensor as the period.
  for (const MemoryRegion* r : {&a, &b}) {
    for (size_t d = 0; d < r->sizes.size(); ++d) {
      if (r->sizes[d] <= 1 || r->strides[d] == 0) continue;
      const uint64_t period = static_cast<uint64_t>(r->strides[d]) * static_cast<uint64_t>(r->elem);
      if (!windows_meet(residues(a, period), residues(b, period), period)) return false;
    }
  }
  return true;
}

bool same_view(const MemoryRegion& a, const MemoryRegion& b) {
  if (a.base != b.base || a.elem != b.elem || a.sizes.size() != b.sizes.size()) return false;
  for (size_t d = 0; d < a.sizes.size(); ++d) {
    if (a.sizes[d] != b.sizes[d]) return false;
    if (a.sizes[d] > 1 && a.strides[d] != b.strides[d]) return false;
  }
  return true;
}

}  // namespace kf
