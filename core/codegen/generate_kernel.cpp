// generate_kernel: RowSchedule -> one CUDA kernel. The pointwise scheduler
// writes grid-stride loops over its output domains (with a 16-byte vector
// variant chosen at run time); the reduction and normalization schedulers
// write one block per row: phases of thread-strided accumulation and block
// reductions, then a pass writing the domain-shaped outputs and one thread
// writing the row-shaped ones. docs/codegen.md describes the kernels.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

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
constexpr int kPointwiseUnroll = 2;  // 16-byte vectors per thread and step

// KFUSE_TUNE_* environment variables override a few scheduler constants,
// to measure the heuristics on a GPU without rebuilding (docs/PERF.md);
// they are read once and are not part of the API.
int tuned(const char* name, int fallback) {
  const char* v = std::getenv(name);
  const int n = v != nullptr ? std::atoi(v) : 0;
  return n > 0 ? n : fallback;
}
int pointwise_unroll() {
  static const int u = tuned("KFUSE_TUNE_POINTWISE_UNROLL", kPointwiseUnroll);
  return u;
}

// Unravels `linear` over `dims` of `dom` (outermost first) into locals
// i<d>; returns one index expression per listed dim ("0" for size-1 dims).
std::vector<std::string> unravel(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims,
                                 const std::string& linear, const std::string& suffix = "") {
  std::vector<std::string> names(dims.size(), "0");
  std::vector<size_t> many;
  for (size_t k = 0; k < dims.size(); ++k)
    if (w.size_class(dom, dims[k]) == SizeClass::Many) many.push_back(k);
  if (many.empty()) return names;
  const std::string& t = w.index_type();
  if (many.size() == 1) {
    names[many[0]] = "i" + std::to_string(dims[many[0]]) + suffix;
    w.line("const " + t + " " + names[many[0]] + " = (" + t + ")(" + linear + ");");
    return names;
  }
  const std::string rem = w.fresh("rem");
  w.line(t + " " + rem + " = (" + t + ")(" + linear + ");");
  for (size_t m = many.size(); m-- > 0;) {
    const size_t k = many[m];
    names[k] = "i" + std::to_string(dims[k]) + suffix;
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
  size_t dim = 0;  // the domain dim the lanes run along
  std::vector<int64_t> outputs;
};

bool same_classes(const KernelWriter& w, int64_t a, int64_t b) {
  return w.concrete().size_classes[static_cast<size_t>(a)] == w.concrete().size_classes[static_cast<size_t>(b)];
}

using LoadLog = std::vector<std::pair<int64_t, std::vector<std::string>>>;

// For each dim of input `v`, the domain dim whose index it reads (-1: a
// size-1 dim read at 0). Without a load log, v is right-aligned with the
// domain (broadcast over the leading dims); with one (loads recorded at
// the domain's plain index names "i<d>"), every load of v must read
// plain names in one arrangement (a permuted input). Empty: no mapping.
std::vector<int> domain_dims(const KernelWriter& w, int64_t v, size_t rd, const LoadLog* log) {
  const size_t rv = w.rank(v);
  std::vector<int> dims(rv, -1);
  if (log == nullptr) {
    if (rv > rd) return {};
    for (size_t j = 0; j < rv; ++j)
      if (w.size_class(v, j) != SizeClass::One) dims[j] = static_cast<int>(rd - rv + j);
    return dims;
  }
  bool seen = false;
  for (const auto& [value, vidx] : *log) {
    if (value != v) continue;
    std::vector<int> these(rv, -1);
    for (size_t j = 0; j < rv && j < vidx.size(); ++j) {
      if (vidx[j] == "0" && w.size_class(v, j) == SizeClass::One) continue;
      if (vidx[j].size() < 2 || vidx[j][0] != 'i' || vidx[j].find_first_not_of("0123456789", 1) != std::string::npos) return {};
      these[j] = std::stoi(vidx[j].substr(1));
    }
    if (vidx.size() != rv || (seen && these != dims)) return {};
    dims = these;
    seen = true;
  }
  return seen ? dims : std::vector<int>{};
}

// Inputs and outputs that can move as whole vectors along domain dim
// `dim` (the last dim, or the outputs' fast dim in a tile): inputs whose
// dim read by `dim` is of class >1 and innermost in memory, every other
// dim a domain dim or broadcast (checked again at run time, with
// alignment); outputs of the domain's sizes with `dim` innermost. `log`:
// see domain_dims.
VectorPlan plan_vectors(KernelWriter& w, const Task& task, const std::vector<int64_t>& outs, int64_t dom, size_t dim,
                        const LoadLog* log = nullptr) {
  VectorPlan p;
  p.dim = dim;
  const ConcreteFusion& c = w.concrete();
  const Fusion& f = w.fusion();
  const size_t r = w.rank(dom);
  if (dim >= r || w.size_class(dom, dim) != SizeClass::Many) return p;
  int widest = 1;
  for (int64_t v : task.inputs) {
    const Value& val = f.value(v);
    if (val.is_scalar) continue;
    const std::vector<int> dims = domain_dims(w, v, r, log);
    auto lane_dim = std::find(dims.begin(), dims.end(), static_cast<int>(dim));
    if (lane_dim == dims.end() || w.size_class(v, static_cast<size_t>(lane_dim - dims.begin())) != SizeClass::Many) continue;
    const int pv = static_cast<int>(lane_dim - dims.begin());
    bool fits = true;  // each dim broadcast or of its domain dim's class
    for (size_t j = 0; j < dims.size(); ++j)
      if (dims[j] >= 0 && w.size_class(v, j) != w.size_class(dom, static_cast<size_t>(dims[j]))) fits = false;
    if (!fits) continue;
    if (val.kind == ValueKind::TensorInput) {
      const InputLayout& l = c.input_layouts[static_cast<size_t>(val.input_index)];
      if (l.stride_order.empty() || l.stride_order.back() != pv || l.alignment < kVectorBytes / 2) continue;
    } else {
      const auto& order = c.stride_orders[static_cast<size_t>(v)];
      if (order.empty() || order.back() != pv) continue;
    }
    w.vector_inputs[v] = dims;
    widest = std::max(widest, dtype_size(val.dtype));
  }
  for (int64_t o : outs) {
    const auto& order = c.stride_orders[static_cast<size_t>(o)];
    if (!same_classes(w, o, dom) || order.empty() || order.back() != static_cast<int>(dim)) continue;
    p.outputs.push_back(o);
    widest = std::max(widest, dtype_size(f.value(o).dtype));
  }
  if (w.vector_inputs.empty() && p.outputs.empty()) return p;
  p.width = kVectorBytes / widest;
  return p;
}

// Run-time conditions for moving `v` as vectors of `width` elements along
// domain dim `dim` (v: a vector input, or an output in domain order).
void vector_conditions(KernelWriter& w, const ExtentSets& sets, int64_t v, int64_t dom, int width, size_t dim,
                       std::vector<std::string>* conds) {
  const size_t r = w.rank(v), rd = w.rank(dom);
  auto vi = w.vector_inputs.find(v);
  const std::vector<int> dims = vi != w.vector_inputs.end() ? vi->second : domain_dims(w, v, rd, nullptr);
  const size_t pv = static_cast<size_t>(std::find(dims.begin(), dims.end(), static_cast<int>(dim)) - dims.begin());
  const int bytes = width * dtype_size(w.fusion().value(v).dtype);
  conds->push_back("((unsigned long long)" + w.pointer(v) + " % " + std::to_string(bytes) + " == 0)");
  conds->push_back(w.stride(v, pv) + " == 1");
  for (size_t d = 0; d < r; ++d)
    if (d != pv && w.size_class(v, d) == SizeClass::Many)
      conds->push_back(w.stride(v, d) + " % " + std::to_string(width) + " == 0");
  for (size_t d = 0; d < r; ++d) {
    if (dims[d] < 0) continue;
    if (w.size_class(v, d) == SizeClass::Many && !sets.same(v, static_cast<int>(d), dom, dims[d]))
      conds->push_back(w.extent(v, d) + " == " + w.extent(dom, static_cast<size_t>(dims[d])));
  }
}

// The vector loads of the used (candidate, group) registers of `section`,
// each guarded by its group's condition (empty: unguarded).
std::string vector_loads(KernelWriter& w, int V, int section, const std::vector<std::string>& group_ok) {
  std::string loads;
  for (const auto& [key, vr] : w.vector_regs) {
    if (vr.section != section) continue;
    const int64_t v = key.first;
    const std::string vt = "kf_vec<" + std::string(storage_type(w.fusion().value(v).dtype)) + ", " + std::to_string(V) + ">";
    const std::string load = "*(const " + vt + "*)(" + w.pointer(v) + " + " + w.offset(v, vr.base) + ")";
    if (!loads.empty()) loads += "\n" + std::string(6, ' ');
    const std::string& ok = group_ok.empty() ? std::string() : group_ok[static_cast<size_t>(key.second)];
    loads += "const " + vt + " " + vr.reg + " = " + (ok.empty() ? load : "(" + ok + ") ? " + load + " : " + vt + "{}") + ";";
  }
  return loads.empty() ? "// no vector loads" : loads;
}

// ---- transposed inputs: tiles through shared memory ----

constexpr int kTile = 64;  // kTile x kTile elements per tile, 256 threads

struct TilePlan {
  std::vector<std::pair<int64_t, std::vector<std::string>>> inputs;  // input, its index in the tile
  size_t da = 0, db = 0;  // tiled inputs are contiguous along da, the outputs along db
  LoadLog loads;          // every load of the outputs' evaluation at the plain names "i<d>"
};

// Inputs of the loop whose innermost memory dim follows the domain's
// second-to-last dim (read through a permute): found by evaluating the
// outputs once in a scratch writer and looking at the index of every load.
TilePlan plan_tiles(const ConcreteFusion& c, const Task& task, const std::vector<int64_t>& outs) {
  TilePlan tp;
  const Fusion& f = *c.fusion;
  const int64_t dom = outs[0];
  KernelWriter probe(c, task);
  const size_t r = probe.rank(dom);
  if (r < 2 || probe.size_class(dom, r - 1) != SizeClass::Many || probe.size_class(dom, r - 2) != SizeClass::Many)
    return tp;
  // (The outputs' layout is the caller's with kf_execute_into: tiles are
  // never slower than the strided reads they replace.)
  for (int64_t o : outs)
    if (!same_classes(probe, o, dom)) return tp;
  // The outputs' fast dim: their produced layout's innermost (a permuted
  // operand makes torch and kfuse produce column-major results).
  const auto& out_order = c.stride_orders[static_cast<size_t>(dom)];
  tp.db = !out_order.empty() && out_order.back() == static_cast<int>(r - 2) ? r - 2 : r - 1;
  tp.da = tp.db == r - 1 ? r - 2 : r - 1;
  std::vector<std::string> idx(r);
  for (size_t d = 0; d < r; ++d) idx[d] = probe.size_class(dom, d) == SizeClass::Many ? "i" + std::to_string(d) : "0";
  LoadLog& log = tp.loads;
  probe.load_log = &log;
  for (int64_t o : outs) probe.value_at(o, idx);
  const std::string along_a = idx[tp.da];
  int bytes = 0;
  for (const auto& [v, vidx] : log) {
    const Value& val = f.value(v);
    if (val.is_scalar || vidx.empty()) continue;
    const std::vector<int>& order = val.kind == ValueKind::TensorInput
                                        ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order
                                        : c.stride_orders[static_cast<size_t>(v)];
    if (order.empty() || vidx[static_cast<size_t>(order.back())] != along_a) continue;
    bool plain = true;  // only the domain's own index names (no temporaries of the probe)
    for (const std::string& e : vidx) plain = plain && (e == "0" || std::find(idx.begin(), idx.end(), e) != idx.end());
    if (!plain) continue;
    const int64_t id = v;  // clang 14 cannot capture structured bindings
    if (std::any_of(tp.inputs.begin(), tp.inputs.end(), [id](const auto& in) { return in.first == id; })) continue;
    const int size = val.dtype == DType::F64 || val.dtype == DType::I64 ? 8 : 4;
    if (bytes + kTile * (kTile + 1) * size > 40 * 1024) break;
    bytes += kTile * (kTile + 1) * size;
    tp.inputs.push_back({v, vidx});
  }
  return tp;
}

// Computes the outputs at each lane of one vector group (lane 0 at `idx`,
// lanes along domain dim vp.dim) and stores them: vector outputs as
// one 16-byte store, the others element by element. `on_lane` runs before
// each lane is evaluated (tiles point their shared-memory reads at it).
void vector_group(KernelWriter& w, const VectorPlan& vp, const std::vector<int64_t>& outs,
                  const std::vector<std::string>& idx, const std::function<void(int)>& on_lane) {
  const Fusion& f = w.fusion();
  const size_t d = vp.dim;
  std::vector<std::string> ov;
  for (int64_t o : vp.outputs) {
    ov.push_back(w.fresh("ov"));
    w.line("kf_vec<" + std::string(storage_type(f.value(o).dtype)) + ", " + std::to_string(vp.width) + "> " + ov.back() + ";");
  }
  w.lane_base = idx;
  for (int lane = 0; lane < vp.width; ++lane) {
    w.lane = lane;
    w.lane_index = idx;
    if (lane > 0) w.lane_index[d] = "(" + idx[d] + " + " + std::to_string(lane) + ")";
    on_lane(lane);
    for (int64_t o : outs) {
      const std::string reg = w.value_at(o, w.lane_index);
      auto it = std::find(vp.outputs.begin(), vp.outputs.end(), o);
      if (it == vp.outputs.end())
        w.store(o, w.lane_index, reg);
      else
        w.line(ov[static_cast<size_t>(it - vp.outputs.begin())] + ".v[" + std::to_string(lane) + "] = " +
               w.stored(f.value(o).dtype, reg) + ";");
    }
  }
  w.lane = -1;
  for (size_t k = 0; k < vp.outputs.size(); ++k) {
    const int64_t o = vp.outputs[k];
    const std::string vt = "kf_vec<" + std::string(storage_type(f.value(o).dtype)) + ", " + std::to_string(vp.width) + ">";
    w.line("*(" + vt + "*)(" + w.pointer(o) + " + " + w.offset(o, idx) + ") = " + ov[k] + ";");
  }
}

// Joins run-time conditions with &&.
std::string all_of(const std::vector<std::string>& conds) {
  std::string cond;
  for (const std::string& c : conds) cond += (cond.empty() ? "" : " && ") + c;
  return cond.empty() ? "true" : cond;
}

// Tiles of the last two dims (a, b): the transposed inputs are read with
// threads along a (coalesced for them) into shared memory, then the
// outputs are computed with threads along b. The shared rows are padded by
// one element. Where strides and alignment allow (checked at run time),
// both phases move 16-byte vectors: a warp then reads and writes whole
// 128-byte lines instead of 64-byte halves with 2-byte elements, and
// issues a quarter of the memory instructions (docs/PERF.md).
struct TileNames {
  std::string ea, eb, ia, ib;       // extents and index names of dims a and b
  std::vector<std::string> shared;  // one tile per tiled input
};

// Phase 1, scalar: thread (k, lx) reads element (a0 + lx, b0 + k).
void tile_fill(KernelWriter& w, const TilePlan& tp, const TileNames& n) {
  const Fusion& f = w.fusion();
  const std::string& t = w.index_type();
  w.line("#pragma unroll");
  w.open("for (int kk = 0; kk < " + std::to_string(kTile) + "; kk += " + std::to_string(kBlock / kTile) + ")");
  w.line("const int k = kk + (int)(threadIdx.x / " + std::to_string(kTile) + "), lx = threadIdx.x % " + std::to_string(kTile) + ";");
  w.line("const " + t + " " + n.ia + " = a0 + lx, " + n.ib + " = b0 + k;");
  w.open("if (" + n.ia + " < " + n.ea + " && " + n.ib + " < " + n.eb + ")");
  for (size_t q = 0; q < tp.inputs.size(); ++q) {
    const int64_t v = tp.inputs[q].first;
    w.line(n.shared[q] + "[k][lx] = " + load_form(f.value(v).dtype, w.pointer(v) + "[" + w.offset(v, tp.inputs[q].second) + "]") + ";");
  }
  w.close();
  w.close();
}

// Phase 1, vectors: each thread reads 16 bytes along a per step. Appends
// the run-time conditions to `conds`.
void tile_fill_vectors(KernelWriter& w, const TilePlan& tp, const TileNames& n, std::vector<std::string>* conds) {
  const Fusion& f = w.fusion();
  const ConcreteFusion& c = w.concrete();
  const std::string& t = w.index_type();
  for (size_t q = 0; q < tp.inputs.size(); ++q) {
    const int64_t v = tp.inputs[q].first;
    const Value& val = f.value(v);
    const int V = kVectorBytes / dtype_size(val.dtype), lanes_per_row = kTile / V;
    const std::vector<int>& order = val.kind == ValueKind::TensorInput
                                        ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order
                                        : c.stride_orders[static_cast<size_t>(v)];
    const size_t inner = static_cast<size_t>(order.back());
    conds->push_back(n.ea + " % " + std::to_string(V) + " == 0");
    conds->push_back("((unsigned long long)" + w.pointer(v) + " % " + std::to_string(kVectorBytes) + " == 0)");
    conds->push_back(w.stride(v, inner) + " == 1");
    for (size_t d = 0; d < w.rank(v); ++d)
      if (d != inner && w.size_class(v, d) == SizeClass::Many) conds->push_back(w.stride(v, d) + " % " + std::to_string(V) + " == 0");
    const std::string vt = "kf_vec<" + std::string(storage_type(val.dtype)) + ", " + std::to_string(V) + ">";
    w.line("#pragma unroll");
    w.open("for (int kk = 0; kk < " + std::to_string(kTile) + "; kk += " + std::to_string(kBlock / lanes_per_row) + ")");
    w.line("const int k = kk + (int)(threadIdx.x / " + std::to_string(lanes_per_row) + "), ga = (int)(threadIdx.x % " +
           std::to_string(lanes_per_row) + ") * " + std::to_string(V) + ";");
    w.line("const " + t + " " + n.ia + " = a0 + ga, " + n.ib + " = b0 + k;");
    w.open("if (" + n.ia + " < " + n.ea + " && " + n.ib + " < " + n.eb + ")");
    const std::string reg = w.fresh("tv");
    w.line("const " + vt + " " + reg + " = *(const " + vt + "*)(" + w.pointer(v) + " + " + w.offset(v, tp.inputs[q].second) + ");");
    for (int j = 0; j < V; ++j)
      w.line(n.shared[q] + "[k][ga + " + std::to_string(j) + "] = " + load_form(val.dtype, reg + ".v[" + std::to_string(j) + "]") + ";");
    w.close();
    w.close();
  }
}

// A tiled input's index in terms of the probe's names "i<d>", renamed to
// the loop's index expressions `idx` (domain order).
std::vector<std::string> tile_index(const std::vector<std::string>& probe_idx, const std::vector<std::string>& idx) {
  std::vector<std::string> at = probe_idx;
  for (std::string& e : at)
    for (size_t d = 0; d < idx.size(); ++d)
      if (e == "i" + std::to_string(d)) {
        e = idx[d];
        break;
      }
  return at;
}

// Phase 2, scalar: thread (k, lx) computes the outputs at (a0 + k, b0 + lx).
void tile_compute(KernelWriter& w, const TilePlan& tp, const TileNames& n, const std::vector<int64_t>& outs,
                  const std::vector<std::string>& idx) {
  const std::string& t = w.index_type();
  w.line("#pragma unroll 4");  // a full unroll measured slower (docs/PERF.md)
  w.open("for (int kk = 0; kk < " + std::to_string(kTile) + "; kk += " + std::to_string(kBlock / kTile) + ")");
  w.line("const int k = kk + (int)(threadIdx.x / " + std::to_string(kTile) + "), lx = threadIdx.x % " + std::to_string(kTile) + ";");
  w.line("const " + t + " " + n.ia + " = a0 + k, " + n.ib + " = b0 + lx;");
  w.open("if (" + n.ia + " < " + n.ea + " && " + n.ib + " < " + n.eb + ")");
  for (size_t q = 0; q < tp.inputs.size(); ++q)
    w.tile_reads[tp.inputs[q].first] = {tile_index(tp.inputs[q].second, idx), n.shared[q] + "[lx][k]"};
  for (int64_t o : outs) w.store(o, idx, w.value_at(o, idx));
  w.tile_reads.clear();
  w.close();
  w.close();
}

// Phase 2, vectors along b (the outputs' fast dim): thread (k, gb) of
// group u computes V consecutive outputs at (a0 + u * rows + k, b0 + gb ...).
// The groups' vector loads are written at `loads_tag`, placed before
// phase 1: they are in flight together with the tile's (one memory round
// trip per tile instead of two).
struct TileGroups {
  std::vector<std::vector<std::string>> idx;  // per group: the domain index of lane 0
  std::vector<std::string> ok, k;             // per group: in range; row in the tile
};

TileGroups tile_groups(KernelWriter& w, const TileNames& n, const VectorPlan& vp, const std::vector<std::string>& idx,
                       size_t da, size_t db) {
  const std::string& t = w.index_type();
  const int V = vp.width, lanes_per_row = kTile / V, rows = kBlock / lanes_per_row;
  TileGroups g;
  w.line("const int gb = (int)(threadIdx.x % " + std::to_string(lanes_per_row) + ") * " + std::to_string(V) + ";");
  for (int u = 0; u * rows < kTile; ++u) {
    const std::string k = w.fresh("tk"), ia = w.fresh("ta"), ib = w.fresh("tb");
    w.line("const int " + k + " = " + std::to_string(u * rows) + " + (int)(threadIdx.x / " + std::to_string(lanes_per_row) + ");");
    w.line("const " + t + " " + ia + " = a0 + " + k + ", " + ib + " = b0 + gb;");
    std::vector<std::string> gi = idx;
    gi[da] = ia;
    gi[db] = ib;
    g.idx.push_back(gi);
    g.ok.push_back(ia + " < " + n.ea + " && " + ib + " < " + n.eb);
    g.k.push_back(k);
  }
  return g;
}

void tile_compute_vectors(KernelWriter& w, const ExtentSets& sets, const TilePlan& tp, const TileNames& n,
                          const VectorPlan& vp, const TileGroups& g, const std::vector<int64_t>& outs,
                          std::vector<std::string>* conds) {
  const int64_t dom = outs[0];
  const int V = vp.width;
  w.section = 0;
  for (size_t u = 0; u < g.idx.size(); ++u) {
    w.open("if (" + g.ok[u] + ")");
    w.group = static_cast<int>(u);
    vector_group(w, vp, outs, g.idx[u], [&](int lane) {
      for (size_t q = 0; q < tp.inputs.size(); ++q)
        w.tile_reads[tp.inputs[q].first] = {tile_index(tp.inputs[q].second, w.lane_index),
                                            n.shared[q] + "[gb + " + std::to_string(lane) + "][" + g.k[u] + "]"};
    });
    w.tile_reads.clear();
    w.close();
  }
  conds->push_back(n.eb + " % " + std::to_string(V) + " == 0");
  for (const auto& [key, vr] : w.vector_regs)
    if (key.second == 0) vector_conditions(w, sets, key.first, dom, V, vp.dim, conds);
  for (int64_t o : vp.outputs) vector_conditions(w, sets, o, dom, V, vp.dim, conds);
}

void tile_loop(KernelWriter& w, const ExtentSets& sets, const Task& task, const TilePlan& tp,
               const std::vector<int64_t>& outs) {
  const Fusion& f = w.fusion();
  const int64_t dom = outs[0];
  const size_t r = w.rank(dom);
  const std::string& t = w.index_type();
  const std::string T = std::to_string(kTile);
  const size_t da = tp.da, db = tp.db;
  TileNames n{w.extent(dom, da), w.extent(dom, db), "i" + std::to_string(da), "i" + std::to_string(db), {}};
  const std::string ta = w.hoist("long long", "n", "((long long)" + n.ea + " + " + T + " - 1) / " + T);
  const std::string tb = w.hoist("long long", "n", "((long long)" + n.eb + " + " + T + " - 1) / " + T);
  std::string outer;
  std::vector<size_t> outer_dims;
  for (size_t d = 0; d < r; ++d) {
    if (d == da || d == db) continue;
    outer_dims.push_back(d);
    const std::string e = w.extent(dom, d);
    if (e != "1") outer = outer.empty() ? "(long long)" + e : outer + " * " + e;
  }
  const std::string tiles = w.hoist("long long", "n", (outer.empty() ? "" : outer + " * ") + ta + " * " + tb);
  for (const auto& in : tp.inputs) {
    n.shared.push_back(w.fresh("kf_tile"));
    w.line("__shared__ " + std::string(reg_type(f.value(in.first).dtype)) + " " + n.shared.back() + "[" + T + "][" + T + " + 1];");
  }
  // Vector candidates of phase 2 (the tiled inputs come from shared memory).
  w.vector_inputs.clear();
  w.vector_regs.clear();
  VectorPlan vp;
  vp = plan_vectors(w, task, outs, dom, db, &tp.loads);
  for (const auto& in : tp.inputs)
    w.vector_inputs.erase(in.first);
  w.open("for (long long tile = blockIdx.x; tile < " + tiles + "; tile += gridDim.x)");
  // Diagonal order: blocks in flight together differ in both tile
  // coordinates. In row order they would share a0 (or b0), and with
  // power-of-two row pitches every one of them would hit the same DRAM
  // channels (partition camping).
  w.line("const long long in_ = tile % (" + ta + " * " + tb + "), ta_ = in_ % " + ta + ", tb_ = (in_ / " + ta + " + ta_) % " + tb + ";");
  std::vector<std::string> idx(r);
  const std::vector<std::string> o_idx = unravel(w, dom, outer_dims, "tile / (" + ta + " * " + tb + ")");
  for (size_t k = 0; k < outer_dims.size(); ++k) idx[outer_dims[k]] = o_idx[k];
  idx[da] = n.ia;
  idx[db] = n.ib;
  w.line("const " + t + " a0 = (" + t + ")(ta_ * " + T + "), b0 = (" + t + ")(tb_ * " + T + ");");
  w.line("__syncthreads();  // the previous tile is consumed");
  const std::string tag = w.fresh("KFTILECOND");
  w.open("if (" + tag + ")");  // uniform over the block: the barriers inside are safe
  std::vector<std::string> conds;
  TileGroups groups;
  const std::string loads = w.fresh("KFTILELOADS");
  if (vp.width > 0) {
    groups = tile_groups(w, n, vp, idx, da, db);
    w.line(loads);
  }
  tile_fill_vectors(w, tp, n, &conds);
  w.line("__syncthreads();");
  if (vp.width > 0) {
    tile_compute_vectors(w, sets, tp, n, vp, groups, outs, &conds);
    w.replace(loads, vector_loads(w, vp.width, 0, groups.ok));
  } else {
    tile_compute(w, tp, n, outs, idx);
  }
  w.replace(tag, all_of(conds));
  w.close_open("else");
  tile_fill(w, tp, n);
  w.line("__syncthreads();");
  tile_compute(w, tp, n, outs, idx);
  w.close();
  w.close();
}

void pointwise_loop(KernelWriter& w, const ExtentSets& sets, const Task& task,
                    const std::vector<int64_t>& outs, int* width_out) {
  const int64_t dom = outs[0];
  const size_t r = w.rank(dom);
  const std::string n = w.numel(dom);
  const std::vector<size_t> dims = all_dims(r);
  w.vector_inputs.clear();
  w.vector_regs.clear();
  VectorPlan vp = plan_vectors(w, task, outs, dom, r - 1);
  *width_out = std::max(*width_out, vp.width * pointwise_unroll());
  if (vp.width > 0) {
    const std::string tag = w.fresh("");
    const int V = vp.width;
    w.open("if (KFVECCOND" + tag + ")");
    // U vectors per thread and step, all loaded before any is used: more
    // bytes in flight per thread (vector u of a step is u * blockDim.x
    // vectors after the first, so each load stays coalesced).
    const int U = pointwise_unroll();
    const std::string nv = w.hoist("long long", "n", n + " / " + std::to_string(V));
    w.open("for (long long q = (long long)blockIdx.x * blockDim.x * " + std::to_string(U) + " + threadIdx.x; q < " + nv +
           "; q += (long long)gridDim.x * blockDim.x * " + std::to_string(U) + ")");
    std::vector<std::string> ok(static_cast<size_t>(U));
    std::vector<std::vector<std::string>> base(static_cast<size_t>(U));
    for (int u = 0; u < U; ++u) {
      const std::string qu = w.fresh("qu");
      w.line("const long long " + qu + " = q + (long long)" + std::to_string(u) + " * blockDim.x;");
      ok[static_cast<size_t>(u)] = u == 0 ? std::string() : qu + " < " + nv;
      base[static_cast<size_t>(u)] =
          unravel(w, dom, dims, "(" + qu + " < " + nv + " ? " + qu + " : 0) * " + std::to_string(V), "_" + std::to_string(u));
    }
    w.line("KFVECLOADS" + tag);
    w.section = 0;
    for (int u = 0; u < U; ++u) {
      const std::vector<std::string>& idx = base[static_cast<size_t>(u)];
      w.open(u == 0 ? std::string() : "if (" + ok[static_cast<size_t>(u)] + ")");
      w.group = u;
      vector_group(w, vp, outs, idx, [](int) {});
      w.close();
    }
    std::vector<std::string> conds = {w.extent(dom, r - 1) + " % " + std::to_string(V) + " == 0"};
    for (const auto& [key, vr] : w.vector_regs)
      if (key.second == 0) vector_conditions(w, sets, key.first, dom, V, r - 1, &conds);
    for (int64_t o : vp.outputs) vector_conditions(w, sets, o, dom, V, r - 1, &conds);
    w.replace("KFVECLOADS" + tag, vector_loads(w, V, 0, ok));
    w.replace("KFVECCOND" + tag, all_of(conds));
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
  std::string sum;  // cached rows: variance in two passes, the row sum (then the mean) here
};

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

// One element `x` into `name` (not Welford).
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

// Declares the registers of every reduction result (assigned in each path
// of the row, read after it).
void declare_results(KernelWriter& w, const RowSchedule& s) {
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

// Assigns the finished results of `e` from its combined value `red`.
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
      const std::string corr = std::to_string(e.attrs[1]);
      finish(e.outputs[0], "(" + red + ".m2 / (" + at + ")(" + row_len + " > " + corr + " ? " + row_len + " - " + corr + " : 0))");
      if (e.op == Op::VAR_MEAN)
        finish(e.outputs[1], "(" + row_len + " == 0 ? " + literal_f64(acc, __builtin_nan("")) + " : " + red + ".mean)");
      break;
    }
    default: finish(e.outputs[0], red); break;
  }
}

std::vector<Accumulator> declare_accs(KernelWriter& w, const std::vector<int64_t>& phase, bool split_welford) {
  const Fusion& f = w.fusion();
  std::vector<Accumulator> accs;
  for (int64_t ei : phase) {
    const Expr& e = f.exprs[static_cast<size_t>(ei)];
    Accumulator a{w.fresh("acc"), accumulator_dtype(f.value(e.inputs[0]).dtype), &e, ""};
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
  for (const Accumulator& a : accs) {
    const Expr& e = *a.expr;
    const std::string at = reg_type(a.acc);
    const std::string red = w.fresh("red");
    const std::string red_type = is_welford(e) ? "kf_welford<" + at + ">" : at;
    std::string v = a.name;
    if (!a.sum.empty()) {  // two passes: the row's mean, this thread's squared deviations from it
      const std::string m2 = w.fresh("m2");
      w.line("const " + at + " " + m2 + " = kf_block_reduce(" + a.name + ", kf_sum_op());");
      w.line("const " + red_type + " " + red + " = {(" + at + ")" + row_len + ", " + a.sum + ", " + m2 + "};");
    } else {
      w.line("const " + red_type + " " + red + " = kf_block_reduce(" + v + ", " + combine_op(e, a.acc) + ");");
    }
    finish_results(w, e, a.acc, red, row_len);
  }
}

std::vector<std::string> full_index(const KernelWriter& w, const std::vector<size_t>& red,
                                    const std::vector<std::string>& red_idx) {
  std::vector<std::string> idx = w.row_index;
  for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = red_idx[k];
  return idx;
}

// The row re-read from global memory in every phase, one element per
// thread step (any row length and layout).
void row_streaming(KernelWriter& w, const RowSchedule& s, const std::vector<size_t>& red, const std::string& row_len) {
  const Fusion& f = w.fusion();
  const int64_t dom = s.domain;
  const std::string row_loop = "for (" + w.index_type() + " j = threadIdx.x; j < " + row_len + "; j += blockDim.x)";
  for (const std::vector<int64_t>& phase : s.phases) {
    std::vector<Accumulator> accs = declare_accs(w, phase, false);
    w.open(row_loop);
    const std::vector<std::string> idx = full_index(w, red, unravel(w, dom, red, "j"));
    for (const Accumulator& a : accs) {
      const int64_t in = a.expr->inputs[0];
      w.line(acc_step(*a.expr, a.acc, a.name, convert(f.value(in).dtype, a.acc, w.value_at(in, idx))));
    }
    w.close();
    reduce_block(w, accs, row_len);
  }
  if (!s.domain_outputs.empty()) {
    w.open(row_loop);
    const std::vector<std::string> idx = full_index(w, red, unravel(w, dom, red, "j"));
    for (int64_t o : s.domain_outputs) w.store(o, idx, w.value_at(o, idx));
    w.close();
  }
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

// 16-byte vectors per thread in the cached row. Measured on an H200
// (docs/PERF.md): 2 (more threads per row) and 6 or 8 (register spills
// under the 64-register cap of 1024-thread blocks) are all slower than 4.
constexpr int kRowVectors = 4;
int row_vectors() {
  static const int k = tuned("KFUSE_TUNE_ROW_VECTORS", kRowVectors);
  return k;
}

// The row held in registers: each thread loads K vectors of V elements
// (vector k at element (k * blockDim.x + threadIdx.x) * V of the row) once,
// then every phase and the output pass read the registers. Inputs first
// needed in a later phase (layernorm's weight and bias) are loaded there.
// Returns the condition under which it applies (placeholders resolved).
std::string row_cached(KernelWriter& w, const RowSchedule& s, const ExtentSets& sets, const VectorPlan& vp, const Task& task,
                       const std::vector<size_t>& red, const std::string& row_len) {
  const Fusion& f = w.fusion();
  const int64_t dom = s.domain;
  const size_t last = w.rank(dom) - 1;
  const int V = vp.width, K = row_vectors();
  const std::string& t = w.index_type();
  std::vector<std::string> ok(K);
  std::vector<std::vector<std::string>> base(K);
  for (int k = 0; k < K; ++k) {
    const std::string b = w.fresh("jb");
    w.line("const " + t + " " + b + " = ((" + t + ")" + std::to_string(k) + " * (" + t + ")blockDim.x + (" + t +
           ")threadIdx.x) * " + std::to_string(V) + ";");
    ok[static_cast<size_t>(k)] = b + " < " + row_len;
    base[static_cast<size_t>(k)] = full_index(w, red, unravel(w, dom, red, b, "_" + std::to_string(k)));
  }
  const std::string tag = w.fresh("");
  auto section_mark = [&](size_t p) { return "KFSEC" + tag + "_" + std::to_string(p); };
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
    if (w.section > static_cast<int>(s.phases.size())) w.line(section_mark(static_cast<size_t>(w.section)));
    each_lane(k, body);
  };
  w.line(section_mark(0));
  for (size_t p = 0; p < s.phases.size(); ++p) {
    w.section = static_cast<int>(p);
    std::vector<Accumulator> accs = declare_accs(w, s.phases[p], true);
    auto input_of = [&](const Accumulator& a, const std::vector<std::string>& idx) {
      const int64_t in = a.expr->inputs[0];
      return convert(f.value(in).dtype, a.acc, w.value_at(in, idx));
    };
    for (int k = 0; k < K; ++k) {
      // Computed inputs of the reductions (softmax's exp) are evaluated
      // outside the lane guard, so later phases and the output pass find
      // them in registers instead of computing them again. Plain reads of
      // the row stay inside: holding their float forms across phases
      // would cost registers that the packed vectors already hold.
      each_lane(k, [&](const std::vector<std::string>& idx) {
        for (const Accumulator& a : accs)
          if (!plain_read(f, task, a.expr->inputs[0])) input_of(a, idx);
      });
      lanes(k, [&](const std::vector<std::string>& idx) {
        for (const Accumulator& a : accs) {
          const std::string x = input_of(a, idx);
          if (!a.sum.empty()) w.line(a.sum + " += " + x + ";");
          else w.line(acc_step(*a.expr, a.acc, a.name, x));
        }
      });
      w.close();
    }
    // Variance, second pass: squared deviations from the row's mean, read
    // from the registers (two block sums instead of a Welford merge tree,
    // whose every step divides).
    bool second = false;
    for (const Accumulator& a : accs) {
      if (a.sum.empty()) continue;
      second = true;
      w.line(a.sum + " = " + row_len + " > 0 ? kf_block_reduce(" + a.sum + ", kf_sum_op()) / (" +
             reg_type(a.acc) + ")" + row_len + " : 0;");
    }
    if (second) {
      for (int k = 0; k < K; ++k) {
        lanes(k, [&](const std::vector<std::string>& idx) {
          for (const Accumulator& a : accs) {
            if (a.sum.empty()) continue;
            const std::string d = w.fresh("wd");
            w.line("const " + std::string(reg_type(a.acc)) + " " + d + " = " + input_of(a, idx) + " - " + a.sum + ";");
            w.line(a.name + " += " + d + " * " + d + ";");
          }
        });
        w.close();
      }
    }
    reduce_block(w, accs, row_len);
    w.line(section_mark(p + 1));
  }
  // The output pass loads what it alone reads (weights, biases) per vector,
  // right before use: fewer registers live at once.
  for (int k = 0; k < K && !s.domain_outputs.empty(); ++k) {
    w.section = static_cast<int>(s.phases.size()) + 1 + k;
    std::vector<std::string> ov;
    const auto& b = base[static_cast<size_t>(k)];
    lanes(k, [&](const std::vector<std::string>& idx) {
      if (ov.empty())
        for (int64_t o : vp.outputs) {
          ov.push_back(w.fresh("ov"));
          w.line("kf_vec<" + std::string(storage_type(f.value(o).dtype)) + ", " + std::to_string(V) + "> " + ov.back() + ";");
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
    });
    for (size_t q = 0; q < vp.outputs.size() && !ov.empty(); ++q) {
      const int64_t o = vp.outputs[q];
      const std::string vt = "kf_vec<" + std::string(storage_type(f.value(o).dtype)) + ", " + std::to_string(V) + ">";
      w.line("*(" + vt + "*)(" + w.pointer(o) + " + " + w.offset(o, b) + ") = " + ov[q] + ";");
    }
    w.close();
  }
  for (size_t p = 0; p <= s.phases.size() + K; ++p)
    if (p <= s.phases.size() || !s.domain_outputs.empty())
      w.replace(section_mark(p), vector_loads(w, V, static_cast<int>(p), ok));
  std::vector<std::string> conds = {w.extent(dom, last) + " % " + std::to_string(V) + " == 0",
                                    "(long long)" + row_len + " <= (long long)blockDim.x * " + std::to_string(V * K)};
  std::vector<int64_t> seen;
  for (const auto& [key, vr] : w.vector_regs) {
    if (std::find(seen.begin(), seen.end(), key.first) != seen.end()) continue;
    seen.push_back(key.first);
    vector_conditions(w, sets, key.first, dom, V, last, &conds);
  }
  for (int64_t o : vp.outputs) vector_conditions(w, sets, o, dom, V, last, &conds);
  return all_of(conds);
}

// Writes each row-shaped output once per row (keepdim: reduced dims at 0).
void store_row_outputs(KernelWriter& w, const RowSchedule& s, size_t r,
                       const std::vector<size_t>& kept) {
  for (int64_t o : s.row_outputs) {
    std::vector<std::string> idx;
    if (w.rank(o) == r) {
      for (size_t d = 0; d < r; ++d) idx.push_back(s.reduced[d] ? "0" : w.row_index[d]);
    } else {
      for (size_t d : kept) idx.push_back(w.row_index[d]);
    }
    w.store(o, idx, w.value_at(o, idx));
  }
}

// The product of the domain's extents over `dims` as a hoisted long long
// (`one` when every extent is 1).
std::string extent_product(KernelWriter& w, int64_t dom, const std::vector<size_t>& dims,
                           const char* one) {
  std::string p;
  for (size_t d : dims) {
    const std::string e = w.extent(dom, d);
    if (e == "1") continue;
    p = p.empty() ? "(long long)" + e : p + " * " + e;
  }
  return p.empty() ? std::string(one) : w.hoist("long long", "n", p);
}

// Returns the elements per thread of the cached-row path (0: none).
int row_kernel(KernelWriter& w, const RowSchedule& s, const ExtentSets& sets, const Task& task) {
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < r; ++d) (s.reduced[d] ? red : kept).push_back(d);
  auto product = [&](const std::vector<size_t>& dims) { return extent_product(w, dom, dims, "1"); };
  const std::string rows = product(kept);
  const std::string row_len = product(red);
  w.reduced = s.reduced;
  // The cached path needs the innermost dim in the row (vectors along it).
  VectorPlan vp;
  w.vector_inputs.clear();
  w.vector_regs.clear();
  if (r > 0 && s.reduced[r - 1] && w.size_class(dom, r - 1) == SizeClass::Many)
    vp = plan_vectors(w, task, s.domain_outputs, dom, r - 1);
  w.open("for (long long row = blockIdx.x; row < " + rows + "; row += gridDim.x)");
  std::vector<std::string> kept_idx = unravel(w, dom, kept, "row");
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kept_idx[k];
  declare_results(w, s);
  if (vp.width > 0) {
    const std::string tag = w.fresh("KFROWCOND");
    w.open("if (" + tag + ")");
    const std::string cond = row_cached(w, s, sets, vp, task, red, row_len);
    w.replace(tag, cond);
    w.close_open("else");
    row_streaming(w, s, red, row_len);
    w.close();
  } else {
    row_streaming(w, s, red, row_len);
  }
  if (!s.row_outputs.empty()) {
    w.open("if (threadIdx.x == 0)");
    store_row_outputs(w, s, r, kept);
    w.close();
  }
  w.close();
  return vp.width > 0 ? vp.width * row_vectors() : 0;
}

// ---- column reductions (reduced dims outer, the innermost dim kept) ----

constexpr int kColThreads = 32;  // threads along the columns
constexpr int kColRows = 8;      // row groups per block (kBlock / kColThreads)

// One phase of plain reductions (no Welford), no domain-shaped outputs,
// the innermost dim kept: the reduced rows are strided, so a block reduces
// a slab of rows for a tile of columns instead of one row.
bool column_applies(const KernelWriter& w, const RowSchedule& s) {
  const size_t r = w.rank(s.domain);
  if (s.kind != SchedulerKind::Reduction || s.phases.size() != 1 || !s.domain_outputs.empty() || r == 0) return false;
  if (s.reduced[r - 1] || w.size_class(s.domain, r - 1) != SizeClass::Many) return false;
  for (int64_t ei : s.phases[0])
    if (is_welford(w.fusion().exprs[static_cast<size_t>(ei)])) return false;
  return true;
}

// Kernel 1 (partials) into `w`; returns the tile width in columns.
int column_partials(KernelWriter& w, const RowSchedule& s, const ExtentSets& sets, const Task& task) {
  const Fusion& f = w.fusion();
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom), last = r - 1;
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < r; ++d) (s.reduced[d] ? red : kept).push_back(d);
  auto product = [&](const std::vector<size_t>& dims) { return extent_product(w, dom, dims, "1LL"); };
  const std::string cols = product(kept), rlen = product(red);
  w.reduced = s.reduced;
  w.vector_inputs.clear();
  w.vector_regs.clear();
  const VectorPlan vp = plan_vectors(w, task, {}, dom, w.rank(dom) - 1);
  const int V = vp.width > 0 ? vp.width : 4;
  const std::string Vs = std::to_string(V), tile = std::to_string(kColThreads * V);
  w.line("const long long splits = (long long)args.a[KFSPLITS];");
  w.line("const long long c0 = (long long)blockIdx.x * " + tile + ";");
  w.line("const int tx = threadIdx.x & " + std::to_string(kColThreads - 1) + ", ty = threadIdx.x / " + std::to_string(kColThreads) + ";");
  w.line("const long long per = (" + rlen + " + splits - 1) / splits;");
  w.line("const long long q0 = (long long)blockIdx.y * per, q1 = q0 + per < " + rlen + " ? q0 + per : " + rlen + ";");
  // accumulators per lane
  std::vector<std::vector<std::string>> acc(s.phases[0].size());
  std::vector<const Expr*> exprs;
  std::vector<DType> types;
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    exprs.push_back(&e);
    types.push_back(accumulator_dtype(f.value(e.inputs[0]).dtype));
    for (int l = 0; l < V; ++l) {
      acc[a].push_back(w.fresh("acc"));
      w.line(std::string(reg_type(types[a])) + " " + acc[a].back() + " = " + acc_init(e, types[a]) + ";");
    }
  }
  auto step = [&](int lane, const std::vector<std::string>& idx) {
    for (size_t a = 0; a < exprs.size(); ++a) {
      const int64_t in = exprs[a]->inputs[0];
      w.line(acc_step(*exprs[a], types[a], acc[a][static_cast<size_t>(lane)],
                      convert(f.value(in).dtype, types[a], w.value_at(in, idx))));
    }
  };
  const std::string vec_flag = w.fresh("kfvec");
  const std::string cond_tag = w.fresh("KFCOLCOND");
  w.line("const bool " + vec_flag + " = " + (vp.width > 0 ? cond_tag : std::string("false")) + ";");
  if (vp.width > 0) {
    // Vector columns: thread tx holds columns c0 + tx * V + lane.
    w.open("if (" + vec_flag + ")");
    w.line("const long long cb = c0 + (long long)tx * " + Vs + ";");
    w.open("if (cb < " + cols + ")");
    const std::vector<std::string> kidx = unravel(w, dom, kept, "cb", "_c");
    w.line("#pragma unroll 4");  // several rows' loads in flight
    w.open("for (long long q = q0 + ty; q < q1; q += " + std::to_string(kColRows) + ")");
    const std::vector<std::string> ridx = unravel(w, dom, red, "q");
    std::vector<std::string> base(r);
    for (size_t k = 0; k < kept.size(); ++k) base[kept[k]] = kidx[k];
    for (size_t k = 0; k < red.size(); ++k) base[red[k]] = ridx[k];
    const std::string tag = w.fresh("KFVECLOADS");
    w.line(tag);
    w.group = 0;
    w.section = 0;
    w.lane_base = base;
    for (int lane = 0; lane < V; ++lane) {
      std::vector<std::string> idx = base;
      if (lane > 0) idx[last] = "(" + base[last] + " + " + std::to_string(lane) + ")";
      w.lane = lane;
      w.lane_index = idx;
      step(lane, idx);
    }
    w.lane = -1;
    w.replace(tag, vector_loads(w, V, 0, {}));
    w.close();
    w.close();
    std::vector<std::string> conds = {w.extent(dom, last) + " % " + Vs + " == 0"};
    std::vector<int64_t> seen;
    for (const auto& [key, vr] : w.vector_regs) {
      if (std::find(seen.begin(), seen.end(), key.first) != seen.end()) continue;
      seen.push_back(key.first);
      vector_conditions(w, sets, key.first, dom, V, last, &conds);
    }
    std::string cond;
    for (const std::string& c : conds) cond += (cond.empty() ? "" : " && ") + c;
    w.replace(cond_tag, cond);
    w.close_open("else");
  } else {
    w.open("");
  }
  // Scalar columns: thread tx holds columns c0 + tx + 32 * lane (coalesced).
  std::vector<std::string> cl(static_cast<size_t>(V));
  std::vector<std::vector<std::string>> kidx(static_cast<size_t>(V));
  for (int lane = 0; lane < V; ++lane) {
    cl[static_cast<size_t>(lane)] = w.fresh("cl");
    w.line("const long long " + cl[static_cast<size_t>(lane)] + " = c0 + tx + " + std::to_string(kColThreads * lane) + ";");
    kidx[static_cast<size_t>(lane)] = unravel(w, dom, kept, cl[static_cast<size_t>(lane)] + " < " + cols + " ? " + cl[static_cast<size_t>(lane)] + " : 0",
                                              "_" + std::to_string(lane));
  }
  w.line("#pragma unroll 2");
  w.open("for (long long q = q0 + ty; q < q1; q += " + std::to_string(kColRows) + ")");
  const std::vector<std::string> ridx = unravel(w, dom, red, "q");
  for (int lane = 0; lane < V; ++lane) {
    w.open("if (" + cl[static_cast<size_t>(lane)] + " < " + cols + ")");
    std::vector<std::string> idx(r);
    for (size_t k = 0; k < kept.size(); ++k) idx[kept[k]] = kidx[static_cast<size_t>(lane)][k];
    for (size_t k = 0; k < red.size(); ++k) idx[red[k]] = ridx[k];
    step(lane, idx);
    w.close();
  }
  w.close();
  w.close();
  // Combine the row groups through shared memory, then one partial per column.
  for (size_t a = 0; a < exprs.size(); ++a) {
    const std::string at = reg_type(types[a]);
    const std::string sh = w.fresh("kf_part");
    w.line("__shared__ " + at + " " + sh + "[" + std::to_string(kColRows) + "][" + tile + "];");
    for (int lane = 0; lane < V; ++lane)
      w.line(sh + "[ty][" + vec_flag + " ? tx * " + Vs + " + " + std::to_string(lane) + " : tx + " +
             std::to_string(kColThreads * lane) + "] = " + acc[a][static_cast<size_t>(lane)] + ";");
    w.line("__syncthreads();");
    w.open("for (int cc = threadIdx.x; cc < " + tile + "; cc += blockDim.x)");
    w.open("if (c0 + cc < " + cols + ")");
    w.line(at + " v = " + sh + "[0][cc];");
    w.line("#pragma unroll");
    w.line("for (int y = 1; y < " + std::to_string(kColRows) + "; ++y) v = " + combine_op(*exprs[a], types[a]) + "(v, " + sh + "[y][cc]);");
    w.line("((" + at + "*)args.a[KFSCRATCH] + " + std::to_string(a) + " * splits * " + cols + ")[(long long)blockIdx.y * " + cols +
           " + c0 + cc] = v;");
    w.close();
    w.close();
  }
  return kColThreads * V;
}

// Kernel 2: one thread per column combines the partials in split order.
void column_finish(KernelWriter& w, const RowSchedule& s) {
  const Fusion& f = w.fusion();
  const int64_t dom = s.domain;
  const size_t r = w.rank(dom);
  std::vector<size_t> kept, red;
  for (size_t d = 0; d < r; ++d) (s.reduced[d] ? red : kept).push_back(d);
  auto product = [&](const std::vector<size_t>& dims) { return extent_product(w, dom, dims, "1LL"); };
  const std::string cols = product(kept);
  bool mean = false;  // only a mean reads the row length (an unused local is a warning)
  for (int64_t ei : s.phases[0]) mean = mean || f.exprs[static_cast<size_t>(ei)].op == Op::MEAN;
  const std::string rlen = mean ? product(red) : "1";
  w.reduced = s.reduced;
  w.row_results.clear();
  w.line("const long long splits = (long long)args.a[KFSPLITS];");
  w.open("for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < " + cols +
         "; c += (long long)gridDim.x * blockDim.x)");
  const std::vector<std::string> kidx = unravel(w, dom, kept, "c");
  w.row_index.assign(r, "0");
  for (size_t k = 0; k < kept.size(); ++k) w.row_index[kept[k]] = kidx[k];
  declare_results(w, s);
  for (size_t a = 0; a < s.phases[0].size(); ++a) {
    const Expr& e = f.exprs[static_cast<size_t>(s.phases[0][a])];
    const DType acc = accumulator_dtype(f.value(e.inputs[0]).dtype);
    const std::string at = reg_type(acc);
    const std::string p = w.fresh("part"), v = w.fresh("red");
    w.line("const " + at + "* " + p + " = (const " + at + "*)args.a[KFSCRATCH] + " + std::to_string(a) + " * splits * " + cols + ";");
    w.line(at + " " + v + " = " + p + "[c];");
    w.line("for (long long sp = 1; sp < splits; ++sp) " + v + " = " + combine_op(e, acc) + "(" + v + ", " + p + "[sp * " + cols + " + c]);");
    finish_results(w, e, acc, v, rlen);
  }
  store_row_outputs(w, s, r, kept);
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

// The two kernels of a column reduction in one source; the extra argument
// words (scratch pointer, splits) follow the slots.
KernelPlan column_plan(KernelPlan plan, const KernelWriter& w, const std::string& partials, const std::string& finish,
                       const ConcreteFusion& c) {
  plan.args = w.args();
  const size_t n = plan.args.size();
  auto fill = [&](std::string k) {
    for (const auto& [tag, word] : {std::pair<std::string, size_t>{"KFSCRATCH", n}, {"KFSPLITS", n + 1}})
      for (size_t at = k.find(tag); at != std::string::npos; at = k.find(tag)) k.replace(at, tag.size(), std::to_string(word));
    return k;
  };
  const std::string head = "struct KfArgs { long long a[" + std::to_string(n + 2) + "]; };\n";
  const std::string k1 = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlock) + ") KFNAME1(const KfArgs args) {\n" +
                         fill(partials) + "}\n";
  const std::string k2 = "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(plan.launch.finish_block) +
                         ") KFNAME2(const KfArgs args) {\n" + fill(finish) + "}\n";
  std::string text = head + k1 + k2;
  const std::string h = hex64(fnv1a(text));
  plan.name = "kf_" + h;
  plan.finish_name = "kf_" + h + "_finish";
  text.replace(text.find("KFNAME1"), 7, plan.name);
  text.replace(text.find("KFNAME2"), 7, plan.finish_name);
  plan.source = std::string(cuda_prelude()) + text;
  plan.launch.block = kBlock;
  plan.params = std::string(scheduler_name(plan.scheduler)) + " column block=" + std::to_string(kBlock) +
                " tile_cols=" + std::to_string(plan.launch.tile_cols) + " index=" + (c.index32 ? "int32" : "int64");
  return plan;
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
  std::string extra;
  if (s.kind == SchedulerKind::Pointwise) {
    const ExtentSets& sets = extent_sets_of(c);
    const TilePlan tp = s.loops.size() == 1 ? plan_tiles(c, task, s.loops[0]) : TilePlan{};
    if (!tp.inputs.empty()) {
      tile_loop(w, sets, task, tp, s.loops[0]);
      width = kTile * kTile / kBlock;  // one tile per block
    } else {
      for (const auto& loop : s.loops) pointwise_loop(w, sets, task, loop, &width);
    }
    plan.launch.kind = LaunchRule::Kind::Elementwise;
    plan.launch.domain_value = s.loops[0][0];
    plan.launch.items_per_thread = std::max(width, 1);
    if (!tp.inputs.empty()) extra = " tiled=" + std::to_string(tp.inputs.size());
  } else if (column_applies(w, s)) {
    const ExtentSets& sets = extent_sets_of(c);
    plan.launch.kind = LaunchRule::Kind::ColumnReduce;
    plan.launch.domain_value = s.domain;
    plan.launch.reduced_dims = s.reduced;
    plan.launch.tile_cols = column_partials(w, s, sets, task);
    plan.launch.accumulators = static_cast<int>(s.phases[0].size());
    plan.launch.extra_args = 2;
    const std::string partials = w.take_kernel();
    column_finish(w, s);
    const std::string finish = w.take_kernel();
    return column_plan(plan, w, partials, finish, c);
  } else {
    const ExtentSets& sets = extent_sets_of(c);
    plan.launch.row_items = row_kernel(w, s, sets, task);
    if (plan.launch.row_items > 0) plan.launch.block = 1024;  // the block is chosen per call
    plan.launch.kind = LaunchRule::Kind::PerRow;
    plan.launch.domain_value = s.domain;
    plan.launch.reduced_dims = s.reduced;
  }
  plan.args = w.args();
  const size_t slots = std::max<size_t>(plan.args.size(), 1);
  std::string kernel = "struct KfArgs { long long a[" + std::to_string(slots) + "]; };\n" +
                       "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(plan.launch.block) +
                       (plan.launch.row_items > 0 ? ", 1" : "") +
                       ") KFNAME(const KfArgs args) {\n" + w.preamble() + w.body() + "}\n";
  plan.name = "kf_" + hex64(fnv1a(kernel));
  kernel.replace(kernel.find("KFNAME"), 6, plan.name);
  plan.source = std::string(cuda_prelude()) + kernel;
  plan.params = std::string(scheduler_name(s.kind)) + " block=" + std::to_string(plan.launch.block) +
                " index=" + (c.index32 ? "int32" : "int64");
  if (s.kind == SchedulerKind::Pointwise)
    plan.params += " loops=" + std::to_string(s.loops.size()) + " vector=" + std::to_string(width) + extra;
  else
    plan.params += " phases=" + std::to_string(s.phases.size()) + " row_items=" + std::to_string(plan.launch.row_items);
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
