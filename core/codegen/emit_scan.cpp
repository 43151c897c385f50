// Scan kernels (ScanParams in kernel_schedule.h): a thread per line, or a
// block per line with a block-wide scan of each chunk and a carry between
// chunks. Floats combine in float (double for float64), as torch's CUDA
// scans; integers and bool in wrapping int64.
#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/codegen/scan_code.h"

namespace kf {

namespace scan_code {

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

std::string element(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx) {
  return convert(o.in_t, o.acc, w.value_at(o.in, idx));
}

void store(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& idx, const std::string& acc) {
  w.store(o.out, idx, convert(o.acc, o.out_t, acc));
}

void group_elements(KernelWriter& w, const ScanOperands& o, const std::vector<std::string>& base, size_t dim, int group,
                    const std::string& ok, const std::vector<std::string>& into) {
  w.open("if (" + ok + ")");
  w.group = group;
  w.lane_base = base;
  for (size_t j = 0; j < into.size(); ++j) {
    w.lane = static_cast<int>(j);
    w.lane_index = base;
    if (j > 0) w.lane_index[dim] = "(" + base[dim] + " + " + std::to_string(j) + ")";
    w.line(into[j] + " = " + element(w, o, w.lane_index) + ";");
  }
  w.lane = -1;
  w.close();
}

}  // namespace scan_code

using namespace scan_code;

namespace {

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
  for (int u = 0; u < U; ++u)
    group_elements(w, o, at[su(u)], o.dim, u, in[su(u)],
                   std::vector<std::string>(x.begin() + u * V, x.begin() + (u + 1) * V));
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

std::string scan_helpers(const KernelWriter& w, const ScanParams& p) {
  const ScanOperands o = scan_operands(w, p);
  const std::string t = reg_type(o.acc);
  return std::string(!p.block_per_line && p.pass_rows > 0 ? kPublishedValues : "") + "\nstruct kf_scan_op { KF_DEV " + t + " operator()(" + t + " a, " + t + " b) const { return " + combine(o, "a", "b") +
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
