// generate_kernel: RowSchedule -> one CUDA kernel. The pointwise scheduler
// writes grid-stride loops over its output domains (with a 16-byte vector
// variant chosen at run time); the reduction and normalization schedulers
// write one block per row: phases of thread-strided accumulation and block
// reductions, then a pass writing the domain-shaped outputs and one thread
// writing the row-shaped ones. docs/codegen.md describes the kernels.
#include <algorithm>
#include <cstdio>

#include "core/codegen/kernel_plan.h"
#include "core/codegen/kernel_writer.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/prelude.h"
#include "core/schedule/extent_sets.h"
#include "core/schedule/row_schedule.h"
#include "core/util/error.h"

namespace kf {

namespace {

constexpr int kBlock = 256;
constexpr int kVectorBytes = 16;

// Unravels `linear` over `dims` of `dom` (outermost first) into locals
// i<d>; returns one index expression per listed dim ("0" for size-1 dims).
std::vector<std::string> unravel(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims,
                                 const std::string& linear) {
  std::vector<std::string> names(dims.size(), "0");
  std::vector<size_t> many;
  for (size_t k = 0; k < dims.size(); ++k)
    if (w.size_class(dom, dims[k]) == SizeClass::Many) many.push_back(k);
  if (many.empty()) return names;
  const std::string& t = w.index_type();
  if (many.size() == 1) {
    names[many[0]] = "i" + std::to_string(dims[many[0]]);
    w.line("const " + t + " " + names[many[0]] + " = (" + t + ")(" + linear + ");");
    return names;
  }
  const std::string rem = w.fresh("rem");
  w.line(t + " " + rem + " = (" + t + ")(" + linear + ");");
  for (size_t m = many.size(); m-- > 0;) {
    const size_t k = many[m];
    names[k] = "i" + std::to_string(dims[k]);
    if (m == 0) {
      w.line("const " + t + " " + names[k] + " = " + rem + ";");
    } else {
      const std::string e = w.extent(dom, dims[k]);
      w.line("const " + t + " " + names[k] + " = " + rem + " % " + e + ";");
      w.line(rem + " /= " + e + ";");
    }
  }
  return names;
}

std::vector<size_t> all_dims(size_t r) {
  std::vector<size_t> d(r);
  for (size_t i = 0; i < r; ++i) d[i] = i;
  return d;
}

const char* kGridStride = "(long long)gridDim.x * blockDim.x";
const char* kThread = "(long long)blockIdx.x * blockDim.x + threadIdx.x";

// ---- pointwise ----

struct VectorPlan {
  int width = 0;  // elements per lane group; 0: no vector loop
  std::vector<int64_t> outputs;
};

bool same_classes(const KernelWriter& w, int64_t a, int64_t b) {
  return w.concrete().size_classes[static_cast<size_t>(a)] == w.concrete().size_classes[static_cast<size_t>(b)];
}

// Inputs and outputs that can move as whole vectors: the domain's sizes,
// last dim innermost in memory (checked again at run time, with alignment).
VectorPlan plan_vectors(KernelWriter& w, const Task& task, const std::vector<int64_t>& outs, int64_t dom) {
  VectorPlan p;
  const ConcreteFusion& c = w.concrete();
  const Fusion& f = w.fusion();
  const size_t r = w.rank(dom);
  if (r == 0 || w.size_class(dom, r - 1) != SizeClass::Many) return p;
  int widest = 1;
  auto innermost_last = [&](const std::vector<int>& order) { return !order.empty() && order.back() == static_cast<int>(r - 1); };
  for (int64_t v : task.inputs) {
    const Value& val = f.value(v);
    if (val.is_scalar || w.rank(v) != r || !same_classes(w, v, dom)) continue;
    if (val.kind == ValueKind::TensorInput) {
      const InputLayout& l = c.input_layouts[static_cast<size_t>(val.input_index)];
      if (!innermost_last(l.stride_order) || l.alignment < kVectorBytes / 2) continue;
    } else if (!innermost_last(c.stride_orders[static_cast<size_t>(v)])) {
      continue;
    }
    w.vector_inputs.push_back(v);
    widest = std::max(widest, dtype_size(val.dtype));
  }
  for (int64_t o : outs) {
    if (!same_classes(w, o, dom) || !innermost_last(c.stride_orders[static_cast<size_t>(o)])) continue;
    p.outputs.push_back(o);
    widest = std::max(widest, dtype_size(f.value(o).dtype));
  }
  if (w.vector_inputs.empty() && p.outputs.empty()) return p;
  p.width = kVectorBytes / widest;
  return p;
}

// Run-time conditions for moving `v` as vectors of `width` elements.
void vector_conditions(KernelWriter& w, const ExtentSets& sets, int64_t v, int64_t dom, int width,
                       std::vector<std::string>* conds) {
  const size_t r = w.rank(v);
  const int bytes = width * dtype_size(w.fusion().value(v).dtype);
  conds->push_back("((unsigned long long)" + w.pointer(v) + " % " + std::to_string(bytes) + " == 0)");
  conds->push_back(w.stride(v, r - 1) + " == 1");
  for (size_t d = 0; d + 1 < r; ++d)
    if (w.size_class(v, d) == SizeClass::Many)
      conds->push_back(w.stride(v, d) + " % " + std::to_string(width) + " == 0");
  for (size_t d = 0; d < r; ++d)
    if (!sets.same(v, static_cast<int>(d), dom, static_cast<int>(d)))
      conds->push_back(w.extent(v, d) + " == " + w.extent(dom, d));
}

void pointwise_loop(KernelWriter& w, const ExtentSets& sets, const Task& task,
                    const std::vector<int64_t>& outs, int* width_out) {
  const int64_t dom = outs[0];
  const size_t r = w.rank(dom);
  const std::string n = w.numel(dom);
  const std::vector<size_t> dims = all_dims(r);
  w.vector_inputs.clear();
  w.vector_regs.clear();
  VectorPlan vp = plan_vectors(w, task, outs, dom);
  *width_out = std::max(*width_out, vp.width);
  if (vp.width > 0) {
    const std::string tag = w.fresh("");
    const int V = vp.width;
    w.open("if (KFVECCOND" + tag + ")");
    w.open("for (long long q = " + std::string(kThread) + "; q < " + n + " / " + std::to_string(V) +
           "; q += " + kGridStride + ")");
    std::vector<std::string> idx = unravel(w, dom, dims, "q * " + std::to_string(V));
    w.line("KFVECLOADS" + tag);
    std::vector<std::string> ov;
    for (int64_t o : vp.outputs) {
      ov.push_back(w.fresh("ov"));
      w.line("kf_vec<" + std::string(storage_type(w.fusion().value(o).dtype)) + ", " + std::to_string(V) + "> " + ov.back() + ";");
    }
    for (int lane = 0; lane < V; ++lane) {
      w.lane = lane;
      w.lane_index = idx;
      if (lane > 0) w.lane_index[r - 1] = "(" + idx[r - 1] + " + " + std::to_string(lane) + ")";
      for (int64_t o : outs) {
        const std::string reg = w.value_at(o, w.lane_index);
        auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
        if (it == vp.outputs.end()) {
          w.store(o, w.lane_index, reg);
        } else {
          const DType dt = w.fusion().value(o).dtype;
          w.line(ov[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(lane) + "] = " + store_form(dt, reg) + ";");
        }
      }
    }
    w.lane = -1;
    for (size_t k = 0; k < vp.outputs.size(); ++k) {
      const int64_t o = vp.outputs[k];
      const std::string vt = "kf_vec<" + std::string(storage_type(w.fusion().value(o).dtype)) + ", " + std::to_string(V) + ">";
      w.line("*(" + vt + "*)(" + w.pointer(o) + " + " + w.offset(o, idx) + ") = " + ov[k] + ";");
    }
    std::vector<std::string> conds = {w.extent(dom, r - 1) + " % " + std::to_string(V) + " == 0"};
    std::string loads;
    for (const auto& [v, reg] : w.vector_regs) {
      const std::string vt = "kf_vec<" + std::string(storage_type(w.fusion().value(v).dtype)) + ", " + std::to_string(V) + ">";
      if (!loads.empty()) loads += "\n" + std::string(6, ' ');
      loads += "const " + vt + " " + reg + " = *(const " + vt + "*)(" + w.pointer(v) + " + " + w.offset(v, idx) + ");";
      vector_conditions(w, sets, v, dom, V, &conds);
    }
    for (int64_t o : vp.outputs) vector_conditions(w, sets, o, dom, V, &conds);
    w.replace("KFVECLOADS" + tag, loads.empty() ? "// no vector loads" : loads);
    std::string cond;
    for (const std::string& c : conds) cond += (cond.empty() ? "" : " && ") + c;
    w.replace("KFVECCOND" + tag, cond);
    w.close();
    w.close_open("else");
  } else {
    w.open("");
  }
  w.open("for (long long q = " + std::string(kThread) + "; q < " + n + "; q += " + kGridStride + ")");
  std::vector<std::string> idx = unravel(w, dom, dims, "q");
  for (int64_t o : outs) w.store(o, idx, w.value_at(o, idx));
  w.close();
  w.close();
}

// ---- reductions ----

DType accumulator_dtype(DType in) {
  if (in == DType::F64) return DType::F64;
  if (is_float(in)) return DType::F32;
  return DType::I64;
}

struct Accumulator {
  std::string name;
  DType acc;
  const Expr* expr;
};

void row_kernel(KernelWriter& w, const RowSchedule& s) {
  const Fusion& f = w.fusion();
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < r; ++d) (s.reduced[d] ? red : kept).push_back(d);
  auto product = [&](const std::vector<size_t>& dims) {
    std::string p;
    for (size_t d : dims) {
      const std::string e = w.extent(dom, d);
      if (e == "1") continue;
      p = p.empty() ? "(long long)" + e : p + " * " + e;
    }
    return p.empty() ? std::string("1") : w.hoist("long long", "n", p);
  };
  const std::string rows = product(kept);
  const std::string row_len = product(red);
  const std::string& t = w.index_type();
  w.reduced = s.reduced;
  w.open("for (long long row = blockIdx.x; row < " + rows + "; row += gridDim.x)");
  std::vector<std::string> kept_idx = unravel(w, dom, kept, "row");
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kept_idx[k];

  auto full_index = [&](const std::vector<std::string>& red_idx) {
    std::vector<std::string> idx = w.row_index;
    for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = red_idx[k];
    return idx;
  };
  const std::string row_loop = "for (" + t + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)";

  for (const std::vector<int64_t>& phase : s.phases) {
    std::vector<Accumulator> accs;
    for (int64_t ei : phase) {
      const Expr& e = f.exprs[static_cast<size_t>(ei)];
      Accumulator a{w.fresh("acc"), accumulator_dtype(f.value(e.inputs[0]).dtype), &e};
      const std::string at = reg_type(a.acc);
      const bool flt = is_float(a.acc);
      std::string init;
      switch (e.op) {
        case Op::PROD: init = flt ? "1" : "1LL"; break;
        case Op::MAX:
          init = a.acc == DType::F64 ? "-__longlong_as_double(0x7ff0000000000000LL)"
                 : flt              ? "-__int_as_float(0x7f800000)"
                                    : "(-9223372036854775807LL - 1)";
          break;
        case Op::MIN:
          init = a.acc == DType::F64 ? "__longlong_as_double(0x7ff0000000000000LL)"
                 : flt              ? "__int_as_float(0x7f800000)"
                                    : "9223372036854775807LL";
          break;
        default: init = "0"; break;
      }
      if (e.op == Op::VAR || e.op == Op::VAR_MEAN)
        w.line("kf_welford<" + at + "> " + a.name + " = {0, 0, 0};");
      else
        w.line(at + " " + a.name + " = " + init + ";");
      accs.push_back(a);
    }
    w.open(row_loop);
    const std::vector<std::string> idx = full_index(unravel(w, dom, red, "j"));
    for (const Accumulator& a : accs) {
      const int64_t in = a.expr->inputs[0];
      const std::string x = convert(f.value(in).dtype, a.acc, w.value_at(in, idx));
      const bool flt = is_float(a.acc);
      switch (a.expr->op) {
        case Op::SUM:
        case Op::MEAN: w.line(flt ? a.name + " += " + x + ";" : a.name + " = kf_add(" + a.name + ", " + x + ");"); break;
        case Op::PROD: w.line(flt ? a.name + " *= " + x + ";" : a.name + " = kf_mul(" + a.name + ", " + x + ");"); break;
        case Op::MAX: w.line(a.name + " = kf_max_acc(" + a.name + ", " + x + ");"); break;
        case Op::MIN: w.line(a.name + " = kf_min_acc(" + a.name + ", " + x + ");"); break;
        default: w.line("kf_welford_add(" + a.name + ", " + x + ");"); break;
      }
    }
    w.close();
    for (const Accumulator& a : accs) {
      const Expr& e = *a.expr;
      const bool flt = is_float(a.acc);
      const std::string at = reg_type(a.acc);
      std::string op;
      switch (e.op) {
        case Op::SUM:
        case Op::MEAN: op = flt ? "kf_sum_op()" : "kf_isum_op()"; break;
        case Op::PROD: op = flt ? "kf_prod_op()" : "kf_iprod_op()"; break;
        case Op::MAX: op = "kf_max_op()"; break;
        case Op::MIN: op = "kf_min_op()"; break;
        default: op = "kf_welford_op()"; break;
      }
      const std::string red_reg = w.fresh("red");
      const std::string red_type = (e.op == Op::VAR || e.op == Op::VAR_MEAN) ? "kf_welford<" + at + ">" : at;
      w.line("const " + red_type + " " + red_reg + " = kf_block_reduce(" + a.name + ", " + op + ");");
      auto finish = [&](int64_t out, const std::string& expr) {
        const DType ot = f.value(out).dtype;
        const std::string reg = w.fresh("r");
        w.line("const " + std::string(reg_type(ot)) + " " + reg + " = " + convert(a.acc, ot, expr) + ";");
        w.row_results[out] = reg;
      };
      const std::string n = "(" + at + ")" + row_len;
      switch (e.op) {
        case Op::MEAN: finish(e.outputs[0], "(" + red_reg + " / " + n + ")"); break;
        case Op::VAR:
        case Op::VAR_MEAN: {
          const std::string corr = std::to_string(e.attrs[1]);
          finish(e.outputs[0], "(" + red_reg + ".m2 / (" + at + ")(" + row_len + " > " + corr + " ? " + row_len + " - " + corr + " : 0))");
          if (e.op == Op::VAR_MEAN)
            finish(e.outputs[1], "(" + row_len + " == 0 ? " + literal_f64(a.acc, __builtin_nan("")) + " : " + red_reg + ".mean)");
          break;
        }
        default: finish(e.outputs[0], red_reg); break;
      }
    }
  }

  if (!s.domain_outputs.empty()) {
    w.open(row_loop);
    const std::vector<std::string> idx = full_index(unravel(w, dom, red, "j"));
    for (int64_t o : s.domain_outputs) w.store(o, idx, w.value_at(o, idx));
    w.close();
  }
  if (!s.row_outputs.empty()) {
    w.open("if (threadIdx.x == 0)");
    for (int64_t o : s.row_outputs) {
      std::vector<std::string> idx;
      if (w.rank(o) == r) {
        for (size_t d = 0; d < r; ++d) idx.push_back(s.reduced[d] ? "0" : w.row_index[d]);
      } else {
        for (size_t d : kept) idx.push_back(w.row_index[d]);
      }
      w.store(o, idx, w.value_at(o, idx));
    }
    w.close();
  }
  w.close();
}

std::string hex64(uint64_t h) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

KernelPlan generate_kernel(const ConcreteFusion& c, const Task& task) {
  RowSchedule s;
  std::string why;
  if (!schedule_row(c, task, &s, &why)) fail(KF_ERR_UNSUPPORTED, why);
  KernelWriter w(c, task);
  KernelPlan plan;
  plan.scheduler = s.kind;
  plan.launch.block = s.block;
  int width = 0;
  if (s.kind == SchedulerKind::Pointwise) {
    const ExtentSets sets(c);
    for (const auto& loop : s.loops) pointwise_loop(w, sets, task, loop, &width);
    plan.launch.kind = LaunchRule::Kind::Elementwise;
    plan.launch.domain_value = s.loops[0][0];
    plan.launch.items_per_thread = std::max(width, 1);
  } else {
    row_kernel(w, s);
    plan.launch.kind = LaunchRule::Kind::PerRow;
    plan.launch.domain_value = s.domain;
    plan.launch.reduced_dims = s.reduced;
  }
  plan.args = w.args();
  const size_t slots = std::max<size_t>(plan.args.size(), 1);
  std::string kernel = "struct KfArgs { long long a[" + std::to_string(slots) + "]; };\n" +
                       "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(s.block) +
                       ") KFNAME(const KfArgs args) {\n" + w.preamble() + w.body() + "}\n";
  plan.name = "kf_" + hex64(fnv1a(kernel));
  kernel.replace(kernel.find("KFNAME"), 6, plan.name);
  plan.source = std::string(cuda_prelude()) + kernel;
  plan.params = std::string(scheduler_name(s.kind)) + " block=" + std::to_string(s.block) +
                " index=" + (c.index32 ? "int32" : "int64");
  if (s.kind == SchedulerKind::Pointwise)
    plan.params += " loops=" + std::to_string(s.loops.size()) + " vector=" + std::to_string(width);
  else
    plan.params += " phases=" + std::to_string(s.phases.size());
  return plan;
}

bool can_generate(const ConcreteFusion& c, const Task& task, std::string* why) {
  try {
    generate_kernel(c, task);
    return true;
  } catch (const Error& e) {
    if (e.status() != KF_ERR_UNSUPPORTED) throw;
    if (why != nullptr) *why = e.what();
    return false;
  }
}

}  // namespace kf
