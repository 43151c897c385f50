// Column reductions (reduced dims outer, the innermost dim kept): per
// phase, kernel 1 reduces, per block, a slab of reduced rows (blockIdx.y's
// split) for a tile of columns into partials in args.scratch, and kernel 2
// combines the splits of each column in a fixed order (deterministic) into
// the phase's results. With one phase and no normalization, kernel 1 also
// writes the domain-shaped outputs on the way and kernel 2 the row-shaped
// ones. Otherwise each finish also keeps its results in per-column arrays
// in the scratch (after the partials) for the later kernels: the next
// phase's partials, and the epilogue, which walks the domain like kernel 1
// and writes the domain-shaped outputs.
//
// Scratch layout (8-byte words; cols = the product of the kept extents):
//   [0, W * splits * cols)  the partials of the phase running now (W: the
//                           most words any phase's accumulators take)
//   then one array of cols words per reduction result, in phase order.
#include <algorithm>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/reduction_code.h"
#include "core/codegen/reduction_scratch.h"

namespace kf {

namespace {

// Kept and reduced dims in memory order (RowDomain::order): columns and
// rows are walked as laid out, the lanes' dim (innermost) last in `kept`.
void split_dims(const RowDomain& s, std::vector<size_t>* kept, std::vector<size_t>* red) {
  *kept = s.dims_in_order(false);
  *red = s.dims_in_order(true);
}

}  // namespace

// The register type of an accumulator (Welford's triple for a variance).
std::string acc_type(const Expr& e, DType acc) {
  return is_welford(e) ? "kf_welford<" + std::string(reg_type(acc)) + ">" : reg_type(acc);
}

// The typed pointer to accumulator `a`'s partials of `phase` (splits rows
// of cols each).
std::string partials_of(KernelWriter& w, const std::vector<int64_t>& phase, size_t a, const std::string& cols) {
  const Fusion& f = w.fusion();
  int words = 0;
  for (size_t b = 0; b < a; ++b) words += column_acc_words(f, f.exprs[static_cast<size_t>(phase[b])]);
  const Expr& e = f.exprs[static_cast<size_t>(phase[a])];
  const std::string t = acc_type(e, accumulator_dtype(f.value(e.inputs[0]).dtype));
  return "((" + t + "*)((char*)args.scratch + " + std::to_string(words) + "LL * splits * " + cols + " * 8))";
}

void use_stored_results(KernelWriter& w, const RowDomain& rows, size_t phase, const std::string& cols) {
  const Fusion& f = w.fusion();
  const std::string words = std::to_string(column_partial_words(f, rows));
  size_t k = 0;
  w.result_domain = rows.domain;
  w.result_order = rows.dims_in_order(false);
  // Written where used (a kernel uses some of the arrays; the compiler
  // shares the address arithmetic).
  for (size_t ph = 0; ph < rows.phases.size(); ++ph)
    for (int64_t ei : rows.phases[ph])
      for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) {
        if (ph < phase) {
          const std::string t = reg_type(f.value(o).dtype);
          w.result_arrays[o] = "((" + t + "*)((char*)args.scratch + (" + words + "LL * args.splits + " + std::to_string(k) +
                               ") * " + cols + " * 8))";
        }
        ++k;
      }
}

int column_acc_words(const Fusion& f, const Expr& e) {
  if (!is_welford(e)) return 1;
  // kf_welford<float> (12 bytes) in 2 words, kf_welford<double> in 3.
  return accumulator_dtype(f.value(e.inputs[0]).dtype) == DType::F64 ? 3 : 2;
}

int column_partial_words(const Fusion& f, const RowDomain& rows) {
  int most = 0;
  for (const auto& phase : rows.phases) {
    int words = 0;
    for (int64_t ei : phase) words += column_acc_words(f, f.exprs[static_cast<size_t>(ei)]);
    most = std::max(most, words);
  }
  return most;
}

int column_result_words(const Fusion& f, const RowDomain& rows) {
  int n = 0;
  for (const auto& phase : rows.phases)
    for (int64_t ei : phase) n += static_cast<int>(f.exprs[static_cast<size_t>(ei)].outputs.size());
  return n;
}

bool column_epilogue(const ColumnParams& p) { return p.rows.normalizes; }

namespace {

constexpr const char* kMinusInf = "-__int_as_float(0x7f800000)";

// A phase's accumulators as they combine: one alone, or an online pair
// (ColumnParams::online) as one kf_online {max, sum}.
struct CombineUnit {
  size_t a = 0;     // the accumulator (an online pair's max)
  int sum = -1;     // an online pair's sum accumulator
};

std::vector<CombineUnit> combine_units(const ColumnParams& p, const std::vector<int64_t>& phase) {
  std::vector<CombineUnit> units;
  std::vector<bool> paired_sum(phase.size(), false);
  for (size_t a = 0; a < phase.size(); ++a) {
    CombineUnit u{a, -1};
    for (const auto& [mi, si] : p.online)
      if (phase[a] == mi)
        if (auto s = std::find(phase.begin(), phase.end(), si); s != phase.end()) {
          u.sum = static_cast<int>(s - phase.begin());
          paired_sum[static_cast<size_t>(u.sum)] = true;
        }
    units.push_back(u);
  }
  std::erase_if(units, [&](const CombineUnit& u) { return paired_sum[u.a]; });
  return units;
}

}  // namespace

namespace {

// Kernel 1 of `phase` (the epilogue at phase = the number of phases), or,
// `direct`, the one-kernel twin (ColumnParams::short_twin: one row group,
// phase 0): each thread reduces all rows of its columns, then finishes its
// accumulators and stores the outputs (what the finishing kernel does per
// column) instead of the block's combine and the partials.
void emit_columns(KernelWriter& w, const ColumnParams& p, size_t phase, std::vector<ArgCheck>* checks, bool direct) {
  const Fusion& f = w.fusion();
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const RowDomain& s = p.rows;
  const bool epilogue = phase == s.phases.size();
  // The domain-shaped outputs: the epilogue writes them when there is
  // one, else phase 0's partials do.
  std::vector<int64_t> outs;
  if (epilogue || (phase == 0 && !column_epilogue(p))) outs = s.domain_outputs;
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom), last = p.vectors.width > 0 ? p.vectors.dim : r - 1;  // the lanes' dim
  std::vector<size_t> kept, red;
  split_dims(s, &kept, &red);
  const std::string cols = extent_product(w, dom, kept, "1LL"), rlen = extent_product(w, dom, red, "1LL");
  w.reduced = s.reduced;
  w.views = s.views;
  use_vectors(w, p.vectors);
  if (phase > 0) use_stored_results(w, p.rows, phase, cols);
  const int V = p.vectors.width > 0 ? p.vectors.width : 4;
  const std::string Vs = std::to_string(V), tile = std::to_string(p.tile_cols()), groups = std::to_string(p.row_groups);
  w.line("const long long c0 = (long long)blockIdx.x * " + tile + ";");
  w.line("const int tx = threadIdx.x % " + std::to_string(p.col_threads) + ", ty = threadIdx.x / " +
         std::to_string(p.col_threads) + ";");
  if (direct) {
    w.line("const long long q0 = 0, q1 = " + rlen + ";");
  } else {
    // The rows' slabs: args.splits of them (the partials' count), or, in
    // the epilogue (no partials), gridDim.y.
    w.line(std::string("const long long splits = ") + (epilogue ? "gridDim.y;" : "args.splits;"));
    w.line("const long long per = (" + rlen + " + splits - 1) / splits;");
    w.line("const long long q0 = (long long)blockIdx.y * per, q1 = q0 + per < " + rlen + " ? q0 + per : " + rlen + ";");
  }
  // Accumulators per lane.
  const std::vector<int64_t> none;
  const std::vector<int64_t>& accs_of = epilogue ? none : s.phases[phase];
  std::vector<std::vector<std::string>> acc(accs_of.size());
  std::vector<const Expr*> exprs;
  std::vector<DType> types;
  for (size_t a = 0; a < accs_of.size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(accs_of[a])];
    exprs.push_back(&e);
    types.push_back(accumulator_dtype(f.value(e.inputs[0]).dtype));
    for (int l = 0; l < V; ++l) {
      acc[a].push_back(w.fresh("acc"));
      w.line(acc_type(e, types[a]) + " " + acc[a].back() + " = " + (is_welford(e) ? "{0, 0, 0}" : acc_init(e, types[a])) + ";");
    }
  }
  const std::vector<CombineUnit> units = combine_units(p, accs_of);
  bool online = false;
  for (const CombineUnit& u : units) online = online || u.sum >= 0;
  // Accumulator a's input at idx, in its accumulator type.
  auto input_of = [&](size_t a, const std::vector<std::string>& idx) {
    const int64_t in = exprs[a]->inputs[0];
    return convert(f.value(in).dtype, types[a], w.value_at(in, idx));
  };
  // An online pair's sum, rescaled to its running max raised to `step`.
  auto rescale = [&](const CombineUnit& u, size_t l, const std::string& step) {
    const std::string& m = acc[u.a][l];
    const std::string& s = acc[static_cast<size_t>(u.sum)][l];
    const std::string mn = w.fresh("mn");
    w.line("const float " + mn + " = kf_max_acc(" + m + ", " + step + ");");
    w.line(s + " = kf_online_rescale(" + s + ", " + m + ", " + mn + ");");
    w.line(m + " = " + mn + ";");
  };
  // An online pair's sum step: the fusion's own exp(x - max), with the max
  // bound to the lane's running one (the lane's column as the "row" whose
  // result it reads).
  auto sum_step = [&](const CombineUnit& u, size_t l, const std::vector<std::string>& idx) {
    const size_t s = static_cast<size_t>(u.sum);
    const int64_t mo = exprs[u.a]->outputs[0];
    const std::vector<std::string> row_index = w.row_index;
    w.row_index = idx;
    w.row_results[mo] = acc[u.a][l];
    w.line(acc_step(*exprs[s], types[s], acc[s][l], input_of(s, idx)));
    w.row_results.erase(mo);
    w.row_index = row_index;
  };
  // One element into the accumulators (lane: whose registers). Both paths
  // take a step of rows at a time: an online pair's max goes to the lane's
  // `step_max` only; the caller rescales once per step and adds the sum
  // steps after.
  auto accumulate = [&](int lane, const std::vector<std::string>& idx,
                        const std::vector<std::vector<std::string>>& step_max) {
    const size_t l = static_cast<size_t>(lane);
    for (size_t k = 0; k < units.size(); ++k) {
      const CombineUnit& u = units[k];
      const std::string& m = u.sum >= 0 ? step_max[k][l] : acc[u.a][l];
      if (u.sum >= 0) w.line(m + " = kf_max_acc(" + m + ", " + input_of(u.a, idx) + ");");
      else w.line(acc_step(*exprs[u.a], types[u.a], m, input_of(u.a, idx)));
    }
  };
  // Online pairs over a step of rows: each lane's step max (declared per
  // step), then one rescale per lane (the sum steps follow).
  auto declare_step_max = [&] {
    std::vector<std::vector<std::string>> step_max(units.size());
    for (size_t k = 0; k < units.size(); ++k)
      for (int lane = 0; units[k].sum >= 0 && lane < V; ++lane) {
        step_max[k].push_back(w.fresh("sm"));
        w.line("float " + step_max[k].back() + " = " + kMinusInf + ";");
      }
    return step_max;
  };
  auto rescale_step = [&](const std::vector<std::vector<std::string>>& step_max) {
    for (size_t k = 0; k < units.size(); ++k)
      for (int lane = 0; units[k].sum >= 0 && lane < V; ++lane)
        rescale(units[k], static_cast<size_t>(lane), step_max[k][static_cast<size_t>(lane)]);
  };
  // U rows per step (the vector path kRowsInFlight, the scalar twin
  // ColumnParams::scalar_rows): row g of the step at q + g * row_groups,
  // its index clamped to q past the slab's end (so that every load is in
  // bounds), and its in-range flag.
  auto step_rows = [&](int U, std::vector<std::string>* oks, std::vector<std::vector<std::string>>* ridx) {
    for (int g = 0; g < U; ++g) {
      const std::string qg = w.fresh("q"), ok = w.fresh("ok");
      w.line("const long long " + qg + " = q + " + std::to_string(p.row_groups * g) + ";");
      w.line("const bool " + ok + " = " + qg + " < q1;");
      oks->push_back(ok);
      ridx->push_back(unravel(w, dom, red, "(" + ok + " ? " + qg + " : q)", "_g" + std::to_string(g), true));
    }
  };
  // The one-kernel twin: a column's accumulators of lane `lane` are whole
  // after its rows; finished as the finishing kernel finishes them, and
  // the row-shaped outputs stored at the column's kept index `kidx`.
  std::vector<int64_t> results;
  for (const Expr* e : exprs) results.insert(results.end(), e->outputs.begin(), e->outputs.end());
  const bool row_len = std::any_of(exprs.begin(), exprs.end(), [](const Expr* e) { return e->op == Op::MEAN || is_welford(*e); });
  // `values` (per row output, per lane): the registers the vector path
  // fills instead of storing, to store the lanes together (store_lanes).
  auto finish_direct = [&](int lane, const std::vector<std::string>& kidx,
                           const std::vector<std::vector<std::string>>* values) {
    w.row_index.assign(r, "0");
    for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kidx[k];
    RowDomain current = s;
    current.phases = {accs_of};
    declare_results(w, current);
    for (size_t a = 0; a < exprs.size(); ++a)
      finish_results(w, *exprs[a], types[a], acc[a][static_cast<size_t>(lane)], row_len ? rlen : "1");
    if (values == nullptr) store_row_outputs(w, s);
    for (size_t k = 0; values != nullptr && k < s.row_outputs.size(); ++k) {
      const int64_t o = s.row_outputs[k];
      w.line((*values)[k][static_cast<size_t>(lane)] + " = " + w.value_at(o, row_output_index(w, s, o)) + ";");
    }
    for (int64_t o : results) w.row_results.erase(o);
  };
  // The vector path's row outputs, after its V lanes are finished: each
  // output whose dim along the lanes is contiguous and whose first lane is
  // aligned (checked per thread) takes 16-byte stores, the others one
  // element per lane. (Stored per lane, a warp's store spans V sectors: a
  // sum and a max over a dim of 2 into [4095, 128256] ran at 87% of the
  // L1's throughput and 16% of DRAM's, 7.0 ms, ncu session 31.)
  auto store_lanes = [&](const std::vector<std::string>& kidx, const std::vector<std::vector<std::string>>& values) {
    std::vector<std::vector<std::string>> at;  // per lane: the index of each output
    for (int lane = 0; lane < V; ++lane) {
      w.row_index.assign(r, "0");
      for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kidx[k];
      w.row_index[kept.back()] = "(" + kidx.back() + " + " + std::to_string(lane) + ")";
      at.emplace_back();
      for (int64_t o : s.row_outputs) {
        const std::vector<std::string> idx = row_output_index(w, s, o);
        at.back().insert(at.back().end(), idx.begin(), idx.end());
      }
    }
    size_t first = 0;  // o's first index entry in at[lane]
    for (size_t k = 0; k < s.row_outputs.size(); ++k) {
      const int64_t o = s.row_outputs[k];
      const DType t = f.value(o).dtype;
      const size_t n = w.rank(o);
      auto index = [&](int lane) {
        const auto& a = at[static_cast<size_t>(lane)];
        return std::vector<std::string>(a.begin() + static_cast<std::ptrdiff_t>(first), a.begin() + static_cast<std::ptrdiff_t>(first + n));
      };
      auto scalar_stores = [&] {
        for (int lane = 0; lane < V; ++lane) w.store(o, index(lane), values[k][static_cast<size_t>(lane)]);
      };
      const int d = row_output_dim(w, s, o, kept.back());
      const int chunk = std::min(V, 16 / std::max(dtype_size(t), 1));
      if (d < 0 || chunk < 2 || w.size_class(o, static_cast<size_t>(d)) != SizeClass::Many) {
        scalar_stores();
      } else {
        // (one hoisting call per statement: the names they number must not
        // depend on the C++ compiler's order of evaluation)
        const std::string first = w.address(o, index(0));
        const std::string stride = w.stride(o, static_cast<size_t>(d));
        w.open("if (" + stride + " == 1 && (unsigned long long)(" + first + ") % " + std::to_string(chunk * dtype_size(t)) +
               " == 0)");
        const std::string vt = vector_type(w, o, chunk);
        for (int c = 0; c < V; c += chunk) {
          const std::string kv = w.fresh("ov");
          w.line(vt + " " + kv + ";");
          for (int j = 0; j < chunk; ++j)
            w.line(kv + ".v[" + std::to_string(j) + "] = " + w.stored(t, values[k][static_cast<size_t>(c + j)]) + ";");
          w.line("*(" + vt + "*)(" + w.address(o, index(c)) + ") = " + kv + ";");
        }
        w.close_open("else");
        scalar_stores();
        w.close();
      }
      first += n;
    }
  };
  VectorPlan store_plan = p.vectors;  // the vector outputs this kernel stores
  if (outs.empty()) store_plan.outputs.clear();
  const KernelWriter::Section cond = w.reserve();
  const std::string vec_flag = w.fresh("kfvec");
  // w.paths: the vector path, the scalar one or both behind vec_flag.
  const bool vector_path = p.vectors.width > 0 && w.paths != KernelWriter::Paths::Scalar;
  const bool scalar_path = p.vectors.width == 0 || w.paths != KernelWriter::Paths::Vector;
  // The scalar twin's vector path at any element alignment (odd widths,
  // sliced rows: KernelWriter::any_left), ahead of its scalar path: the
  // lanes' columns along the domain's last dim, one warp per row group.
  const bool any_path = !vector_path && p.any_rows > 0 && p.vectors.width > 0 && p.vectors.dim == last && p.col_threads == 32 &&
                        !kept.empty() && kept.back() == last && w.size_class(dom, last) == SizeClass::Many;
  // Vector columns: thread tx holds columns c0 + tx * V + lane.
  auto vector_columns = [&] {
    w.line("const long long cb = c0 + (long long)tx * " + Vs + ";");
    w.open("if (cb < " + cols + ")");
    const std::vector<std::string> kidx = unravel(w, dom, kept, "cb", "_c");
    // At any alignment: a lane's columns past the row's end read the
    // row's last column where they read single elements (in bounds; their
    // accumulators are never written, their elements never stored).
    std::vector<std::string> lane_cols;
    if (any_path) {
      const std::string ext = w.extent(dom, last), two = std::to_string(2 * V);
      w.any_left = w.fresh("kfleft");
      w.any_mask = w.fresh("kfmask");
      w.line("[[maybe_unused]] const int " + w.any_left + " = (int)(" + cols + " - cb < " + two + " ? " + cols + " - cb : " + two + ");");
      w.line("const long long " + w.any_mask + "_n = (" + cols + " - c0 + " + Vs + " - 1) / " + Vs + ";");
      w.line("[[maybe_unused]] const unsigned " + w.any_mask + " = " + w.any_mask + "_n >= 32 ? 0xffffffffu : (1u << " + w.any_mask +
             "_n) - 1u;  // the warp's lanes whose columns start in the row");
      lane_cols.push_back(kidx.back());
      for (int l = 1; l < V; ++l) {
        lane_cols.push_back(w.fresh("kfcol"));
        const std::string c = "(" + kidx.back() + " + " + std::to_string(l) + ")";
        w.line("[[maybe_unused]] const long long " + lane_cols.back() + " = " + c + " < " + ext + " ? " + c + " : " + ext + " - 1;");
      }
    }
    w.begin_result_loads();
    // (at any alignment, fewer: each vector takes two chunks' registers
    // until shifted, and the shifts are instructions; docs/perf-log.md)
    const int U = any_path ? p.any_rows : kRowsInFlight;
    // kRowsInFlight rows per step, all their loads first: a kernel that
    // also stores (the epilogue) cannot have the compiler move a later
    // row's loads above this row's stores (they may alias), which leaves
    // one load in flight per thread (docs/perf-log.md).
    w.open("for (long long q = q0 + ty; q < q1; q += " + std::to_string(p.row_groups * U) + ")");
    std::vector<std::string> oks;
    std::vector<std::vector<std::string>> ridx, bases;
    std::vector<std::vector<std::vector<std::string>>> lanes;  // (any_path) each lane's index per row
    step_rows(U, &oks, &ridx);
    for (int g = 0; g < U; ++g) {
      std::vector<std::string> base(r);
      for (size_t k = 0; k < kept.size(); ++k) base[kept[k]] = kidx[k];
      for (size_t k = 0; k < red.size(); ++k) base[red[k]] = ridx[static_cast<size_t>(g)][k];
      bases.push_back(base);
      lanes.emplace_back();
      for (const std::string& c : lane_cols) {
        lanes.back().push_back(base);
        lanes.back().back()[last] = c;
      }
    }
    auto lanes_of = [&](int g) { return any_path ? &lanes[static_cast<size_t>(g)] : nullptr; };
    const KernelWriter::Section loads = w.reserve();
    // Online pairs: the step's max over its rows first, one rescale per
    // lane and step, then the rows' sum steps (one exp per element).
    const std::vector<std::vector<std::string>> step_max = declare_step_max();
    for (int g = 0; g < U; ++g) {
      w.open("if (" + oks[static_cast<size_t>(g)] + ")");
      w.group = g;
      w.section = 0;
      // Each element visited once: the domain-shaped outputs are computed
      // and stored here too (16-byte stores for the plan's).
      vector_group(w, store_plan, outs, bases[static_cast<size_t>(g)],
                   [&](int lane) { accumulate(lane, w.lane_index, step_max); }, lanes_of(g));
      w.close();
    }
    rescale_step(step_max);
    VectorPlan lanes_only = p.vectors;  // (no stores)
    lanes_only.outputs.clear();
    for (int g = 0; g < U && online; ++g) {
      w.open("if (" + oks[static_cast<size_t>(g)] + ")");
      w.group = g;
      vector_group(w, lanes_only, {}, bases[static_cast<size_t>(g)], [&](int lane) {
        for (const CombineUnit& u : units)
          if (u.sum >= 0) sum_step(u, static_cast<size_t>(lane), w.lane_index);
      }, lanes_of(g));
      w.close();
    }
    w.group = 0;
    w.fill(loads, vector_loads(w, V, 0, oks, w.any_left));
    w.any_left.clear();
    w.any_mask.clear();
    w.close();
    w.end_result_loads();
    // (the vector conditions hold: the lanes' columns are consecutive
    // along the last dim, within one row of it)
    std::vector<std::vector<std::string>> values(s.row_outputs.size());
    for (size_t k = 0; direct && k < s.row_outputs.size(); ++k)
      for (int lane = 0; lane < V; ++lane) {
        values[k].push_back(w.fresh("ro"));
        w.line(std::string(reg_type(f.value(s.row_outputs[k]).dtype)) + " " + values[k].back() + ";");
      }
    for (int lane = 0; direct && lane < V; ++lane) {
      std::vector<std::string> lane_idx = kidx;
      lane_idx.back() = "(" + kidx.back() + " + " + std::to_string(lane) + ")";
      w.open("");
      finish_direct(lane, lane_idx, &values);
      w.close();
    }
    if (direct) store_lanes(kidx, values);
    w.close();
  };
  if (vector_path || any_path) {
    w.open(scalar_path ? "if (" + vec_flag + ")" : "");
    vector_columns();
    std::vector<std::string> conds;
    if (any_path) {
      // Shifted lanes (a slice or cat along the columns) keep to the
      // aligned vectors: this path is then never taken.
      conds.push_back(cols + " == " + w.extent(dom, last));
      const bool shifted = !w.lane_conditions.empty();
      used_vector_conditions(w, sets, p.vectors, dom, true, &conds, nullptr, nullptr, true);
      if (shifted) conds = {"false"};
    } else {
      // With the vector path alone the host checks the conditions: no text.
      if (scalar_path) conds.push_back(w.extent(dom, last) + " % " + Vs + " == 0");
      std::vector<ArgCheck> host_checks = {w.extent_multiple(dom, last, V)};
      used_vector_conditions(w, sets, p.vectors, dom, true, scalar_path ? &conds : nullptr, &host_checks);
      if (checks != nullptr) checks->insert(checks->end(), host_checks.begin(), host_checks.end());
    }
    w.fill(cond, {scalar_path ? "const bool " + vec_flag + " = " + all_of(conds) + ";"
                              : "[[maybe_unused]] const bool " + vec_flag + " = true;"});
    if (scalar_path) w.close_open("else");
  } else {
    w.fill(cond, {"[[maybe_unused]] const bool " + vec_flag + " = false;"});
  }
  if (scalar_path) {
    if (!vector_path && !any_path) w.open("");
    // Scalar columns: thread tx holds columns c0 + tx + col_threads * lane (coalesced).
    std::vector<std::string> cl(static_cast<size_t>(V));
    std::vector<std::vector<std::string>> kidx(static_cast<size_t>(V));
    for (int lane = 0; lane < V; ++lane) {
      const size_t l = static_cast<size_t>(lane);
      cl[l] = w.fresh("cl");
      w.line("const long long " + cl[l] + " = c0 + tx + " + std::to_string(p.col_threads * lane) + ";");
      kidx[l] = unravel(w, dom, kept, cl[l] + " < " + cols + " ? " + cl[l] + " : 0", "_" + std::to_string(lane));
    }
    w.begin_result_loads();
    // Rows in flight as on the vector path: every lane's values of the
    // step's rows first, outside the range tests (their indices are
    // clamped: the loads are in bounds and can all be in flight), then
    // the accumulation and the stores where the row and column exist.
    // Beside the vector path at any alignment, its rows per step: the
    // kernel's registers are the larger path's, and this one then serves
    // only the rare layouts that one does not take (docs/perf-log.md, session
    // 20: 4 rows here cost the other path up to 1.6x).
    const int U = any_path ? p.any_rows : p.scalar_rows;
    w.open("for (long long q = q0 + ty; q < q1; q += " + std::to_string(p.row_groups * U) + ")");
    std::vector<std::string> oks;
    std::vector<std::vector<std::string>> ridx;
    step_rows(U, &oks, &ridx);
    auto index = [&](int g, int lane) {
      std::vector<std::string> idx(r);
      for (size_t k = 0; k < kept.size(); ++k) idx[kept[k]] = kidx[static_cast<size_t>(lane)][k];
      for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = ridx[static_cast<size_t>(g)][k];
      return idx;
    };
    for (int g = 0; g < U; ++g)
      for (int lane = 0; lane < V; ++lane) {
        const std::vector<std::string> idx = index(g, lane);
        for (const CombineUnit& u : units) w.value_at(exprs[u.a]->inputs[0], idx);
        for (int64_t o : outs) w.value_at(o, idx);
      }
    const std::vector<std::vector<std::string>> step_max = declare_step_max();
    auto each = [&](const std::function<void(int, const std::vector<std::string>&)>& body) {
      for (int g = 0; g < U; ++g) {
        w.open("if (" + oks[static_cast<size_t>(g)] + ")");
        for (int lane = 0; lane < V; ++lane) {
          w.open("if (" + cl[static_cast<size_t>(lane)] + " < " + cols + ")");
          body(lane, index(g, lane));
          w.close();
        }
        w.close();
      }
    };
    each([&](int lane, const std::vector<std::string>& idx) {
      accumulate(lane, idx, step_max);
      for (int64_t o : outs) w.store(o, idx, w.value_at(o, idx));
    });
    if (online) {
      rescale_step(step_max);
      each([&](int lane, const std::vector<std::string>& idx) {
        for (const CombineUnit& u : units)
          if (u.sum >= 0) sum_step(u, static_cast<size_t>(lane), idx);
      });
    }
    w.close();
    w.end_result_loads();
    for (int lane = 0; direct && lane < V; ++lane) {
      w.open("if (" + cl[static_cast<size_t>(lane)] + " < " + cols + ")");
      finish_direct(lane, kidx[static_cast<size_t>(lane)], nullptr);
      w.close();
    }
    w.close();
  } else {
    w.close();
  }
  if (exprs.empty() || direct) return;
  // A lane whose elements were all -inf summed exp(-inf - -inf): NaN where
  // its part of the sum is 0 (kf_online_sum still gives NaN for a column
  // of -inf only).
  for (const CombineUnit& u : units)
    for (int lane = 0; u.sum >= 0 && lane < V; ++lane)
      w.line("if (" + acc[u.a][static_cast<size_t>(lane)] + " == " + kMinusInf + ") " +
             acc[static_cast<size_t>(u.sum)][static_cast<size_t>(lane)] + " = 0.f;");
  // Combine the row groups through shared memory (one buffer, reused by
  // each unit in turn), then one partial per column.
  size_t most = 0;
  for (const CombineUnit& u : units)
    most = std::max<size_t>(most, u.sum >= 0 ? 8 : (is_welford(*exprs[u.a]) ? 3 : 1) * (types[u.a] == DType::F32 ? 4 : 8));
  const std::string sh = w.fresh("kf_part");
  w.line("__shared__ __align__(16) char " + sh + "[" + std::to_string(most * static_cast<size_t>(p.row_groups * p.tile_cols())) + "];");
  for (size_t k = 0; k < units.size(); ++k) {
    const CombineUnit& u = units[k];
    const bool online = u.sum >= 0;
    const std::string at = online ? "kf_online" : acc_type(*exprs[u.a], types[u.a]);
    const std::string part = w.fresh("kfp");
    w.line("auto* " + part + " = (" + at + "(*)[" + tile + "])" + sh + ";");
    if (k > 0) w.line("__syncthreads();  // the buffer's previous values are consumed");
    for (int lane = 0; lane < V; ++lane) {
      const size_t l = static_cast<size_t>(lane);
      w.line(part + "[ty][" + vec_flag + " ? tx * " + Vs + " + " + std::to_string(lane) + " : tx + " +
             std::to_string(p.col_threads * lane) + "] = " +
             (online ? "kf_online{" + acc[u.a][l] + ", " + acc[static_cast<size_t>(u.sum)][l] + "}" : acc[u.a][l]) + ";");
    }
    w.line("__syncthreads();");
    w.open("for (int cc = threadIdx.x; cc < " + tile + "; cc += blockDim.x)");
    w.open("if (c0 + cc < " + cols + ")");
    w.line(at + " v = " + part + "[0][cc];");
    w.line("#pragma unroll");
    w.line("for (int y = 1; y < " + groups + "; ++y) v = " + (online ? "kf_online_op()" : combine_op(*exprs[u.a], types[u.a])) +
           "(v, " + part + "[y][cc]);");
    const std::string at_col = "[(long long)blockIdx.y * " + cols + " + c0 + cc]";
    if (online) {
      w.line(partials_of(w, accs_of, u.a, cols) + at_col + " = v.m;");
      w.line(partials_of(w, accs_of, static_cast<size_t>(u.sum), cols) + at_col + " = v.s;");
    } else {
      w.line(partials_of(w, accs_of, u.a, cols) + at_col + " = v;");
    }
    w.close();
    w.close();
  }
}

}  // namespace

void emit_column_partials(KernelWriter& w, const ColumnParams& p, size_t phase, std::vector<ArgCheck>* checks) {
  emit_columns(w, p, phase, checks, false);
}

void emit_column_short(KernelWriter& w, const ColumnParams& p, std::vector<ArgCheck>* checks) {
  emit_columns(w, p.short_twin(), 0, checks, true);
}

void emit_column_finish(KernelWriter& w, const ColumnParams& p, size_t phase) {
  const Fusion& f = w.fusion();
  const RowDomain& s = p.rows;
  const std::vector<int64_t>& accs_of = s.phases[phase];
  const bool last_phase = phase + 1 == s.phases.size();
  const bool keep_results = !last_phase || column_epilogue(p);  // later kernels read them
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  split_dims(s, &kept, &red);
  const std::string cols = extent_product(w, dom, kept, "1LL");
  bool row_len = false;  // only a mean or a variance reads the row length (an unused local is a warning)
  for (int64_t ei : accs_of) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    row_len = row_len || e.op == Op::MEAN || is_welford(e);
  }
  const std::string rlen = row_len ? extent_product(w, dom, red, "1LL") : "1";
  const std::string tx_n = std::to_string(p.col_threads), groups = std::to_string(p.finish_block / p.col_threads);
  w.reduced = s.reduced;
  w.views = s.views;
  w.row_results.clear();
  if (phase > 0 || keep_results) use_stored_results(w, p.rows, keep_results ? s.phases.size() : phase, cols);
  // Thread (tx, ty): column c0 + tx, splits ty, ty + groups, ... in order;
  // then the groups' values combined in order through shared memory (a
  // fixed order: the result does not depend on scheduling).
  w.line("const long long splits = args.splits;");
  w.line("const int tx = threadIdx.x % " + tx_n + ", ty = threadIdx.x / " + tx_n + ";");
  // (an online pair combines as one kf_online)
  const std::vector<CombineUnit> units = combine_units(p, accs_of);
  auto expr_of = [&](size_t a) -> const Expr& { return f.exprs[static_cast<size_t>(accs_of[a])]; };
  auto acc_of = [&](size_t a) { return accumulator_dtype(f.value(expr_of(a).inputs[0]).dtype); };
  std::vector<std::string> shared;
  for (const CombineUnit& u : units) {
    shared.push_back(w.fresh("kf_fin"));
    w.line("__shared__ " + (u.sum >= 0 ? std::string("kf_online") : acc_type(expr_of(u.a), acc_of(u.a))) + " " +
           shared.back() + "[" + groups + "][" + tx_n + "];");
  }
  w.open("for (long long c0 = (long long)blockIdx.x * " + tx_n + "; c0 < " + cols + "; c0 += (long long)gridDim.x * " + tx_n + ")");
  w.line("const long long c = c0 + tx;");
  for (size_t k = 0; k < units.size(); ++k) {
    const CombineUnit& u = units[k];
    const Expr& e = expr_of(u.a);
    const DType acc = acc_of(u.a);
    const std::string v = w.fresh("red");
    const std::string loop = "if (c < " + cols + ") for (long long sp = ty; sp < splits; sp += " + groups + ") ";
    if (u.sum >= 0) {
      const std::string pm = w.fresh("part"), ps = w.fresh("part");
      w.line("const float* " + pm + " = " + partials_of(w, accs_of, u.a, cols) + ";");
      w.line("const float* " + ps + " = " + partials_of(w, accs_of, static_cast<size_t>(u.sum), cols) + ";");
      w.line("kf_online " + v + " = {" + kMinusInf + ", 0.f};");
      w.line(loop + v + " = kf_online_op()(" + v + ", kf_online{" + pm + "[sp * " + cols + " + c], " + ps + "[sp * " + cols +
             " + c]});");
    } else {
      const std::string at = acc_type(e, acc);
      const std::string part = w.fresh("part");
      w.line("const " + at + "* " + part + " = " + partials_of(w, accs_of, u.a, cols) + ";");
      w.line(at + " " + v + " = " + (is_welford(e) ? "{0, 0, 0}" : acc_init(e, acc)) + ";");
      w.line(loop + v + " = " + combine_op(e, acc) + "(" + v + ", " + part + "[sp * " + cols + " + c]);");
    }
    w.line(shared[k] + "[ty][tx] = " + v + ";");
  }
  w.line("__syncthreads();");
  w.open("if (ty == 0 && c < " + cols + ")");
  const std::vector<std::string> kidx = unravel(w, dom, kept, "c", "", true);
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kidx[k];
  // This phase's results in registers; earlier phases' are read from memory.
  const std::map<int64_t, std::string> arrays = w.result_arrays;
  w.result_arrays.clear();
  std::vector<int64_t> current_results;
  for (int64_t ei : accs_of)
    for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) current_results.push_back(o);
  for (const auto& [v, ptr] : arrays)
    if (std::find(current_results.begin(), current_results.end(), v) == current_results.end()) w.result_arrays[v] = ptr;
  RowDomain current = s;
  current.phases = {accs_of};
  declare_results(w, current);
  auto keep = [&](const Expr& e) {
    if (keep_results)
      for (int64_t o : e.outputs) w.line(arrays.at(o) + "[c] = " + w.row_results.at(o) + ";");
  };
  for (size_t k = 0; k < units.size(); ++k) {
    const CombineUnit& u = units[k];
    const Expr& e = expr_of(u.a);
    const DType acc = acc_of(u.a);
    const std::string v = w.fresh("red");
    const bool online = u.sum >= 0;
    w.line((online ? std::string("kf_online") : acc_type(e, acc)) + " " + v + " = " + shared[k] + "[0][tx];");
    w.line("for (int y = 1; y < " + groups + "; ++y) " + v + " = " + (online ? "kf_online_op()" : combine_op(e, acc)) +
           "(" + v + ", " + shared[k] + "[y][tx]);");
    finish_results(w, e, acc, online ? v + ".m" : v, rlen);
    keep(e);
    if (!online) continue;
    const size_t s = static_cast<size_t>(u.sum);
    finish_results(w, expr_of(s), acc_of(s), "kf_online_sum(" + v + ")", rlen);
    keep(expr_of(s));
  }
  if (last_phase) store_row_outputs(w, s);
  w.close();
  w.line("__syncthreads();  // the shared values are consumed");
  w.close();
}

}  // namespace kf
