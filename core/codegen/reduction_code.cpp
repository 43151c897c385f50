#include "core/codegen/reduction_code.h"

#include <algorithm>

#include "core/codegen/op_cuda.h"
#include "core/ir/op_attrs.h"

namespace kf {

DType accumulator_dtype(DType in) {
  if (in == DType::F64) return DType::F64;
  if (is_float(in)) return DType::F32;
  return DType::I64;
}

bool is_welford(const Expr& e) { return e.op == Op::VAR || e.op == Op::VAR_MEAN; }

std::string acc_init(const Expr& e, DType acc) {
  const bool flt = is_float(acc);
  switch (e.op) {
    case Op::PROD: return flt ? "1" : "1LL";
    case Op::MAX:
      return acc == DType::F64 ? "-__longlong_as_double(0x7ff0000000000000LL)"
             : flt            ? "-__int_as_float(0x7f800000)"
                              : "(-9223372036854775807LL - 1)";
    case Op::MIN:
      return acc == DType::F64 ? "__longlong_as_double(0x7ff0000000000000LL)"
             : flt            ? "__int_as_float(0x7f800000)"
                              : "9223372036854775807LL";
    default: return "0";
  }
}

std::string combine_op(const Expr& e, DType acc) {
  const bool flt = is_float(acc);
  switch (e.op) {
    case Op::SUM:
    case Op::MEAN: return flt ? "kf_sum_op()" : "kf_isum_op()";
    case Op::PROD: return flt ? "kf_prod_op()" : "kf_iprod_op()";
    case Op::MAX: return "kf_max_op()";
    case Op::MIN: return "kf_min_op()";
    default: return "kf_welford_op()";
  }
}

std::string acc_step(const Expr& e, DType acc, const std::string& name, const std::string& x) {
  const bool flt = is_float(acc);
  switch (e.op) {
    case Op::SUM:
    case Op::MEAN: return flt ? name + " += " + x + ";" : name + " = kf_add(" + name + ", " + x + ");";
    case Op::PROD: return flt ? name + " *= " + x + ";" : name + " = kf_mul(" + name + ", " + x + ");";
    case Op::MAX: return name + " = kf_max_acc(" + name + ", " + x + ");";
    case Op::MIN: return name + " = kf_min_acc(" + name + ", " + x + ");";
    default: return "kf_welford_add(" + name + ", " + x + ");";
  }
}

void declare_results(KernelWriter& w, const RowDomain& s) {
  const Fusion& f = w.fusion();
  for (const auto& phase : s.phases)
    for (int64_t ei : phase)
      for (int64_t o : f.exprs[static_cast<size_t>(ei)].outputs) {
        const std::string reg = w.fresh("r");
        w.line(std::string(reg_type(f.value(o).dtype)) + " " + reg + ";");
        w.row_results[o] = reg;
        if (f.value(o).dtype == DType::F32) {  // unused ones cost nothing: the compiler drops them
          w.reciprocals[reg] = reg + "_rcp";
          w.line("[[maybe_unused]] float " + reg + "_rcp;");
        }
      }
}

void finish_results(KernelWriter& w, const Expr& e, DType acc, const std::string& red, const std::string& row_len) {
  const Fusion& f = w.fusion();
  const std::string at = reg_type(acc);
  auto finish = [&](int64_t out, const std::string& expr) {
    const std::string& reg = w.row_results.at(out);
    w.line(reg + " = " + convert(acc, f.value(out).dtype, expr) + ";");
    if (auto rcp = w.reciprocals.find(reg); rcp != w.reciprocals.end())
      w.line(rcp->second + " = kf_rcp_for_div(" + reg + ");");
  };
  const std::string n = "(" + at + ")" + row_len;
  switch (e.op) {
    case Op::MEAN: finish(e.outputs[0], "(" + red + " / " + n + ")"); break;
    case Op::VAR:
    case Op::VAR_MEAN: {
      const std::string corr = std::to_string(ReduceAttrs(e).correction);
      finish(e.outputs[0], "(" + red + ".m2 / (" + at + ")(" + row_len + " > " + corr + " ? " + row_len + " - " + corr + " : 0))");
      if (e.op == Op::VAR_MEAN)
        finish(e.outputs[1], "(" + row_len + " == 0 ? " + literal_f64(acc, __builtin_nan("")) + " : " + red + ".mean)");
      break;
    }
    default: finish(e.outputs[0], red); break;
  }
}

std::vector<Accumulator> declare_accs(KernelWriter& w, const std::vector<int64_t>& phase, bool split_welford,
                                      const std::vector<std::pair<int64_t, int64_t>>& online) {
  const Fusion& f = w.fusion();
  std::vector<Accumulator> accs;
  for (int64_t ei : phase) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    if (is_welford(e)) {  // one accumulator per input: the corrections differ only at the finish
      auto same = std::find_if(accs.begin(), accs.end(), [&](const Accumulator& b) {
        return is_welford(*b.expr) && b.expr->inputs[0] == e.inputs[0];
      });
      if (same != accs.end()) {
        same->shared.push_back(&e);
        continue;
      }
    }
    Accumulator a;
    a.name = w.fresh("acc");
    a.acc = accumulator_dtype(f.value(e.inputs[0]).dtype);
    a.expr = &e;
    for (const auto& [mi, si] : online) {
      if (si != ei) continue;
      // The max is declared first: it comes first in the phase.
      const Expr* max_expr = &f.exprs[static_cast<size_t>(mi)];
      const auto m = std::find_if(accs.begin(), accs.end(), [&](const Accumulator& b) { return b.expr == max_expr; });
      if (m == accs.end()) fail(KF_ERR_INTERNAL, "codegen: online sum expr ", si, " without its max expr ", mi);
      a.online_max = static_cast<int>(m - accs.begin());
      m->online_paired = true;
    }
    const std::string at = reg_type(a.acc);
    if (is_welford(e) && split_welford) {
      a.sum = w.fresh("ws");
      w.line(at + " " + a.sum + " = 0, " + a.name + " = 0;");
    } else if (is_welford(e)) {
      w.line("kf_welford<" + at + "> " + a.name + " = {0, 0, 0};");
    } else {
      w.line(at + " " + a.name + " = " + acc_init(e, a.acc) + ";");
    }
    accs.push_back(a);
  }
  return accs;
}

void reduce_block(KernelWriter& w, const std::vector<Accumulator>& accs, const std::string& row_len) {
  // Plain accumulators of one type and op combine in one reduction of a
  // kf_many (one set of barriers for all: layer norm backward's two row
  // sums took six barriers per row).
  auto plain = [](const Accumulator& a) {
    return !a.online_paired && a.online_max < 0 && a.sum.empty() && !is_welford(*a.expr);
  };
  std::vector<bool> done(accs.size(), false);
  for (size_t i = 0; i < accs.size(); ++i) {
    if (done[i] || !plain(accs[i])) continue;
    const std::string at = reg_type(accs[i].acc), op = combine_op(*accs[i].expr, accs[i].acc);
    std::vector<size_t> group;
    for (size_t k = i; k < accs.size(); ++k)
      if (!done[k] && plain(accs[k]) && reg_type(accs[k].acc) == at && combine_op(*accs[k].expr, accs[k].acc) == op)
        group.push_back(k);
    if (group.size() < 2) continue;
    const std::string many = "kf_many<" + at + ", " + std::to_string(group.size()) + ">", red = w.fresh("red");
    std::string values;
    for (size_t k : group) values += (values.empty() ? "" : ", ") + accs[k].name;
    const std::string each = "kf_each<" + op.substr(0, op.size() - 2) + ">()";  // (op is "kf_..._op()")
    w.line("const " + many + " " + red + " = " + w.row_reduce + "(" + many + "{{" + values + "}}, " + each + ");");
    for (size_t n = 0; n < group.size(); ++n) {
      const Accumulator& a = accs[group[n]];
      const std::string v = red + ".v[" + std::to_string(n) + "]";
      finish_results(w, *a.expr, a.acc, v, row_len);
      for (const Expr* other : a.shared) finish_results(w, *other, a.acc, v, row_len);
      done[group[n]] = true;
    }
  }
  for (size_t i = 0; i < accs.size(); ++i) {
    const Accumulator& a = accs[i];
    if (done[i]) continue;
    const Expr& e = *a.expr;
    const std::string at = reg_type(a.acc);
    const std::string red = w.fresh("red");
    if (a.online_paired) continue;  // with its sum
    if (a.online_max >= 0) {
      const Accumulator& m = accs[static_cast<size_t>(a.online_max)];
      w.line("const kf_online " + red + " = " + w.row_reduce + "(kf_online{" + m.name + ", " + a.name + "}, kf_online_op());");
      finish_results(w, *m.expr, m.acc, red + ".m", row_len);
      finish_results(w, e, a.acc, "kf_online_sum(" + red + ")", row_len);
      continue;
    }
    const std::string red_type = is_welford(e) ? "kf_welford<" + at + ">" : at;
    std::string v = a.name;
    if (!a.sum.empty()) {  // two passes: the row's mean, this thread's squared deviations from it
      const std::string m2 = w.fresh("m2");
      w.line("const " + at + " " + m2 + " = " + w.row_reduce + "(" + a.name + ", kf_sum_op());");
      w.line("const " + red_type + " " + red + " = {(" + at + ")" + row_len + ", " + a.sum + ", " + m2 + "};");
    } else {
      w.line("const " + red_type + " " + red + " = " + w.row_reduce + "(" + v + ", " + combine_op(e, a.acc) + ");");
    }
    finish_results(w, e, a.acc, red, row_len);
    for (const Expr* other : a.shared) finish_results(w, *other, a.acc, red, row_len);
  }
}

std::vector<std::string> row_output_index(const KernelWriter& w, const RowDomain& s, int64_t o) {
  const size_t r = s.reduced.size();
  std::vector<std::string> idx;
  if (w.rank(o) == r) {
    for (size_t d = 0; d < r; ++d) idx.push_back(s.reduced[d] ? "0" : w.row_index[d]);
  } else {  // (the output's dims are the kept ones in logical order, whatever order `kept` walks)
    for (size_t d = 0; d < r; ++d)
      if (!s.reduced[d]) idx.push_back(w.row_index[d]);
  }
  return idx;
}

int row_output_dim(const KernelWriter& w, const RowDomain& s, int64_t o, size_t d) {
  if (s.reduced[d]) return -1;
  if (w.rank(o) == s.reduced.size()) return static_cast<int>(d);
  return static_cast<int>(std::count(s.reduced.begin(), s.reduced.begin() + static_cast<std::ptrdiff_t>(d), false));
}

void store_row_outputs(KernelWriter& w, const RowDomain& s) {
  for (int64_t o : s.row_outputs) {
    const std::vector<std::string> idx = row_output_index(w, s, o);
    w.store(o, idx, w.value_at(o, idx));
  }
}

}  // namespace kf
