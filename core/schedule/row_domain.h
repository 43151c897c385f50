// The row view of a task with reductions, shared by the row and column
// schedulers: the domain (the reductions' common input sizes), the reduced
// dims, the phases, and which outputs are domain- or row-shaped.
#pragma once

#include <optional>
#include <string>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/access_map.h"
#include "core/schedule/kernel_schedule.h"
#include "core/ir/task.h"

namespace kf {

// The domain outputs stored at the domain's own index (not through a
// reshape: RowDomain::views), the ones a vector plan may store as vectors.
std::vector<int64_t> plain_domain_outputs(const RowDomain& rows);
// Adds to `vp` (a plan along the domain's last dim) the view outputs whose
// reshape keeps the last dim whole and whose last dim is their innermost:
// their lanes are consecutive in memory too.
void add_view_vectors(const ConcreteFusion& c, const RowDomain& rows, VectorPlan* vp);

// The domain's innermost dim in memory (RowDomain::order's last), when of
// class >1: reduced, the row kernels take the task and vectorize along it;
// kept, the column kernels.
std::optional<size_t> innermost_dim(const ConcreteFusion& c, const RowDomain& rows);

// The reduced dims of a reduction expr over an input of rank `rank`.
std::vector<bool> reduced_dims(const Expr& e, size_t rank);

// Where a row kernel reads each value: the domain outputs, `domain_reads`
// and every reduction's input at the domain's identity, the row outputs at
// their row's index.
AccessMap row_accesses(const ConcreteFusion& c, const Task& task, const RowDomain& s,
                       const std::vector<int64_t>& domain_reads = {});

// The most reduction phases one kernel runs (a reduction that reads another's
// result starts a phase). Each phase re-evaluates the element expression
// from the row's inputs (the row is held in registers or memory, not the
// values between phases), so a kernel's work and source grow with the
// square of its phases: N pairs of r = sum(y); y = sub(y, r) gave 4.3 MB
// of CUDA at N = 50 and 240 MB at N = 400. Longer chains are split by the
// segmenter into kernels of at most this many phases (each ~0.4 MB).
constexpr size_t kMaxRowPhases = 8;

// The task's rows, or nullopt with the reason in `why` (optional):
// reductions over different domains, outputs the domain cannot produce,
// a reduction result read at an index other than its own row (which a
// kernel holding one row's results cannot provide), or more than
// kMaxRowPhases phases. The task must contain
// a reduction and no library op.
// `domain_reads`: further values the kernel evaluates at every domain
// index (an inner-outer kernel's outer reduction inputs).
std::optional<RowDomain> find_row_domain(const ConcreteFusion& c, const Task& task, std::string* why,
                                         const std::vector<int64_t>& domain_reads = {});

}  // namespace kf
