// Which extents of a concrete fusion are equal in every call of its
// concretization class. Sizes vary within a class, so a kernel may assume
// two extents equal only where the IR forces it: a broadcast of two >1
// extents succeeds only if they agree, a permute moves an extent, a
// reduction keeps its kept extents, and so on. Every (value, dim) is an atom;
// atoms forced equal share a set; all extents of size class 1 share one set
// and all of class 0 another. With `reshape_targets`, a reshape's target
// extent given by a constant joins every extent given by a constant of that
// value, and one given by an extent query (size) joins that extent: q and k
// rotated apart and reshaped back by constants then have one loop, and a
// tiled kernel where one of them is written in another order.
#pragma once

#include <cstdint>
#include <vector>

#include "core/concretize/concrete_fusion.h"

namespace kf {

class ExtentSets {
 public:
  ExtentSets(const ConcreteFusion& c, bool reshape_targets);
  // The set of extent `dim` of `value` (values of rank 0 have none).
  int64_t set_of(int64_t value, int dim) const;
  bool same(int64_t a, int da, int64_t b, int db) const { return set_of(a, da) == set_of(b, db); }
  // Whether two values have provably equal sizes (same rank, dims pairwise).
  bool same_sizes(int64_t a, int64_t b) const;
  // Points every atom at its root: afterwards lookups write nothing, so one
  // frozen set can serve many threads.
  void freeze();

 private:
  int64_t find(int64_t atom) const;
  void unite(int64_t a, int64_t b);
  int64_t atom(int64_t value, size_t dim) const { return first_[static_cast<size_t>(value)] + static_cast<int64_t>(dim); }
  std::vector<int64_t> first_;
  mutable std::vector<int64_t> parent_;
  bool frozen_ = false;
  const ConcreteFusion& c_;
};

// Whether concretize builds its extent sets with reshape targets:
// KFUSE_RESHAPE_EXTENTS (an on/off switch, read once), on by default
// since session 47 (docs/perf-log.md session 47 §1: of the 32 corpus
// plans of seven seeds it changes, two interleaved ropes 4.0-4.5x faster,
// two merged loops 0.86-0.91x; =0 gives the old plans exactly).
bool reshape_target_extents();

// The frozen extent sets of `c`, computed when `c` was concretized.
const ExtentSets& extent_sets_of(const ConcreteFusion& c);

}  // namespace kf
