// Scan kernels (ScanParams in kernel_schedule.h): a thread per line, or a
// block per line with a block-wide scan of each chunk and a carry between
// chunks. Floats combine in float (double for float64), as torch's CUDA
// scans; integers and bool in wrapping int64.
#include <functional>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"

namespace kf {

namespace {

struct ScanOperands {
  int64_t in, out;
  size_t dim, rank;
  Op op;
  bool exclusive;
  DType in_t, out_t, acc;
};

ScanOperands scan_operands(const KernelWriter& w, const ScanParams& p) {
  const Expr& e = w.fusion().exprs[static_cast<size_t>(p.expr)];
  ScanOperands o;
  o.in = e.inputs[0];
  o.out = e.outputs[0];
  o.dim = ScanAttrs(e).index();
  o.rank = w.rank(o.out);
  o.op = e.op;
  o.exclusive = ScanAttrs(e).exclusive;
  o.in_t = w.fusion().value(o.in).dtype;
  o.out_t = w.fusion().value(o.out).dtype;
  o.acc = o.out_t == DType::F64 ? DType::F64 : is_float(o.out_t) ? DType::F32 : DType::I64;
  return o;
}

std::string identity(const ScanOperands& o) {
  if (o.op == Op::CUMSUM) return o.acc == DType::I64 ? "0LL" : o.acc == DType::F64 ? "0.0" : "0.0f";
  if (o.op == Op::CUMPROD) return o.acc == DType::I64 ? "1LL" : o.acc == DType::F64 ? "1.0" : "1.0f";
  if (o.acc == DType::F32) return "(-__int_as_float(0x7f800000))";
  if (o.acc == DType::F64) return "(-__longlong_as_double(0x7ff0000000000000LL))";
  switch (o.out_t) {
    case DType::I64: return "(-9223372036854775807LL - 1)";
    case DType::I32: return "(-2147483647LL - 1)";
    case DType::I8: return "(-128LL)";
    default: return "0LL";  // uint8, bool
  }
}

std::string combine(const ScanOperands& o, const std::string& a, const std::string& b) {
  if (o.op == Op::CUMMAX) return "kf_max_acc(" + a + ", " + b + ")";
  if (o.acc == DType::I64) return std::string(o.op == Op::CUMSUM ? "kf_add(" : "kf_mul(") + a + ", " + b + ")";
  return a + (o.op == Op::CUMSUM ? " + " : " * ") + b;
}

// The dims of the result but the scanned one, in memory order (outermost
// first), and their indices for line `linear`.
std::vector<std::string> line_index(KernelWriter& w, const ScanParams& p, const ScanOperands& o,
                                    const std::string& linear) {
  const std::vector<size_t>& others = p.line_dims;
  std::vector<std::string> idx(o.rank, "0");
  const std::vector<std::string> names = unravel(w, o.out, others, linear, "l", true);
  for (size_t k = 0; k < others.size(); ++k) idx[others[k]] = names[k];
  return idx;
}

std::string lines_count(KernelWriter& w, const ScanOperands& o) {
  std::string n = "1LL";
  for (size_t d = 0; d < o.rank; ++d)
    if (d != o.dim) n += " * " + w.extent(o.out, d);
  return w.hoist("long long", "nl", n);
}

// One element: the input at idx as the accumulator type.
std::string element(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx) {
  return convert(o.in_t, o.acc, w.value_at(o.in, idx));
}

void store(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx, const std::string& acc) {
  w.store(o.out, idx, convert(o.acc, o.out_t, acc));
}

enum class ScanPhase { Partial, Final };

// A line in chunks of U x blockDim.x x V elements (U = vector_steps): the
// chunk is U slices of blockDim.x x V, and thread t owns the V consecutive
// elements at t * V of each slice, loaded and stored as one vector. A warp's
// load instruction then covers contiguous bytes (each thread's vectors a
// slice apart, not side by side: ncu counted half of every sector wasted
// with adjacent vectors). One block scan of the U thread sums per chunk;
// slice u's prefix adds the totals of slices 0..u-1. The line's length is a
// multiple of V (checked by the caller), so a vector is all in or all out.
void scan_vector_chunks(KernelWriter& w, const ScanParams& p, const ScanOperands& o, const std::vector<std::string>& idx,
                        const std::string& len) {
  const VectorPlan& vp = p.vectors;
  const int V = vp.width, U = p.vector_steps;
  const auto su = [](int u) { return static_cast<size_t>(u); };
  const std::string acc_t = reg_type(o.acc), Vs = std::to_string(V), Us = std::to_string(U);
  use_vectors(w, vp);
  const std::string slice = w.hoist("long long", "slice", "(long long)blockDim.x * " + Vs);
  w.open("for (long long base = 0; base < " + len + "; base += " + slice + " * " + Us + ")");
  std::vector<std::string> in(su(U)), x;
  std::vector<std::vector<std::string>> at(su(U), idx);
  for (int u = 0; u < U; ++u) {
    const std::string j = "(base + " + (u == 0   ? std::string()
                                  : u == 1 ? slice + " + "
                                           : slice + " * " + std::to_string(u) + " + ") +
                          "(long long)t * " + Vs + ")";
    in[su(u)] = w.fresh("in");
    w.line("const bool " + in[su(u)] + " = " + j + " < " + len + ";");
    at[su(u)][o.dim] = "(" + in[su(u)] + " ? " + j + " : 0LL)";
  }
  const KernelWriter::Section loads = w.reserve();
  for (int j = 0; j < U * V; ++j) {
    x.push_back(w.fresh("x"));
    w.line(acc_t + " " + x.back() + " = " + identity(o) + ";");
  }
  w.section = 0;
  for (int u = 0; u < U; ++u) {
    const auto& a = at[su(u)];
    w.open("if (" + in[su(u)] + ")");
    w.group = u;
    w.lane_base = a;
    for (int j = 0; j < V; ++j) {
      w.lane = j;
      w.lane_index = a;
      if (j > 0) w.lane_index[o.dim] = "(" + a[o.dim] + " + " + std::to_string(j) + ")";
      w.line(x[su(u * V + j)] + " = " + element(w, o, w.lane_index) + ";");
    }
    w.lane = -1;
    w.close();
  }
  w.fill(loads, vector_loads(w, V, 0, in));
  // inc[u][j]: the inclusive scan of vector u's first j + 1 elements.
  std::vector<std::vector<std::string>> inc(su(U));
  const std::string sums = w.fresh("sums"), before = w.fresh("before"), totals = w.fresh("totals");
  w.line(acc_t + " " + sums + "[" + Us + "], " + before + "[" + Us + "], " + totals + "[" + Us + "];");
  for (int u = 0; u < U; ++u) {
    inc[su(u)].push_back(x[su(u * V)]);
    for (int j = 1; j < V; ++j) {
      inc[su(u)].push_back(w.fresh("s"));
      w.line("const " + acc_t + " " + inc[su(u)].back() + " = " + combine(o, inc[su(u)][su(j - 1)], x[su(u * V + j)]) + ";");
    }
    w.line(sums + "[" + std::to_string(u) + "] = " + inc[su(u)].back() + ";");
  }
  w.line("kf_block_exscan<" + Us + ">(" + sums + ", " + identity(o) + ", kf_scan_op(), warp_totals, " + before + ", " + totals + ");");
  const std::string vt = vector_type(w, o.out, V);
  std::string start = "carry";  // the scan of everything before slice u
  for (int u = 0; u < U; ++u) {
    const std::string prefix = w.fresh("prefix");
    w.line("const " + acc_t + " " + prefix + " = " + combine(o, start, before + "[" + std::to_string(u) + "]") + ";");
    w.open("if (" + in[su(u)] + ")");
    const std::string ov = w.fresh("ov");
    w.line(vt + " " + ov + ";");
    for (int j = 0; j < V; ++j) {
      const std::string v = o.exclusive ? (j == 0 ? prefix : combine(o, prefix, inc[su(u)][su(j - 1)]))
                                        : combine(o, prefix, inc[su(u)][su(j)]);
      w.line(ov + ".v[" + std::to_string(j) + "] = " + w.stored(o.out_t, convert(o.acc, o.out_t, v)) + ";");
    }
    w.line("*(" + vt + "*)(" + w.address(o.out, at[su(u)]) + ") = " + ov + ";");
    w.close();
    start = combine(o, start, totals + "[" + std::to_string(u) + "]");
    if (u + 1 < U) {
      const std::string next = w.fresh("start");
      w.line("const " + acc_t + " " + next + " = " + start + ";");
      start = next;
    }
  }
  w.line("carry = " + start + ";");
  w.line("__syncthreads();  // warp_totals is reused by the next chunk");
  w.close();
}

// A thread per (line, segment) (neighbouring threads on neighbouring
// lines): args.segments segments of ceil(length / segments) elements. The
// partial phase writes each segment's total to scratch[segment * lines +
// line]; the final phase starts from the prefix the carry kernel left
// there (identity when there is one segment) and writes the result.
void emit_segment_loop(KernelWriter& w, const ScanParams& p, const ScanOperands& o, ScanPhase phase) {
  const std::string acc_t = reg_type(o.acc);
  const std::string len = "(long long)" + w.extent(o.out, o.dim);
  const std::string lines = lines_count(w, o);
  w.line(acc_t + "* const part = (" + acc_t + "*)args.scratch;");
  w.line("const long long seg_len = (" + len + " + args.segments - 1) / args.segments;");
  w.open("for (long long item = " + std::string(kThread) + "; item < " + lines + " * args.segments; item += " + kGridStride + ")");
  w.line("const long long g = item / " + lines + ";");
  w.line("const long long q = item - g * " + lines + ";");
  std::vector<std::string> idx = line_index(w, p, o, "q");
  w.line("const long long k_end = (g + 1) * seg_len < " + len + " ? (g + 1) * seg_len : " + len + ";");
  if (phase == ScanPhase::Partial)
    w.line(acc_t + " acc = " + identity(o) + ";");
  else
    w.line(acc_t + " acc = args.segments > 1 ? part[item] : " + identity(o) + ";");
  // line_steps elements per step, all loaded before the first is combined.
  const int S = p.line_steps;
  w.open("for (long long k = g * seg_len; k < k_end; k += " + std::to_string(S) + ")");
  std::vector<std::string> x, in;
  for (int s = 0; s < S; ++s) {
    const std::string ks = s == 0 ? std::string("k") : "(k + " + std::to_string(s) + ")";
    in.push_back(w.fresh("in"));
    x.push_back(w.fresh("x"));
    w.line("const bool " + in.back() + " = " + ks + " < k_end;");
    w.line(acc_t + " " + x.back() + " = " + identity(o) + ";");
    w.open("if (" + in.back() + ")");
    idx[o.dim] = ks;
    w.line(x.back() + " = " + element(w, o, idx) + ";");
    w.close();
  }
  for (int s = 0; s < S; ++s) {
    w.open(s == 0 ? std::string() : "if (" + in[static_cast<size_t>(s)] + ")");
    idx[o.dim] = s == 0 ? std::string("k") : "(k + " + std::to_string(s) + ")";
    if (phase == ScanPhase::Final && o.exclusive) store(w, o, idx, "acc");
    w.line("acc = " + combine(o, "acc", x[static_cast<size_t>(s)]) + ";");
    if (phase == ScanPhase::Final && !o.exclusive) store(w, o, idx, "acc");
    w.close();
  }
  w.close();
  if (phase == ScanPhase::Partial) w.line("part[item] = acc;");
  w.close();
}

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
      w.open("if (" + in[su(i)] + ")");
      w.group = i;
      w.lane_base = a;
      for (int j = 0; j < V; ++j) {
        w.lane = j;
        w.lane_index = a;
        if (j > 0) w.lane_index[vd] = "(" + a[vd] + " + " + std::to_string(j) + ")";
        w.line(x[su(i)][su(j)] + " = " + element(w, o, w.lane_index) + ";");
      }
      w.lane = -1;
      w.close();
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

}  // namespace

// Thread-per-line scans split into segments: the segments' totals, then
// (emit_scan_carry) their exclusive prefixes per line, then emit_scan.
void emit_scan_partials(KernelWriter& w, const ScanParams& p) {
  emit_segment_loop(w, p, scan_operands(w, p), ScanPhase::Partial);
}

void emit_scan_carry(KernelWriter& w, const ScanParams& p) {
  const ScanOperands o = scan_operands(w, p);
  const std::string acc_t = reg_type(o.acc);
  const std::string lines = lines_count(w, o);
  w.line(acc_t + "* const part = (" + acc_t + "*)args.scratch;");
  w.open("for (long long q = " + std::string(kThread) + "; q < " + lines + "; q += " + kGridStride + ")");
  w.line(acc_t + " running = " + identity(o) + ";");
  w.open("for (long long g = 0; g < args.segments; ++g)");
  w.line("const " + acc_t + " t = part[g * " + lines + " + q];");
  w.line("part[g * " + lines + " + q] = running;");
  w.line("running = " + combine(o, "running", "t") + ";");
  w.close();
  w.close();
}

void emit_scan(KernelWriter& w, const ScanParams& p) {
  const ScanOperands o = scan_operands(w, p);
  const std::string acc_t = reg_type(o.acc);
  const std::string len = "(long long)" + w.extent(o.out, o.dim);
  const std::string lines = lines_count(w, o);
  if (!p.block_per_line) {
    if (p.pass_rows > 0)
      emit_single_pass(w, p, o);
    else
      emit_segment_loop(w, p, o, ScanPhase::Final);
    return;
  }
  // Chunks of block x items elements, staged through shared memory so that
  // the loads and stores are coalesced (element j * blockDim.x + t by
  // thread t) while each thread combines `items` consecutive elements
  // (t * items + j); one padding slot per 32 avoids bank conflicts.
  const int items = p.items;
  const std::string B = std::to_string(p.block), I = std::to_string(items);
  const auto slot = [](const std::string& i) { return "stage[(" + i + ") + ((" + i + ") >> 5)]"; };
  const bool vectors = p.vectors.width > 0;
  const int scans = vectors ? p.vector_steps : 1;  // values a block scan combines at once
  w.line("__shared__ " + acc_t + " warp_totals[" + std::to_string(32 * scans) + "];");
  w.line("__shared__ " + acc_t + " stage[" + std::to_string(p.block * items + p.block * items / 32) + "];");
  w.line("const int t = threadIdx.x;");
  const KernelWriter::Section cond = w.reserve();
  const std::string vec = w.fresh("kfvec");
  w.open("for (long long q = blockIdx.x; q < " + lines + "; q += gridDim.x)");
  std::vector<std::string> idx = line_index(w, p, o, "q");
  w.line(acc_t + " carry = " + identity(o) + ";");
  if (vectors) {
    w.open("if (" + vec + ")");
    scan_vector_chunks(w, p, o, idx, len);
    w.close_open("else");
  } else {
    w.open("");
  }
  w.open("for (long long base = 0; base < " + len + "; base += " + B + "LL * " + I + ")");
  for (int j = 0; j < items; ++j) {
    const std::string k = w.fresh("k");
    w.line("const long long " + k + " = base + " + std::to_string(j * p.block) + " + t;");
    std::vector<std::string> at = idx;
    at[o.dim] = "(" + k + " < " + len + " ? " + k + " : base)";
    w.open("");
    w.line(acc_t + " v = " + identity(o) + ";");
    w.open("if (" + k + " < " + len + ")");
    w.line("v = " + element(w, o, at) + ";");
    w.close();
    w.line(slot(std::to_string(j * p.block) + " + t") + " = v;");
    w.close();
  }
  w.line("__syncthreads();");
  std::vector<std::string> x, inc;
  for (int j = 0; j < items; ++j) {
    x.push_back("x" + std::to_string(j));
    w.line("const " + acc_t + " " + x.back() + " = " + slot("t * " + I + " + " + std::to_string(j)) + ";");
  }
  inc.push_back(x[0]);
  for (int j = 1; j < items; ++j) {
    inc.push_back("s" + std::to_string(j));
    w.line("const " + acc_t + " " + inc.back() + " = " + combine(o, inc[static_cast<size_t>(j - 1)], x[static_cast<size_t>(j)]) + ";");
  }
  w.line(acc_t + " total, before;");
  w.line("kf_block_exscan<1>(&" + inc.back() + ", " + identity(o) + ", kf_scan_op(), warp_totals, &before, &total);");
  w.line("const " + acc_t + " prefix = " + combine(o, "carry", "before") + ";");
  for (int j = 0; j < items; ++j) {
    const std::string v = o.exclusive ? (j == 0 ? std::string("prefix") : combine(o, "prefix", inc[static_cast<size_t>(j - 1)]))
                                      : combine(o, "prefix", inc[static_cast<size_t>(j)]);
    w.line(slot("t * " + I + " + " + std::to_string(j)) + " = " + v + ";");
  }
  w.line("__syncthreads();");
  for (int j = 0; j < items; ++j) {
    const std::string k = "base + " + std::to_string(j * p.block) + " + t";
    w.open("if (" + k + " < " + len + ")");
    std::vector<std::string> at = idx;
    at[o.dim] = "(" + k + ")";
    store(w, o, at, slot(std::to_string(j * p.block) + " + t"));
    w.close();
  }
  w.line("carry = " + combine(o, "carry", "total") + ";");
  w.line("__syncthreads();  // stage and warp_totals are reused by the next chunk");
  w.close();
  w.close();
  w.close();
  if (vectors) {
    std::vector<std::string> conds = {w.extent(o.out, o.dim) + " % " + std::to_string(p.vectors.width) + " == 0"};
    used_vector_conditions(w, extent_sets_of(w.concrete()), p.vectors, o.out, false, &conds);
    w.fill(cond, {"const bool " + vec + " = " + all_of(conds) + ";"});
  }
}

// The single-pass kernel's published values (emit_single_pass): 32-bit
// halves in 64-bit words whose high half is 1 once written (the scratch
// is zeroed first), so that a reader sees a value and its flag in one
// relaxed load, and no fence waits for the writer's other stores.
constexpr const char* kPublished = R"KFCUDA(
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

std::string scan_helpers(const KernelWriter& w, const ScanParams& p) {
  const ScanOperands o = scan_operands(w, p);
  const std::string t = reg_type(o.acc);
  return std::string(!p.block_per_line && p.pass_rows > 0 ? kPublished : "") + "\nstruct kf_scan_op { KF_DEV " + t + " operator()(" + t + " a, " + t + " b) const { return " + combine(o, "a", "b") +
         "; } };\n" + R"KFCUDA(// The exclusive prefixes of N values per thread over the block (blockDim.x
// a multiple of 32, at most 1024), each value scanned on its own, and the
// block's N totals; warp_totals: 32 x N in shared memory. Two barriers
// whatever N.
template <int N, class T, class Op>
KF_DEV void kf_block_exscan(const T* v, T id, Op op, T* warp_totals, T* ex, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  T inc[N];
#pragma unroll
  for (int n = 0; n < N; ++n) {
    inc[n] = v[n];
    for (int o = 1; o < 32; o <<= 1) {
      const T m = __shfl_up_sync(0xffffffffu, inc[n], o);
      if (lane >= o) inc[n] = op(m, inc[n]);
    }
    if (lane == 31) warp_totals[n * 32 + warp] = inc[n];
  }
  __syncthreads();
  for (int n = warp; n < N; n += warps) {  // warp n scans the warp totals of value n
    T s = lane < warps ? warp_totals[n * 32 + lane] : id;
    for (int o = 1; o < 32; o <<= 1) {
      const T m = __shfl_up_sync(0xffffffffu, s, o);
      if (lane >= o) s = op(m, s);
    }
    warp_totals[n * 32 + lane] = s;
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    T e = __shfl_up_sync(0xffffffffu, inc[n], 1);
    if (lane == 0) e = id;
    total[n] = warp_totals[n * 32 + warps - 1];
    ex[n] = warp == 0 ? e : op(warp_totals[n * 32 + warp - 1], e);
  }
}
)KFCUDA";
}

}  // namespace kf
