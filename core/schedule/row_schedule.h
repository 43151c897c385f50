// The row-wise view of a GPU segment that every generated kernel follows.
// A segment iterates one domain: for pointwise segments the sizes of its
// outputs (outputs of provably different sizes get loops of their own); for
// segments with reductions the sizes of the reductions' common input, whose
// dims split into kept dims (one row each) and reduced dims (the row).
// Reductions run in phases (a reduction reading another's result, as
// layernorm's variance of x - mean, runs in a later phase); outputs are
// either domain-shaped (written in a last pass over the row: normalization)
// or row-shaped (written once per row: reduction).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/scheduler_kind.h"
#include "core/segment/task.h"

namespace kf {

struct RowSchedule {
  SchedulerKind kind = SchedulerKind::Pointwise;
  // Pointwise: the outputs of each loop; the loop runs over the sizes of its
  // first output, which all of them share.
  std::vector<std::vector<int64_t>> loops;
  // Reduction and normalization.
  int64_t domain = -1;                       // value whose sizes are the domain
  std::vector<bool> reduced;                 // per domain dim
  std::vector<std::vector<int64_t>> phases;  // reduction expr indices, per phase
  std::vector<int64_t> domain_outputs;       // evaluated at every domain index
  std::vector<int64_t> row_outputs;          // evaluated once per row
  int block = 256;
};

// Fills `out` and returns true when the pointwise, reduction or
// normalization scheduler accepts `task`; otherwise returns false with the
// reason in `why` (library ops, reductions over different domains, outputs
// whose sizes the domain cannot produce).
bool schedule_row(const ConcreteFusion& c, const Task& task, RowSchedule* out, std::string* why);

}  // namespace kf
