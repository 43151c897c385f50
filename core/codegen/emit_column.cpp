// Column reductions (reduced dims outer, the innermost dim kept): kernel 1
// reduces, per block, a slab of reduced rows (blockIdx.y's split) for a
// tile of columns into partials in args.scratch, writing any domain-shaped
// outputs on the way; kernel 2 combines the splits of each column in a
// fixed order (deterministic) and writes the row-shaped outputs.
#include <algorithm>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/reduction_code.h"

namespace kf {

namespace {

void split_dims(const RowDomain& s, std::vector<size_t>* kept, std::vector<size_t>* red) {
  for (size_t d = 0; d < s.reduced.size(); ++d) (s.reduced[d] ? red : kept)->push_back(d);
}

}  // namespace

void emit_column_partials(KernelWriter& w, const ColumnParams& p) {
  const Fusion& f = w.fusion();
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const RowDomain& s = p.rows;
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom), last = r - 1;
  std::vector<size_t> kept, red;
  split_dims(s, &kept, &red);
  const std::string cols = extent_product(w, dom, kept, "1LL"), rlen = extent_product(w, dom, red, "1LL");
  w.reduced = s.reduced;
  use_vectors(w, p.vectors);
  const int V = p.vectors.width > 0 ? p.vectors.width : 4;
  const std::string Vs = std::to_string(V), tile = std::to_string(p.tile_cols()), groups = std::to_string(p.row_groups);
  w.line("const long long splits = args.splits;");
  w.line("const long long c0 = (long long)blockIdx.x * " + tile + ";");
  w.line("const int tx = threadIdx.x % " + std::to_string(p.col_threads) + ", ty = threadIdx.x / " +
         std::to_string(p.col_threads) + ";");
  w.line("const long long per = (" + rlen + " + splits - 1) / splits;");
  w.line("const long long q0 = (long long)blockIdx.y * per, q1 = q0 + per < " + rlen + " ? q0 + per : " + rlen + ";");
  // Accumulators per lane.
  std::vector<std::vector<std::string>> acc(s.phases[0].size());
  std::vector<const Expr*> exprs;
  std::vector<DType> types;
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    exprs.push_back(&e);
    types.push_back(accumulator_dtype(f.value(e.inputs[0]).dtype));
    for (int l = 0; l < V; ++l) {
      acc[a].push_back(w.fresh("acc"));
      w.line(std::string(reg_type(types[a])) + " " + acc[a].back() + " = " + acc_init(e, types[a]) + ";");
    }
  }
  // One element: into the accumulators, and the domain-shaped outputs
  // (each element is visited once; `vector_out` registers take the lanes
  // of the plan's vector outputs, stored as one 16-byte vector after).
  auto step = [&](int lane, const std::vector<std::string>& idx, const std::vector<std::string>& vector_out) {
    for (size_t a = 0; a < exprs.size(); ++a) {
      const int64_t in = exprs[a]->inputs[0];
      w.line(acc_step(*exprs[a], types[a], acc[a][static_cast<size_t>(lane)],
                      convert(f.value(in).dtype, types[a], w.value_at(in, idx))));
    }
    for (int64_t o : s.domain_outputs) {
      const std::string reg = w.value_at(o, idx);
      auto it = std::find(p.vectors.outputs.begin(), p.vectors.outputs.end(), o);
      if (vector_out.empty() || it == p.vectors.outputs.end())
        w.store(o, idx, reg);
      else
        w.line(vector_out[static_cast<size_t>(it - p.vectors.outputs.begin())] + ".v[" + std::to_string(lane) +
               "] = " + w.stored(f.value(o).dtype, reg) + ";");
    }
  };
  const KernelWriter::Section cond = w.reserve();
  const std::string vec_flag = w.fresh("kfvec");
  if (p.vectors.width > 0) {
    // Vector columns: thread tx holds columns c0 + tx * V + lane.
    w.open("if (" + vec_flag + ")");
    w.line("const long long cb = c0 + (long long)tx * " + Vs + ";");
    w.open("if (cb < " + cols + ")");
    const std::vector<std::string> kidx = unravel(w, dom, kept, "cb", "_c");
    w.line("#pragma unroll 4");  // several rows' loads in flight
    w.open("for (long long q = q0 + ty; q < q1; q += " + groups + ")");
    const std::vector<std::string> ridx = unravel(w, dom, red, "q");
    std::vector<std::string> base(r);
    for (size_t k = 0; k < kept.size(); ++k) base[kept[k]] = kidx[k];
    for (size_t k = 0; k < red.size(); ++k) base[red[k]] = ridx[k];
    const KernelWriter::Section loads = w.reserve();
    w.group = 0;
    w.section = 0;
    w.lane_base = base;
    std::vector<std::string> ov;
    for (int64_t o : p.vectors.outputs) {
      ov.push_back(w.fresh("ov"));
      w.line(vector_type(w, o, V) + " " + ov.back() + ";");
    }
    for (int lane = 0; lane < V; ++lane) {
      std::vector<std::string> idx = base;
      if (lane > 0) idx[last] = "(" + base[last] + " + " + std::to_string(lane) + ")";
      w.lane = lane;
      w.lane_index = idx;
      step(lane, idx, ov);
    }
    w.lane = -1;
    for (size_t q = 0; q < ov.size(); ++q) {
      const int64_t o = p.vectors.outputs[q];
      w.line("*(" + vector_type(w, o, V) + "*)(" + w.pointer(o) + " + " + w.offset(o, base) + ") = " + ov[q] + ";");
    }
    w.fill(loads, vector_loads(w, V, 0, {}));
    w.close();
    w.close();
    std::vector<std::string> conds = {w.extent(dom, last) + " % " + Vs + " == 0"};
    used_vector_conditions(w, sets, p.vectors, dom, true, &conds);
    w.fill(cond, {"const bool " + vec_flag + " = " + all_of(conds) + ";"});
    w.close_open("else");
  } else {
    w.fill(cond, {"const bool " + vec_flag + " = false;"});
    w.open("");
  }
  // Scalar columns: thread tx holds columns c0 + tx + col_threads * lane (coalesced).
  std::vector<std::string> cl(static_cast<size_t>(V));
  std::vector<std::vector<std::string>> kidx(static_cast<size_t>(V));
  for (int lane = 0; lane < V; ++lane) {
    const size_t l = static_cast<size_t>(lane);
    cl[l] = w.fresh("cl");
    w.line("const long long " + cl[l] + " = c0 + tx + " + std::to_string(p.col_threads * lane) + ";");
    kidx[l] = unravel(w, dom, kept, cl[l] + " < " + cols + " ? " + cl[l] + " : 0", "_" + std::to_string(lane));
  }
  w.line("#pragma unroll 2");
  w.open("for (long long q = q0 + ty; q < q1; q += " + groups + ")");
  const std::vector<std::string> ridx = unravel(w, dom, red, "q");
  for (int lane = 0; lane < V; ++lane) {
    w.open("if (" + cl[static_cast<size_t>(lane)] + " < " + cols + ")");
    std::vector<std::string> idx(r);
    for (size_t k = 0; k < kept.size(); ++k) idx[kept[k]] = kidx[static_cast<size_t>(lane)][k];
    for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = ridx[k];
    step(lane, idx, {});
    w.close();
  }
  w.close();
  w.close();
  // Combine the row groups through shared memory, then one partial per column.
  for (size_t a = 0; a < exprs.size(); ++a) {
    const std::string at = reg_type(types[a]);
    const std::string sh = w.fresh("kf_part");
    w.line("__shared__ " + at + " " + sh + "[" + groups + "][" + tile + "];");
    for (int lane = 0; lane < V; ++lane)
      w.line(sh + "[ty][" + vec_flag + " ? tx * " + Vs + " + " + std::to_string(lane) + " : tx + " +
             std::to_string(p.col_threads * lane) + "] = " + acc[a][static_cast<size_t>(lane)] + ";");
    w.line("__syncthreads();");
    w.open("for (int cc = threadIdx.x; cc < " + tile + "; cc += blockDim.x)");
    w.open("if (c0 + cc < " + cols + ")");
    w.line(at + " v = " + sh + "[0][cc];");
    w.line("#pragma unroll");
    w.line("for (int y = 1; y < " + groups + "; ++y) v = " + combine_op(*exprs[a], types[a]) + "(v, " + sh + "[y][cc]);");
    w.line("((" + at + "*)args.scratch + " + std::to_string(a) + " * splits * " + cols + ")[(long long)blockIdx.y * " +
           cols + " + c0 + cc] = v;");
    w.close();
    w.close();
  }
}

void emit_column_finish(KernelWriter& w, const ColumnParams& p) {
  const Fusion& f = w.fusion();
  const RowDomain& s = p.rows;
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  split_dims(s, &kept, &red);
  const std::string cols = extent_product(w, dom, kept, "1LL");
  bool mean = false;  // only a mean reads the row length (an unused local is a warning)
  for (int64_t ei : s.phases[0]) mean = mean || f.exprs[static_cast<size_t>(ei)].op == Op::MEAN;
  const std::string rlen = mean ? extent_product(w, dom, red, "1LL") : "1";
  const std::string tx_n = std::to_string(p.col_threads), groups = std::to_string(p.finish_block / p.col_threads);
  w.reduced = s.reduced;
  w.row_results.clear();
  // Thread (tx, ty): column c0 + tx, splits ty, ty + groups, ... in order;
  // then the groups' values combined in order through shared memory (a
  // fixed order: the result does not depend on scheduling).
  w.line("const long long splits = args.splits;");
  w.line("const int tx = threadIdx.x % " + tx_n + ", ty = threadIdx.x / " + tx_n + ";");
  std::vector<std::string> shared;
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    shared.push_back(w.fresh("kf_fin"));
    w.line("__shared__ " + std::string(reg_type(accumulator_dtype(f.value(e.inputs[0]).dtype))) + " " + shared.back() + "[" +
           groups + "][" + tx_n + "];");
  }
  w.open("for (long long c0 = (long long)blockIdx.x * " + tx_n + "; c0 < " + cols + "; c0 += (long long)gridDim.x * " + tx_n + ")");
  w.line("const long long c = c0 + tx;");
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    const DType acc = accumulator_dtype(f.value(e.inputs[0]).dtype);
    const std::string at = reg_type(acc);
    const std::string part = w.fresh("part"), v = w.fresh("red");
    w.line("const " + at + "* " + part + " = (const " + at + "*)args.scratch + " + std::to_string(a) + " * splits * " + cols + ";");
    w.line(at + " " + v + " = " + acc_init(e, acc) + ";");
    w.line("if (c < " + cols + ") for (long long sp = ty; sp < splits; sp += " + groups + ") " + v + " = " + combine_op(e, acc) +
           "(" + v + ", " + part + "[sp * " + cols + " + c]);");
    w.line(shared[a] + "[ty][tx] = " + v + ";");
  }
  w.line("__syncthreads();");
  w.open("if (ty == 0 && c < " + cols + ")");
  const std::vector<std::string> kidx = unravel(w, dom, kept, "c");
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kidx[k];
  declare_results(w, s);
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    const DType acc = accumulator_dtype(f.value(e.inputs[0]).dtype);
    const std::string v = w.fresh("red");
    w.line(std::string(reg_type(acc)) + " " + v + " = " + shared[a] + "[0][tx];");
    w.line("for (int y = 1; y < " + groups + "; ++y) " + v + " = " + combine_op(e, acc) + "(" + v + ", " + shared[a] + "[y][tx]);");
    finish_results(w, e, acc, v, rlen);
  }
  store_row_outputs(w, s, kept);
  w.close();
  w.line("__syncthreads();  // the shared values are consumed");
  w.close();
}

}  // namespace kf
