// Row kernels: the row held in registers (row_parts.h).
#include <algorithm>

#include "core/codegen/op_cuda.h"
#include "core/codegen/row_parts.h"
#include "core/schedule/online_softmax.h"
#include "core/util/error.h"

namespace kf::row_emit {

namespace {

// Whether `v` is a task input seen through casts and shape ops only.
bool plain_read(const Fusion& f, const Task& task, int64_t v) {
  while (std::find(task.inputs.begin(), task.inputs.end(), v) == task.inputs.end()) {
    const Value& val = f.value(v);
    if (val.producer < 0) return true;  // a constant or scalar
    const Expr& e = f.exprs[static_cast<size_t>(val.producer)];
    if (e.op != Op::CAST && op_info(e.op).category != OpCategory::Shape) return false;
    v = e.inputs[0];
  }
  return true;
}

}  // namespace

std::string row_cached(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                       const Task& task, const std::vector<size_t>& red, const std::string& row_len,
                       std::vector<ArgCheck>* checks, const RowEdges* edges) {
  const Fusion& f = w.fusion();
  const RowDomain& s = p.rows;
  const VectorPlan& vp = p.vectors;
  const int64_t dom = s.domain;
  const size_t last = vp.dim;  // (the lanes' dim: innermost in memory, last in `red`)
  const int V = vp.width, K = p.vectors_per_thread;
  const std::string& t = w.index_type();
  std::vector<std::string> ok(static_cast<size_t>(K)), first(static_cast<size_t>(K));
  std::vector<std::vector<std::string>> base(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    const std::string b = w.fresh("jb");
    first[static_cast<size_t>(k)] = b;
    w.line("const " + t + " " + b + " = " + (edges != nullptr ? edges->head + " + " : "") + "((" + t + ")" +
           std::to_string(k) + " * (" + t + ")blockDim.x + (" + t + ")threadIdx.x) * " + std::to_string(V) + ";");
    // (with edges: a whole vector of the aligned middle)
    ok[static_cast<size_t>(k)] = edges != nullptr ? b + " + " + std::to_string(V) + " <= " + row_len : b + " < " + row_len;
    std::string suffix(1, '_');  // (not "_" + to_string: GCC 12 warns of a false -Wrestrict there)
    suffix += std::to_string(k);
    base[static_cast<size_t>(k)] = full_index(w, red, unravel(w, dom, red, b, suffix));
  }
  // With edges, thread i < edges->edges also holds element i of the row's
  // head and tail, read per element (in each phase: from L1) under `edge_ok`.
  std::string edge_ok, je;
  std::vector<std::string> edge_index;
  if (edges != nullptr) {
    je = w.fresh("je");
    edge_ok = w.fresh("eok");
    w.line("const " + t + " " + je + " = (" + t + ")threadIdx.x < " + edges->head + " ? (" + t + ")threadIdx.x : (" + t +
           ")threadIdx.x + " + edges->vectors + " * " + std::to_string(V) + ";");
    w.line("const bool " + edge_ok + " = (" + t + ")threadIdx.x < " + edges->edges + ";");
    edge_index = full_index(w, red, unravel(w, dom, red, je, "_e"));
  }
  // body(index) for the edge element, when this thread holds one.
  auto edge_element = [&](const std::function<void(const std::vector<std::string>&)>& body) {
    if (edges == nullptr) return;
    w.open("if (" + edge_ok + ")");
    body(edge_index);
    w.close();
  };
  // Online pairs keep their two phases here: one pass measured slower on
  // this path (docs/perf-log.md, session 6).
  const std::vector<std::vector<int64_t>>& phases = s.phases;
  std::map<int, KernelWriter::Section> loads;  // load section -> where its loads go
  // body(lane index) for each lane of vector k, in the current scope.
  auto each_lane = [&](int k, const std::function<void(const std::vector<std::string>&)>& body) {
    const auto& b = base[static_cast<size_t>(k)];
    w.group = k;
    w.lane_base = b;
    for (int lane = 0; lane < V; ++lane) {
      std::vector<std::string> idx = b;
      if (lane > 0) idx[last] = "(" + b[last] + " + " + std::to_string(lane) + ")";
      w.lane = lane;
      w.lane_index = idx;
      body(idx);
    }
    w.lane = -1;
  };
  // body(lane index) for each lane of vector k when it is in the row.
  auto lanes = [&](int k, const std::function<void(const std::vector<std::string>&)>& body) {
    w.open("if (" + ok[static_cast<size_t>(k)] + ")");
    if (w.section > static_cast<int>(phases.size())) loads[w.section] = w.reserve();
    each_lane(k, body);
  };
  loads[0] = w.reserve();
  for (size_t ph = 0; ph < phases.size(); ++ph) {
    w.section = static_cast<int>(ph);
    std::vector<Accumulator> accs = declare_accs(w, phases[ph], true);
    auto input_of = [&](const Accumulator& a, const std::vector<std::string>& idx) {
      const int64_t in = a.expr->inputs[0];
      return convert(f.value(in).dtype, a.acc, w.value_at(in, idx));
    };
    auto accumulate = [&](const std::vector<std::string>& idx) {
      for (const Accumulator& a : accs) {
        const std::string x = input_of(a, idx);
        if (!a.sum.empty()) w.line(a.sum + " += " + x + ";");
        else w.line(acc_step(*a.expr, a.acc, a.name, x));
      }
    };
    for (int k = 0; k < K; ++k) {
      // Computed inputs of the reductions (softmax's exp) are evaluated
      // outside the lane guard, so later phases and the output pass find
      // them in registers instead of computing them again. Plain reads of
      // the row stay inside: holding their float forms across phases
      // would cost registers that the packed vectors already hold.
      // Lanes past the row's end, read before their guard, read no
      // per-element input out of bounds: a weight (Edges), or the row's own
      // input where it is not a vector (a misaligned x: lanes of the last
      // row read past its tensor, compute-sanitizer, session 30).
      w.lane_limit = row_len;
      each_lane(k, [&](const std::vector<std::string>& idx) {
        for (const Accumulator& a : accs)
          if (!plain_read(f, task, a.expr->inputs[0])) input_of(a, idx);
      });
      w.lane_limit.clear();
      lanes(k, [&](const std::vector<std::string>& idx) { accumulate(idx); });
      w.close();
    }
    edge_element(accumulate);
    // Variance, second pass: squared deviations from the row's mean, read
    // from the registers (two block sums instead of a Welford merge tree,
    // whose every step divides).
    bool second = false;
    for (const Accumulator& a : accs) {
      if (a.sum.empty()) continue;
      second = true;
      w.line(a.sum + " = " + row_len + " > 0 ? " + w.row_reduce + "(" + a.sum + ", kf_sum_op()) / (" +
             reg_type(a.acc) + ")" + row_len + " : 0;");
    }
    if (second) {
      auto deviations = [&](const std::vector<std::string>& idx) {
        for (const Accumulator& a : accs) {
          if (a.sum.empty()) continue;
          const std::string d = w.fresh("wd");
          w.line("const " + std::string(reg_type(a.acc)) + " " + d + " = " + input_of(a, idx) + " - " + a.sum + ";");
          w.line(a.name + " += " + d + " * " + d + ";");
        }
      };
      for (int k = 0; k < K; ++k) {
        lanes(k, deviations);
        w.close();
      }
      edge_element(deviations);
    }
    reduce_block(w, accs, row_len);
    loads[static_cast<int>(ph) + 1] = w.reserve();
  }
  // The output pass loads what it alone reads (weights, biases) per vector,
  // right before use: fewer registers live at once. (After the last
  // reduction: a short-row group without a row of its own skips it.)
  const bool guarded = !w.row_live.empty() && (!s.domain_outputs.empty() || outer.active());
  if (guarded) w.open("if (" + w.row_live + ")");
  for (int k = 0; k < K && (!s.domain_outputs.empty() || outer.active()); ++k) {
    w.section = static_cast<int>(phases.size()) + 1 + k;
    std::vector<std::string> ov;
    const auto& b = base[static_cast<size_t>(k)];
    lanes(k, [&](const std::vector<std::string>& idx) {
      if (ov.empty())
        for (int64_t o : vp.outputs) {
          ov.push_back(w.fresh("ov"));
          w.line(vector_type(w, o, V) + " " + ov.back() + ";");
        }
      for (int64_t o : s.domain_outputs) {
        const std::string reg = w.value_at(o, idx);
        auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
        if (it == vp.outputs.end())
          w.store(o, idx, reg);
        else
          w.line(ov[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(w.lane) + "] = " +
                 w.stored(f.value(o).dtype, reg) + ";");
      }
      const size_t kk = static_cast<size_t>(k), lane = static_cast<size_t>(w.lane);
      if (outer.lane_major.empty()) {
        outer_step(w, outer, idx, [&](size_t a) { return outer.regs[a][kk][lane]; });
      } else if (outer.active()) {
        const std::string slot = w.fresh("ls");
        w.line("const unsigned " + slot + " = " + outer.lane_slot(first[kk] + " + " + std::to_string(lane)) + ";");
        outer_step(w, outer, idx, [&](size_t a) { return outer.lane_major[a] + "[" + slot + "]"; });
      }
    });
    for (size_t q = 0; q < vp.outputs.size() && !ov.empty(); ++q) {
      const int64_t o = vp.outputs[q];
      const std::string vt = vector_type(w, o, V);
      w.line("*(" + vt + "*)(" + w.address(o, b) + ") = " + ov[q] + ";");
    }
    w.close();
  }
  if (!s.domain_outputs.empty() || outer.active())
    edge_element([&](const std::vector<std::string>& idx) {
      for (int64_t o : s.domain_outputs) w.store(o, idx, w.value_at(o, idx));
      if (!outer.active()) return;
      const std::string slot = w.fresh("ls");
      w.line("const unsigned " + slot + " = " + outer.lane_slot(je) + ";");
      outer_step(w, outer, idx, [&](size_t a) { return outer.lane_major[a] + "[" + slot + "]"; });
    });
  if (guarded) w.close();
  // Row inputs that only the output pass reads (log-softmax backward's y)
  // load with the last phase's inputs: in flight across its block
  // reduction, rather than one vector at a time behind the output's stores
  // (which a load may alias). Weights stay per vector (they hit in L2).
  // p.staged lists the row inputs of a row read in several passes.
  const int last_phase = phases.empty() ? 0 : static_cast<int>(phases.size()) - 1;
  for (auto& [key, vr] : w.vector_regs)
    if (vr.section > static_cast<int>(phases.size()) &&
        std::find(p.staged.begin(), p.staged.end(), key.first) != p.staged.end())
      vr.section = last_phase;
  // (Edges: the inputs at any alignment, each row's shift of its own; whole
  // vectors of the middle only, so V elements exist from lane 0 on.)
  for (const auto& [sec, place] : loads)
    w.fill(place, vector_loads(w, V, sec, ok, edges != nullptr ? std::to_string(V) : std::string()));
  // The row fits the block's registers: the launch takes the long-row
  // kernel otherwise (takes_long_rows), so the host checks the rest only
  // (with edges: any width, rows alike modulo the width).
  if (edges == nullptr) checks->push_back(w.extent_multiple(dom, last, V));
  if (w.paths == KernelWriter::Paths::Vector) {
    if (edges != nullptr) edge_vector_checks(w, sets, vp, dom, edges->ref, checks);
    else used_vector_conditions(w, sets, vp, dom, true, nullptr, checks);
    return "";
  }
  if (edges != nullptr) fail(KF_ERR_INTERNAL, "the register path with edges is host-checked only");
  std::vector<std::string> conds = {w.extent(dom, last) + " % " + std::to_string(V) + " == 0",
                                    "(long long)" + row_len + " <= (long long)blockDim.x * " + std::to_string(V * K)};
  used_vector_conditions(w, sets, vp, dom, true, &conds, checks);
  return all_of(conds);
}

}  // namespace kf::row_emit
