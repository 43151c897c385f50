#include "core/runtime/compact_strides.h"

#include "core/util/dl_layout.h"

namespace kf {

Extents compact_strides_inline(std::span<const int64_t> sizes, std::span<const int> order) {
  const size_t r = sizes.size();
  Extents strides(r, 1);
  int64_t s = 1;
  for (size_t k = r; k > 0; --k) {
    const size_t d = order.empty() ? k - 1 : static_cast<size_t>(order[k - 1]);
    strides[d] = s;
    // dl_strides' rule (core/util/dl_layout.h): only an empty tensor (never
    // addressed) can saturate here, e.g. [2, 0, INT64_MAX].
    s = compact_outer_stride(s, sizes[d]);
  }
  return strides;
}

std::vector<int64_t> compact_strides(std::span<const int64_t> sizes, std::span<const int> order) {
  return compact_strides_inline(sizes, order).to_vector();
}

}  // namespace kf
