#include "core/concretize/reshape_groups.h"

namespace kf {

namespace {

// Calls emit(group) for each group of the finest grouping (see the header).
// No allocation: the key is built from it on every call.
template <class Emit>
void each_group(std::span<const int64_t> in, std::span<const int64_t> out, Emit emit) {
  const int ri = static_cast<int>(in.size()), ro = static_cast<int>(out.size());
  for (int64_t e : in)
    if (e == 0) return emit(ReshapeGroup{ri, ro});
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
      else return emit(ReshapeGroup{ri - i, ro - j});  // (unreachable for equal counts)
    }
    // Trailing size-1 dims join this group.
    while (i + g.in_dims < ri && in[static_cast<size_t>(i + g.in_dims)] == 1) ++g.in_dims;
    while (j + g.out_dims < ro && out[static_cast<size_t>(j + g.out_dims)] == 1) ++g.out_dims;
    i += g.in_dims;
    j += g.out_dims;
    emit(g);
  }
}

}  // namespace

ReshapeGroups reshape_groups(std::span<const int64_t> in, std::span<const int64_t> out) {
  ReshapeGroups groups;
  each_group(in, out, [&](ReshapeGroup g) { groups.push_back(g); });
  return groups;
}

void append_reshape_key(std::span<const int64_t> in, std::span<const int64_t> out, std::vector<int64_t>* words) {
  const size_t count = words->size();
  words->push_back(0);
  each_group(in, out, [&](ReshapeGroup g) {
    words->push_back(int64_t{g.in_dims} << 8 | g.out_dims);
    ++(*words)[count];
  });
}

}  // namespace kf
