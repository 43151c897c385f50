// Scatter kernels (ScatterParams in kernel_schedule.h): the copy of the
// input, then the atomic path (clear, update, mean) or the sorted path
// (keys, block sort, global sort step, apply). Every kernel grid-strides;
// the launch (core/runtime/cuda/step_launch.cpp) picks grids and passes
// the scratch pointer, the padded key count and the sort step in the
// argument block's extra words.
#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"

namespace kf {

namespace {

constexpr const char* kNoKey = "9223372036854775807LL";  // padding and skipped updates sort last

struct Operands {
  int64_t x, index, src, out;
  size_t dim, rank;
  DType dtype, index_dtype;
};

Operands operands(const KernelWriter& w, const ScatterParams& p) {
  const Expr& e = w.fusion().exprs[static_cast<size_t>(p.expr)];
  const Fusion& f = w.fusion();
  return {e.inputs[0], e.inputs[1], e.inputs[2], e.outputs[0], ScatterAttrs(e).index(), w.rank(e.outputs[0]),
          f.value(e.outputs[0]).dtype, f.value(e.inputs[1]).dtype};
}

std::vector<std::string> with_dim(std::vector<std::string> idx, size_t dim, const std::string& i) {
  idx[dim] = i;
  return idx;
}

// The index's length along dim, in slices (ScatterParams::index_dim).
std::string slice_count(KernelWriter& w, const ScatterParams& p, const Operands& o) {
  return "(long long)" + w.extent(o.index, static_cast<size_t>(p.index_dim));
}

// A slice's extent along dim d != dim: the result's for index_reduce
// (its src matches the result there), the index's for a scatter (at most
// the result's).
std::string slice_extent(KernelWriter& w, const Operands& o, size_t d) {
  return w.rank(o.index) == 1 ? w.extent(o.out, d) : w.extent(o.index, d);
}

// The loop over the updates: one per index element, or for slices one per
// element of the result with the index's length along dim (the slice j
// of the index, and the element within it).
std::string update_count(KernelWriter& w, const ScatterParams& p, const Operands& o) {
  if (!p.slices) return w.numel(o.index);
  std::string n = slice_count(w, p, o);
  for (size_t d = 0; d < o.rank; ++d)
    if (d != o.dim) n += " * " + slice_extent(w, o, d);
  return w.hoist("long long", "nu", n);
}

// Multi-index of update `linear` (long long) in the update domain. Slices
// unravel over the index's length along dim and the slice's extents, each
// the extent of a value the plan passes (the index's, or the result's for
// index_reduce), so a 32-bit plan divides by the host's fastdiv words
// (KernelWriter::divmod), not by 64-bit division: about 70 instructions
// an update, for a GNN's index_add of [1M, 128] messages 9G of them.
std::vector<std::string> update_index(KernelWriter& w, const ScatterParams& p, const Operands& o,
                                      const std::string& linear, const std::string& suffix) {
  if (!p.slices) return unravel(w, o.index, all_dims(o.rank), linear, suffix, true);
  std::vector<std::string> idx(o.rank);
  const std::string rem = w.fresh("rem");
  const std::string type = w.index_type();
  w.line(type + " " + rem + " = (" + type + ")(" + linear + ");");
  for (size_t d = o.rank; d-- > 0;) {
    idx[d] = w.fresh("u");
    const std::string decl = "[[maybe_unused]] const " + type;
    if (d == 0) {
      w.line(decl + " " + idx[d] + " = " + rem + ";");
      continue;
    }
    // (slice_count and slice_extent, as the values whose extents they are)
    if (d == o.dim) w.divmod(decl, idx[d], rem, o.index, static_cast<size_t>(p.index_dim));
    else w.divmod(decl, idx[d], rem, w.rank(o.index) == 1 ? o.out : o.index, d);
  }
  return idx;
}

// The index value of an update (long long). Slices read the index at the
// update's position along dim only: index_reduce's rank-1 index, or a
// scatter's index (the same along the other dims) at 0 there.
std::string target_index(KernelWriter& w, const ScatterParams& p, const Operands& o, const std::vector<std::string>& u) {
  std::vector<std::string> at = u;
  if (p.slices) at = w.rank(o.index) == 1 ? std::vector<std::string>{u[o.dim]}
                                           : with_dim(std::vector<std::string>(o.rank, "0"), o.dim, u[o.dim]);
  const std::string i = w.value_at(o.index, at);
  const std::string t = w.fresh("t");
  w.line("const long long " + t + " = (long long)" + i + ";");
  return t;
}

std::string in_range(KernelWriter& w, const Operands& o, const std::string& t) {
  return t + " >= 0 && " + t + " < (long long)" + w.extent(o.out, o.dim);
}

// Row-major linear index of `idx` over the result's sizes (counts, keys).
std::string logical_linear(KernelWriter& w, const Operands& o, const std::vector<std::string>& idx) {
  std::string l = "(long long)(" + idx[0] + ")";
  for (size_t d = 1; d < o.rank; ++d) l = "(" + l + " * " + w.extent(o.out, d) + " + " + idx[d] + ")";
  return l;
}

// The identity a selected element starts from when include_self is off
// (atomic path), as a register of the dtype.
std::string identity(const Operands& o, ScatterReduce r) {
  const DType t = o.dtype;
  switch (r) {
    case ScatterReduce::Prod: return literal_i64(t, 1);
    case ScatterReduce::Amax:
      if (is_float(t)) return literal_f64(t, -__builtin_inf());
      if (t == DType::Bool) return "false";
      return t == DType::I64 ? "(-9223372036854775807LL - 1)" : t == DType::I32 ? "(-2147483647 - 1)" : t == DType::I8 ? "-128" : "0";
    case ScatterReduce::Amin:
      if (is_float(t)) return literal_f64(t, __builtin_inf());
      if (t == DType::Bool) return "true";
      return t == DType::I64 ? "9223372036854775807LL" : t == DType::I32 ? "2147483647" : t == DType::I8 ? "127" : "255";
    default: return literal_i64(t, 0);
  }
}

// `a` combined with `b` (registers of the dtype, or double) by reduce r.
std::string combine(ScatterReduce r, DType t, const std::string& a, const std::string& b) {
  switch (r) {
    case ScatterReduce::Sum:
    case ScatterReduce::Mean: return is_float(t) ? a + " + " + b : "kf_add(" + a + ", " + b + ")";
    case ScatterReduce::Prod: return is_float(t) ? a + " * " + b : "kf_mul(" + a + ", " + b + ")";
    case ScatterReduce::Amax:
    case ScatterReduce::Amin: {
      const bool max = r == ScatterReduce::Amax;
      if (t == DType::Bool) return "(" + a + (max ? " || " : " && ") + b + ")";
      if (is_float(t)) return std::string(max ? "kf_max_acc(" : "kf_min_acc(") + a + ", " + b + ")";
      return std::string(max ? "kf_max_acc((long long)" : "kf_min_acc((long long)") + a + ", (long long)" + b + ")";
    }
    case ScatterReduce::None: return b;
  }
  return b;
}

// The atomic read-modify-write of out[target] with register v.
void atomic_update(KernelWriter& w, const ScatterParams& p, const Operands& o, const std::string& addr,
                   const std::string& v) {
  const DType t = o.dtype;
  const ScatterReduce r = p.reduce == ScatterReduce::Mean ? ScatterReduce::Sum : p.reduce;
  const bool sum = r == ScatterReduce::Sum;
  if (sum && (t == DType::F32 || t == DType::F64 || t == DType::I32)) {
    w.line("atomicAdd(" + addr + ", " + v + ");");
    return;
  }
  if (sum && t == DType::I64) {
    w.line("atomicAdd((unsigned long long*)" + addr + ", (unsigned long long)" + v + ");");
    return;
  }
  if (sum && t == DType::BF16) {
    w.line("kf_atomic_add_bf16(" + addr + ", " + v + ");");
    return;
  }
  if (sum && t == DType::F16) {
    w.line("kf_atomic_add_f16(" + addr + ", " + v + ");");
    return;
  }
  if ((r == ScatterReduce::Amax || r == ScatterReduce::Amin) && (t == DType::I32 || t == DType::I64)) {
    w.line(std::string(r == ScatterReduce::Amax ? "atomicMax(" : "atomicMin(") + addr + ", " + v + ");");
    return;
  }
  // Any other dtype and reduction: a compare-and-swap loop on the word
  // holding the element.
  const std::string s = storage_type(t);
  std::string reg = load_form(t, "cur");
  std::string res = combine(r, t, reg, v);
  if (t == DType::BF16 || t == DType::F16 || t == DType::F8E4M3 || t == DType::F8E5M2) res = round_form(t, res);
  w.line("kf_atomic_apply(" + addr + ", [&](" + s + " cur) -> " + s + " { return " + store_form(t, "(" + std::string(reg_type(t)) + ")(" + res + ")") + "; });");
}

std::string scratch_words(const char* type) { return std::string("((") + type + "*)args.scratch)"; }

// Whether the atomic path's mean counts updates per slice (one int per
// index along dim, bumped by each slice's first element) rather than per
// element: where the index selects slices every element of a slice takes
// the same number of updates, so the per-element counts doubled the
// atomics (seed 243917705 c0188, docs/perf-log.md session 44). Elements
// outside the index's extents along the other dims take none
// (emit_scatter_mean checks).
bool slice_counts(const ScatterParams& p) { return p.slices && p.reduce == ScatterReduce::Mean && !p.sorted; }

}  // namespace

// The input copied into the result, 4 elements per thread and step (all
// loaded before any is stored: more bytes in flight).
void emit_scatter_copy(KernelWriter& w, const ScatterParams& p) {
  constexpr int kUnroll = 4;
  const Operands o = operands(w, p);
  const std::string n = w.numel(o.out);
  w.open("for (long long qb = " + std::string(kThread) + "; qb < " + n + "; qb += " + std::to_string(kUnroll) + " * " +
         kGridStride + ")");
  std::vector<std::string> qs, vals;
  std::vector<std::vector<std::string>> idx;
  for (int u = 0; u < kUnroll; ++u) {
    const std::string q = w.fresh("q");
    w.line("const long long " + q + " = qb + " + std::to_string(u) + " * " + kGridStride + ";");
    qs.push_back(q);
    idx.push_back(unravel(w, o.out, all_dims(o.rank), q + " < " + n + " ? " + q + " : qb", "_" + std::to_string(u)));
    vals.push_back(w.value_at(o.x, idx.back()));
  }
  for (int u = 0; u < kUnroll; ++u) {
    w.open("if (" + qs[static_cast<size_t>(u)] + " < " + n + ")");
    w.store(o.out, idx[static_cast<size_t>(u)], vals[static_cast<size_t>(u)]);
    const std::string& q = qs[static_cast<size_t>(u)];
    if (slice_counts(p))
      w.line("if (" + q + " < " + w.extent(o.out, o.dim) + ") " + scratch_words("int") + "[" + q + "] = 0;");
    else if (p.reduce == ScatterReduce::Mean && !p.sorted)
      w.line(scratch_words("int") + "[" + q + "] = 0;");
    w.close();
  }
  w.close();
}

namespace {

// The atomic kernels' view of a plan: a scatter's updates one per index
// element even where its index selects slices (the unravel over the
// index's sizes is cheaper per element than the slice's 64-bit one:
// scatter_max_nodes' atomic path 2.02 ms that way in session 24, 2.57 ms
// over slices in session 25); index_reduce's stay slices.
ScatterParams atomic_view(const KernelWriter& w, ScatterParams p) {
  if (w.fusion().exprs[static_cast<size_t>(p.expr)].op == Op::SCATTER) p.slices = false;
  return p;
}

}  // namespace

void emit_scatter_clear(KernelWriter& w, const ScatterParams& sp) {
  const ScatterParams p = atomic_view(w, sp);
  const Operands o = operands(w, p);
  w.open("for (long long q = " + std::string(kThread) + "; q < " + update_count(w, p, o) + "; q += " + kGridStride + ")");
  const std::vector<std::string> u = update_index(w, p, o, "q", "c");
  const std::string t = target_index(w, p, o, u);
  w.open("if (" + in_range(w, o, t) + ")");
  w.store(o.out, with_dim(u, o.dim, t), identity(o, p.reduce));
  w.close();
  w.close();
}

// The atomic updates, ScatterParams::update_unroll per thread and step:
// each one's target and value loaded before any is applied. One at a
// time, a thread waited on the index, then on the gathered row, then
// applied one update: a GNN's index_add of [1M, 128] messages took
// 0.61-0.70 ms a layer against triton's 0.32 for the same fused kernel
// (session 44 run 6).
void emit_scatter_update(KernelWriter& w, const ScatterParams& sp) {
  const int unroll = std::max(sp.update_unroll, 1);
  const ScatterParams p = atomic_view(w, sp);
  const Operands o = operands(w, p);
  const std::string n = update_count(w, p, o);
  w.open("for (long long qb = " + std::string(kThread) + "; qb < " + n + "; qb += " + std::to_string(unroll) + " * " +
         kGridStride + ")");
  std::vector<std::string> oks, ts, vals;
  std::vector<std::vector<std::string>> us;
  for (int k = 0; k < unroll; ++k) {
    const std::string q = w.fresh("q");
    w.line("const long long " + q + " = qb + " + std::to_string(k) + " * " + kGridStride + ";");
    // (past the end: the step's first update, loaded and not applied)
    us.push_back(update_index(w, p, o, q + " < " + n + " ? " + q + " : qb", "u" + std::to_string(k)));
    ts.push_back(target_index(w, p, o, us.back()));
    oks.push_back(q + " < " + n + " && " + in_range(w, o, ts.back()));  // out of range: skipped (docs/semantics.md#scatter)
    vals.push_back(w.value_at(o.src, us.back()));
  }
  for (int k = 0; k < unroll; ++k) {
    const auto ku = static_cast<size_t>(k);
    const std::vector<std::string>& u = us[ku];
    const std::string& t = ts[ku];
    w.open("if (" + oks[ku] + ")");
    const std::vector<std::string> target = with_dim(u, o.dim, t);
    if (p.reduce == ScatterReduce::None) {
      w.store(o.out, target, vals[ku]);
    } else {
      atomic_update(w, p, o, w.address(o.out, target), vals[ku]);
      if (slice_counts(sp)) {
        std::string first;
        for (size_t d = 0; d < o.rank; ++d)
          if (d != o.dim) first += (first.empty() ? "" : " && ") + u[d] + " == 0";
        w.line((first.empty() ? "" : "if (" + first + ") ") + "atomicAdd(" + scratch_words("int") + " + " + t + ", 1);");
      } else if (p.reduce == ScatterReduce::Mean) {
        w.line("atomicAdd(" + scratch_words("int") + " + " + logical_linear(w, o, target) + ", 1);");
      }
    }
    w.close();
  }
  w.close();
}

void emit_scatter_mean(KernelWriter& w, const ScatterParams& p) {
  const Operands o = operands(w, p);
  const std::string n = w.numel(o.out);
  w.open("for (long long q = " + std::string(kThread) + "; q < " + n + "; q += " + kGridStride + ")");
  std::vector<std::string> idx;
  if (slice_counts(p)) {
    idx = unravel(w, o.out, all_dims(o.rank), "q");
    std::string covered;
    for (size_t d = 0; d < o.rank; ++d)
      if (d != o.dim) covered += (covered.empty() ? "" : " && ") + idx[d] + " < " + slice_extent(w, o, d);
    w.line("const int cnt = " + (covered.empty() ? "" : "!(" + covered + ") ? 0 : ") + scratch_words("int") + "[" +
           idx[o.dim] + "];");
    w.open("if (cnt > 0)");
  } else {
    w.line("const int cnt = " + scratch_words("int") + "[q];");
    w.open("if (cnt > 0)");
    idx = unravel(w, o.out, all_dims(o.rank), "q");
  }
  const std::string at = w.element(o.out, idx);
  const DType t = o.dtype;
  const std::string cur = "(" + std::string(reg_type(t)) + ")" + load_form(t, at);
  const std::string count = "(cnt + " + std::string(p.include_self ? "1" : "0") + ")";
  std::string res;
  if (is_float(t)) {
    res = "(" + cur + " / (" + reg_type(t) + ")" + count + ")";
    if (t != DType::F32 && t != DType::F64) res = round_form(t, res);
  } else {
    res = "kf_floor_div((long long)" + cur + ", (long long)" + count + ")";
  }
  w.line(at + " = " + store_form(t, "(" + std::string(reg_type(t)) + ")(" + res + ")") + ";");
  w.close();
  w.close();
}

void emit_scatter_keys(KernelWriter& w, const ScatterParams& p) {
  const Operands o = operands(w, p);
  const std::string units = p.slices ? slice_count(w, p, o) : w.numel(o.index);
  w.line("long long* const keys = " + scratch_words("long long") + ";");
  w.line("long long* const pos = keys + args.padded;");
  w.open("for (long long q = " + std::string(kThread) + "; q < args.padded; q += " + kGridStride + ")");
  w.line("long long key = " + std::string(kNoKey) + ";");
  w.open("if (q < " + units + ")");
  if (p.slices) {
    const std::string t = target_index(w, p, o, with_dim(std::vector<std::string>(o.rank, "0"), o.dim, "q"));
    w.line("if (" + in_range(w, o, t) + ") key = " + t + ";");
  } else {
    const std::vector<std::string> u = unravel(w, o.index, all_dims(o.rank), "q", "k", true);
    const std::string t = target_index(w, p, o, u);
    w.line("if (" + in_range(w, o, t) + ") key = " + logical_linear(w, o, with_dim(u, o.dim, t)) + ";");
  }
  w.close();
  w.line("keys[q] = key;");
  w.line("pos[q] = q;");
  w.close();
}

// Bitonic sort of (key, pos) pairs, 2048 per block in shared memory: with
// args.sort_k == 0 every chunk is sorted from scratch (steps k = 2..2048),
// else the steps j = 1024..1 of merge step k (the global kernel did j >=
// 2048). Blocks of 1024 threads, one compare-exchange each per step.
void emit_scatter_sort_block(KernelWriter& w, const ScatterParams& /*p*/) {
  w.line("__shared__ long long sk[2048], sp[2048];");
  w.line("long long* const keys = " + scratch_words("long long") + ";");
  w.line("long long* const pos = keys + args.padded;");
  w.line("const int t = threadIdx.x;");
  w.open("for (long long base = (long long)blockIdx.x * 2048; base < args.padded; base += (long long)gridDim.x * 2048)");
  w.line("sk[t] = keys[base + t]; sp[t] = pos[base + t];");
  w.line("sk[t + 1024] = keys[base + t + 1024]; sp[t + 1024] = pos[base + t + 1024];");
  w.line("__syncthreads();");
  w.line("const long long k0 = args.sort_k == 0 ? 2 : args.sort_k;");
  w.line("const long long k1 = args.sort_k == 0 ? 2048 : args.sort_k;");
  w.open("for (long long k = k0; k <= k1; k <<= 1)");
  w.open("for (int j = (int)(k < 2048 ? k >> 1 : 1024); j > 0; j >>= 1)");
  w.line("const int i0 = 2 * t - (t & (j - 1));");
  w.line("const int i1 = i0 + j;");
  w.line("const bool up = ((base + i0) & k) == 0;");
  w.line("const long long ka = sk[i0], kb = sk[i1], pa = sp[i0], pb = sp[i1];");
  w.line("const bool greater = ka > kb || (ka == kb && pa > pb);");
  w.open("if (greater == up)");
  w.line("sk[i0] = kb; sk[i1] = ka; sp[i0] = pb; sp[i1] = pa;");
  w.close();
  w.line("__syncthreads();");
  w.close();
  w.close();
  w.line("keys[base + t] = sk[t]; pos[base + t] = sp[t];");
  w.line("keys[base + t + 1024] = sk[t + 1024]; pos[base + t + 1024] = sp[t + 1024];");
  w.line("__syncthreads();");
  w.close();
}

// One global compare-exchange step (args.sort_k, args.sort_j >= 2048).
void emit_scatter_sort_global(KernelWriter& w, const ScatterParams& /*p*/) {
  w.line("long long* const keys = " + scratch_words("long long") + ";");
  w.line("long long* const pos = keys + args.padded;");
  w.line("const long long j = args.sort_j, k = args.sort_k;");
  w.open("for (long long q = " + std::string(kThread) + "; q < args.padded / 2; q += " + kGridStride + ")");
  w.line("const long long i0 = 2 * q - (q & (j - 1));");
  w.line("const long long i1 = i0 + j;");
  w.line("const bool up = (i0 & k) == 0;");
  w.line("const long long ka = keys[i0], kb = keys[i1], pa = pos[i0], pb = pos[i1];");
  w.line("const bool greater = ka > kb || (ka == kb && pa > pb);");
  w.open("if (greater == up)");
  w.line("keys[i0] = kb; keys[i1] = ka; pos[i0] = pb; pos[i1] = pa;");
  w.close();
  w.close();
}

namespace {

// The sorted path's combine chunk: a run of equal keys is summed in order
// by one thread per slice element within each chunk of kSortedChunk
// sorted positions; runs that cross chunks are finished from the
// chunks' partials (emit_scatter_combine), so an index repeated
// thousands of times costs a few chunks' latency, not one long chain.
constexpr int kSortedChunk = KernelPlan::kScatterSortedChunk;
constexpr int kSortedUnroll = 8;  // independent src loads in flight per thread

struct Sorted {
  std::string width;  // slice elements per update (1 for scatter)
  std::string acc_t;
  DType acc_d;
  bool none;
};

Sorted sorted_types(KernelWriter& w, const ScatterParams& p, const Operands& o) {
  Sorted s;
  s.width = "1LL";
  if (p.slices) {
    std::string width = "1LL";
    for (size_t d = 0; d < o.rank; ++d)
      if (d != o.dim) width += " * " + slice_extent(w, o, d);
    s.width = w.hoist("long long", "wd", width);
  }
  s.none = p.reduce == ScatterReduce::None;
  // amax/amin select one of the values: float holds every float dtype's
  // but float64's exactly (one max.NaN instruction, not a double compare
  // chain); sums and products round, so they add in float64.
  const bool select = (p.reduce == ScatterReduce::Amax || p.reduce == ScatterReduce::Amin) && is_float(o.dtype) &&
                      o.dtype != DType::F64;
  s.acc_d = s.none ? o.dtype : select ? DType::F32 : DType::F64;
  s.acc_t = reg_type(s.acc_d);
  return s;
}

// Opens the loop over the slice elements of sorted position `key`: for
// index_reduce each thread takes `lanes` elements blockDim.x apart (lane
// u: element c<u>, in range when ok<u>; out-of-range lanes read element
// c0_ and store nothing); for scatter one lane (c0 = 0). Returns each
// lane's index into the result. Close once.
std::vector<std::vector<std::string>> open_lanes(KernelWriter& w, const ScatterParams& p, const Operands& o,
                                                 const Sorted& s, int lanes) {
  std::vector<std::vector<std::string>> targets;
  if (!p.slices) {
    w.open("");
    w.line("[[maybe_unused]] const long long c0 = 0;");
    w.line("[[maybe_unused]] const bool ok0 = true;");
    targets.push_back(unravel(w, o.out, all_dims(o.rank), "key", "t", true));
    return targets;
  }
  w.open("for (long long c0_ = threadIdx.x; c0_ < " + s.width + "; c0_ += " + std::to_string(lanes) + " * blockDim.x)");
  for (int u = 0; u < lanes; ++u) {
    const std::string c = "c" + std::to_string(u), ok = "ok" + std::to_string(u);
    w.line("const bool " + ok + " = c0_ + " + std::to_string(u) + " * (long long)blockDim.x < " + s.width + ";");
    w.line("const long long " + c + " = " + ok + " ? c0_ + " + std::to_string(u) + " * (long long)blockDim.x : c0_;");
    std::vector<std::string> target(o.rank, "0");
    const std::string rem = w.fresh("rem");
    w.line("long long " + rem + " = " + c + ";");
    for (size_t d = o.rank; d-- > 0;) {
      if (d == o.dim) continue;
      target[d] = w.fresh("e");
      w.line("const long long " + target[d] + " = " + rem + " % (long long)" + slice_extent(w, o, d) + ";");
      w.line(rem + " /= (long long)" + slice_extent(w, o, d) + ";");
    }
    target[o.dim] = "key";
    targets.push_back(target);
  }
  return targets;
}

// Opens the loops over sorted positions p (keys[p] in `key`) that pass
// `head` (for index_reduce one block per position: a block per position
// and slice tile measured slower, perf-log.md session 9; for scatter one
// thread per position), then open_lanes. Close twice.
std::vector<std::vector<std::string>> open_sorted_loops(KernelWriter& w, const ScatterParams& p, const Operands& o,
                                                        const Sorted& s, const std::string& head,
                                                        const std::vector<std::string>& per_position, int lanes) {
  w.line("long long* const keys = " + scratch_words("long long") + ";");
  w.line("[[maybe_unused]] long long* const pos = keys + args.padded;");
  w.line("[[maybe_unused]] " + s.acc_t + "* const part = (" + s.acc_t + "*)(keys + 2 * args.padded);");
  if (p.slices)
    w.open("for (long long p = blockIdx.x; p < args.padded; p += gridDim.x)");
  else
    w.open("for (long long p = " + std::string(kThread) + "; p < args.padded; p += " + kGridStride + ")");
  w.line("const long long key = keys[p];");
  w.line("if (key == " + std::string(kNoKey) + ") continue;");
  w.line("const bool starts = p == 0 || keys[p - 1] != key;");
  w.line("const long long chunk_end = p / " + std::to_string(kSortedChunk) + " * " + std::to_string(kSortedChunk) +
         " + " + std::to_string(kSortedChunk) + ";");
  w.line("if (!(" + head + ")) continue;");
  for (const std::string& l : per_position) w.line(l);
  return open_lanes(w, p, o, s, lanes);
}

std::string part_at(const Sorted& s, const std::string& chunk, int slot, const std::string& c) {
  return "part[(" + chunk + " * 2 + " + std::to_string(slot) + ") * " + s.width + " + " + c + "]";
}

// The run's final value `acc` stored (mean divides by n).
void store_final(KernelWriter& w, const ScatterParams& p, const Operands& o, const Sorted& s,
                 const std::vector<std::string>& target, const std::string& acc) {
  const std::string v = p.reduce == ScatterReduce::Mean ? "(" + acc + " / (double)n)" : acc;
  w.store(o.out, target, convert(s.acc_d, o.dtype, v));
}

// The start of a combination that leaves the first value unchanged, bit
// for bit: -0.0 for sums (-0.0 + x == x, also for x = -0.0), 1 for
// products, -inf for amax and inf for amin (float dtypes only: the
// scheduler sorts them for speed), in the accumulator's type; reduce none
// overwrites it.
std::string neutral(const ScatterParams& p, const Sorted& s) {
  if (s.none) return "0";
  if (p.reduce == ScatterReduce::Amax) return literal_f64(s.acc_d, -__builtin_inf());
  if (p.reduce == ScatterReduce::Amin) return literal_f64(s.acc_d, __builtin_inf());
  return p.reduce == ScatterReduce::Prod ? "1.0" : "-0.0";
}

}  // namespace

// Phase 1 of the sorted path: every run start, and every chunk start
// inside a run, combines its positions up to the run's or the chunk's end
// in order. A run within one chunk is finished here (starting from the
// input's value: the CPU's order, so the same bits); a piece of a longer
// run leaves a partial: slot 0 of its chunk when it continues a run, slot
// 1 when it starts one. Each thread keeps lanes x unroll loads in flight
// (ScatterParams).
void emit_scatter_apply(KernelWriter& w, const ScatterParams& p) {
  const Operands o = operands(w, p);
  const Sorted s = sorted_types(w, p, o);
  const int lanes = p.lanes, unroll = p.unroll;
  const bool self = p.include_self && !s.none;
  const std::vector<std::vector<std::string>> targets =
      open_sorted_loops(w, p, o, s, "starts || p % " + std::to_string(kSortedChunk) + " == 0",
                        {"long long e = p + 1;", "while (e < args.padded && e < chunk_end && keys[e] == key) ++e;",
                         "const bool ends = e == args.padded || keys[e] != key;",
                         std::string("[[maybe_unused]] const long long n = e - p + (starts ? ") + (self ? "1" : "0") + " : 0);"},
                        lanes);
  std::vector<std::string> acc(static_cast<size_t>(lanes));
  for (int u = 0; u < lanes; ++u) {
    acc[static_cast<size_t>(u)] = "acc" + std::to_string(u);
    const std::string init = self ? "starts ? " + convert(o.dtype, s.acc_d, w.value_at(o.x, targets[static_cast<size_t>(u)])) + " : " + neutral(p, s)
                                  : neutral(p, s);
    w.line(s.acc_t + " " + acc[static_cast<size_t>(u)] + " = " + init + ";");
  }
  w.open("for (long long r = p; r < e; r += " + std::to_string(unroll) + ")");
  std::vector<std::string> rows;
  for (int k = 0; k < unroll; ++k) {
    rows.push_back(w.fresh("r"));
    w.line("const long long " + rows.back() + " = pos[r + " + std::to_string(k) + " < e ? r + " + std::to_string(k) + " : r];");
  }
  std::vector<std::vector<std::string>> vals(static_cast<size_t>(lanes));
  for (int u = 0; u < lanes; ++u)
    for (int k = 0; k < unroll; ++k) {
      std::vector<std::string> source;
      if (p.slices) source = with_dim(targets[static_cast<size_t>(u)], o.dim, rows[static_cast<size_t>(k)]);
      else source = unravel(w, o.index, all_dims(o.rank), rows[static_cast<size_t>(k)], "s" + std::to_string(k), true);
      vals[static_cast<size_t>(u)].push_back(convert(o.dtype, s.acc_d, w.value_at(o.src, source)));
    }
  for (int k = 0; k < unroll; ++k) {
    w.open("if (r + " + std::to_string(k) + " < e)");
    for (int u = 0; u < lanes; ++u) {
      const std::string& a = acc[static_cast<size_t>(u)];
      w.line(a + " = " + combine(p.reduce, s.acc_d, a, vals[static_cast<size_t>(u)][static_cast<size_t>(k)]) + ";");
    }
    w.close();
  }
  w.close();
  for (int u = 0; u < lanes; ++u) {
    const std::string us = std::to_string(u);
    w.open("if (ok" + us + ")");
    w.open("if (starts && ends)");
    store_final(w, p, o, s, targets[static_cast<size_t>(u)], acc[static_cast<size_t>(u)]);
    w.close_open("else");
    w.line("part[((p / " + std::to_string(kSortedChunk) + ") * 2 + (starts ? 1 : 0)) * " + s.width + " + c" + us +
           "] = " + acc[static_cast<size_t>(u)] + ";");
    w.close();
    w.close();
  }
  w.close();
  w.close();
}

// Phase 2: one block (index_reduce) or thread (scatter) per chunk
// boundary that a run crosses and whose run starts in the chunk before it
// combines the run's partials in order: that chunk's slot 1, then slot 0
// of each chunk the run continues into.
void emit_scatter_combine(KernelWriter& w, const ScatterParams& p) {
  const Operands o = operands(w, p);
  const Sorted s = sorted_types(w, p, o);
  const std::string C = std::to_string(kSortedChunk);
  w.line("const long long* const keys = " + scratch_words("const long long") + ";");
  w.line("const " + s.acc_t + "* const part = (const " + s.acc_t + "*)(keys + 2 * args.padded);");
  w.line("const long long chunks = args.padded / " + C + ";");
  if (p.slices)
    w.open("for (long long k = blockIdx.x; k + 1 < chunks; k += gridDim.x)");
  else
    w.open("for (long long k = " + std::string(kThread) + "; k + 1 < chunks; k += " + kGridStride + ")");
  w.line("const long long b = (k + 1) * " + C + ";");
  w.line("const long long key = keys[b];");
  w.line("if (key == " + std::string(kNoKey) + " || keys[b - 1] != key) continue;  // no run crosses b");
  w.line("if (k > 0 && keys[k * " + C + "] == key && keys[k * " + C + " - 1] == key) continue;  // an earlier boundary's run");
  if (p.reduce == ScatterReduce::Mean) {  // the run's length
    w.line("long long p = b - 1;");
    w.line("while (p > k * " + C + " && keys[p - 1] == key) --p;");
    w.line("long long e = b;");
    w.line("while (e < args.padded && keys[e] == key) ++e;");
    w.line("const long long n = e - p + " + std::string(p.include_self ? "1" : "0") + ";");
  }
  const int lanes = p.lanes;
  const std::vector<std::vector<std::string>> targets = open_lanes(w, p, o, s, lanes);
  for (int u = 0; u < lanes; ++u) {
    const std::string us = std::to_string(u);
    w.line(s.acc_t + " acc" + us + " = " + part_at(s, "k", 1, "c" + us) + ";");
  }
  w.line("long long kk = k + 1;");
  w.open("while (true)");
  for (int u = 0; u < lanes; ++u) {
    const std::string a = "acc" + std::to_string(u);
    w.line(a + " = " + combine(p.reduce, s.acc_d, a, part_at(s, "kk", 0, "c" + std::to_string(u))) + ";");
  }
  w.line("if ((kk + 1) * " + C + " < args.padded && keys[(kk + 1) * " + C + "] == key) ++kk;");
  w.line("else break;");
  w.close();
  for (int u = 0; u < lanes; ++u) {
    const std::string us = std::to_string(u);
    w.open("if (ok" + us + ")");
    store_final(w, p, o, s, targets[static_cast<size_t>(u)], "acc" + us);
    w.close();
  }
  w.close();
  w.close();
}

// Device helpers of the scatter kernels, in their units only (the other
// kernels do not pay for parsing them).
std::string_view scatter_helpers() {
  return R"KFCUDA(
// The bytes of a stored element (low bytes first, as the GPU stores them).
template <class T> KF_DEV T kf_from_bits(unsigned long long b) { union { unsigned long long u; T t; } x; x.u = b; return x.t; }
template <class T> KF_DEV unsigned long long kf_to_bits(T t) { union { unsigned long long u; T t; } x; x.u = 0; x.t = t; return x.u; }
// A read-modify-write of one stored element of 1, 2, 4 or 8 bytes by a
// compare-and-swap loop on the aligned word that holds it.
template <class T, class F> KF_DEV void kf_atomic_apply(T* p, F f) {
  if constexpr (sizeof(T) == 8) {
    unsigned long long* w = (unsigned long long*)p;
    unsigned long long old = *(volatile unsigned long long*)w, assumed;
    do {
      assumed = old;
      const unsigned long long nb = kf_to_bits(f(kf_from_bits<T>(assumed)));
      if (nb == assumed) return;
      old = atomicCAS(w, assumed, nb);
    } while (old != assumed);
  } else {
    const unsigned long long a = (unsigned long long)p;
    unsigned* w = (unsigned*)(a & ~3ull);
    const unsigned shift = (unsigned)(a & 3ull) * 8u;
    const unsigned mask = sizeof(T) == 4 ? 0xffffffffu : ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned old = *(volatile unsigned*)w, assumed;
    do {
      assumed = old;
      const unsigned nb = (unsigned)kf_to_bits(f(kf_from_bits<T>((assumed & mask) >> shift)));
      const unsigned nw = (assumed & ~mask) | ((nb << shift) & mask);
      if (nw == assumed) return;
      old = atomicCAS(w, assumed, nw);
    } while (old != assumed);
  }
}
KF_DEV void kf_atomic_add_bf16(unsigned short* p, float v) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.noftz.bf16 [%0], %1;" :: "l"(p), "h"(kf_f2bf(v)) : "memory");
#else
  kf_atomic_apply(p, [&](unsigned short c) -> unsigned short { return kf_f2bf(kf_bf2f(c) + v); });
#endif
}
KF_DEV void kf_atomic_add_f16(unsigned short* p, float v) {
  asm volatile("red.global.add.noftz.f16 [%0], %1;" :: "l"(p), "h"(kf_f2h(v)) : "memory");
}
KF_DEV long long kf_floor_div(long long a, long long b) {
  long long q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
)KFCUDA";
}

}  // namespace kf
