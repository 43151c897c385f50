// Tiled kernels (transposes): tiles of the domain's dims (a, b). The tiled
// inputs are read with threads along a (coalesced for them) into shared
// memory, then the outputs are computed with threads along b. A tile row
// is an odd number of 4-byte words (TiledInput::pitch); inputs of 1 or 2
// bytes are held as stored. Where every tensor's strides and
// alignment allow (checked at run time), both phases move 16-byte
// vectors: a warp then reads and writes whole 128-byte lines instead of
// 64-byte halves with 2-byte elements, and issues a quarter of the memory
// instructions. Otherwise phase 2 runs one element a thread and phase 1
// fills each tiled input with the widest vectors it allows (tile_fill;
// docs/perf-log.md, sessions 11 and 42).
#include <algorithm>
#include <functional>

#include "core/codegen/emit_common.h"
#include "core/codegen/emitters.h"
#include "core/codegen/op_cuda.h"
#include "core/schedule/in_place.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {

struct TileNames {
  std::string ea, eb, ia, ib;       // extents of groups a and b (linear), index names of dims a and b
  std::string ea_in, eb_in;         // extents of dims a and b (the groups' inner dims)
  std::string oa, ob;               // index names of the groups' further dims ("": one-dim groups)
  std::vector<std::string> shared;  // one tile per tiled input
  std::vector<std::string> staged;  // one tile per staged output, [b][a]
  std::string T, rows_step;         // the tile size; rows per scalar step
  int64_t dom = -1;                 // the domain and its dims a and b (the groups' divisors)
  size_t da = 0, db = 0;
};

// `x` / the extent of group a's (`a`) or b's inner dim, and `x` % it into
// `inner`, `outer` += the quotient: by the host's fastdiv word where
// indices are int (a division by a run-time extent costs some 20
// instructions, and a group whose inner extent is below the tile divides
// at each vector: seed 1056028048 c0009, session 43).
std::string carry_into_outer(KernelWriter& w, const TileNames& n, bool a, const std::string& inner, const std::string& outer) {
  const std::string& e = a ? n.ea_in : n.eb_in;
  return "if (" + inner + " >= " + e + ") { const " + w.index_type() + " q_ = " + w.quotient(inner, n.dom, a ? n.da : n.db) +
         "; " + outer + " += q_; " + inner + " -= q_ * " + e + "; }";
}

// A tiled input's index at the loop's index expressions `idx` (domain order).
std::vector<std::string> tile_index(const IndexMap& map, const std::vector<std::string>& idx) {
  std::vector<std::string> at(map.size(), "0");
  for (size_t j = 0; j < map.size(); ++j)
    if (map[j] >= 0) at[j] = idx[static_cast<size_t>(map[j])];
  return at;
}

// Whether a tile holds its input's storage elements (TiledInput::element_bytes).
bool stored(const TiledInput& in) { return in.element_bytes < 4; }

// Tile element `at` of tiled input `in` as its register form.
std::string tile_read(const KernelWriter& w, const TiledInput& in, const std::string& at) {
  return stored(in) ? load_form(w.fusion().value(in.value).dtype, at) : at;
}

// The names of one tile element's indices along a group: its linear index
// in the group, its inner and further dims' (lin == inner for one dim).
struct GroupIndex {
  std::string lin, inner, outer;
};

// Defines the indices of the element at offsets (`da`, `db`) in the tile
// from (a0, b0) and returns its range condition. A group of two dims is
// unravelled from the tile's base (ar_ = a0 % its inner extent, aq_ = a0 /
// it, per tile): one division only where the element passes an inner row
// (every element where the inner extent is below the tile). A group of one
// dim is today's single line.
std::string tile_element(KernelWriter& w, const TileNames& n, const GroupIndex& ga, const std::string& da,
                         const GroupIndex& gb, const std::string& db) {
  const std::string& t = w.index_type();
  w.line("const " + t + " " + ga.lin + " = a0 + " + da + ", " + gb.lin + " = b0 + " + db + ";");
  const auto unravel = [&](const GroupIndex& g, const std::string& off, bool a) {
    if (g.outer.empty()) return;
    w.line(t + " " + g.inner + " = " + (a ? "a" : "b") + "r_ + " + off + ", " + g.outer + " = " + (a ? "a" : "b") + "q_;");
    w.line(carry_into_outer(w, n, a, g.inner, g.outer));
  };
  unravel(ga, da, true);
  unravel(gb, db, false);
  return ga.lin + " < " + n.ea + " && " + gb.lin + " < " + n.eb;
}

GroupIndex group_a_names(const TileNames& n) { return {n.oa.empty() ? n.ia : "la_", n.ia, n.oa}; }
GroupIndex group_b_names(const TileNames& n) { return {n.ob.empty() ? n.ib : "lb_", n.ib, n.ob}; }

// Where a tiled input is smaller than the domain along a dim it reads (a
// concatenation's operand, read in its own part of the output only), the
// tile is filled only inside the input: the condition that index `at` lies
// in it ("" where its extents provably equal the domain's).
std::string inside_input(KernelWriter& w, const TiledInput& in, int64_t dom, const std::vector<std::string>& at) {
  const ExtentSets& sets = extent_sets_of(w.concrete());
  std::vector<std::string> conds;
  for (size_t j = 0; j < in.dims.size(); ++j)
    if (in.dims[j] >= 0 && w.size_class(in.value, j) == SizeClass::Many && !sets.same(in.value, static_cast<int>(j), dom, in.dims[j]))
      conds.push_back(at[j] + " < " + w.extent(in.value, j));
  return conds.empty() ? std::string() : all_of(conds);
}

// The scalar tile loop: rows k = kk + threadIdx.x / T (kk stepping by
// rows_step), the lane lx = threadIdx.x % T fixed per thread. `lanes_a`:
// the lanes run along group a (phase 1, coalesced for the tiled inputs;
// the outputs stored along a), else along b (phase 2). A group of two dims
// is unravelled once for the lane, before the loop, and stepped for the
// rows (its inner index advances by rows_step and wraps): unravelled per
// element, its division where the inner extent is below the tile cost more
// instructions than the copy itself (seed 1940430775 c0126: 89 a warp per
// element, docs/perf-log.md session 42). `body` is emitted inside the
// bound.
void tile_loop(KernelWriter& w, const TileNames& n, bool lanes_a, const std::string& unroll,
               const std::function<void()>& body, int begin = 0, int end = -1) {
  const std::string b = std::to_string(begin), e = end < 0 ? n.T : std::to_string(end);
  const std::string& t = w.index_type();
  const GroupIndex ga = group_a_names(n), gb = group_b_names(n);
  const GroupIndex& lane = lanes_a ? ga : gb;
  const GroupIndex& row = lanes_a ? gb : ga;
  const std::string lane_base = lanes_a ? "a" : "b", row_base = lanes_a ? "b" : "a";
  const std::string& row_e = lanes_a ? n.eb_in : n.ea_in;
  w.open("");
  w.line("const int lx = threadIdx.x % " + n.T + ", k0_ = threadIdx.x / " + n.T + ";");
  w.line("const " + t + " " + lane.lin + " = " + lane_base + "0 + lx;");
  if (!lane.outer.empty()) {
    w.line(t + " " + lane.inner + " = " + lane_base + "r_ + lx, " + lane.outer + " = " + lane_base + "q_;");
    w.line(carry_into_outer(w, n, lanes_a, lane.inner, lane.outer));
  }
  if (!row.outer.empty()) {
    w.line(t + " " + row.inner + " = " + row_base + "r_ + " + (begin ? b + " + " : "") + "k0_, " + row.outer + " = " +
           row_base + "q_;");
    w.line(carry_into_outer(w, n, !lanes_a, row.inner, row.outer));
  }
  w.line(unroll);
  w.open("for (int kk = " + b + "; kk < " + e + "; kk += " + n.rows_step + ")");
  w.line("const int k = kk + k0_;");
  w.line("const " + t + " " + row.lin + " = " + row_base + "0 + k;");
  w.open("if (" + ga.lin + " < " + n.ea + " && " + gb.lin + " < " + n.eb + ")");
  body();
  w.close();
  if (!row.outer.empty())
    w.line(row.inner + " += " + n.rows_step + "; while (" + row.inner + " >= " + row_e + ") { " + row.inner + " -= " +
           row_e + "; ++" + row.outer + "; }");
  w.close();
  w.close();
}

// Phase 1 for one tiled task input, one element a thread a step (its
// extent along a, stride or alignment fit no vector): in two halves of the
// tile, every load of a half issued before its first store to shared
// memory, as with vectors (8 registers of loads in flight, not 16: the
// kernel's registers are its branches' maximum).
void tile_fill_scalar(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx,
                      size_t q) {
  const int64_t v = p.inputs[q].value;
  const DType dt = w.fusion().value(v).dtype;
  const std::vector<std::string> at = tile_index(p.inputs[q].dims, idx);
  const std::string inside = inside_input(w, p.inputs[q], p.outputs[0], at);
  const int rows = p.block / p.tile, half = p.tile / 2, steps = half / rows;
  const bool raw = stored(p.inputs[q]);
  for (int begin = 0; begin < p.tile; begin += half) {
    const std::string reg = w.fresh("tr");
    w.line(std::string(raw ? storage_type(dt) : reg_type(dt)) + " " + reg + "[" + std::to_string(steps) + "] = {};");
    const std::string slot = reg + "[(kk - " + std::to_string(begin) + ") / " + n.rows_step + "]";
    tile_loop(w, n, true, "#pragma unroll", [&] {
      const std::string load = raw ? w.element(v, at) : load_form(dt, w.element(v, at));
      w.line((inside.empty() ? "" : "if (" + inside + ") ") + slot + " = " + load + ";");
    }, begin, begin + half);
    w.line("#pragma unroll");
    w.open("for (int s = 0; s < " + std::to_string(steps) + "; ++s)");
    w.line(n.shared[q] + "[" + std::to_string(begin) + " + s * " + n.rows_step + " + (int)(threadIdx.x / " + n.T +
           ")][threadIdx.x % " + n.T + "] = " + reg + "[s];");
    w.close();
  }
}

// Phase 1 for the computed tiles (a value computed from one input that it
// reads through a slice or a reshape): evaluated at the tile's elements,
// its input's loads coalesced along a.
void tile_fill_computed(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  if (std::all_of(p.inputs.begin(), p.inputs.end(), [&](const TiledInput& in) { return w.is_input(in.value); })) return;
  tile_loop(w, n, true, "#pragma unroll", [&] {
    for (size_t q = 0; q < p.inputs.size(); ++q) {
      const int64_t v = p.inputs[q].value;
      if (w.is_input(v)) continue;
      const std::vector<std::string> at = tile_index(p.inputs[q].dims, idx);
      const std::string inside = inside_input(w, p.inputs[q], p.outputs[0], at);
      // The value's loads are statements of their own: they go inside the
      // bound (a cat's first operand computed from a slice at an offset
      // would read past its input).
      if (!inside.empty()) w.open("if (" + inside + ")");
      w.line(n.shared[q] + "[k][lx] = " + w.value_at(v, at) + ";");
      if (!inside.empty()) {
        w.close_open("else");
        w.line(n.shared[q] + "[k][lx] = 0;");
        w.close();
      }
    }
  });
}

// Step s of the vector fill: thread t's tile row k and first column ga.
std::string fill_coords(int rows, int lanes, int V) {
  const std::string l = std::to_string(lanes);
  return "const int k = s * " + std::to_string(rows) + " + (int)(threadIdx.x / " + l + "), ga = (int)(threadIdx.x % " + l +
         ") * " + std::to_string(V) + ";";
}

// The run-time conditions for vectors of V elements along a in tiled input
// q (hoisted: they depend on the arguments alone).
std::string fill_condition(KernelWriter& w, const TiledParams& p, const TileNames& n, size_t q, int V) {
  const ConcreteFusion& c = w.concrete();
  const int64_t v = p.inputs[q].value;
  const Value& val = w.fusion().value(v);
  const std::vector<int>& order = val.kind == ValueKind::TensorInput
                                      ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order
                                      : c.stride_orders[static_cast<size_t>(v)];
  const size_t inner = static_cast<size_t>(order.back());
  const std::string Vs = std::to_string(V);
  std::vector<std::string> conds;
  // A vector stays in one inner row of group A (its inner extent a
  // multiple of V), or, where the group's two dims are one dense run of
  // the input (the further dim's stride is the inner extent, the input
  // as wide as the domain along a), it may cross rows: then the group's
  // extent, and the input's part of it along the further dim (a cat's
  // operand), are multiples of V (c0011: a batch of 2 innermost, bf16).
  const ExtentSets& esets = extent_sets_of(c);
  size_t further = w.rank(v);
  if (!p.group_a.empty() && p.inputs[q].dims[inner] == static_cast<int>(p.dim_a) &&
      esets.same(v, static_cast<int>(inner), p.outputs[0], static_cast<int>(p.dim_a)))
    for (size_t j = 0; j < p.inputs[q].dims.size(); ++j)
      if (p.inputs[q].dims[j] == static_cast<int>(p.group_a[0]) && w.size_class(v, j) == SizeClass::Many) further = j;
  if (further == w.rank(v)) {
    conds.push_back(n.ea_in + " % " + Vs + " == 0");
  } else {
    const std::string part = esets.same(v, static_cast<int>(further), p.outputs[0], static_cast<int>(p.group_a[0]))
                                 ? std::string()
                                 : " && (long long)" + w.extent(v, further) + " * " + n.ea_in + " % " + Vs + " == 0";
    const std::string st = w.stride(v, further);
    conds.push_back("((" + n.ea_in + " % " + Vs + " == 0 && " + st + " % " + Vs + " == 0) || (" + st + " == " + n.ea_in +
                    " && " + n.ea + " % " + Vs + " == 0" + part + "))");
  }
  conds.push_back("((unsigned long long)" + w.pointer(v) + " % " + std::to_string(V * dtype_size(val.dtype)) + " == 0)");
  conds.push_back(w.stride(v, inner) + " == 1");
  for (size_t d = 0; d < w.rank(v); ++d)
    if (d != inner && d != further && w.size_class(v, d) == SizeClass::Many) conds.push_back(w.stride(v, d) + " % " + Vs + " == 0");
  // (A vector starts at a multiple of V along a: inside the input when its
  // first lane is, given the input's extent along a is a multiple too.)
  for (size_t j = 0; j < p.inputs[q].dims.size(); ++j)
    if (p.inputs[q].dims[j] == static_cast<int>(p.dim_a) && !esets.same(v, static_cast<int>(j), p.outputs[0], p.inputs[q].dims[j]))
      conds.push_back(w.extent(v, j) + " % " + Vs + " == 0");
  return w.hoist("bool", "kffill", all_of(conds));
}

// Phase 1 with vectors of V elements along a, in two parts: the loads of
// one tiled task input into registers (loads out of range give zeros,
// which no output reads), then their stores into its tile. Every load of
// the tiles goes before the first store to shared memory, so a thread has
// all its vectors in flight at once: with a store after each load, ncu
// showed the warps waiting on one load at a time (docs/perf-log.md,
// session 11).
struct FilledVectors {
  size_t q = 0;
  std::string reg;
  int V = 0, lanes = 0, rows = 0, steps = 0;  // lanes per tile row, tile rows per step
};

FilledVectors tile_fill_loads(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx,
                              size_t q, int V) {
  const int64_t v = p.inputs[q].value;
  const int lanes = p.tile / V, rows = p.block / lanes;
  const FilledVectors fl{q, w.fresh("tv"), V, lanes, rows, (p.tile + rows - 1) / rows};
  const std::vector<std::string> at = tile_index(p.inputs[q].dims, idx);
  const std::string inside = inside_input(w, p.inputs[q], p.outputs[0], at);
  const std::string vt = vector_type(w, v, V);
  w.line(vt + " " + fl.reg + "[" + std::to_string(fl.steps) + "];");
  w.line("#pragma unroll");
  w.open("for (int s = 0; s < " + std::to_string(fl.steps) + "; ++s)");
  w.line(fill_coords(rows, lanes, V));
  const std::string in_range = tile_element(w, n, group_a_names(n), "ga", group_b_names(n), "k");
  w.line(fl.reg + "[s] = (" + in_range + (inside.empty() ? "" : " && " + inside) + ") ? *(const " + vt + "*)(" +
         w.address(v, at) + ") : " + vt + "{};");
  w.close();
  return fl;
}

void tile_fill_stores(KernelWriter& w, const TiledParams& p, const TileNames& n, const FilledVectors& fl) {
  w.line("#pragma unroll");
  w.open("for (int s = 0; s < " + std::to_string(fl.steps) + "; ++s)");
  w.line(fill_coords(fl.rows, fl.lanes, fl.V));
  // The last step passes the tile's edge only where the rows per step do
  // not divide it (not with 256 threads and 64-element tiles).
  w.open(p.tile % fl.rows == 0 ? std::string() : "if (k < " + n.T + ")");
  const TiledInput& in = p.inputs[fl.q];
  for (int j = 0; j < fl.V; ++j) {
    const std::string lane = fl.reg + "[s].v[" + std::to_string(j) + "]";
    w.line(n.shared[fl.q] + "[k][ga + " + std::to_string(j) + "] = " +
           (stored(in) ? lane : load_form(w.fusion().value(in.value).dtype, lane)) + ";");
  }
  w.close();
  w.close();
}

// Phase 1 of the vector branch: every tiled task input in 16-byte vectors
// (their conditions appended to `conds`), all loads first; then the
// computed tiles.
void tile_fill_vectors(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx,
                       std::vector<std::string>* conds) {
  std::vector<FilledVectors> filled;
  for (size_t q = 0; q < p.inputs.size(); ++q) {
    if (!w.is_input(p.inputs[q].value)) continue;
    const int V = kVectorBytes / dtype_size(w.fusion().value(p.inputs[q].value).dtype);
    conds->push_back(fill_condition(w, p, n, q, V));
    filled.push_back(tile_fill_loads(w, p, n, idx, q, V));
  }
  for (const FilledVectors& fl : filled) tile_fill_stores(w, p, n, fl);
  tile_fill_computed(w, p, n, idx);
}

// Phase 1 of the scalar branch (phase 2 one element a thread: an output's
// or a vector input's extent, stride or address fits no vector): each
// tiled task input with the widest vectors along a that its own extents,
// strides and address allow (16 bytes, else 4 bytes for dtypes narrower
// than that, else one element a thread, tile_fill_scalar), chosen per
// input. Before, the whole kernel fell to one element a thread (seed
// 1940430775 c0126: a [2048, 16, 4095] permute whose input fits vectors,
// its output rows not). Then the computed tiles. (Only here: the same
// choice inside the vector branch, between phase 2's loads in flight and
// the tile's, cost c0019 19% and c0091 27% on an H200, session 42, c0091
// at the same 48 registers; that branch keeps all its loads together.)
void tile_fill(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  for (size_t q = 0; q < p.inputs.size(); ++q) {
    if (!w.is_input(p.inputs[q].value)) continue;
    bool first = true;
    const int size = dtype_size(w.fusion().value(p.inputs[q].value).dtype);
    for (int V : {kVectorBytes / size, 4 / size}) {
      if (V < 2) continue;
      const std::string ok = fill_condition(w, p, n, q, V);
      if (first)
        w.open("if (" + ok + ")");
      else
        w.close_open("else if (" + ok + ")");
      first = false;
      tile_fill_stores(w, p, n, tile_fill_loads(w, p, n, idx, q, V));
    }
    if (!first) w.close_open("else");
    tile_fill_scalar(w, p, n, idx, q);
    if (!first) w.close();
  }
  tile_fill_computed(w, p, n, idx);
}

// Phase 1 for the outputs stored along a (TiledParams::outputs_a): thread
// (k, lx) computes them at (a0 + lx, b0 + k) from the inputs directly,
// the stores and the loads of inputs contiguous along a coalesced (the
// tiles' loads of the same elements are in L1). All of an element's
// values before its first store (an output may update an input that the
// next one reads: in_place.h); after a barrier where one updates a tiled
// input (tiles_overwritten_in_phase_1: other threads fill its tile).
void tile_outputs_a(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  if (p.outputs_a.empty()) return;
  if (!tiles_overwritten_in_phase_1(w.concrete(), p).empty())
    w.line("__syncthreads();  // the tiles are filled before phase 1 updates a tiled input in place");
  w.tile_reads.clear();
  tile_loop(w, n, true, "#pragma unroll 4", [&] {
    std::vector<std::string> values;
    for (int64_t o : p.outputs_a) {
      values.push_back(w.fresh("oa"));
      w.line("const " + std::string(reg_type(w.fusion().value(o).dtype)) + " " + values.back() + " = " + w.value_at(o, idx) + ";");
    }
    for (size_t k = 0; k < p.outputs_a.size(); ++k) w.store(p.outputs_a[k], idx, values[k]);
  });
}

// Phase 3, after a barrier: thread (k, lx) stores the staged outputs at
// (a0 + lx, b0 + k) from their tiles, threads along a (coalesced for them).
void tile_outputs_staged(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  if (p.outputs_staged.empty()) return;
  w.line("__syncthreads();");
  tile_loop(w, n, true, "#pragma unroll 4", [&] {
    for (size_t j = 0; j < p.outputs_staged.size(); ++j) w.store(p.outputs_staged[j], idx, n.staged[j] + "[k][lx]");
  });
}

// The scalar tile loop of TiledParams::walk_b_with_a, where group B's
// inner extent R (n.eb_in) is a power of two below the tile (checked at
// run time by the caller): thread t takes flat indices f = t, t + block,
// ... of the tile in the outputs' memory order, r = f % R along B's inner
// dim, then k = f / R % tile along a, then q = f / (R * tile) along B's
// further dim (the tile's lane lx = q * R + r). R divides the tile, so
// b0 starts an inner row (br_ = 0) and the element's indices are r, bq_ +
// q and a0 + k. A warp then stores 32 consecutive elements of an output
// whose dim a follows B's inner dim in memory, where lanes along B stored
// runs of R.
void tile_loop_b_with_a(KernelWriter& w, const TileNames& n, const std::function<void()>& body) {
  const std::string& t = w.index_type();
  const GroupIndex gb = group_b_names(n);
  w.open("");
  w.line("const int wsh_ = __ffs(" + n.eb_in + ") - 1;");
  w.line("#pragma unroll 4");
  w.open("for (int wf_ = threadIdx.x; wf_ < " + n.T + " * " + n.T + "; wf_ += blockDim.x)");
  w.line("const int wq_ = wf_ >> (wsh_ + 6), k = (wf_ >> wsh_) & (" + n.T + " - 1), lx = (wq_ << wsh_) + (wf_ & (" + n.eb_in +
         " - 1));");
  w.line("const " + t + " " + n.ia + " = a0 + k, " + gb.lin + " = b0 + lx;");
  w.line("const " + t + " " + gb.inner + " = wf_ & (" + n.eb_in + " - 1), " + gb.outer + " = bq_ + wq_;");
  w.open("if (" + n.ia + " < " + n.ea + " && " + gb.lin + " < " + n.eb + ")");
  body();
  w.close();
  w.close();
  w.close();
}

// Phase 2, scalar: thread (k, lx) computes the outputs at (a0 + k, b0 + lx).
void tile_compute(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  const auto body = [&] {
    for (size_t q = 0; q < p.inputs.size(); ++q)
      w.tile_reads[p.inputs[q].value] = {tile_index(p.inputs[q].dims, idx), tile_read(w, p.inputs[q], n.shared[q] + "[lx][k]")};
    for (size_t j = 0; j < p.outputs_staged.size(); ++j)
      w.line(n.staged[j] + "[lx][k] = " + w.value_at(p.outputs_staged[j], idx) + ";");
    for (int64_t o : p.outputs_b()) w.store(o, idx, w.value_at(o, idx));
    w.tile_reads.clear();
  };
  const bool walk = p.walk_b_with_a && n.oa.empty() && !n.ob.empty() && p.tile == 64;
  if (walk) {
    w.open("if (" + n.eb_in + " < " + n.T + " && (" + n.eb_in + " & (" + n.eb_in + " - 1)) == 0)");
    tile_loop_b_with_a(w, n, body);
    w.close_open("else");
  }
  // (a full unroll measured slower, docs/perf-log.md)
  tile_loop(w, n, false, "#pragma unroll 4", body);
  if (walk) w.close();
}

// Phase 2, vectors along b (the outputs' fast dim): thread (k, gb) of
// group u computes V consecutive outputs at (a0 + u * rows + k, b0 + gb ...).
struct TileGroups {
  std::vector<std::vector<std::string>> idx;  // per group: the domain index of lane 0
  std::vector<std::string> ok, k;             // per group: in range; row in the tile
};

TileGroups tile_groups(KernelWriter& w, const TiledParams& p, const TileNames& n, const std::vector<std::string>& idx) {
  const int V = p.vectors.width, lanes_per_row = p.tile / V, rows = p.block / lanes_per_row;
  TileGroups g;
  w.line("const int gb = (int)(threadIdx.x % " + std::to_string(lanes_per_row) + ") * " + std::to_string(V) + ";");
  for (int u = 0; u * rows < p.tile; ++u) {
    const std::string k = w.fresh("tk"), ia = w.fresh("ta"), ib = w.fresh("tb");
    w.line("const int " + k + " = " + std::to_string(u * rows) + " + (int)(threadIdx.x / " + std::to_string(lanes_per_row) + ");");
    const GroupIndex ga = n.oa.empty() ? GroupIndex{ia, ia, ""} : GroupIndex{ia, w.fresh("ti"), w.fresh("to")};
    const GroupIndex gb = n.ob.empty() ? GroupIndex{ib, ib, ""} : GroupIndex{ib, w.fresh("ti"), w.fresh("to")};
    std::vector<std::string> gi = idx;
    gi[p.dim_a] = ga.inner;
    gi[p.dim_b] = gb.inner;
    if (!n.oa.empty()) gi[p.group_a[0]] = ga.outer;
    if (!n.ob.empty()) gi[p.group_b[0]] = gb.outer;
    g.idx.push_back(gi);
    g.ok.push_back(tile_element(w, n, ga, k, gb, "gb"));
    g.k.push_back(k);
  }
  return g;
}

void tile_compute_vectors(KernelWriter& w, const ExtentSets& sets, const TiledParams& p, const TileNames& n,
                          const TileGroups& g, std::vector<std::string>* conds) {
  w.section = 0;
  // (inputs the plan reads at a shift: a slice's or a cat part's, as in
  // the pointwise loop; transpose.cpp plans them where no tile is filled)
  w.shifted_reads = std::any_of(p.vectors.inputs.begin(), p.vectors.inputs.end(), [](const auto& in) {
    return std::any_of(in.second.begin(), in.second.end(), is_shifted);
  });
  for (size_t u = 0; u < g.idx.size(); ++u) {
    w.open("if (" + g.ok[u] + ")");
    w.group = static_cast<int>(u);
    vector_group(w, p.vectors, p.outputs_b(), g.idx[u], [&](int lane) {
      for (size_t q = 0; q < p.inputs.size(); ++q)
        w.tile_reads[p.inputs[q].value] = {
            tile_index(p.inputs[q].dims, w.lane_index),
            tile_read(w, p.inputs[q], n.shared[q] + "[gb + " + std::to_string(lane) + "][" + g.k[u] + "]")};
      for (size_t j = 0; j < p.outputs_staged.size(); ++j)
        w.line(n.staged[j] + "[gb + " + std::to_string(lane) + "][" + g.k[u] + "] = " +
               w.value_at(p.outputs_staged[j], w.lane_index) + ";");
    });
    w.tile_reads.clear();
    w.close();
  }
  w.shifted_reads = false;
  conds->push_back(n.eb_in + " % " + std::to_string(p.vectors.width) + " == 0");  // (a vector stays in one inner row)
  used_vector_conditions(w, sets, p.vectors, p.outputs[0], false, conds);
}

}  // namespace

void emit_tiled(KernelWriter& w, const TiledParams& p) {
  const Fusion& f = w.fusion();
  const ExtentSets& sets = extent_sets_of(w.concrete());
  const int64_t dom = p.outputs[0];
  const size_t r = w.rank(dom);
  const std::string& t = w.index_type();
  const size_t da = p.dim_a, db = p.dim_b;
  TileNames n{w.extent(dom, da), w.extent(dom, db), "i" + std::to_string(da), "i" + std::to_string(db),
              w.extent(dom, da), w.extent(dom, db), "", "", {}, {}, std::to_string(p.tile), std::to_string(p.block / p.tile),
              dom, da, db};
  // Groups of two dims: linear extents (the product), the further dims' indices.
  if (!p.group_a.empty()) {
    n.oa = "i" + std::to_string(p.group_a[0]);
    n.ea = w.hoist("long long", "n", "(long long)" + n.ea_in + " * " + w.extent(dom, p.group_a[0]));
  }
  if (!p.group_b.empty()) {
    n.ob = "i" + std::to_string(p.group_b[0]);
    n.eb = w.hoist("long long", "n", "(long long)" + n.eb_in + " * " + w.extent(dom, p.group_b[0]));
  }
  const std::string ta = w.hoist("long long", "n", "((long long)" + n.ea + " + " + n.T + " - 1) / " + n.T);
  const std::string tb = w.hoist("long long", "n", "((long long)" + n.eb + " + " + n.T + " - 1) / " + n.T);
  std::string outer;
  std::vector<size_t> outer_dims;
  for (size_t d = 0; d < r; ++d) {
    if (p.tiles_dim(d)) continue;
    outer_dims.push_back(d);
    const std::string e = w.extent(dom, d);
    if (e != "1") outer = outer.empty() ? "(long long)" + e : outer + " * " + e;
  }
  const std::string tiles = w.hoist("long long", "n", (outer.empty() ? "" : outer + " * ") + ta + " * " + tb);
  for (const TiledInput& in : p.inputs) {
    n.shared.push_back(w.fresh("kf_tile"));
    const DType dt = f.value(in.value).dtype;
    w.line("__shared__ " + std::string(stored(in) ? storage_type(dt) : reg_type(dt)) + " " + n.shared.back() + "[" + n.T +
           "][" + std::to_string(in.pitch(p.tile)) + "];");
  }
  for (int64_t o : p.outputs_staged) {
    n.staged.push_back(w.fresh("kf_otile"));
    w.line("__shared__ " + std::string(reg_type(f.value(o).dtype)) + " " + n.staged.back() + "[" + n.T + "][" + n.T +
           " + 1];");
  }
  use_vectors(w, p.vectors);
  w.open("for (long long tile = blockIdx.x; tile < " + tiles + "; tile += gridDim.x)");
  // Order 3 (the default): blocks in flight take consecutive tiles along
  // the outputs' contiguous dim b, so together they write whole rows of the
  // outputs (and read whole rows of the inputs laid out like them): DRAM
  // pages are used whole (transpose_add: DRAM 81% -> 86% of peak against
  // the diagonal order, docs/perf-log.md session 19).
  const std::string pos = "const long long in_ = tile % (" + ta + " * " + tb + "), ";
  if (p.order == 2)
    w.line(pos + "ta_ = in_ % " + ta + ", tb_ = in_ / " + ta + ";");
  else if (p.order == 3)
    w.line(pos + "tb_ = in_ % " + tb + ", ta_ = in_ / " + tb + ";");
  else
    w.line(pos + "ta_ = in_ % " + ta + ", tb_ = (in_ / " + ta + " + ta_) % " + tb + ";");
  std::vector<std::string> idx(r);
  const std::vector<std::string> o_idx = unravel(w, dom, outer_dims, "tile / (" + ta + " * " + tb + ")");
  for (size_t k = 0; k < outer_dims.size(); ++k) idx[outer_dims[k]] = o_idx[k];
  idx[da] = n.ia;
  idx[db] = n.ib;
  if (!n.oa.empty()) idx[p.group_a[0]] = n.oa;
  if (!n.ob.empty()) idx[p.group_b[0]] = n.ob;
  w.line("const " + t + " a0 = (" + t + ")(ta_ * " + n.T + "), b0 = (" + t + ")(tb_ * " + n.T + ");");
  // The tile's base in the groups' inner and further dims (tile_element).
  if (!n.oa.empty()) w.line("const " + t + " aq_ = " + w.quotient("a0", dom, da) + ", ar_ = a0 - aq_ * " + n.ea_in + ";");
  if (!n.ob.empty()) w.line("const " + t + " bq_ = " + w.quotient("b0", dom, db) + ", br_ = b0 - bq_ * " + n.eb_in + ";");
  w.line("__syncthreads();  // the previous tile is consumed");
  // The vector branch: both phases in vectors where every tensor's
  // extents, strides and address allow, checked here (uniform over the
  // block: the barriers inside are safe); else phase 2 one element a
  // thread, phase 1 in each input's widest vectors (tile_fill).
  const auto scalar_phases = [&] {
    tile_fill(w, p, n, idx);
    tile_outputs_a(w, p, n, idx);
    w.line("__syncthreads();");
    tile_compute(w, p, n, idx);
    tile_outputs_staged(w, p, n, idx);
  };
  if (p.vectors.width > 0) {
    // Both phases in vectors; with TiledParams::vectors_without_fill a
    // second vector branch beside it fills the tile in the input's widest
    // vectors chosen at run time (tile_fill), for inputs whose extents or
    // address rule out the fill's vectors but not phase 2's: an aligned
    // tensor keeps the first branch's code.
    const KernelWriter::Section cond = w.reserve();
    // One vector branch; returns its condition.
    const auto vector_phases = [&](bool fill_in_vectors) {
      use_vectors(w, p.vectors);  // (each branch's own vector registers and lane conditions)
      std::vector<std::string> conds;
      const TileGroups groups = tile_groups(w, p, n, idx);
      // The groups' vector loads go before phase 1: they are in flight
      // together with the tile's (one memory round trip per tile, not two).
      const KernelWriter::Section loads = w.reserve();
      if (fill_in_vectors)
        tile_fill_vectors(w, p, n, idx, &conds);
      else
        tile_fill(w, p, n, idx);
      tile_outputs_a(w, p, n, idx);
      w.line("__syncthreads();");
      tile_compute_vectors(w, sets, p, n, groups, &conds);
      w.fill(loads, vector_loads(w, p.vectors.width, 0, groups.ok));
      tile_outputs_staged(w, p, n, idx);
      return all_of(conds);
    };
    const std::string ok = w.fresh("kfvec");
    w.open("if (" + ok + ")");
    std::vector<std::string> flags = {"const bool " + ok + " = " + vector_phases(true) + ";"};
    if (p.vectors_without_fill) {
      const std::string ok_without_fill = w.fresh("kfvec");
      w.close_open("else if (" + ok_without_fill + ")");
      flags.push_back("const bool " + ok_without_fill + " = " + vector_phases(false) + ";");
    }
    w.fill(cond, flags);
    w.close_open("else");
    scalar_phases();
    w.close();
  } else {
    scalar_phases();
  }
  w.close();
}

}  // namespace kf
