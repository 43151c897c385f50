#include "core/concretize/reshape_groups.h"

namespace kf {

ReshapeGroups reshape_groups(std::span<const int64_t> in, std::span<const int64_t> out) {
  const int ri = static_cast<int>(in.size()), ro = static_cast<int>(out.size());
  for (int64_t e : in)
    if (e == 0) return {{ri, ro}};
  ReshapeGroups groups;
  int i = 0, j = 0;
  while (i < ri || j < ro) {
    ReshapeGroup g;
    int64_t pi = 1, po = 1;
    // At least one dim of each side (while it has any), then the smaller
    // product grows until they meet.
    if (i < ri) pi *= in[static_cast<size_t>(i + g.in_dims++)];
    if (j < ro) po *= out[static_cast<size_t>(j + g.out_dims++)];
    while (pi != po) {
      if (pi < po && i + g.in_dims < ri) pi *= in[static_cast<size_t>(i + g.in_dims++)];
      else if (j + g.out_dims < ro) po *= out[static_cast<size_t>(j + g.out_dims++)];
      else return {{ri, ro}};  // (unreachable for equal counts)
    }
    // Trailing size-1 dims join this group.
    while (i + g.in_dims < ri && in[static_cast<size_t>(i + g.in_dims)] == 1) ++g.in_dims;
    while (j + g.out_dims < ro && out[static_cast<size_t>(j + g.out_dims)] == 1) ++g.out_dims;
    i += g.in_dims;
    j += g.out_dims;
    groups.push_back(g);
  }
  return groups;
}

void append_reshape_key(const ReshapeGroups& g, std::vector<int64_t>* words) {
  words->push_back(static_cast<int64_t>(g.size()));
  for (const ReshapeGroup& x : g) words->push_back(int64_t{x.in_dims} << 8 | x.out_dims);
}

}  // namespace kf
