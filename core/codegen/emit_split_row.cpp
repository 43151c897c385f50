// Rows split over blocks: for a row reduction whose rows are too long for
// one block's registers or shared memory and too few to give every
// multiprocessor one (group norm: 128 rows of 327680 elements), one block
// per row leaves most of the device idle. Here block (row, split) reduces
// the split's slab of the row (the reduced dims' linear index, 16-byte
// vectors along the innermost dim, kRowsInFlight vectors loaded before any
// is computed) into one partial per (split, row); emit_column_finish, with
// the rows as its columns, combines the splits in order. Later phases read
// the earlier results from the scratch (reduction_scratch.h) and an
// epilogue, split finer, writes the domain-shaped outputs.
#include <algorithm>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/reduction_code.h"
#include "core/codegen/reduction_scratch.h"

namespace kf {

ColumnParams split_row_finish(const RowParams& p) {
  ColumnParams c;
  c.rows = p.rows;
  c.vectors = p.vectors;
  c.col_threads = p.kernels.split_col_threads;
  return c;
}

void emit_split_row(KernelWriter& w, const RowParams& p, size_t phase) {
  const Fusion& f = w.fusion();
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const RowDomain& s = p.rows;
  const bool epilogue = phase == s.phases.size();
  std::vector<int64_t> outs;  // as in the column kernels: the epilogue's, else phase 0's
  if (epilogue || (phase == 0 && !s.normalizes)) outs = s.domain_outputs;
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom), last = p.vectors.dim;
  // In memory order, as the row kernels and emit_column_finish (which
  // reads the partials by row) walk them.
  const std::vector<size_t> kept = s.dims_in_order(false), red = s.dims_in_order(true);
  const std::string rows = extent_product(w, dom, kept, "1LL"), rlen = extent_product(w, dom, red, "1LL");
  w.reduced = s.reduced;
  w.views = s.views;
  use_vectors(w, p.vectors);
  if (phase > 0) use_stored_results(w, s, phase, rows);
  const bool vectors = p.vectors.width > 0;
  const int V = vectors ? p.vectors.width : 1;
  const std::string Vs = std::to_string(V);
  // The row, and this block's slab of it (a multiple of V long, so that
  // vectors never straddle two blocks).
  w.line(std::string("const long long splits = ") + (epilogue ? "gridDim.y;" : "args.splits;"));
  w.line("const long long row = blockIdx.x;");
  w.line("const long long per = ((" + rlen + " + splits - 1) / splits + " + Vs + " - 1) / " + Vs + " * " + Vs + ";");
  const std::string slab = epilogue && p.split_epilogue_reversed ? "(long long)(gridDim.y - 1 - blockIdx.y)" : "(long long)blockIdx.y";
  w.line("const long long q0 = " + slab + " * per, q1 = q0 + per < " + rlen + " ? q0 + per : " + rlen + ";");
  const std::vector<std::string> kidx = unravel(w, dom, kept, "row", "_row", true);
  std::vector<DType> types;
  const std::vector<int64_t> none;
  const std::vector<int64_t>& accs_of = epilogue ? none : s.phases[phase];
  std::vector<std::string> acc;
  std::vector<const Expr*> exprs;
  for (int64_t ei : accs_of) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    exprs.push_back(&e);
    types.push_back(accumulator_dtype(f.value(e.inputs[0]).dtype));
    acc.push_back(w.fresh("acc"));
    w.line(acc_type(e, types.back()) + " " + acc.back() + " = " + (is_welford(e) ? "{0, 0, 0}" : acc_init(e, types.back())) + ";");
  }
  auto full = [&](const std::vector<std::string>& ridx) {
    std::vector<std::string> idx(r);
    for (size_t k = 0; k < kept.size(); ++k) idx[kept[k]] = kidx[k];
    for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = ridx[k];
    return idx;
  };
  auto step = [&](const std::vector<std::string>& idx) {
    for (size_t a = 0; a < exprs.size(); ++a) {
      const int64_t in = exprs[a]->inputs[0];
      w.line(acc_step(*exprs[a], types[a], acc[a], convert(f.value(in).dtype, types[a], w.value_at(in, idx))));
    }
  };
  VectorPlan store_plan = p.vectors;  // the vector outputs this kernel stores
  if (outs.empty()) store_plan.outputs.clear();
  const KernelWriter::Section cond = w.reserve();
  const std::string vec = w.fresh("kfvec");
  // Vectors: thread t's vectors at q0 + (t + k * blockDim.x) * V.
  auto vector_walk = [&] {
    w.begin_result_loads();
    const int U = kRowsInFlight;
    w.open("for (long long q = q0 + (long long)threadIdx.x * " + Vs + "; q < q1; q += (long long)blockDim.x * " +
           std::to_string(V * U) + ")");
    std::vector<std::string> oks;
    std::vector<std::vector<std::string>> bases;
    for (int g = 0; g < U; ++g) {
      const std::string qg = w.fresh("q"), ok = w.fresh("ok");
      w.line("const long long " + qg + " = q + (long long)blockDim.x * " + std::to_string(V * g) + ";");
      w.line("const bool " + ok + " = " + qg + " < q1;");
      oks.push_back(ok);
      bases.push_back(full(unravel(w, dom, red, "(" + ok + " ? " + qg + " : q)", "_g" + std::to_string(g), true)));
    }
    const KernelWriter::Section loads = w.reserve();
    for (int g = 0; g < U; ++g) {
      w.open("if (" + oks[static_cast<size_t>(g)] + ")");
      w.group = g;
      w.section = 0;
      vector_group(w, store_plan, outs, bases[static_cast<size_t>(g)], [&](int) { step(w.lane_index); });
      w.close();
    }
    w.group = 0;
    w.fill(loads, vector_loads(w, V, 0, oks));
    w.close();
    w.end_result_loads();
  };
  // Elements: without a vector plan, or where its conditions fail.
  auto element_walk = [&] {
    w.begin_result_loads();
    w.open("for (long long q = q0 + threadIdx.x; q < q1; q += blockDim.x)");
    const std::vector<std::string> idx = full(unravel(w, dom, red, "q"));
    step(idx);
    for (int64_t o : outs) w.store(o, idx, w.value_at(o, idx));
    w.close();
    w.end_result_loads();
  };
  if (vectors) {
    w.open("if (" + vec + ")");
    vector_walk();
    w.close_open("else");
    element_walk();
    w.close();
    std::vector<std::string> conds = {rlen + " % " + Vs + " == 0", w.extent(dom, last) + " % " + Vs + " == 0"};
    used_vector_conditions(w, sets, p.vectors, dom, true, &conds);
    w.fill(cond, {"const bool " + vec + " = " + all_of(conds) + ";"});
  } else {
    element_walk();
  }
  // One partial per accumulator: the block's combined value.
  for (size_t a = 0; a < exprs.size(); ++a) {
    const std::string v = w.fresh("red");
    w.line("const " + acc_type(*exprs[a], types[a]) + " " + v + " = kf_block_reduce(" + acc[a] + ", " +
           combine_op(*exprs[a], types[a]) + ");");
    w.line("if (threadIdx.x == 0) " + partials_of(w, accs_of, a, rows) + "[(long long)blockIdx.y * " + rows + " + row] = " + v + ";");
  }
}

}  // namespace kf
