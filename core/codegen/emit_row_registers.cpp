// Row kernels: the row held in registers (row_parts.h).
#include <algorithm>
#include <optional>

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

// Whether the row kernel copies vector register `key` ahead: a plain
// vector of an input that varies over the rows (a weight read by every row
// stays a load: it hits in L1).
bool prefetched(const KernelWriter& w, const RowDomain& s, const std::pair<int64_t, int>& key,
                const KernelWriter::VectorReg& vr, int groups) {
  if (key.second >= groups || !vr.guard.empty()) return false;
  auto in = w.vector_inputs.find(key.first);
  if (in == w.vector_inputs.end() || in->second != vr.dims) return false;  // (read through a reshape)
  for (size_t j = 0; j < vr.dims.size(); ++j) {
    const int d = vr.dims[j];
    if (d >= 0 && !s.reduced[static_cast<size_t>(d)] && w.size_class(key.first, j) == SizeClass::Many) return true;
  }
  return false;
}

// The prefetch's copies (RowParams::prefetch_rows), at `place`: on a
// block's first row this row's vectors, then on every row the next row's,
// each thread into slots of its own (kf_pf: per register and buffer, a
// 16-byte slot per thread), so no barrier orders them: a thread waits for
// its own copies only (cp.async.wait_group). kf_pfon: the launch gave the
// slots (else the vectors load as before: a device without cp.async or
// the shared memory). `from_slot` gets each copied register's read.
void prefetch_copies(KernelWriter& w, const RowParams& p, const std::vector<std::string>& ok,
                     const std::vector<std::string>& next_row, KernelWriter::Section place,
                     std::map<std::string, std::string>* from_slot) {
  // At most 4 vectors (128 bytes of slots per thread: 128 KB for 1024
  // threads), in the order of the writer's registers.
  constexpr int kMostVectors = 4;
  std::vector<const KernelWriter::VectorReg*> regs;
  std::vector<int64_t> values;
  for (const auto& [key, vr] : w.vector_regs)
    if (static_cast<int>(regs.size()) < kMostVectors && prefetched(w, p.rows, key, vr, p.vectors_per_thread)) {
      regs.push_back(&vr);
      values.push_back(key.first);
    }
  w.prefetch_vectors = static_cast<int>(regs.size());
  if (regs.empty()) return;
  const std::string n = std::to_string(regs.size());
  auto slot = [&](const std::string& buffer, size_t q) {
    return "kf_pf + ((" + buffer + " * " + n + "u + " + std::to_string(q) + "u) * blockDim.x + threadIdx.x) * 16u";
  };
  std::vector<std::string> first, next;
  for (size_t q = 0; q < regs.size(); ++q) {
    const KernelWriter::VectorReg& vr = *regs[q];
    std::vector<std::string> next_base = vr.base;
    for (size_t j = 0; j < vr.dims.size(); ++j)
      if (vr.dims[j] >= 0 && !p.rows.reduced[static_cast<size_t>(vr.dims[j])])
        next_base[j] = next_row[static_cast<size_t>(vr.dims[j])];
    const std::string& in_row = ok[static_cast<size_t>(vr.ok_group)];
    first.push_back("if (" + in_row + ") kf_copy_async16(" + slot("kf_pfb", q) + ", " + w.address(values[q], vr.base) + ");");
    next.push_back("if (" + in_row + ") kf_copy_async16(" + slot("(kf_pfb ^ 1u)", q) + ", " +
                   w.address(values[q], next_base) + ");");
    const std::string vt = vector_type(w, values[q], p.vectors.width);
    (*from_slot)[vr.reg] = "*(const " + vt + "*)(" + slot("kf_pfb", q) + ")";
  }
  std::vector<size_t> kept;
  for (size_t d = 0; d < p.rows.reduced.size(); ++d)
    if (!p.rows.reduced[d]) kept.push_back(d);
  std::vector<std::string> lines = {"if (kf_pfon) {", "  if (row == blockIdx.x) {  // the block's first row: not copied ahead"};
  for (const std::string& l : first) lines.push_back("    " + l);
  lines.push_back("    kf_copy_async_commit();");
  lines.push_back("  }");
  lines.push_back("  if (kf_nrow < " + extent_product(w, p.rows.domain, kept, "1") + ") {");
  for (const std::string& l : next) lines.push_back("    " + l);
  lines.push_back("  }");
  lines.push_back("  kf_copy_async_commit();");
  lines.push_back("  kf_copy_async_wait_prior();  // this row's copies are done (the next row's stay in flight)");
  lines.push_back("}");
  w.fill(place, lines);
}

}  // namespace

std::string row_cached(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                       const Task& task, const std::vector<size_t>& red, const std::string& row_len,
                       std::vector<ArgCheck>* checks, const RowEdges* edges) {
  const Fusion& f = w.fusion();
  const RowDomain& s = p.rows;
  const VectorPlan& vp = p.vectors;
  const int64_t dom = s.domain;
  const size_t last = w.rank(dom) - 1;
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
  // Prefetch (RowParams::prefetch_rows): the next row's index, and the
  // place of the copies (which vectors is known once the row is written).
  const bool prefetch = p.prefetch_rows && edges == nullptr;
  std::vector<std::string> next_row;  // per domain dim: the next row's index (kept dims)
  std::optional<KernelWriter::Section> copies;
  if (prefetch) {
    std::vector<size_t> kept;
    for (size_t d = 0; d < s.reduced.size(); ++d)
      if (!s.reduced[d]) kept.push_back(d);
    w.line("const long long kf_nrow = row + gridDim.x;");
    const std::vector<std::string> names = unravel(w, dom, kept, "kf_nrow", "_n", true);
    next_row = w.row_index;
    for (size_t k = 0; k < kept.size(); ++k) next_row[kept[k]] = names[k];
    copies = w.reserve();
  }
  // Online pairs keep their two phases here: one pass measured slower on
  // this path (docs/PERF.md, session 6).
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
      // (Edges: lanes past the row's end, read before their guard, read no
      // per-element input, such as a weight, out of bounds.)
      if (edges != nullptr) w.lane_limit = row_len;
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
  // right before use: fewer registers live at once.
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
  std::map<std::string, std::string> from_slot;  // prefetched register -> its read from this row's slot
  if (prefetch) prefetch_copies(w, p, ok, next_row, *copies, &from_slot);
  for (const auto& [sec, place] : loads) w.fill(place, vector_loads(w, V, sec, ok, &from_slot, "kf_pfon"));
  if (!from_slot.empty()) w.line("kf_pfb ^= 1u;  // the next row's slots become this row's");
  // The row fits the block's registers: the launch takes the long-row
  // kernel otherwise (takes_long_rows), so the host checks the rest only
  // (with edges: any width, rows alike modulo the width).
  if (edges == nullptr) checks->push_back(w.extent_multiple(dom, last, V));
  if (w.paths == KernelWriter::Paths::Vector) {
    used_vector_conditions(w, sets, vp, dom, true, nullptr, checks, edges != nullptr ? &edges->ref : nullptr);
    return "";
  }
  if (edges != nullptr) fail(KF_ERR_INTERNAL, "the register path with edges is host-checked only");
  std::vector<std::string> conds = {w.extent(dom, last) + " % " + std::to_string(V) + " == 0",
                                    "(long long)" + row_len + " <= (long long)blockDim.x * " + std::to_string(V * K)};
  used_vector_conditions(w, sets, vp, dom, true, &conds, checks);
  return all_of(conds);
}

}  // namespace kf::row_emit
