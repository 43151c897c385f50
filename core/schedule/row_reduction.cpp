// The row scheduler (reductions and normalizations): one block per row.
// When the innermost dim in memory is reduced (RowDomain::order), the row can be held in registers as
// 16-byte vectors (the block then sized per call to the row), or, when it
// is too long for them, staged in shared memory; any row, and any layout,
// also runs re-read from memory in every phase.
#include <algorithm>
#include <map>
#include <set>

#include "core/schedule/online_softmax.h"
#include "core/schedule/row_domain.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {
constexpr int kStreamingBlock = 256;
constexpr int kCachedBlock = 1024;  // the most threads a row may need (the block is chosen per call)

// The values the kernel evaluates at domain indices to compute `v`: its
// producers within the task back to the task inputs, stopping at
// reduction results (row values).
void domain_closure(const Fusion& f, const Task& task, int64_t v, std::set<int64_t>* out) {
  std::vector<int64_t> stack{v};  // (no recursion: a chain may be as long as the definition allows)
  while (!stack.empty()) {
    const int64_t u = stack.back();
    stack.pop_back();
    if (!out->insert(u).second) continue;
    if (std::find(task.inputs.begin(), task.inputs.end(), u) != task.inputs.end()) continue;
    const Value& val = f.value(u);
    if (val.producer < 0) continue;
    const Expr& e = f.exprs[static_cast<size_t>(val.producer)];
    if (op_info(e.op).category == OpCategory::Reduction) continue;
    for (int64_t in : e.inputs) stack.push_back(in);
  }
}

// How many values per element a cached row keeps live across block-wide
// reductions: the values that two passes (the reduction phases, then the
// output pass) both read, counting only the last of a chain (softmax
// backward keeps dy and y for dy - sum(dy * y) and y * (...): 2; dropout +
// residual + layernorm keeps only h = x * mask + r: 1). Row inputs that
// only the output pass reads count too: the cached path loads them before
// the last block reduction (log-softmax backward's y).
int values_live_across_phases(const Fusion& f, const Task& task, const RowDomain& rows,
                              const std::vector<int64_t>& row_inputs) {
  std::vector<std::set<int64_t>> passes;
  for (const auto& phase : rows.phases) {
    std::set<int64_t> r;
    for (int64_t ei : phase) domain_closure(f, task, f.exprs[static_cast<size_t>(ei)].inputs[0], &r);
    passes.push_back(std::move(r));
  }
  std::set<int64_t> out;
  for (int64_t o : rows.domain_outputs) domain_closure(f, task, o, &out);
  passes.push_back(std::move(out));
  std::map<int64_t, int> uses;
  for (const auto& pass : passes)
    for (int64_t v : pass) ++uses[v];
  std::set<int64_t> shared;
  for (const auto& [v, n] : uses)
    if (n >= 2 && f.value(v).kind != ValueKind::Constant && f.value(v).kind != ValueKind::ScalarInput) shared.insert(v);
  std::set<int64_t> held = shared;
  for (int64_t ei : task.exprs) {  // a shared value that feeds another shared one is not held itself
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (op_info(e.op).category == OpCategory::Reduction) continue;
    bool feeds_shared = false;
    for (int64_t o : e.outputs) feeds_shared = feeds_shared || shared.contains(o);
    if (feeds_shared)
      for (int64_t in : e.inputs) held.erase(in);
  }
  for (int64_t in : row_inputs)
    if (passes.back().contains(in) && uses[in] == 1) held.insert(in);
  return static_cast<int>(held.size());
}
// RowParams::edge_vectors: the plan's inputs (each loaded at its own
// row's shift, kf_vload_any: a padded x beside a contiguous residual, a
// weight that the row's shift misaligns), and its outputs but the views
// (stored through a reshape), which the run time checks start each row at
// one shift.
VectorPlan edge_vectors(const RowDomain& rows, const VectorPlan& vectors) {
  size_t reduced = 0;
  for (bool b : rows.reduced) reduced += b ? 1 : 0;
  if (vectors.width == 0 || reduced != 1 || !rows.reduced[vectors.dim]) return {};
  VectorPlan e = vectors;
  std::erase_if(e.outputs, [&](int64_t o) { return rows.views.contains(o); });
  if (e.inputs.empty() && e.outputs.empty()) return {};
  return e;
}

// Row inputs at an address aligned to less than half a vector (a storage
// offset, rows padded to an odd stride) join the plan of a row reduced
// along one dim where nothing else the rows read or write moves as
// vectors: the main kernel's checks then fail for them and the Edges
// kernels peel each row's head and tail around aligned vectors (short
// rows: the short-row kernel's scalar twin, several rows a block), where
// without them the row had no vectors: the plain kernel, a block per row,
// one element per thread, no stage and no online pass, every phase reading
// the row from memory again. Measured on an H200 (docs/perf-log.md
// session 48 §1): a mean of squares over rows of 112 at offset 3 9.8x, a
// variance 2.5x, a log-sum-exp of float32 rows at offset 4097 2.4x,
// argmaxes over a vocabulary 1.5-1.6x, cross-entropy forwards 1.9x. Where
// aligned row tensors already move as vectors (a residual, the outputs)
// the main kernel reads the misaligned input per element at their lanes;
// the Edges kernels, each input loaded at its own shift (kf_vload_any),
// were slower there: norm backwards 0.42-0.78x, add + layernorm 0.58x,
// softmax over rows of 256 0.63x. Weights are not added here:
// plan_vectors takes them at any alignment.
void add_unaligned_row_inputs(const ConcreteFusion& c, const Task& task, const RowDomain& rows, size_t inner,
                              const std::vector<bool>& kept, VectorPlan* vectors) {
  if (std::count(rows.reduced.begin(), rows.reduced.end(), true) != 1) return;  // (no Edges kernel)
  if (!vectors->outputs.empty() || !inputs_reading(c, rows.domain, kept, *vectors).inputs.empty()) return;
  const VectorPlan any = inputs_reading(
      c, rows.domain, kept,
      plan_vectors(c, task, plain_domain_outputs(rows), rows.domain, inner, nullptr, {}, &kept, 1));
  bool added = false;
  for (const auto& [in, dims] : any.inputs) added = vectors->inputs.emplace(in, dims).second || added;
  if (added && vectors->width == 0) {
    vectors->dim = inner;
    vectors->width = any.width;  // (drop_lane_invariant sets it from the plan's dtypes)
  }
}

// Every field of the plan but its kernels.
RowParams row_plan(const ConcreteFusion& c, const Task& task, const RowDomain& rows, const Tuning& tuning) {
  RowParams p;
  p.rows = rows;
  p.vectors_per_thread = tuning.row_vectors;
  p.grid = grid_targets(tuning);
  const size_t r = rows.reduced.size();
  std::vector<bool> kept(r);
  for (size_t d = 0; d < r; ++d) kept[d] = !rows.reduced[d];
  // Vectors along the innermost dim in memory (RowDomain::order), when
  // reduced; their width past the weights once the vectors per thread are
  // known (below).
  if (const std::optional<size_t> inner = innermost_dim(c, rows); inner && rows.reduced[*inner]) {
    p.vectors = plan_vectors(c, task, plain_domain_outputs(rows), rows.domain, *inner, nullptr, {}, &kept);
    if (tuning.row_unaligned_inputs != 0) add_unaligned_row_inputs(c, task, rows, *inner, kept, &p.vectors);
    drop_lane_invariant(c, task, row_accesses(c, task, rows), &p.vectors);
  }
  p.block = p.vectors.width > 0 ? kCachedBlock : kStreamingBlock;
  if (p.vectors.width > 0) p.online = online_softmax_pairs(*c.fusion, task, rows);
  // Row inputs: the vector inputs read at every element of the row and
  // varying across rows (x, dy); those broadcast over the rows (weights)
  // are reused by every row from the caches.
  std::vector<int64_t> row_inputs;
  for (const auto& [in, dims] : p.vectors.inputs) {
    bool whole_row = true, varies = false;
    for (size_t d = 0; d < r; ++d) {
      const bool read = std::find(dims.begin(), dims.end(), static_cast<int>(d)) != dims.end();
      if (rows.reduced[d]) whole_row = whole_row && read;
      else varies = varies || (read && c.size_classes[static_cast<size_t>(rows.domain)][d] == SizeClass::Many);
    }
    if (whole_row && varies) row_inputs.push_back(in);
  }
  // Registers: each thread of a cached row holds vectors_per_thread
  // vectors of every value live across a block-wide reduction, as floats,
  // under the 64-register cap of 1024-thread blocks; two such values at 4
  // vectors spill (softmax backward: docs/perf-log.md), so they get half as
  // many (and twice the threads per row).
  if (values_live_across_phases(*c.fusion, task, rows, row_inputs) >= 2)
    p.vectors_per_thread = std::max(1, p.vectors_per_thread / 2);
  size_past_weights(c, rows.domain, kept, p.vectors_per_thread, tuning.row_thread_bytes, &p.vectors);
  add_view_vectors(c, rows, &p.vectors);
  // Staged: the row inputs, when the row is read more than once (a
  // single pass, a plain row sum, gains nothing).
  const bool output_pass = !rows.domain_outputs.empty();
  const size_t passes = online_phases(rows, p.online).size() + (output_pass ? 1 : 0);
  p.stream_rows = p.vectors.width > 0 && passes == 1 && (!p.online.empty() || tuning.row_stream_single_pass != 0);
  p.split_epilogue_reversed = tuning.split_epilogue_reversed != 0;
  p.edge_vectors = edge_vectors(rows, p.vectors);
  if (passes < 2) return p;
  p.staged = row_inputs;
  // Rows too long for a block's shared memory, or too few for the device,
  // shared by the blocks of a cluster (RowKernel::Cluster). Powers of two
  // only: the cluster's reduction pairs its blocks.
  for (int n = 2; n <= std::min(tuning.row_cluster_max, 8) && !p.staged.empty(); n *= 2) p.cluster_max = n;
  p.cluster_block = std::clamp(tuning.row_cluster_block / 32 * 32, 32, p.block);
  p.cluster_stageable = p.cluster_max > 1 && !p.online.empty() && output_pass && tuning.row_cluster_stageable != 0;
  return p;
}

// RowParams::across: the domain outputs (not views, not written in place)
// whose innermost dim of class >1 in memory is a kept dim, so that a block
// per row would store them one element per 32-byte sector. Only the
// caller's layout does that (kf_execute_into; layout.cpp keeps it for rows
// under KFUSE_TUNE_ROW_ACROSS_OUTPUTS, else copies such outputs at the end).
std::vector<int64_t> outputs_across_rows(const ConcreteFusion& c, const RowDomain& rows) {
  const Fusion& f = *c.fusion;
  std::vector<int64_t> across;
  int tile_bytes = 0;
  for (int64_t o : rows.domain_outputs) {
    if (rows.views.contains(o)) continue;
    bool in_place = false;
    for (const Output& out : f.outputs) in_place = in_place || (out.value == o && out.alias_input >= 0);
    const std::vector<int>& order = c.stride_orders[static_cast<size_t>(o)];
    const auto& cls = c.size_classes[static_cast<size_t>(o)];
    if (in_place || order.size() != rows.reduced.size()) continue;
    for (size_t k = order.size(); k-- > 0;) {
      const size_t d = static_cast<size_t>(order[k]);
      if (d >= cls.size() || cls[d] != SizeClass::Many) continue;
      // (each takes a static shared tile of 16 rows of 258 elements:
      // beyond 40 KB in all, the rest keep their stores)
      if (!rows.reduced[d] && (tile_bytes += 16 * 258 * dtype_size(f.value(o).dtype)) <= 40 * 1024) across.push_back(o);
      break;
    }
  }
  return across;
}

// Rows per block of the across kernel: 16 consecutive rows fill a 32-byte
// sector of a 2-byte output's column. (Its tile's shape is codegen's:
// row_parts.h kAcrossChunk and kAcrossPad.)
constexpr int kAcrossRows = 16;

}  // namespace

RowParams schedule_row(const ConcreteFusion& c, const Task& task, const RowDomain& rows, const Tuning& tuning) {
  RowParams p = row_plan(c, task, rows, tuning);
  if (!p.has_outer() && tuning.row_across_outputs != 0) p.across = outputs_across_rows(c, rows);
  if (!p.across.empty()) {  // one streaming kernel (RowParams::across)
    p.across_rows = kAcrossRows;
    p.block = 32 * kAcrossRows;
    std::erase_if(p.vectors.outputs, [&](int64_t o) {
      return std::find(p.across.begin(), p.across.end(), o) != p.across.end();
    });
    p.staged.clear();
    p.stage_outer = false;
    p.stream_rows = false;
    p.edge_vectors = {};
    p.cluster_max = 0;
    p.cluster_stageable = false;
  }
  p.kernels = plan_row_kernels(p, tuning);
  return p;
}

}  // namespace kf
