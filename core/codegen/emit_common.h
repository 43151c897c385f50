// Pieces every kernel family's emitter shares: index unravelling, the
// 16-byte vector groups of a VectorPlan (loads, lanes, stores and the
// run-time conditions that guard them), extent products.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/codegen/kernel_writer.h"
#include "core/concretize/extent_sets.h"
#include "core/schedule/kernel_schedule.h"

namespace kf {

inline constexpr const char* kGridStride = "(long long)gridDim.x * blockDim.x";
inline constexpr const char* kThread = "(long long)blockIdx.x * blockDim.x + threadIdx.x";

// Unravels `linear` over `dims` of `dom` (outermost first) into locals
// i<d><suffix>; returns one index expression per listed dim ("0" for
// size-1 dims).
// maybe_unused: the locals may go unread (all reads come from elsewhere).
std::vector<std::string> unravel(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims,
                                 const std::string& linear, const std::string& suffix = "", bool maybe_unused = false);
// The same over every dim of `dom` in `order` (outermost first), returned
// in domain order.
std::vector<std::string> unravel_in_order(KernelWriter& w, int64_t dom, const std::vector<size_t>& order,
                                          const std::string& linear, const std::string& suffix = "",
                                          bool maybe_unused = false);
std::vector<size_t> all_dims(size_t r);
// Joins run-time conditions with && ("true" for none).
std::string all_of(const std::vector<std::string>& conds);
// The product of the domain's extents over `dims` as a hoisted long long
// (`one` when every extent is 1).
std::string extent_product(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims, const char* one);

// Makes the plan's inputs the writer's vector candidates (no registers yet).
void use_vectors(KernelWriter& w, const VectorPlan& vp);
// Run-time conditions for moving `v` as vectors of `width` elements along
// domain dim `dim` (v: a vector input, or an output in domain order).
// input_dims: the input's dims mapped to the domain's (default: the plan's).
// conds may be null (the host checks them); checks (when not null): the
// same conditions for the host (ArgCheck).
// With `ref` (rows of any shift, RowKernel::Edges), v's other strides need
// not be multiples of the width: each must leave the same remainder as
// ref's stride along the same domain dim (every row of v then starts at
// the remainder of ref's row). With any_alignment (KernelWriter::any_left's
// loads and stores): element-aligned pointers, v's other strides free.
struct VectorRef {
  int64_t value = -1;
  std::vector<int> dims;  // its dims' domain dims
};
void vector_conditions(KernelWriter& w, const ExtentSets& sets, int64_t v, int64_t dom, int width, size_t dim,
                       std::vector<std::string>* conds, const std::vector<int>* input_dims = nullptr,
                       std::vector<ArgCheck>* checks = nullptr, const VectorRef* ref = nullptr,
                       bool any_alignment = false);
// The domain dim each dim of `v` reads: a vector input's (the writer's
// vector_inputs), a view output's lane dim, or an output's in domain order.
std::vector<int> vector_dims(const KernelWriter& w, int64_t v, int64_t dom, size_t dim);
// The conditions of every vector register used in group 0 (or in any
// group when `every_group`) and of the plan's outputs (and of the shifted
// lanes), with their host forms in `checks` when not null.
void used_vector_conditions(KernelWriter& w, const ExtentSets& sets, const VectorPlan& vp, int64_t dom,
                            bool every_group, std::vector<std::string>* conds, std::vector<ArgCheck>* checks = nullptr,
                            const VectorRef* ref = nullptr, bool any_alignment = false);
// The vector loads of the used (candidate, group) registers of `section`,
// each guarded by its group's condition (group_ok empty: unguarded). With
// any_left (an expression: the elements that exist from lane 0 on), each
// loads at any element alignment through kf_vload_any (aligned 16-byte
// chunks shifted into place, never a byte outside the tensor).
// A vector of type vt of value v loaded at address `at` through
// kf_vload_any (left: the elements that exist from `at` on).
std::string vector_load_any(KernelWriter& w, int64_t v, const std::string& vt, const std::string& at,
                            const std::string& left);
std::vector<std::string> vector_loads(KernelWriter& w, int V, int section, const std::vector<std::string>& group_ok,
                                      const std::string& any_left = "");
// Computes the outputs at each lane of one vector group (lane 0 at `idx`,
// lanes along domain dim vp.dim) and stores them: vector outputs as one
// 16-byte store, the others element by element after every lane is
// computed (so that no store sits between two lanes' loads). `on_lane` runs before each
// lane is evaluated (tiles point their shared-memory reads at it).
// lane_indices (when given): each lane's own domain index (lanes of
// consecutive linear positions, which may cross rows: the flat vectors of
// emit_pointwise), idx being lane 0's.
void vector_group(KernelWriter& w, const VectorPlan& vp, const std::vector<int64_t>& outs,
                  const std::vector<std::string>& idx, const std::function<void(int)>& on_lane,
                  const std::vector<std::vector<std::string>>* lane_indices = nullptr);

// vector_group in two halves: the values of every lane (held in registers
// named in the result), then their stores, so that code can sit between
// them (an in-place window's barrier: emit_pointwise window_loop).
struct GroupStores {
  std::vector<std::string> vector_regs;  // per vp.outputs entry
  struct Element {
    int64_t value;
    int lane;
    std::vector<std::string> idx;
    std::string reg;
  };
  std::vector<Element> elements;  // the outputs stored element by element
  std::vector<std::string> idx;   // lane 0's index
  std::string any_left, any_mask;
};
GroupStores vector_group_values(KernelWriter& w, const VectorPlan& vp, const std::vector<int64_t>& outs,
                                const std::vector<std::string>& idx, const std::function<void(int)>& on_lane,
                                const std::vector<std::vector<std::string>>* lane_indices = nullptr);
void store_vector_group(KernelWriter& w, const VectorPlan& vp, const GroupStores& g);
// "kf_vec<T, V>" for the storage type of value v.
std::string vector_type(const KernelWriter& w, int64_t v, int V);

}  // namespace kf
