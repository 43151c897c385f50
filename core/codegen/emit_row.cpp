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
#include "core/schedule/online_softmax.h"
#include "core/util/error.h"

namespace kf {

namespace {

std::vector<std::string> full_index(const KernelWriter& w, const std::vector<size_t>& red,
                                    const std::vector<std::string>& red_idx) {
  std::vector<std::string> idx = w.row_index;
  for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = red_idx[k];
  return idx;
}

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

// The staged path (RowParams::staged): the row's staged inputs in dynamic
// shared memory, one row of each input's storage type after the other,
// then with stage_outer one row of partials per outer reduction.
struct Stage {
  std::map<int64_t, std::string> rows;  // staged input -> its row in shared memory
  std::vector<std::string> partials;    // per outer reduction (stage_outer)
  bool active() const { return !rows.empty(); }
};

// The input's own index where the domain index is `idx` (its dims' map).
std::vector<std::string> input_index(const std::vector<int>& dims, const std::vector<std::string>& idx) {
  std::vector<std::string> out;
  for (int d : dims) out.push_back(d < 0 ? "0" : idx[static_cast<size_t>(d)]);
  return out;
}

// One element of every outer reduction at domain index `idx` into `acc(a)`.
void outer_step(KernelWriter& w, const OuterAccs& o, const std::vector<std::string>& idx,
                const std::function<std::string(size_t)>& acc) {
  for (size_t a = 0; a < o.exprs.size(); ++a) {
    const int64_t in = o.exprs[a]->inputs[0];
    w.line(acc_step(*o.exprs[a], o.types[a], acc(a), convert(w.fusion().value(in).dtype, o.types[a], w.value_at(in, idx))));
  }
}

// One element of online sum `a` (paired with max `m`): the fusion's own
// exp(x - max) with the row's max bound to the running max (the values
// computed stay in the caller's lane scope).
void online_sum_step(KernelWriter& w, const Accumulator& a, const Accumulator& m,
                     const std::function<std::string()>& term) {
  const int64_t mo = m.expr->outputs[0];
  const std::string row_max = w.row_results.at(mo);
  w.row_results[mo] = m.name;
  w.line(acc_step(*a.expr, a.acc, a.name, term()));
  w.row_results[mo] = row_max;
}

// A thread whose elements are all -inf summed exp(-inf - -inf): NaN where
// the row's result is 0 (unless the whole row is -inf: kf_online_sum).
void end_online_sums(KernelWriter& w, const std::vector<Accumulator>& accs) {
  for (const Accumulator& a : accs)
    if (a.online_max >= 0)
      w.line("if (" + accs[static_cast<size_t>(a.online_max)].name + " == -__int_as_float(0x7f800000)) " + a.name + " = 0.f;");
}

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

// Opens a loop over the row's vectors, element j of each (one thread per
// vector per step): the whole row, or with edges its aligned middle.
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

// Where element `j` of the row sits in a stage: at j, or in the cluster row
// kernel at its place in this block's part.
std::string stage_at(const KernelWriter& w, const std::string& j) {
  return w.part_begin.empty() ? j : "(" + j + " - " + w.part_begin + ")";
}

// Opens a loop over the row's head and tail, element j of each.
void open_edge_steps(KernelWriter& w, int V, const RowEdges& edges) {
  const std::string& t = w.index_type();
  w.open("for (" + t + " je = threadIdx.x; je < " + edges.edges + "; je += blockDim.x)");
  w.line("const " + t + " j = je < " + edges.head + " ? je : je + " + edges.vectors + " * " + std::to_string(V) + ";");
}

// How the streaming loops step through a row: one element per thread step
// (any row length and layout), or 16-byte vector steps (VectorSteps: the
// vector plan's inputs loaded as whole vectors; the run-time conditions of
// every register used are collected by the caller from the writer's
// vector registers of groups >= kStreamGroups).
constexpr int kStreamGroups = 1000;
struct VectorSteps {
  int next = kStreamGroups;  // the next loop's register group (and load section)
  // The Edges kernel: vectors from the row's first aligned element, then
  // its head and tail one element per thread step (staged rows sit at
  // their shift in shared memory, so that their vectors are aligned too).
  const RowEdges* edges = nullptr;
};

// The row re-read in every phase: from global memory, or for the inputs of
// `stage` (when given) from their rows in shared memory.
void row_streaming(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const std::vector<size_t>& red,
                   const std::string& row_len, const Stage* stage, VectorSteps* steps) {
  const Fusion& f = w.fusion();
  const RowDomain& s = p.rows;
  const int64_t dom = s.domain;
  const std::string& t = w.index_type();
  // body(domain index, element of the row) for every element of the row,
  // with the staged inputs read there pointed at shared memory.
  // Vector steps read each staged input's vector from shared memory whole
  // (lane-by-lane reads, 16 bytes apart across threads, conflict 4-way).
  // `after`: run after the lanes of a vector step, in its scope.
  // `second`: run for every lane again after `body` ran for all of them
  // (an online max's step first, its sum's after).
  using Body = std::function<void(const std::vector<std::string>&, const std::string&)>;
  auto each_element = [&](const Body& body, bool vector_steps, const std::function<void()>& after = {},
                          const Body& second = {}) {
    std::map<int64_t, std::string> stage_vectors;  // staged input -> its vector at j (vector steps)
    auto point_stage = [&](const std::vector<std::string>& idx, const std::string& j) {
      w.tile_reads.clear();
      if (stage != nullptr)
        for (const auto& [in, row] : stage->rows) {
          const DType t = f.value(in).dtype;
          w.tile_reads[in] = {input_index(p.vectors.inputs.at(in), idx),
                              stage_vectors.empty() ? load_form(t, row + "[" + stage_at(w, j) + "]")
                                                    : vector_lane_form(t, stage_vectors[in], w.lane)};
        }
    };
    if (steps == nullptr || !vector_steps) {
      if (w.part_begin.empty()) w.open("for (" + t + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)");
      else w.open("for (" + t + " j = " + w.part_begin + " + threadIdx.x; j < " + w.part_end + "; j += blockDim.x)");
      const std::vector<std::string> idx = full_index(w, red, unravel(w, dom, red, "j", "", stage != nullptr));
      // (the Edges kernel's stage holds element j at its shift)
      point_stage(idx, steps != nullptr && steps->edges != nullptr ? "(j + " + steps->edges->shift + ")" : "j");
      body(idx, "j");
      if (second) second(idx, "j");
      w.close();
      return;
    }
    const int V = p.vectors.width;
    const size_t last = w.rank(dom) - 1;
    const RowEdges* edges = steps->edges;
    // Where element j of the row sits in its stage.
    const std::string at = edges != nullptr ? "(j + " + edges->shift + ")" : stage_at(w, "j");
    open_vector_steps(w, V, row_len, edges);
    const std::vector<std::string> base = full_index(w, red, unravel(w, dom, red, "j", "", true));
    const KernelWriter::Section loads = w.reserve();
    if (stage != nullptr)
      for (const auto& [in, row] : stage->rows) {
        const std::string vt = vector_type(w, in, V);
        stage_vectors[in] = w.fresh("sv");
        w.line("[[maybe_unused]] const " + vt + " " + stage_vectors[in] + " = *(const " + vt + "*)(" + row + " + " + at + ");");
      }
    const int group = steps->next++;
    w.group = group;
    w.section = group;
    w.lane_base = base;
    for (const Body* b : {&body, &second}) {
      if (!*b) continue;
      for (int lane = 0; lane < V; ++lane) {
        std::vector<std::string> idx = base;
        const std::string j = lane == 0 ? "j" : "(j + " + std::to_string(lane) + ")";
        if (lane > 0) idx[last] = "(" + base[last] + " + " + std::to_string(lane) + ")";
        w.lane = lane;
        w.lane_index = idx;
        point_stage(idx, j);
        (*b)(idx, j);
      }
    }
    w.lane = -1;
    if (after) after();
    w.fill(loads, vector_loads(w, V, group, {}));
    w.close();
    if (edges == nullptr) return;
    stage_vectors.clear();  // the edges read their stage per element
    open_edge_steps(w, V, *edges);
    const std::vector<std::string> idx = full_index(w, red, unravel(w, dom, red, "j", "", stage != nullptr));
    point_stage(idx, at);
    body(idx, "j");
    if (second) second(idx, "j");
    w.close();
  };
  // With the row in shared memory a variance takes two passes (the row
  // sum, then squared deviations from the mean) as on the register path:
  // cheaper than Welford's division per element.
  const bool two_pass = stage != nullptr;
  for (const std::vector<int64_t>& phase : online_phases(s, p.online)) {
    std::vector<Accumulator> accs = declare_accs(w, phase, two_pass, p.online);
    auto input_of = [&](const Accumulator& a, const std::vector<std::string>& idx) {
      const int64_t in = a.expr->inputs[0];
      return convert(f.value(in).dtype, a.acc, w.value_at(in, idx));
    };
    // Online pairs, per step (a vector, or one element): the step's max
    // first, then the running sum rescaled to the new running max (one exp
    // per step, kf_online_rescale) and the step's exp(x - max) added.
    std::map<const Accumulator*, std::string> step_max;
    // Welford in vector steps: the step's lanes as a block (their mean and
    // squared deviations) merged once per step (kf_welford_add_block).
    std::map<const Accumulator*, std::vector<std::string>> lane_values;
    auto welford_blocks = [&] {
      for (auto& [a, xs] : lane_values) {
        const std::string at = reg_type(a->acc);
        const std::string n = "(" + at + ")" + std::to_string(xs.size());
        std::string sum = xs[0];
        for (size_t k = 1; k < xs.size(); ++k) sum += " + " + xs[k];
        const std::string mean = w.fresh("bm"), m2 = w.fresh("bq");
        w.line("const " + at + " " + mean + " = (" + sum + ") / " + n + ";");
        w.line(at + " " + m2 + " = 0;");
        for (const std::string& x : xs) w.line(m2 + " += (" + x + " - " + mean + ") * (" + x + " - " + mean + ");");
        w.line("kf_welford_add_block(" + a->name + ", " + n + ", " + mean + ", " + m2 + ");");
        xs.clear();
      }
    };
    each_element([&](const std::vector<std::string>& idx, const std::string&) {
      for (const Accumulator& a : accs) {
        if (a.online_max >= 0) continue;
        if (a.online_paired) {
          if (w.lane <= 0) {
            step_max[&a] = w.fresh("sm");
            w.line("float " + step_max[&a] + " = " + acc_init(*a.expr, a.acc) + ";");
          }
          w.line(acc_step(*a.expr, a.acc, step_max[&a], input_of(a, idx)));
        } else if (!a.sum.empty()) {
          w.line(a.sum + " += " + input_of(a, idx) + ";");
        } else if (is_welford(*a.expr) && w.lane >= 0) {
          const std::string x = w.fresh("wx");
          w.line("const " + std::string(reg_type(a.acc)) + " " + x + " = " + input_of(a, idx) + ";");
          lane_values[&a].push_back(x);
        } else {
          w.line(acc_step(*a.expr, a.acc, a.name, input_of(a, idx)));
        }
      }
    }, true, welford_blocks, [&](const std::vector<std::string>& idx, const std::string&) {
      for (const Accumulator& a : accs) {
        if (a.online_max < 0) continue;
        const Accumulator& m = accs[static_cast<size_t>(a.online_max)];
        if (w.lane <= 0) {
          const std::string mn = w.fresh("mn");
          w.line("const float " + mn + " = kf_max_acc(" + m.name + ", " + step_max[&m] + ");");
          w.line(a.name + " = kf_online_rescale(" + a.name + ", " + m.name + ", " + mn + ");");
          w.line(m.name + " = " + mn + ";");
        }
        online_sum_step(w, a, m, [&] { return input_of(a, idx); });
      }
    });
    end_online_sums(w, accs);
    bool second = false;
    for (const Accumulator& a : accs) {
      if (a.sum.empty()) continue;
      second = true;
      w.line(a.sum + " = " + row_len + " > 0 ? " + w.row_reduce + "(" + a.sum + ", kf_sum_op()) / (" + reg_type(a.acc) +
             ")" + row_len + " : 0;");
    }
    if (second)
      each_element([&](const std::vector<std::string>& idx, const std::string&) {
        for (const Accumulator& a : accs) {
          if (a.sum.empty()) continue;
          const std::string d = w.fresh("wd");
          w.line("const " + std::string(reg_type(a.acc)) + " " + d + " = " + input_of(a, idx) + " - " + a.sum + ";");
          w.line(a.name + " += " + d + " * " + d + ";");
        }
      }, true);
    reduce_block(w, accs, row_len);
  }
  if (!s.domain_outputs.empty() || outer.active()) {
    // Partial rows are read and written one element per thread step: as
    // vectors of lanes their accesses would conflict in shared memory (and
    // the partials' initialization and copy use the same mapping).
    // In vector steps the plan's vector outputs are stored 16 bytes at once.
    const bool smem = stage != nullptr && !stage->partials.empty();
    const VectorPlan& vp = p.vectors;
    std::vector<std::string> ov;
    std::vector<std::string> base;
    each_element([&](const std::vector<std::string>& idx, const std::string& j) {
      if (w.lane == 0) base = idx;
      if (w.lane == 0 && ov.empty())
        for (int64_t o : vp.outputs) {
          ov.push_back(w.fresh("ov"));
          w.line(vector_type(w, o, vp.width) + " " + ov.back() + ";");
        }
      for (int64_t o : s.domain_outputs) {
        const std::string reg = w.value_at(o, idx);
        auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
        if (w.lane < 0 || it == vp.outputs.end())
          w.store(o, idx, reg);
        else
          w.line(ov[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(w.lane) + "] = " +
                 w.stored(f.value(o).dtype, reg) + ";");
      }
      outer_step(w, outer, idx, [&](size_t a) { return (smem ? stage->partials[a] : outer.partials[a]) + "[" + j + "]"; });
    }, !outer.active(), [&] {
      for (size_t q = 0; q < ov.size(); ++q) {
        const int64_t o = vp.outputs[q];
        w.line("*(" + vector_type(w, o, vp.width) + "*)(" + w.address(o, base) + ") = " + ov[q] + ";");
      }
    });
  }
  w.tile_reads.clear();
}

// Declares the staged path's shared-memory rows (kernel level) and returns
// its run-time condition: the vector conditions of the staged inputs and
// enough dynamic shared memory for this row (the launch sizes it per call,
// LaunchRule::row_stage_bytes).
// Declares the staged path's shared-memory rows (kernel level) and returns
// its run-time condition: the vector conditions of the staged inputs and
// enough dynamic shared memory for this row (the launch sizes it per call,
// LaunchRule::row_stage_bytes, with row_stage_pad elements for each row's
// rounding up to 16 bytes). With `ref` (the Edges kernel) a row sits
// at its shift: each takes the row rounded up to whole vectors, plus one.
std::string declare_stage(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                          const std::string& row_len, const VectorRef* ref, Stage* stage, std::vector<std::string>* lines) {
  const Fusion& f = w.fusion();
  const int64_t dom = p.rows.domain;
  const int V = p.vectors.width;
  std::vector<std::string> conds;
  std::string row = w.part_most.empty() ? row_len : w.part_most;
  if (ref == nullptr)
    conds.push_back(w.extent(dom, w.rank(dom) - 1) + " % " + std::to_string(V) + " == 0");
  else
    row = w.hoist("long long", "srow", "(" + row_len + " + " + std::to_string(2 * V - 2) + ") / " + std::to_string(V) + " * " + std::to_string(V));
  lines->push_back("extern __shared__ __align__(16) unsigned char kf_stage[];");
  std::string at = "0";
  auto place = [&](const std::string& type, const std::string& prefix) {
    const std::string name = w.fresh(prefix);
    lines->push_back(type + "* const " + name + " = (" + type + "*)(kf_stage + " + at + ");");
    // Each row a multiple of 16 bytes, so that the next one's vectors are
    // aligned (a row of a 1-byte mask is a multiple of 8 bytes only).
    at = "(" + at + " + ((unsigned long long)" + row + " * sizeof(" + type + ") + 15) / 16 * 16)";
    return name;
  };
  for (int64_t in : p.staged) {
    stage->rows[in] = place(storage_type(f.value(in).dtype), "st");
    vector_conditions(w, sets, in, dom, V, p.vectors.dim, &conds, nullptr, nullptr, ref);
  }
  if (p.stage_outer)
    for (size_t a = 0; a < outer.exprs.size(); ++a) stage->partials.push_back(place(reg_type(outer.types[a]), "spart"));
  conds.push_back(at + " <= (unsigned long long)kf_dynamic_smem()");
  return all_of(conds);
}

// Copies the row's staged inputs into shared memory, 16 bytes per load
// (with `edges`, the row's aligned vectors so, its head and tail per
// element, each element at its shift).
void fill_stage(KernelWriter& w, const RowParams& p, const Stage& stage, const std::vector<size_t>& red,
                const std::string& row_len, const RowEdges* edges) {
  const int V = p.vectors.width;
  const std::string at = edges != nullptr ? "(j + " + edges->shift + ")" : stage_at(w, "j");
  w.line("__syncthreads();  // the previous row's reads of the stage are done");
  open_vector_steps(w, V, row_len, edges);
  std::vector<std::string> idx = full_index(w, red, unravel(w, p.rows.domain, red, "j"));
  // The cluster row kernel copies without registers (cp.async): every
  // vector of its part in flight at once, few instructions per vector.
  const bool async = !w.part_begin.empty() && edges == nullptr;
  for (const auto& [in, row] : stage.rows) {
    const std::string vt = vector_type(w, in, V);
    const std::string from = w.address(in, input_index(p.vectors.inputs.at(in), idx));
    if (async) w.line("kf_copy_async16(" + row + " + " + at + ", " + from + ");");
    else w.line("*(" + vt + "*)(" + row + " + " + at + ") = *(const " + vt + "*)(" + from + ");");
  }
  w.close();
  if (async) w.line("kf_copy_async_wait();");
  if (edges != nullptr) {
    open_edge_steps(w, V, *edges);
    idx = full_index(w, red, unravel(w, p.rows.domain, red, "j"));
    for (const auto& [in, row] : stage.rows)
      w.line(row + "[" + at + "] = *(" + w.address(in, input_index(p.vectors.inputs.at(in), idx)) + ");");
    w.close();
  }
  w.line("__syncthreads();");
}

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

// The row held in registers: each thread loads K vectors of V elements
// (vector k at element (k * blockDim.x + threadIdx.x) * V of the row) once,
// then every phase and the output pass read the registers. Inputs first
// needed in a later phase (layernorm's weight and bias) are loaded there:
// load section p holds the loads first needed in phase p, section
// phases + 1 + k those of output vector k. Returns the run-time condition
// under which this path applies.
// The row's elements held in registers; returns the run-time condition of
// this path ("" with w.paths == Vector: the host checks it, from `checks`).
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
    base[static_cast<size_t>(k)] = full_index(w, red, unravel(w, dom, red, b, "_" + std::to_string(k)));
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
  for (const auto& [sec, place] : loads) w.fill(place, vector_loads(w, V, sec, ok));
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

// emit_row with the plan of the kernel `which` (the Edges kernel's own).
void emit_row_kernel(KernelWriter& w, const Task& task, const RowParams& p, RowKernel which, std::vector<ArgCheck>* checks) {
  const RowDomain& s = p.rows;
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < r; ++d) (s.reduced[d] ? red : kept).push_back(d);
  const std::string rows = extent_product(w, dom, kept, "1");
  const std::string row_len = extent_product(w, dom, red, "1");
  const bool edges = which == RowKernel::Edges || which == RowKernel::LongEdges;
  const bool cluster = which == RowKernel::Cluster;
  const bool long_rows = which == RowKernel::LongRows || which == RowKernel::LongEdges || cluster;
  if (cluster && (p.has_outer() || p.vectors.width == 0))
    fail(KF_ERR_INTERNAL, "the cluster row kernel takes rows with a vector plan and no outer reductions");
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
  if (cluster)  // (the grid is a multiple of the cluster)
    w.open("for (long long row = blockIdx.x / kf_cn; row < " + rows + "; row += gridDim.x / kf_cn)");
  else
    w.open("for (long long row = blockIdx.x; row < " + rows + "; row += gridDim.x)");
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
  } else if (long_rows) {
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
    if (!edges) conds.push_back(w.extent(dom, r - 1) + " % " + std::to_string(p.vectors.width) + " == 0");
    std::vector<ArgCheck>* host = edges ? checks : nullptr;
    const VectorRef* shifted = edges ? &ref : nullptr;
    std::vector<std::pair<int64_t, std::vector<int>>> seen;
    for (const auto& [key, reg] : w.vector_regs)
      if (reg.ok_group >= kStreamGroups &&
          std::find(seen.begin(), seen.end(), std::make_pair(key.first, reg.dims)) == seen.end()) {
        seen.emplace_back(key.first, reg.dims);
        vector_conditions(w, sets, key.first, dom, p.vectors.width, p.vectors.dim, &conds, &reg.dims, host, shifted);
      }
    if (edges)  // the staged inputs: read from global memory only as they are staged
      for (int64_t in : p.staged)
        vector_conditions(w, sets, in, dom, p.vectors.width, p.vectors.dim, nullptr, nullptr, host, shifted);
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
    w.open(cluster ? "if (threadIdx.x == 0 && kf_cr == 0)" : "if (threadIdx.x == 0)");
    store_row_outputs(w, s, kept);
    w.close();
  }
  w.close();
  w.part_begin.clear();
  w.part_end.clear();
  w.part_most.clear();
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
  if (!has_edge_kernel(p)) fail(KF_ERR_INTERNAL, "a row plan without edge vectors has no Edges kernels");
  if (which == RowKernel::Edges && w.paths != KernelWriter::Paths::Vector)
    fail(KF_ERR_INTERNAL, "the Edges kernel is the register path alone");
  RowParams e = p;
  e.vectors = p.edge_vectors;
  std::erase_if(e.staged, [&](int64_t in) { return !e.vectors.inputs.contains(in); });
  emit_row_kernel(w, task, e, which, checks);
}

bool has_long_row_kernel(const RowParams& p) { return p.vectors.width > 0; }

bool has_edge_kernel(const RowParams& p) { return p.edge_vectors.width > 0; }

bool has_cluster_kernel(const RowParams& p) {
  return p.cluster_max > 1 && p.vectors.width > 0 && !p.staged.empty() && !p.has_outer() && !p.stream_rows;
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
  return has_edge_kernel(p) ? outer_accumulator_bytes(f, p) : 0;
}

int row_stage_bytes(const Fusion& f, const RowParams& p) {
  if (p.vectors.width == 0) return 0;
  int bytes = 0;
  for (int64_t in : p.staged) bytes += dtype_size(f.value(in).dtype);
  if (p.stage_outer && !p.staged.empty()) bytes += outer_accumulator_bytes(f, p);
  return p.staged.empty() ? 0 : bytes;
}

}  // namespace kf
