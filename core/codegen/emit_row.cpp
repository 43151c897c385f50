// Row kernels (reductions and normalizations): one block per row. Phases
// of thread-strided accumulation and block reductions, then a pass writing
// the domain-shaped outputs and one thread writing the row-shaped ones.
// With a vector plan the row is held in registers when it fits (checked at
// run time with the vector conditions), else staged in shared memory when
// it fits there; otherwise it is re-read from memory in every phase.
#include <algorithm>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/reduction_code.h"
#include "core/codegen/row_parts.h"
#include "core/schedule/online_softmax.h"
#include "core/util/error.h"

namespace kf {

namespace {

using namespace row_emit;

// emit_row with the plan of the kernel `which` (the Edges kernel's own).
void emit_row_kernel(KernelWriter& w, const Task& task, const RowParams& p, RowKernel which, std::vector<ArgCheck>* checks) {
  const RowDomain& s = p.rows;
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  // Rows and their elements walked in memory order (RowDomain::order):
  // consecutive threads read consecutive addresses, the lanes' dim last.
  const std::vector<size_t> kept = s.dims_in_order(false), red = s.dims_in_order(true);
  const std::string rows = extent_product(w, dom, kept, "1");
  const std::string row_len = extent_product(w, dom, red, "1");
  const bool edges = which == RowKernel::Edges || which == RowKernel::LongEdges;
  const bool cluster = which == RowKernel::Cluster;
  const bool short_rows = which == RowKernel::ShortRows;
  // The across kernel (RowParams::across): the plan's only kernel, a warp
  // per row as the short-row kernel's groups, every phase streamed as the
  // long-row kernel's (with vector steps where the checks pass).
  const bool across = which == RowKernel::Main && !p.across.empty();
  const bool long_rows = which == RowKernel::LongRows || which == RowKernel::LongEdges || cluster || across;
  if (across && (p.has_outer() || !p.staged.empty() || p.across_rows <= 0 || w.paths != KernelWriter::Paths::Both))
    fail(KF_ERR_INTERNAL, "the across row kernel streams rows without outer reductions, stage or twins");
  if (cluster && (p.has_outer() || p.vectors.width == 0))
    fail(KF_ERR_INTERNAL, "the cluster row kernel takes rows with a vector plan and no outer reductions");
  if (short_rows && (p.kernels.short_rows_block <= 0 || w.paths == KernelWriter::Paths::Both || p.has_outer()))
    fail(KF_ERR_INTERNAL, "the short-row kernel is the register path or its scalar twin, of rows without outer reductions");
  w.reduced = s.reduced;
  w.views = s.views;
  w.word_lanes = true;
  use_vectors(w, p.vectors);
  VectorRef ref;
  if (edges) {
    w.lane_width = 0;  // no lanes seen through a slice's or cat's shift: a row's own shift moves them
    ref = edge_ref(w, p);
  }
  // The cluster row kernel: the blocks of a cluster share each row, block
  // k taking the k-th part (whole vectors), and reduce over the cluster.
  if (cluster) {
    const std::string& t = w.index_type();
    const std::string V = std::to_string(p.vectors.width);
    w.line("const unsigned kf_cn = kf_cluster_size(), kf_cr = kf_cluster_rank();");
    w.line("const long long kf_pm = ((" + row_len + " + " + V + " - 1) / " + V + " + kf_cn - 1) / kf_cn * " + V + ";");
    w.line("const " + t + " kf_pb = (" + t + ")min((long long)(" + row_len + "), kf_pm * kf_cr);");
    w.line("const " + t + " kf_pe = (" + t + ")min((long long)(" + row_len + "), (long long)kf_pb + kf_pm);");
    w.part_begin = "kf_pb";
    w.part_end = "kf_pe";
    w.part_most = "kf_pm";
    w.row_reduce = "kf_cluster_reduce";
  }
  // Which path runs: the same for every row (the conditions read extents,
  // strides and base pointers only). Main: registers, else memory one
  // element at a time. LongRows: shared memory, else memory in 16-byte
  // steps, else one element at a time.
  const KernelWriter::Section cond = w.reserve();
  const std::string cached = w.fresh("kfrow");
  const std::string staged = w.fresh("kfstage");
  const std::string vec = w.fresh("kfvec");
  const OuterPlace place = which == RowKernel::Edges ? OuterPlace::LaneMajor
                           : !long_rows && w.paths != KernelWriter::Paths::Scalar ? OuterPlace::Registers
                                                                                    : OuterPlace::Memory;
  const OuterAccs outer = declare_outer(w, p, row_len, place);
  Stage stage;
  std::vector<std::string> cond_lines;
  std::string stage_cond = "false";
  if (long_rows && !p.staged.empty())
    stage_cond = declare_stage(w, p, outer, sets, row_len, edges ? &ref : nullptr, &stage, &cond_lines);
  const bool staged_partials = !stage.partials.empty();
  if (across)  // (at the kernel's scope: one tile per output for both paths)
    for (int64_t o : p.across) {
      w.across_tiles[o] = w.fresh("kf_tile");
      cond_lines.push_back("__shared__ " + std::string(storage_type(w.fusion().value(o).dtype)) + " " + w.across_tiles[o] +
                           "[" + std::to_string(p.across_rows * (kAcrossChunk + kAcrossPad)) + "];");
    }
  if (outer.active()) {  // the partials accumulate from the identity
    w.open(long_rows ? "" : "if (!" + cached + ")");
    w.open("for (" + w.index_type() + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)");
    for (size_t a = 0; a < outer.exprs.size(); ++a) {
      const std::string init = acc_init(*outer.exprs[a], outer.types[a]);
      if (staged_partials)
        w.line("if (" + staged + " && " + vec + ") " + stage.partials[a] + "[j] = " + init + "; else " + outer.partials[a] + "[j] = " + init + ";");
      else
        w.line(outer.partials[a] + "[j] = " + init + ";");
    }
    w.close();
    w.close();
    // The loops over rows may give an element to another thread.
    if (long_rows) w.line("__syncthreads();");
  }
  if (cluster) {  // (the grid is a multiple of the cluster)
    w.open("for (long long row = blockIdx.x / kf_cn; row < " + rows + "; row += gridDim.x / kf_cn)");
  } else if (short_rows || across) {
    // Group threadIdx.y takes row kf_rb + threadIdx.y of each step. The
    // steps are the same for the whole block, so every lane of a warp
    // reaches every shuffle of kf_group_reduce; a group past the last row
    // computes the last row again (in bounds) and stores nothing, since
    // with an output aliasing its input that row may already be rewritten.
    w.open("for (long long kf_rb = (long long)blockIdx.x * blockDim.y; kf_rb < " + rows +
           "; kf_rb += (long long)gridDim.x * blockDim.y)");
    w.line("const bool kf_live = kf_rb + threadIdx.y < " + rows + ";");
    // (Rows over every dim, one row in all, never read `row`.)
    w.line(std::string(kept.empty() ? "[[maybe_unused]] " : "") + "const long long row = kf_live ? kf_rb + threadIdx.y : " +
           rows + " - 1;");
    w.row_live = "kf_live";
    w.row_reduce = "kf_group_reduce";
  } else {
    w.open("for (long long row = blockIdx.x; row < " + rows + "; row += gridDim.x)");
  }
  std::vector<std::string> kept_idx = unravel(w, dom, kept, "row");
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kept_idx[k];
  declare_results(w, s);
  if (!long_rows && p.vectors.width > 0 && w.paths == KernelWriter::Paths::Vector) {  // the host checked
    w.open("");
    RowEdges row_edges;
    if (edges) row_edges = declare_edges(w, p, red, row_len, ref);
    row_cached(w, p, outer, sets, task, red, row_len, checks, edges ? &row_edges : nullptr);
    w.close();
    cond_lines.push_back("[[maybe_unused]] const bool " + cached + " = true;");
  } else if (!long_rows && p.vectors.width > 0 && w.paths == KernelWriter::Paths::Scalar) {  // the vector twin's fallback
    cond_lines.push_back("[[maybe_unused]] const bool " + cached + " = false;");
    row_streaming(w, p, outer, red, row_len, nullptr, nullptr);
  } else if (!long_rows && p.vectors.width > 0) {
    w.open("if (" + cached + ")");
    cond_lines.push_back("const bool " + cached + " = " + row_cached(w, p, outer, sets, task, red, row_len, checks, nullptr) + ";");
    w.close_open("else");
    row_streaming(w, p, outer, red, row_len, nullptr, nullptr);
    w.close();
  } else if (long_rows && p.vectors.width > 0) {
    VectorSteps steps;
    RowEdges row_edges;
    if (edges) {
      row_edges = declare_edges(w, p, red, row_len, ref);
      steps.edges = &row_edges;
    }
    if (stage.active()) {
      w.open("if (" + staged + " && " + vec + ")");
      fill_stage(w, p, stage, red, row_len, steps.edges);
      row_streaming(w, p, outer, red, row_len, &stage, &steps);
      w.close_open("else if (" + vec + ")");
    } else {
      w.open("if (" + vec + ")");
    }
    row_streaming(w, p, outer, red, row_len, nullptr, &steps);
    w.close_open("else");
    row_streaming(w, p, outer, red, row_len, nullptr, nullptr);
    w.close();
    // The Edges kernel's host checks (`checks`) are these conditions; the
    // long-row kernel has none (it is launched whatever they say).
    std::vector<std::string> conds;
    if (!edges) conds.push_back(w.extent(dom, p.vectors.dim) + " % " + std::to_string(p.vectors.width) + " == 0");
    std::vector<ArgCheck>* host = edges ? checks : nullptr;
    const VectorRef* shifted = edges ? &ref : nullptr;
    std::vector<std::pair<int64_t, std::vector<int>>> seen;
    for (const auto& [key, reg] : w.vector_regs)
      if (reg.ok_group >= kStreamGroups &&
          std::find(seen.begin(), seen.end(), std::make_pair(key.first, reg.dims)) == seen.end()) {
        seen.emplace_back(key.first, reg.dims);
        vector_conditions(w, sets, key.first, dom, p.vectors.width, p.vectors.dim, &conds, &reg.dims, host, shifted, edges);
      }
    // (Edges: inputs load at any alignment, kf_vload_any; outputs store at the reference's shift.)
    if (edges)  // the staged inputs: read from global memory only as they are staged
      for (int64_t in : p.staged)
        vector_conditions(w, sets, in, dom, p.vectors.width, p.vectors.dim, nullptr, nullptr, host, shifted, true);
    if (!outer.active())  // the output pass stores the plan's vector outputs whole
      for (int64_t o : p.vectors.outputs)
        vector_conditions(w, sets, o, dom, p.vectors.width, p.vectors.dim, &conds, nullptr, host, shifted);
    conds.insert(conds.end(), w.lane_conditions.begin(), w.lane_conditions.end());
    if (stage.active()) cond_lines.push_back("const bool " + staged + " = " + stage_cond + ";");
    cond_lines.push_back("const bool " + vec + " = " + all_of(conds) + ";");
  } else {
    if (outer.active()) cond_lines.push_back("const bool " + cached + " = false;");
    row_streaming(w, p, outer, red, row_len, nullptr, nullptr);
  }
  w.fill(cond, cond_lines);
  if (!s.row_outputs.empty()) {
    w.open(cluster                 ? "if (threadIdx.x == 0 && kf_cr == 0)"
           : short_rows || across ? "if (threadIdx.x == 0 && kf_live)"
                                  : "if (threadIdx.x == 0)");
    store_row_outputs(w, s);
    w.close();
  }
  w.close();
  w.part_begin.clear();
  w.part_end.clear();
  w.part_most.clear();
  w.row_live.clear();
  w.across_tiles.clear();
  w.row_reduce = "kf_block_reduce";
  if (!outer.lane_major.empty()) {  // the Edges kernel's partials, once
    w.line("__syncthreads();  // every row's updates are done");
    w.open("for (" + w.index_type() + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)");
    for (size_t a = 0; a < outer.exprs.size(); ++a)
      w.line(outer.partials[a] + "[j] = " + outer.lane_major[a] + "[" + outer.lane_slot("j") + "];");
    w.close();
  } else if (outer.active() && !long_rows && p.vectors.width > 0 && w.paths != KernelWriter::Paths::Scalar) {  // the cached path's partials, once
    w.open("if (" + cached + ")");
    const std::string& t = w.index_type();
    for (int k = 0; k < p.vectors_per_thread; ++k)
      for (int lane = 0; lane < p.vectors.width; ++lane) {
        const std::string j = "(((" + t + ")" + std::to_string(k) + " * (" + t + ")blockDim.x + (" + t + ")threadIdx.x) * " +
                              std::to_string(p.vectors.width) + " + " + std::to_string(lane) + ")";
        w.open("if (" + j + " < " + row_len + ")");
        for (size_t a = 0; a < outer.exprs.size(); ++a)
          w.line(outer.partials[a] + "[" + j + "] = " + outer.regs[a][static_cast<size_t>(k)][static_cast<size_t>(lane)] + ";");
        w.close();
      }
    w.close();
  }
  if (staged_partials) {  // the staged path's partials, once
    w.line("__syncthreads();  // written by the row loops' threads");
    w.open("if (" + staged + " && " + vec + ")");
    w.open("for (" + w.index_type() + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)");
    for (size_t a = 0; a < outer.exprs.size(); ++a) w.line(outer.partials[a] + "[j] = " + stage.partials[a] + "[j];");
    w.close();
    w.close();
  }
}

}  // namespace

void emit_row(KernelWriter& w, const Task& task, const RowParams& p, RowKernel which, std::vector<ArgCheck>* checks) {
  std::vector<ArgCheck> unused;
  if (checks == nullptr) checks = &unused;
  if (which != RowKernel::Edges && which != RowKernel::LongEdges) {
    emit_row_kernel(w, task, p, which, checks);
    return;
  }
  if (!p.kernels.long_edges) fail(KF_ERR_INTERNAL, "a row plan without edge vectors has no Edges kernels");
  if (which == RowKernel::Edges && w.paths != KernelWriter::Paths::Vector)
    fail(KF_ERR_INTERNAL, "the Edges kernel is the register path alone");
  RowParams e = p;
  e.vectors = p.edge_vectors;
  std::erase_if(e.staged, [&](int64_t in) { return !e.vectors.inputs.contains(in); });
  emit_row_kernel(w, task, e, which, checks);
}

namespace {
// Bytes of one column's accumulators, over the outer reductions.
int outer_accumulator_bytes(const Fusion& f, const RowParams& p) {
  int bytes = 0;
  if (p.has_outer())
    for (int64_t ei : p.outer.phases.at(0))
      bytes += dtype_size(accumulator_dtype(f.value(f.exprs[static_cast<size_t>(ei)].inputs[0]).dtype));
  return bytes;
}
}  // namespace

int row_partial_bytes(const Fusion& f, const RowParams& p) {
  return p.kernels.long_edges ? outer_accumulator_bytes(f, p) : 0;
}

int row_stage_bytes(const Fusion& f, const RowParams& p) {
  if (p.vectors.width == 0) return 0;
  int bytes = 0;
  for (int64_t in : p.staged) bytes += dtype_size(f.value(in).dtype);
  if (p.stage_outer && !p.staged.empty()) bytes += outer_accumulator_bytes(f, p);
  return p.staged.empty() ? 0 : bytes;
}

}  // namespace kf