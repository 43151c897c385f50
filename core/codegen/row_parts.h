// Pieces shared by the row kernels' emitters: emit_row.cpp assembles a
// kernel from them, emit_row_memory.cpp walks a row re-read from memory or
// staged in shared memory, emit_row_registers.cpp a row held in registers.
// Internal to core/codegen.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/reduction_code.h"

namespace kf::row_emit {

// The across kernel (RowParams::across): its output pass runs over column
// chunks of kAcrossChunk elements (a multiple of every vector width: 32
// lanes of up to 16-byte vectors of 2-byte elements), each row's chunk
// into a shared tile of across_rows rows of kAcrossChunk + kAcrossPad
// elements. In the tile a chunk's column c = a * V + b (lane a's element b
// of a vector step) sits at b * (kAcrossChunk / V) + a, so the lanes of a
// step write consecutive elements; the padding makes a row 2 words (4-byte
// elements) or 1 word (2-byte) past a multiple of 32 banks, so that the
// store's warp, 16 rows of two tile columns, reads 32 banks.
constexpr int kAcrossChunk = 256;
constexpr int kAcrossPad = 2;

// The domain index of a row element: the row's own index (KernelWriter::
// row_index) with its reduced dims `red` set to `red_idx`.
std::vector<std::string> full_index(const KernelWriter& w, const std::vector<size_t>& red,
                                    const std::vector<std::string>& red_idx);

// Inner-outer kernels: the outer (column) reductions. Each block owns one
// row of partials per outer reduction in args.scratch (split = blockIdx.x,
// the layout emit_column_finish reads). The cached path accumulates its
// lanes' columns in registers and writes them once after its last row; the
// streaming path accumulates in its partial row in memory (each element is
// touched by one thread only, so no barrier is needed).
// The Edges kernel (RowKernel::Edges) cannot keep its columns in
// registers: a row's shift moves which columns a thread holds. Its
// partials accumulate in dynamic shared memory instead, lane-major (column
// c at (c % V) * stride + c / V), so that for each lane the threads of a
// warp touch consecutive words (no bank conflicts); `lane_major` rows, one
// per reduction, each V * stride words. Within a row each column belongs
// to one thread, and the next row's block reductions order one row's
// updates before the next's.
struct OuterAccs {
  std::vector<const Expr*> exprs;
  std::vector<DType> types;
  std::vector<std::string> partials;                      // per reduction: this block's partial row
  std::vector<std::vector<std::vector<std::string>>> regs;  // [reduction][vector k][lane] (cached path)
  std::vector<std::string> lane_major;                    // per reduction (Edges kernel)
  std::string lane_stride;
  int width = 0;  // the vector width V of lane_major
  bool active() const { return !exprs.empty(); }
  // Where column `c` (an index expression) sits in a lane_major row.
  std::string lane_slot(const std::string& c) const {
    const std::string V = std::to_string(width) + "u";
    return "((unsigned)(" + c + ") % " + V + ") * " + lane_stride + " + (unsigned)(" + c + ") / " + V;
  }
};

enum class OuterPlace { Memory, Registers, LaneMajor };

// Registers: the cached path's accumulators too (main kernel); LaneMajor:
// the Edges kernel's shared rows, set to the identity here.
OuterAccs declare_outer(KernelWriter& w, const RowParams& p, const std::string& row_len, OuterPlace place);

// The staged path (RowParams::staged): the row's staged inputs in dynamic
// shared memory, one row of each input's storage type after the other,
// then with stage_outer one row of partials per outer reduction.
struct Stage {
  std::map<int64_t, std::string> rows;  // staged input -> its row in shared memory
  std::vector<std::string> partials;    // per outer reduction (stage_outer)
  bool active() const { return !rows.empty(); }
};

// The input's own index where the domain index is `idx` (its dims' map).
std::vector<std::string> input_index(const std::vector<int>& dims, const std::vector<std::string>& idx);

// One element of every outer reduction at domain index `idx` into `acc(a)`.
void outer_step(KernelWriter& w, const OuterAccs& o, const std::vector<std::string>& idx,
                const std::function<std::string(size_t)>& acc);

// One element of online sum `a` (paired with max `m`): the fusion's own
// exp(x - max) with the row's max bound to the running max (the values
// computed stay in the caller's lane scope).
void online_sum_step(KernelWriter& w, const Accumulator& a, const Accumulator& m,
                     const std::function<std::string()>& term);

// A thread whose elements are all -inf summed exp(-inf - -inf): NaN where
// the row's result is 0 (unless the whole row is -inf: kf_online_sum).
void end_online_sums(KernelWriter& w, const std::vector<Accumulator>& accs);

// The Edges kernel's split of the current row (RowKernel::Edges): `shift`
// is the remainder of the row's start (every vector tensor's, the host
// checked) modulo the width; the row's first `head` elements come before
// its first aligned vector, then `vectors` whole vectors, then the tail:
// `edges` (head + tail) elements read one at a time.
struct RowEdges {
  std::string shift, head, vectors, edges;
  VectorRef ref;  // the tensor whose row start gives the shift
};

// The reference tensor of the Edges kernel: its first vector output, else
// its first vector input.
VectorRef edge_ref(const KernelWriter& w, const RowParams& p);

// Declares the current row's split (RowEdges) against `ref`.
RowEdges declare_edges(KernelWriter& w, const RowParams& p, const std::vector<size_t>& red, const std::string& row_len,
                       const VectorRef& ref);

// The Edges kernels' host checks: the vector inputs at any element
// alignment (each row's shift its own: kf_vload_any), the vector outputs at
// the shift of `ref`'s rows.
void edge_vector_checks(KernelWriter& w, const ExtentSets& sets, const VectorPlan& vp, int64_t dom, const VectorRef& ref,
                        std::vector<ArgCheck>* checks);

// Opens a loop over the row's vectors, element j of each (one thread per
// vector per step): the whole row, or with edges its aligned middle.
void open_vector_steps(KernelWriter& w, int V, const std::string& row_len, const RowEdges* edges);

// Where element `j` of the row sits in a stage: at j, or in the cluster row
// kernel at its place in this block's part.
std::string stage_at(const KernelWriter& w, const std::string& j);

// Opens a loop over the row's head and tail, element j of each.
void open_edge_steps(KernelWriter& w, int V, const RowEdges& edges);

// How the streaming loops step through a row: one element per thread step
// (any row length and layout), or 16-byte vector steps (VectorSteps: the
// vector plan's inputs loaded as whole vectors; the run-time conditions of
// every register used are collected by the caller from the writer's
// vector registers of groups >= kStreamGroups).
inline constexpr int kStreamGroups = 1000;
struct VectorSteps {
  int next = kStreamGroups;  // the next loop's register group (and load section)
  // The Edges kernel: vectors from the row's first aligned element, then
  // its head and tail one element per thread step (staged rows sit at
  // their shift in shared memory, so that their vectors are aligned too).
  const RowEdges* edges = nullptr;
};

// emit_row_memory.cpp

// The row re-read in every phase: from global memory, or for the inputs of
// `stage` (when given) from their rows in shared memory.
void row_streaming(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const std::vector<size_t>& red,
                   const std::string& row_len, const Stage* stage, VectorSteps* steps);

// Declares the staged path's shared-memory rows (kernel level) and returns
// its run-time condition: the vector conditions of the staged inputs and
// enough dynamic shared memory for this row (the launch sizes it per call,
// LaunchRule::row_stage_bytes, with row_stage_pad elements for each row's
// rounding up to 16 bytes). With `ref` (the Edges kernel) a row sits
// at its shift: each takes the row rounded up to whole vectors, plus one.
std::string declare_stage(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                          const std::string& row_len, const VectorRef* ref, Stage* stage, std::vector<std::string>* lines);

// Copies the row's staged inputs into shared memory, 16 bytes per load
// (with `edges`, the row's aligned vectors so, its head and tail per
// element, each element at its shift).
void fill_stage(KernelWriter& w, const RowParams& p, const Stage& stage, const std::vector<size_t>& red,
                const std::string& row_len, const RowEdges* edges);

// emit_row_registers.cpp

// The row held in registers: each thread loads K vectors of V elements
// (vector k at element (k * blockDim.x + threadIdx.x) * V of the row) once,
// then every phase and the output pass read the registers. Inputs first
// needed in a later phase (layernorm's weight and bias) are loaded there:
// load section p holds the loads first needed in phase p, section
// phases + 1 + k those of output vector k. Returns the run-time condition
// under which this path applies ("" with w.paths == Vector: the host
// checks it, from `checks`).
std::string row_cached(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                       const Task& task, const std::vector<size_t>& red, const std::string& row_len,
                       std::vector<ArgCheck>* checks, const RowEdges* edges);

}  // namespace kf::row_emit
