// Row kernels: a row re-read from memory in every phase, or for its staged
// inputs from shared memory (RowParams::staged), and the staged path's
// shared-memory rows (row_parts.h).
#include <algorithm>

#include "core/codegen/op_cuda.h"
#include "core/codegen/row_parts.h"
#include "core/schedule/online_softmax.h"
#include "core/util/error.h"

namespace kf::row_emit {

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
    const size_t last = p.vectors.dim;  // (the lanes' dim: innermost in memory, last in `red`)
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
    w.fill(loads, vector_loads(w, V, group, {}, edges != nullptr ? std::to_string(V) : std::string()));
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
    // (A short-row group past the last row computed the last row again: it
    // stores nothing, as that row may already be rewritten in place. The
    // across kernel's groups all reach its barriers: they guard each store
    // and fill their tiles' rows whatever they hold.)
    const bool across = !w.across_tiles.empty();
    if (!w.row_live.empty() && !across) w.open("if (" + w.row_live + ")");
    const std::string guard = across ? "if (" + w.row_live + ") " : "";
    const int tile_v = std::max(p.vectors.width, 1);
    const std::string chunk = std::to_string(kAcrossChunk), tile_row = std::to_string(kAcrossChunk + kAcrossPad),
                      per_lane = std::to_string(kAcrossChunk / tile_v), V_text = std::to_string(tile_v);
    if (across) {  // the chunks from the row's end: its last-read part may still be in L2
      w.open("for (long long kf_cn = ((long long)(" + row_len + ") + " + chunk + " - 1) / " + chunk + " - 1; kf_cn >= 0; --kf_cn)");
      w.line("const " + t + " kf_cb = (" + t + ")(kf_cn * " + chunk + ");");
      w.line("const " + t + " kf_ce = (" + t + ")min((long long)(" + row_len + "), kf_cn * " + chunk + " + " + chunk + ");");
      w.part_begin = "kf_cb";
      w.part_end = "kf_ce";
    }
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
        if (auto tile = w.across_tiles.find(o); tile != w.across_tiles.end()) {
          const std::string col = "(" + j + " - kf_cb)";
          w.line(tile->second + "[threadIdx.y * " + tile_row + " + " + col + " % " + V_text + " * " + per_lane + " + " + col +
                 " / " + V_text + "] = " + w.stored(f.value(o).dtype, reg) + ";");
          continue;
        }
        auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
        if (w.lane < 0 || it == vp.outputs.end())
          w.line(guard + w.element(o, idx) + " = " + w.stored(f.value(o).dtype, reg) + ";");
        else
          w.line(ov[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(w.lane) + "] = " +
                 w.stored(f.value(o).dtype, reg) + ";");
      }
      outer_step(w, outer, idx, [&](size_t a) { return (smem ? stage->partials[a] : outer.partials[a]) + "[" + j + "]"; });
    }, !outer.active(), [&] {
      for (size_t q = 0; q < ov.size(); ++q) {
        const int64_t o = vp.outputs[q];
        w.line(guard + "*(" + vector_type(w, o, vp.width) + "*)(" + w.address(o, base) + ") = " + ov[q] + ";");
      }
    });
    if (across) {  // the chunk's tiles, stored along the outputs' fast dim (the rows)
      w.part_begin.clear();
      w.part_end.clear();
      const std::string R = std::to_string(p.across_rows);
      const std::vector<size_t> kept = s.dims_in_order(false);
      w.line("__syncthreads();  // the chunk's tiles are written");
      w.open("for (int kf_e = threadIdx.y * 32 + threadIdx.x; kf_e < " + R + " * " + chunk + "; kf_e += " + R + " * 32)");
      w.line("const int kf_tc = kf_e / " + R + ", kf_tr = kf_e % " + R + ";");
      w.line("const " + t + " kf_j = kf_cb + (" + t + ")(kf_tc % " + per_lane + " * " + V_text + " + kf_tc / " + per_lane + ");");
      w.line("const long long kf_row = kf_rb + kf_tr;");
      w.open("if (kf_row < " + extent_product(w, dom, kept, "1") + " && kf_j < kf_ce)");
      std::vector<std::string> idx(s.reduced.size(), "0");
      const std::vector<std::string> kept_idx = unravel(w, dom, kept, "kf_row", "x", true);
      const std::vector<std::string> red_idx = unravel(w, dom, red, "kf_j", "x", true);
      for (size_t k = 0; k < kept.size(); ++k) idx[kept[k]] = kept_idx[k];
      for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = red_idx[k];
      for (const auto& [o, tile] : w.across_tiles)
        w.line(w.element(o, idx) + " = " + tile + "[kf_tr * " + tile_row + " + kf_tc];");
      w.close();
      w.close();
      w.line("__syncthreads();  // the tiles are read");
      w.close();
    }
    if (!w.row_live.empty() && !across) w.close();
  }
  w.tile_reads.clear();
}

std::string declare_stage(KernelWriter& w, const RowParams& p, const OuterAccs& outer, const ExtentSets& sets,
                          const std::string& row_len, const VectorRef* ref, Stage* stage, std::vector<std::string>* lines) {
  const Fusion& f = w.fusion();
  const int64_t dom = p.rows.domain;
  const int V = p.vectors.width;
  std::vector<std::string> conds;
  std::string row = w.part_most.empty() ? row_len : w.part_most;
  if (ref == nullptr)
    conds.push_back(w.extent(dom, p.vectors.dim) + " % " + std::to_string(V) + " == 0");
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

void fill_stage(KernelWriter& w, const RowParams& p, const Stage& stage, const std::vector<size_t>& red,
                const std::string& row_len, const RowEdges* edges) {
  const int V = p.vectors.width;
  const std::string at = edges != nullptr ? "(j + " + edges->shift + ")" : stage_at(w, "j");
  w.line("__syncthreads();  // the previous row's reads of the stage are done");
  open_vector_steps(w, V, row_len, edges);
  std::vector<std::string> idx = full_index(w, red, unravel(w, p.rows.domain, red, "j"));
  // The cluster row kernel copies without registers (cp.async): every
  // vector of its part in flight at once, few instructions per vector. A
  // vector is V elements of the input's own dtype: 16 bytes where that
  // dtype is the narrowest, fewer where a narrower one set V (a bf16 input
  // of a float32 output: 8), and cp.async cannot copy 1 or 2 bytes.
  const bool cluster = !w.part_begin.empty() && edges == nullptr;
  bool waits = false;
  for (const auto& [in, row] : stage.rows) {
    const std::string vt = vector_type(w, in, V);
    const std::string from = w.address(in, input_index(p.vectors.inputs.at(in), idx));
    const int bytes = V * dtype_size(w.fusion().value(in).dtype);
    if (cluster && (bytes == 4 || bytes == 8 || bytes == 16)) {
      w.line("kf_copy_async<" + std::to_string(bytes) + ">(" + row + " + " + at + ", " + from + ");");
      waits = true;
    } else if (edges != nullptr) {  // at the input's own shift (the stage's is the reference's)
      w.line("*(" + vt + "*)(" + row + " + " + at + ") = " + vector_load_any(w, in, vt, from, std::to_string(V)) + ";");
    } else {
      w.line("*(" + vt + "*)(" + row + " + " + at + ") = *(const " + vt + "*)(" + from + ");");
    }
  }
  w.close();
  if (waits) w.line("kf_copy_async_wait();");
  if (edges != nullptr) {
    open_edge_steps(w, V, *edges);
    idx = full_index(w, red, unravel(w, p.rows.domain, red, "j"));
    for (const auto& [in, row] : stage.rows)
      w.line(row + "[" + at + "] = *(" + w.address(in, input_index(p.vectors.inputs.at(in), idx)) + ");");
    w.close();
  }
  w.line("__syncthreads();");
}

}  // namespace kf::row_emit
