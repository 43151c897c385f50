// The row emitters' shared pieces (row_parts.h).
#include <algorithm>

#include "core/codegen/op_cuda.h"
#include "core/codegen/row_parts.h"
#include "core/schedule/online_softmax.h"
#include "core/util/error.h"

namespace kf::row_emit {

std::vector<std::string> full_index(const KernelWriter& w, const std::vector<size_t>& red,
                                    const std::vector<std::string>& red_idx) {
  std::vector<std::string> idx = w.row_index;
  for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = red_idx[k];
  return idx;
}

OuterAccs declare_outer(KernelWriter& w, const RowParams& p, const std::string& row_len, OuterPlace place) {
  OuterAccs o;
  if (!p.has_outer()) return o;
  const Fusion& f = w.fusion();
  const std::vector<int64_t>& phase = p.outer.phases[0];
  std::string at_bytes = "0";
  if (place == OuterPlace::LaneMajor) {
    o.width = p.vectors.width;
    o.lane_stride = w.fresh("kfls");
    w.line("extern __shared__ __align__(16) unsigned char kf_stage[];");
    // Rows up to row_len + 2V - 1 words (LaunchRule::row_partial_bytes).
    w.line("const unsigned " + o.lane_stride + " = (unsigned)(" + row_len + ") / " + std::to_string(o.width) + "u + 2u;");
  }
  for (size_t a = 0; a < phase.size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(phase[a])];
    o.exprs.push_back(&e);
    o.types.push_back(accumulator_dtype(f.value(e.inputs[0]).dtype));
    const std::string at = reg_type(o.types.back());
    // Accumulator a's partials start at word a * splits * row_len (8-byte
    // words, as emit_column_finish reads them).
    o.partials.push_back(w.hoist(at + "*", "part", "(" + at + "*)((char*)args.scratch + " + std::to_string(a) +
                                                       "LL * args.splits * " + row_len + " * 8) + (long long)blockIdx.x * " + row_len));
    o.regs.emplace_back();
    if (place == OuterPlace::LaneMajor) {
      const std::string words = std::to_string(o.width) + "u * " + o.lane_stride;
      o.lane_major.push_back(w.fresh("lpart"));
      w.line(at + "* const " + o.lane_major.back() + " = (" + at + "*)(kf_stage + " + at_bytes + ");");
      at_bytes = "(" + at_bytes + " + (" + words + " * sizeof(" + at + ") + 15u) / 16u * 16u)";
      w.open("for (unsigned j = threadIdx.x; j < " + words + "; j += blockDim.x)");
      w.line(o.lane_major.back() + "[j] = " + acc_init(e, o.types.back()) + ";");
      w.close();
      continue;
    }
    if (p.vectors.width == 0 || place != OuterPlace::Registers) continue;
    for (int k = 0; k < p.vectors_per_thread; ++k) {
      o.regs.back().emplace_back();
      for (int lane = 0; lane < p.vectors.width; ++lane) {
        o.regs.back().back().push_back(w.fresh("oacc"));
        w.line(at + " " + o.regs.back().back().back() + " = " + acc_init(e, o.types.back()) + ";");
      }
    }
  }
  if (place == OuterPlace::LaneMajor) w.line("__syncthreads();  // the partials' identities are in place");
  return o;
}

std::vector<std::string> input_index(const std::vector<int>& dims, const std::vector<std::string>& idx) {
  std::vector<std::string> out;
  for (int d : dims) out.push_back(d < 0 ? "0" : idx[static_cast<size_t>(d)]);
  return out;
}

void outer_step(KernelWriter& w, const OuterAccs& o, const std::vector<std::string>& idx,
                const std::function<std::string(size_t)>& acc) {
  for (size_t a = 0; a < o.exprs.size(); ++a) {
    const int64_t in = o.exprs[a]->inputs[0];
    w.line(acc_step(*o.exprs[a], o.types[a], acc(a), convert(w.fusion().value(in).dtype, o.types[a], w.value_at(in, idx))));
  }
}

void online_sum_step(KernelWriter& w, const Accumulator& a, const Accumulator& m,
                     const std::function<std::string()>& term) {
  const int64_t mo = m.expr->outputs[0];
  const std::string row_max = w.row_results.at(mo);
  w.row_results[mo] = m.name;
  w.line(acc_step(*a.expr, a.acc, a.name, term()));
  w.row_results[mo] = row_max;
}

void end_online_sums(KernelWriter& w, const std::vector<Accumulator>& accs) {
  for (const Accumulator& a : accs)
    if (a.online_max >= 0)
      w.line("if (" + accs[static_cast<size_t>(a.online_max)].name + " == -__int_as_float(0x7f800000)) " + a.name + " = 0.f;");
}

VectorRef edge_ref(const KernelWriter& w, const RowParams& p) {
  const VectorPlan& vp = p.vectors;
  const int64_t v = !vp.outputs.empty() ? vp.outputs[0] : vp.inputs.begin()->first;
  return {v, vector_dims(w, v, p.rows.domain, vp.dim)};
}

RowEdges declare_edges(KernelWriter& w, const RowParams& p, const std::vector<size_t>& red, const std::string& row_len,
                       const VectorRef& ref) {
  const std::string& t = w.index_type();
  const std::string V = std::to_string(p.vectors.width);
  RowEdges e;
  e.ref = ref;
  e.shift = w.fresh("kfsh");
  e.head = w.fresh("kfhead");
  e.vectors = w.fresh("kfnv");
  e.edges = w.fresh("kfne");
  const std::vector<std::string> start = input_index(e.ref.dims, full_index(w, red, {"0"}));
  w.line("const long long " + e.shift + " = ((long long)(" + w.offset(e.ref.value, start) + ") % " + V + " + " + V + ") % " + V + ";");
  w.line("const " + t + " " + e.head + " = (" + t + ")min((long long)((" + V + " - " + e.shift + ") % " + V + "), " + row_len + ");");
  w.line("const " + t + " " + e.vectors + " = (" + t + ")((" + row_len + " - " + e.head + ") / " + V + ");");
  w.line("const " + t + " " + e.edges + " = (" + t + ")(" + row_len + " - (long long)" + e.vectors + " * " + V + ");");
  return e;
}

void edge_vector_checks(KernelWriter& w, const ExtentSets& sets, const VectorPlan& vp, int64_t dom, const VectorRef& ref,
                        std::vector<ArgCheck>* checks) {
  std::vector<std::pair<int64_t, std::vector<int>>> seen;
  for (const auto& [key, vr] : w.vector_regs) {
    if (std::find(seen.begin(), seen.end(), std::make_pair(key.first, vr.dims)) != seen.end()) continue;
    seen.emplace_back(key.first, vr.dims);
    vector_conditions(w, sets, key.first, dom, vp.width, vp.dim, nullptr, &vr.dims, checks, &ref, true);
  }
  for (int64_t o : vp.outputs) vector_conditions(w, sets, o, dom, vp.width, vp.dim, nullptr, nullptr, checks, &ref);
  checks->insert(checks->end(), w.lane_checks.begin(), w.lane_checks.end());
}

void open_vector_steps(KernelWriter& w, int V, const std::string& row_len, const RowEdges* edges) {
  const std::string& t = w.index_type();
  if (edges != nullptr) {
    w.open("for (" + t + " jv = threadIdx.x; jv < " + edges->vectors + "; jv += blockDim.x)");
    w.line("const " + t + " j = " + edges->head + " + jv * " + std::to_string(V) + ";");
  } else if (!w.part_begin.empty()) {  // the cluster row kernel: this block's part
    w.open("for (" + t + " jv = " + w.part_begin + " / " + std::to_string(V) + " + threadIdx.x; jv < " + w.part_end + " / " +
           std::to_string(V) + "; jv += blockDim.x)");
    w.line("const " + t + " j = jv * " + std::to_string(V) + ";");
  } else {
    w.open("for (" + t + " jv = threadIdx.x; jv < " + row_len + " / " + std::to_string(V) + "; jv += blockDim.x)");
    w.line("const " + t + " j = jv * " + std::to_string(V) + ";");
  }
}

std::string stage_at(const KernelWriter& w, const std::string& j) {
  return w.part_begin.empty() ? j : "(" + j + " - " + w.part_begin + ")";
}

void open_edge_steps(KernelWriter& w, int V, const RowEdges& edges) {
  const std::string& t = w.index_type();
  w.open("for (" + t + " je = threadIdx.x; je < " + edges.edges + "; je += blockDim.x)");
  w.line("const " + t + " j = je < " + edges.head + " ? je : je + " + edges.vectors + " * " + std::to_string(V) + ";");
}

}  // namespace kf::row_emit
