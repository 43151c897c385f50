// Which inputs and outputs of a loop can move as 16-byte vectors along one
// domain dim (the schedulers' shared vectorization rule).
#pragma once

#include <cstdint>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/schedule/access_map.h"
#include "core/schedule/kernel_schedule.h"
#include "core/ir/task.h"

namespace kf {

inline constexpr int kVectorBytes = 16;

// Inputs whose dim read along domain dim `dim` is of class >1 and
// innermost in memory, every other dim a domain dim of its own class, a
// broadcast, or (`reads` traced with shifts, where no plain map exists) a
// domain dim read at a shift inside a bound (kShiftedIndex: a cat's
// operands, a pad's input); outputs of the domain's classes with `dim` innermost. Without
// `reads`, an input is assumed right-aligned with the domain (broadcast
// over leading dims: loads at other indices simply stay scalar); with it,
// the input's first plain map (a permuted or broadcast-in-dim input).
// `exclude`: inputs read elsewhere (tiles in shared memory): not loaded
// as vectors, though their dtype still counts for the width. `rows` (a
// row kernel's kept dims): an input that reads none of them of class >1
// (a weight, every row's the same) is taken at any alignment
// (size_past_weights then sizes the plan). Other inputs whose address is
// aligned to fewer than `min_alignment` bytes are left out (the loop reads
// them per element rather than failing its vector checks for all); the row
// scheduler asks for any alignment where the Edges kernels peel each row.
VectorPlan plan_vectors(const ConcreteFusion& c, const Task& task, const std::vector<int64_t>& outs, int64_t dom,
                        size_t dim, const AccessMap* reads = nullptr, const std::vector<int64_t>& exclude = {},
                        const std::vector<bool>* rows = nullptr, int min_alignment = kVectorBytes / 2);

// A row kernel's weights (the vector inputs that read none of the row
// dims `rows` of class >1) whose address or rows cannot start a vector of
// `p`'s width: they load at any alignment (VectorPlan::any_aligned,
// kf_vload_any) instead of one element at a time, each lane's element a
// 16- or 32-byte step from the next lane's (seed 685619608 c0056, a
// layernorm whose float32 weight and bias sit at an offset of one float:
// 1.04 ms, 0.46 with both aligned), and the width is then 16 bytes of the
// widest row input or output, a float32 weight beside bfloat16 rows moving
// 32 bytes per lane group (two chunks and a third for the shift) rather
// than halving the rows' vectors (c0056 0.58 ms at 4 lanes, 0.42 at 8;
// H200, docs/perf-log.md session 45). Aligned weights keep the width they
// give unless the row inputs' bytes a thread loads at once (the width
// times `vectors_per_thread` times their dtype sizes) fall below
// `thread_bytes` (Tuning::row_thread_bytes): an rmsnorm of float16 rows
// with a float32 weight loaded 32 bytes a thread at 4 lanes, DRAM at 57%;
// 8 lanes, 81% (1.30x). Where two row inputs already load 64 (x and the
// residual of an add+rmsnorm), 8 lanes only spilled registers (0.85x;
// docs/perf-log.md session 46).
void size_past_weights(const ConcreteFusion& c, int64_t dom, const std::vector<bool>& rows, int vectors_per_thread,
                       int thread_bytes, VectorPlan* p);

// The scalar loop's loads (a plan of one-element "vectors"): every tensor
// input with a plain map from the domain (any layout, any alignment: a
// one-element load needs neither), so that the loop loads the elements of
// several positions per thread before it computes any (each position's
// store would otherwise keep the compiler from issuing the next one's
// loads early: it cannot tell an output from an input). Inputs read only
// at shifts or through gathers stay loads at their use.
VectorPlan plan_element_loads(const ConcreteFusion& c, const Task& task, int64_t dom, size_t dim, const AccessMap& reads);

// Drops from `p` the inputs that `reads` shows are read only at maps that
// do not index the lane dim (a per-row weight [C] unsqueezed over the rows
// of a batch norm, which the right-aligned rule takes for a lane input) and
// widens the vectors to what the remaining inputs and outputs allow.
// An input `reads` does not reach (read through a reshape) goes too when
// every value the task computes from its data directly is read only at
// maps that skip the lane dim, or when only size queries read it (an
// AOTAutograd cross-entropy reshapes the logits by the labels' sizes: the
// int64 labels, never loaded, kept the logits' vectors at 2 elements);
// otherwise it stays.
void drop_lane_invariant(const ConcreteFusion& c, const Task& task, const AccessMap& reads, VectorPlan* p);

// `p` without the inputs that skip a domain dim of class >1 among those
// `dims` marks: the inputs left start each row (Edges kernels: dims = the
// kept dims) or each position (flat vectors: every dim) where the domain
// does, up to their strides, so one shift the run time finds for the
// reference tensor holds for all of them; a weight broadcast over the rows
// would be misaligned by it, and is read per element, as is an input
// expanded (stride 0) along one of those dims.
VectorPlan inputs_reading(const ConcreteFusion& c, int64_t dom, const std::vector<bool>& dims, VectorPlan p);

// Drops from `p` the inputs read only at a shift along the lane dim that
// splits vectors at `p`'s width (a pad of 1 on the last dim: its lanes
// would straddle the pad's edge and load misaligned); they are read per
// element. The width stays (their dtype still counts for it). Shifts along
// other dims, and shifts by a multiple of the width, keep their vectors.
void keep_aligned_shifts(VectorPlan* p);

// Drops from `p` the task inputs whose address or rows (InputLayout's
// alignment and row_alignment, from the key) cannot start a vector of
// `p`'s width, and the outputs written into such an input (`in_place`:
// the inputs the kernel updates in place, inputs_read_where_written): they
// are read or written per lane, inside the vector loop, rather than
// failing its run-time test and sending every other tensor of the loop to
// the scalar path (a padded moment beside aligned parameters, an update in
// place into a tensor at an odd storage offset). The width stays, unless
// the dropped tensors move more bytes per domain element than the vector
// ones: then the plan has no vectors (the scalar loop serves them better).
void drop_misaligned(const ConcreteFusion& c, int64_t dom, const std::vector<int64_t>& in_place, VectorPlan* p);

// Sets the width to 16 bytes of the narrowest dtype among `p`'s inputs and
// outputs: wider dtypes then move several 16-byte vectors per lane group
// (a bf16 loop reading float32 tables takes 8 lanes, not 4), which halves
// the index and address work per element where the dtypes are mixed.
void narrow_vectors(const ConcreteFusion& c, VectorPlan* p);

}  // namespace kf
