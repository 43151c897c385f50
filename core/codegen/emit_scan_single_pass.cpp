// The single-pass thread-per-line scan (ScanParams::pass_rows > 0; not
// the default: docs/perf-log.md, session 21).
#include <functional>

#include "core/codegen/emit_common.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/scan_code.h"

namespace kf::scan_code {

// The single-pass thread-per-line scan (ScanParams::pass_rows > 0): one
// kernel, its blocks taking tickets in order (a counter in scratch) so
// that a block waits only on blocks that already run. A ticket is a row
// segment g of wr x L elements (wr = args.row_warps warps stacked along
// the scan, L = pass_rows each) for W / wr column groups of 32 x V lines
// (W warps per block; lane l owns lines l * V .. l * V + V - 1 of its
// group, one 16-byte vector along the innermost line dim when the
// run-time conditions hold). Segment totals go to the next segment by a
// decoupled look-back, each lane on its own lines: a segment publishes
// its aggregates, then its inclusive prefixes (kf_put: value and flag in
// one word, so neither side fences). A lane's prefix is the nearest
// published inclusive prefix combined forward with the aggregates after
// it, so it is the same left fold of the aggregates whichever words the
// look-back found: the result does not depend on timing. Scratch (zeroed
// by the host): the ticket counter, then the aggregates and the inclusive
// prefixes, 32 x V values per segment and column group.
void emit_single_pass(KernelWriter& w, const ScanParams& p, const ScanOperands& o) {
  const std::string acc_t = reg_type(o.acc);
  const VectorPlan& vp = p.vectors;
  const int V = std::max(vp.width, 1), L = p.pass_rows, W = p.block / 32;
  const auto su = [](int i) { return static_cast<size_t>(i); };
  // Where line q + j's values go in a column group's arrays (shared and
  // scratch): lane-major, so that a warp's accesses are contiguous.
  const auto slot_of = [](int j) { return "(" + std::to_string(j) + " * 32 + lane)"; };
  const std::string Vs = std::to_string(V), Ws = std::to_string(W), TW = std::to_string(32 * V);
  const std::string len = w.hoist("long long", "len", "(long long)" + w.extent(o.out, o.dim));
  const std::string lines = lines_count(w, o);
  const bool vectors = vp.width > 0;
  if (vectors) use_vectors(w, vp);
  w.line("const long long wr = args.row_warps;  // warps stacked along the scan in a column group");
  w.line("const long long units = (" + lines + " + " + TW + " - 1) / " + TW + ";  // column groups");
  w.line("const long long tiles = (units + " + Ws + " / wr - 1) / (" + Ws + " / wr);  // blocks per segment");
  const std::string K = o.acc == DType::F32 ? "1" : "2";  // 64-bit words per published value
  w.line("unsigned long long* const kf_ticket_next = (unsigned long long*)args.scratch;");
  w.line("unsigned long long* const kf_agg = kf_ticket_next + 1;");
  w.line("unsigned long long* const kf_inc = kf_agg + args.segments * units * " + TW + " * " + K + ";");
  w.line("__shared__ " + acc_t + " kf_wsum[" + Ws + "][" + TW + "];  // each warp's totals, then its start");
  w.line("__shared__ long long kf_ticket;");
  w.line("const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;");
  w.line("const int rw = warp % (int)wr, sub = warp / (int)wr;");
  const KernelWriter::Section cond = w.reserve();
  const std::string vec = w.fresh("kfvec");
  w.open("for (;;)");
  w.line("if (threadIdx.x == 0) kf_ticket = (long long)atomicAdd(kf_ticket_next, 1ULL);");
  w.line("__syncthreads();");
  w.line("const long long ticket = kf_ticket;");
  w.line("if (ticket >= args.segments * tiles) break;");
  w.line("const long long g = ticket / tiles, unit = (ticket - g * tiles) * (" + Ws + " / wr) + sub;");
  w.line("const long long q = unit * " + TW + " + (long long)lane * " + Vs + ";  // the lane's first line");
  w.line("const long long k0 = (g * wr + rw) * " + std::to_string(L) + ";  // the warp's first element");
  // x[i][j]: element k0 + i of line q + j.
  std::vector<std::vector<std::string>> x(su(L));
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < V; ++j) {
      x[su(i)].push_back(w.fresh("x"));
      w.line(acc_t + " " + x[su(i)].back() + " = " + identity(o) + ";");
    }
  const auto row = [&](int i) { return i == 0 ? std::string("k0") : "(k0 + " + std::to_string(i) + ")"; };
  // The lane's lines: one index (vector path) or one per line.
  const auto vector_index = [&] { return line_index(w, p, o, "(q < " + lines + " ? q : 0LL)"); };
  const auto element_index = [&](int j) {
    const std::string qj = j == 0 ? std::string("q") : "(q + " + std::to_string(j) + ")";
    return line_index(w, p, o, "(" + qj + " < " + lines + " ? " + qj + " : 0LL)");
  };
  const auto line_ok = [&](int j) { return (j == 0 ? std::string("q") : "q + " + std::to_string(j)) + " < " + lines; };
  // The element path: `body` at each element of the lane's lines in range,
  // with its index.
  const auto element_rows = [&](const std::function<void(int, int, const std::vector<std::string>&)>& body) {
    for (int j = 0; j < V; ++j) {
      w.open("if (" + line_ok(j) + ")");
      std::vector<std::string> a = element_index(j);
      for (int i = 0; i < L; ++i) {
        w.open("if (" + row(i) + " < " + len + ")");
        a[o.dim] = row(i);
        body(i, j, a);
        w.close();
      }
      w.close();
    }
  };
  if (vectors) {
    w.open("if (" + vec + ")");
    const std::vector<std::string> idx = vector_index();
    const size_t vd = p.line_dims.back();
    std::vector<std::string> in;
    for (int i = 0; i < L; ++i) {
      in.push_back(w.fresh("in"));
      w.line("const bool " + in.back() + " = q < " + lines + " && " + row(i) + " < " + len + ";");
    }
    const KernelWriter::Section loads = w.reserve();
    w.section = 0;
    for (int i = 0; i < L; ++i) {
      std::vector<std::string> a = idx;
      a[o.dim] = "(" + in[su(i)] + " ? " + row(i) + " : 0LL)";
      group_elements(w, o, a, vd, i, in[su(i)], x[su(i)]);
    }
    w.fill(loads, vector_loads(w, V, 0, in));
    w.group = 0;
    w.close_open("else");
  } else {
    w.open("");
  }
  element_rows([&](int i, int j, const std::vector<std::string>& a) {
    w.line(x[su(i)][su(j)] + " = " + element(w, o, a) + ";");
  });
  w.close();
  // The warps' totals, the column groups' aggregates and the look-back.
  for (int j = 0; j < V; ++j) {
    std::string t = x[0][su(j)];
    for (int i = 1; i < L; ++i) t = combine(o, t, x[su(i)][su(j)]);
    w.line("kf_wsum[warp][" + slot_of(j) + "] = " + t + ";");
  }
  w.line("__syncthreads();");
  w.line("// One warp per column group publishes its totals and looks back.");
  w.open("if (rw == 0 && unit < units)");
  for (int j = 0; j < V; ++j) {
    const std::string c = slot_of(j), J = std::to_string(j);
    w.line(acc_t + " a" + J + " = kf_wsum[warp][" + c + "];");
    w.line("for (int r = 1; r < (int)wr; ++r) a" + J + " = " + combine(o, "a" + J, "kf_wsum[warp + r][" + c + "]") + ";");
    w.line(acc_t + " pre" + J + " = " + identity(o) + ";");
  }
  // The word of column slot j in segment `seg`'s values of `arr`.
  const auto word = [&](const char* arr, const std::string& seg, int j) {
    return std::string(arr) + " + ((" + seg + ") * units + unit) * " + TW + " * " + K + " + " + slot_of(j) + " * " + K;
  };
  w.open("if (g > 0)");
  for (int j = 0; j < V; ++j) w.line("kf_put(" + word("kf_agg", "g", j) + ", a" + std::to_string(j) + ");");
  // Back from g - 1 to the nearest segment whose prefixes of this lane's
  // columns are all published, past segments whose aggregates are.
  w.line("long long m = g - 1;");
  w.open("for (;;)");
  w.line("bool ok = true;");
  for (int j = 0; j < V; ++j) w.line("ok &= kf_get(" + word("kf_inc", "m", j) + ", &pre" + std::to_string(j) + ");");
  w.line("if (ok) break;");
  w.line(acc_t + " t;");
  for (int j = 0; j < V; ++j) w.line("ok &= kf_get(" + word("kf_agg", "m", j) + ", &t);");
  w.line("if (ok) --m; else __nanosleep(32);");
  w.close();
  w.open("for (long long s = m + 1; s < g; ++s)");
  w.line(acc_t + " t;");
  for (int j = 0; j < V; ++j) {
    const std::string J = std::to_string(j);
    w.line("kf_get(" + word("kf_agg", "s", j) + ", &t);");
    w.line("pre" + J + " = " + combine(o, "pre" + J, "t") + ";");
  }
  w.close();
  w.close();
  for (int j = 0; j < V; ++j) {
    const std::string J = std::to_string(j);
    w.line("kf_put(" + word("kf_inc", "g", j) + ", g > 0 ? " + combine(o, "pre" + J, "a" + J) + " : a" + J + ");");
  }
  // Each warp's start in place of its total: the group's prefix, then
  // the totals of the warps before it.
  for (int j = 0; j < V; ++j) {
    const std::string c = slot_of(j), J = std::to_string(j);
    w.open("for (int r = 0; r < (int)wr; ++r)");
    w.line("const " + acc_t + " t = kf_wsum[warp + r][" + c + "];");
    w.line("kf_wsum[warp + r][" + c + "] = pre" + J + ";");
    w.line("pre" + J + " = " + combine(o, "pre" + J, "t") + ";");
    w.close();
  }
  w.close();
  w.line("__syncthreads();");
  std::vector<std::string> run;
  for (int j = 0; j < V; ++j) {
    run.push_back(w.fresh("run"));
    w.line(acc_t + " " + run.back() + " = kf_wsum[warp][" + slot_of(j) + "];");
  }
  // The outputs: the running value at each element, in order.
  const auto step = [&](int i, int j) -> std::string {
    const std::string& r = run[su(j)];
    if (o.exclusive) {
      const std::string v = w.fresh("ex");
      w.line("const " + acc_t + " " + v + " = " + r + ";");
      w.line(r + " = " + combine(o, r, x[su(i)][su(j)]) + ";");
      return v;
    }
    w.line(r + " = " + combine(o, r, x[su(i)][su(j)]) + ";");
    return r;
  };
  if (vectors) {
    w.open("if (" + vec + ")");
    const std::vector<std::string> idx = vector_index();
    const std::string vt = vector_type(w, o.out, V);
    for (int i = 0; i < L; ++i) {
      const std::string ov = w.fresh("ov");
      w.line(vt + " " + ov + ";");
      for (int j = 0; j < V; ++j)
        w.line(ov + ".v[" + std::to_string(j) + "] = " + w.stored(o.out_t, convert(o.acc, o.out_t, step(i, j))) + ";");
      std::vector<std::string> a = idx;
      a[o.dim] = row(i);
      w.line("if (q < " + lines + " && " + row(i) + " < " + len + ") *(" + vt + "*)(" + w.address(o.out, a) + ") = " + ov + ";");
    }
    w.close_open("else");
  } else {
    w.open("");
  }
  // (Rows past the line's end come last, so the running values may skip them.)
  element_rows([&](int i, int j, const std::vector<std::string>& a) { store(w, o, a, step(i, j)); });
  w.close();
  w.line("__syncthreads();  // kf_ticket and kf_wsum are rewritten for the next ticket");
  w.close();
  std::vector<std::string> conds = {"true"};
  if (vectors) {
    conds = {w.extent(o.out, p.line_dims.back()) + " % " + Vs + " == 0"};
    used_vector_conditions(w, extent_sets_of(w.concrete()), vp, o.out, true, &conds);
  }
  w.fill(cond, {"const bool " + vec + " = " + all_of(conds) + ";"});
}

// The single-pass kernel's published values (emit_single_pass): 32-bit
// halves in 64-bit words whose high half is 1 once written (the scratch
// is zeroed first), so that a reader sees a value and its flag in one
// relaxed load, and no fence waits for the writer's other stores.
const char* const kPublishedValues = R"KFCUDA(
KF_DEV void kf_put_word(unsigned long long* p, unsigned bits) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"((1ULL << 32) | bits) : "memory");
}
KF_DEV unsigned long long kf_get_word(const unsigned long long* p) {
  unsigned long long w;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
  return w;
}
KF_DEV void kf_put(unsigned long long* p, float v) { kf_put_word(p, __float_as_uint(v)); }
KF_DEV void kf_put(unsigned long long* p, unsigned long long b) {
  kf_put_word(p, (unsigned)b);
  kf_put_word(p + 1, (unsigned)(b >> 32));
}
KF_DEV void kf_put(unsigned long long* p, double v) { kf_put(p, (unsigned long long)__double_as_longlong(v)); }
KF_DEV void kf_put(unsigned long long* p, long long v) { kf_put(p, (unsigned long long)v); }
// Whether the value at p is published (v: its value when it is).
KF_DEV bool kf_get(const unsigned long long* p, float* v) {
  const unsigned long long w = kf_get_word(p);
  *v = __uint_as_float((unsigned)w);
  return (w >> 32) != 0;
}
KF_DEV bool kf_get(const unsigned long long* p, unsigned long long* v) {
  const unsigned long long lo = kf_get_word(p), hi = kf_get_word(p + 1);
  *v = (hi << 32) | (lo & 0xffffffffULL);
  return (lo >> 32) != 0 && (hi >> 32) != 0;
}
KF_DEV bool kf_get(const unsigned long long* p, double* v) {
  unsigned long long b;
  const bool ok = kf_get(p, &b);
  *v = __longlong_as_double((long long)b);
  return ok;
}
KF_DEV bool kf_get(const unsigned long long* p, long long* v) {
  unsigned long long b;
  const bool ok = kf_get(p, &b);
  *v = (long long)b;
  return ok;
}
)KFCUDA";

}  // namespace kf::scan_code
