// The tiled (transpose) scheduler: a pointwise loop some of whose inputs
// are contiguous along another domain dim (a) than the one the outputs are
// written along (b), in any rank and permutation. Those inputs go through
// shared-memory tiles of dims (a, b); everything else is read as in a
// pointwise loop, the other dims outer.
#include <algorithm>
#include <tuple>
#include <map>
#include <set>

#include "core/concretize/extent_sets.h"
#include "core/schedule/access_map.h"
#include "core/schedule/in_place.h"
#include "core/schedule/why_not.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {

constexpr int kTile = 64;
// Static shared memory a kernel may hold under the default 48 KiB limit,
// leaving room for the block reductions' scratch.
constexpr int kTileBytes = 40 * 1024;

// Whether a tile can hold a value read at `map`: plain domain indices
// only, along dim b and every other dim of class >1. A value broadcast over
// some (a DiT modulation's [2, 4096] transposed shift over 4095 rows) is
// re-read from the caches, and its dim a may be tiny (tiles 64 wide over a
// dim of 2 ran at 0.04x torch.compile, seed 730114261 c0104, session 30).
bool tileable_map(const IndexMap& map, const std::vector<SizeClass>& dc, size_t b) {
  for (int m : map)
    if (m < 0 && m != kZeroIndex) return false;
  for (size_t d = 0; d < dc.size(); ++d)
    if ((dc[d] == SizeClass::Many || d == b) && std::find(map.begin(), map.end(), static_cast<int>(d)) == map.end())
      return false;
  return true;
}

// Whether a value read at `map`, broadcast over some dims other than a
// and b (plain along both), may join tiles along a: each tile then holds
// its elements at the outer dims' current indices, as for any input. Only
// beside an input that tileable_map accepts with the same a (a broadcast
// input alone never picks a: session 30's tiny dim a).
bool joins_tiles(const IndexMap& map, size_t a, size_t b) {
  for (int m : map)
    if (m < 0 && m != kZeroIndex) return false;
  return std::find(map.begin(), map.end(), static_cast<int>(a)) != map.end() &&
         std::find(map.begin(), map.end(), static_cast<int>(b)) != map.end();
}

const std::vector<int>& memory_order(const ConcreteFusion& c, int64_t v) {
  const Value& val = c.fusion->value(v);
  return val.kind == ValueKind::TensorInput ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order
                                            : c.stride_orders[static_cast<size_t>(v)];
}

struct TileSource {
  int64_t value = -1;
  IndexMap map;  // the plain map it is read at, and held in the tile at
  int a = -1;    // the domain dim its input is contiguous along
  // The domain dims its input's further memory dims are read along, next
  // innermost first, up to the first one not read at a plain index.
  std::vector<int> next;
};

std::vector<int> next_dims(const std::vector<int>& order, const IndexMap& map) {
  std::vector<int> next;
  for (size_t k = order.size(); k-- > 1;) {
    const int d = map[static_cast<size_t>(order[k - 1])];
    if (d == kZeroIndex) continue;
    if (d < 0) break;
    next.push_back(d);
  }
  return next;
}

// Per value the task computes or reads: the one tensor input of the task
// it is computed from (-1: none, constants and scalars only; -2: several).
// A gather's index operand does not count: it says which rows are read,
// and the rows are what a tile holds (an embedding stored column-major
// reads its table's rows through a tile, seed 1940430775 c0008).
std::map<int64_t, int64_t> sole_inputs(const Fusion& f, const Task& task) {
  std::map<int64_t, int64_t> sole;
  for (int64_t in : task.inputs) sole[in] = f.value(in).is_scalar || f.value(in).rank == 0 ? -1 : in;
  for (int64_t e : task.exprs) {
    const Expr& ex = f.exprs[static_cast<size_t>(e)];
    int64_t s = -1;
    for (size_t k = 0; k < ex.inputs.size(); ++k) {
      if (op_info(ex.op).category == OpCategory::Indexing && k == 1) continue;
      const int64_t in = ex.inputs[k];
      auto it = sole.find(in);
      const int64_t si = it == sole.end() ? -1 : it->second;  // (constants)
      if (si != -1) s = s == -1 || s == si ? si : -2;
    }
    for (int64_t out : ex.outputs) sole[out] = s;
  }
  return sole;
}

// What the tiles may hold, in the order they are tried: inputs read at a
// plain map with their innermost memory dim along a domain dim a of class
// >1 other than b (first-read order, every such map); then, for an input
// with no such map (read through a slice, or a reshape of the tiles' dims:
// a qkv split, a merge of heads), the lowest values computed from it alone
// that are read at a plain map under which it is contiguous along one dim
// a and varies along b (an input constant along b is read by a warp at one
// address: no tile needed). A tile of a computed value is filled by
// evaluating it, threads along a: the input's loads stay coalesced.
std::vector<TileSource> tile_sources(const ConcreteFusion& c, const Task& task, const AccessMap& reads,
                                     const std::vector<SizeClass>& dc, size_t b) {
  const auto is_input = [&](int64_t v) { return std::find(task.inputs.begin(), task.inputs.end(), v) != task.inputs.end(); };
  const auto along_a = [&](int inner) { return inner >= 0 && inner != static_cast<int>(b) && dc[static_cast<size_t>(inner)] == SizeClass::Many; };
  std::vector<TileSource> out, broadcast;
  std::set<int64_t> direct;
  for (int64_t v : reads.order) {
    const std::vector<int>& order = is_input(v) ? memory_order(c, v) : std::vector<int>{};
    if (order.empty()) continue;
    for (const IndexMap& m : reads.reads.at(v)) {
      const int inner = m[static_cast<size_t>(order.back())];
      if (along_a(inner) && tileable_map(m, dc, b)) {
        out.push_back({v, m, inner, next_dims(order, m)});
        direct.insert(v);
      } else if (along_a(inner) && joins_tiles(m, static_cast<size_t>(inner), b)) {
        broadcast.push_back({v, m, inner, next_dims(order, m)});
      }
    }
  }
  // (Last: the tiles' shared memory goes to full-size inputs first; read
  // across its memory by phase 2, a [T, H] input broadcast over a batch
  // of 16 cost seed 1056028048 c0049 2.6x triton's time, session 43.)
  std::set<int64_t> computed_from;  // inputs a computed tile stands for (phase 2 reads the tile)
  const auto with_broadcast = [&] {
    for (TileSource& s : broadcast)
      if (!out.empty() && s.a == out.front().a && !direct.count(s.value) && !computed_from.count(s.value))
        out.push_back(std::move(s));
    return out;
  };
  // Only inputs some read takes across their memory (their innermost dim
  // along another dim than b, or at a computed index) may need a computed
  // tile; and only the lowest plain-read values computed from one alone (no
  // operand of theirs computed from it is plain-read) are traced again: a
  // chain of 10000 ops would otherwise trace each value (quadratic).
  std::set<int64_t> across;
  for (int64_t v : reads.order) {
    const std::vector<int>& order = is_input(v) && !direct.count(v) ? memory_order(c, v) : std::vector<int>{};
    if (order.empty()) continue;
    for (const IndexMap& m : reads.reads.at(v)) {
      const int inner = m[static_cast<size_t>(order.back())];
      if (inner == kOpaqueIndex || along_a(inner)) across.insert(v);
    }
  }
  if (across.empty()) return with_broadcast();
  const std::map<int64_t, int64_t> sole = sole_inputs(*c.fusion, task);
  const auto plain_read = [&](int64_t x) {
    const std::vector<IndexMap>* maps = reads.find(x);
    return maps != nullptr && std::any_of(maps->begin(), maps->end(), [&](const IndexMap& m) { return tileable_map(m, dc, b); });
  };
  for (int64_t w : reads.order) {
    const auto s = sole.find(w);
    if (is_input(w) || s == sole.end() || !across.count(s->second) || !plain_read(w)) continue;
    const int64_t u = s->second;
    const Expr& e = c.fusion->exprs[static_cast<size_t>(c.fusion->value(w).producer)];
    if (std::any_of(e.inputs.begin(), e.inputs.end(), [&](int64_t x) {
          const auto sx = sole.find(x);
          return !is_input(x) && sx != sole.end() && sx->second == u && plain_read(x);
        }))
      continue;  // (not the lowest)
    const std::vector<int>& order = memory_order(c, u);
    for (const IndexMap& m : reads.reads.at(w)) {
      if (!tileable_map(m, dc, b)) continue;
      // (Shifted entries by their dim: a slice of step 1 along the input's
      // innermost dim, a fused gate_up's halves, still fills coalesced.)
      const AccessMap under = trace_accesses(c, task, {{w, m}}, true, SliceReads::Unaligned);
      const std::vector<IndexMap>* um = under.find(u);
      int a = -1;
      bool ok = um != nullptr && !um->empty();
      for (size_t k = 0; ok && k < um->size(); ++k) {
        const IndexMap& x = (*um)[k];
        const int inner = read_dim(x[static_cast<size_t>(order.back())]);
        const bool varies = std::any_of(x.begin(), x.end(), [&](int e) {
          return e == kOpaqueIndex || read_dim(e) == static_cast<int>(b);
        });
        // Every dim of class >1 read (or an opaque index: a gather's
        // rows): an input broadcast over one is re-read from the caches,
        // as for tileable_map, and may have a tiny dim a.
        bool whole = true;
        if (std::find(x.begin(), x.end(), kOpaqueIndex) == x.end())
          for (size_t d = 0; d < dc.size(); ++d)
            if (dc[d] == SizeClass::Many &&
                std::none_of(x.begin(), x.end(), [&](int e) { return read_dim(e) == static_cast<int>(d); }))
              whole = false;
        ok = along_a(inner) && (a < 0 || inner == a) && varies && whole;
        a = inner;
      }
      if (!ok) continue;
      out.push_back({w, m, a, next_dims(order, um->front())});
      computed_from.insert(u);
      break;
    }
  }
  return with_broadcast();
}

// An output's fast dim: its memory's innermost dim past dims of one
// element (whose stride says nothing: seed 2012453407 c0043's k [1, S, H,
// D] stored column-major); -1 where that dim is not of class >1.
int fast_dim(const ConcreteFusion& c, int64_t o, const std::vector<SizeClass>& dc) {
  const std::vector<size_t> order = loop_order(c, o);
  const auto fast = std::find_if(order.rbegin(), order.rend(), [&](size_t d) { return dc[d] != SizeClass::One; });
  return fast == order.rend() || dc[*fast] != SizeClass::Many ? -1 : static_cast<int>(*fast);
}

// A dim phase 2 may run along (TiledParams::dim_b): the fast dim of an
// output, or of a full-size input (whose outputs then all go through
// staged tiles), with that tensor's memory order in domain dims, outermost
// first (group b's next dim comes from it).
struct BChoice {
  size_t b;
  std::vector<size_t> order;
  bool from_output;
};

// The tiled plan whose phase 2 runs along dim b.b (`reads`: the task's
// reads traced from its outputs);
std::optional<TiledParams> tiles_along(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                       const std::vector<int64_t>& outs, const AccessMap& reads, const BChoice& bc,
                                       std::string* why) {
  const size_t b = bc.b;
  const Fusion& f = *c.fusion;
  const int64_t dom = outs[0];
  const auto& dc = c.size_classes[static_cast<size_t>(dom)];
  const size_t r = dc.size();
  TiledParams p;
  p.outputs = outs;
  p.tile = kTile;
  p.block = tuning.tiled_block == 512 ? 512 : 256;  // (64-wide tiles: rows per step divide the tile)
  // Tiles that write several outputs (optimizer steps, gated backwards):
  // 512 threads (Tuning::tiled_block_many_outputs).
  if (tuning.tiled_block_many_outputs > 0 && outs.size() >= static_cast<size_t>(tuning.tiled_block_many_outputs))
    p.block = 512;
  p.order = tuning.tiled_order >= 1 && tuning.tiled_order <= 3 ? tuning.tiled_order : 3;
  p.dim_b = b;
  const IndexMap id = identity_map(c, dom);
  // a: the domain dim along which the first such input is contiguous;
  // later inputs join the tiles when they are contiguous along the same.
  // A tile holds an input, or, where an input is read through a slice or
  // a reshape of the tiles' dims (no plain index of it), the lowest values
  // computed from it alone that are read at plain indices (tile_sources).
  bool have_a = false;
  int bytes = 0;
  std::vector<int> next_a;
  std::vector<int64_t> tiled;
  for (const TileSource& src : tile_sources(c, task, reads, dc, p.dim_b)) {
    const int64_t v = src.value;
    if (have_a && src.a != static_cast<int>(p.dim_a)) continue;
    if (std::find(tiled.begin(), tiled.end(), v) != tiled.end()) continue;  // (its first map)
    const DType t = f.value(v).dtype;
    const bool stored = dtype_size(t) < 4 && std::find(task.inputs.begin(), task.inputs.end(), v) != task.inputs.end();
    const TiledInput in{v, src.map, stored ? dtype_size(t) : t == DType::F64 || t == DType::I64 ? 8 : 4};
    if (bytes + in.bytes(kTile) > kTileBytes) break;
    bytes += in.bytes(kTile);
    p.dim_a = static_cast<size_t>(src.a);
    if (!have_a) next_a = src.next;
    have_a = true;
    p.inputs.push_back(in);
    tiled.push_back(v);
  }
  // Without such an input, an output stored along another dim than b
  // (outputs_staged below) gives dim a: its memory's innermost dim.
  if (p.inputs.empty()) {
    for (int64_t o : outs) {
      const std::vector<int>& order = memory_order(c, o);
      if (order.size() != r || static_cast<size_t>(order.back()) == p.dim_b ||
          dc[static_cast<size_t>(order.back())] != SizeClass::Many)
        continue;
      p.dim_a = static_cast<size_t>(order.back());
      next_a = next_dims(order, id);
      have_a = true;
      break;
    }
    if (!have_a)
      return reject(why, "no input or output is contiguous along a dim other than the outputs' fast dim");
  }
  // The groups (TiledParams::group_a): each takes one further dim, the
  // next one of class Many in its tensor's memory order (the tiled input's
  // for A, the outputs' for B) that the tiles do not run over yet (class
  // 0/1 dims and the other group's dims skipped). Where the next dim is
  // the other group's (an output [N, M, 2] of an input [2, N, M]: b's next
  // dim is a), the group takes the one after it: its tile rows then sit a
  // row of the other dim apart in memory, but a tile covers whole runs of
  // both (a 2-wide b alone filled 2 of a tile's 64 rows: seed 2012453407
  // c0168 geglu, 5.47 ms against torch.compile's 0.32, 5% of DRAM); where
  // b is long (a plain transpose [B, N, M] -> [B, M, N]) the ungrouped
  // twin runs. Two dims fill a tile unless both are tiny; a third would
  // add index math for a rare case.
  // Whether a group's inner dim is a batch of a few or a sequence of
  // thousands is known only at run time: the plan's ungrouped twin takes
  // the calls where every group's inner dim fills half a tile
  // (takes_ungrouped_tiles). Where both groups want the same dim (a qkv
  // split: batch then sequence innermost in the input, head dim then
  // sequence in the outputs), the group whose inner dim is logically outer
  // chooses first: a logically outer dim innermost in memory is most
  // likely a batch dim of a few elements (corpus seed 1631654200: c0170's
  // dim a, c0171's and c0074's dim b are dim 0). The domain's last dim is
  // never a group's inner dim: it is most likely a feature dim that fills
  // tiles alone, and where one group helps and the other does not, the
  // kernel with both loses to the one with the helpful group (seed
  // 259726623 c0119: 0.086 -> 0.107 ms without this rule, session 32).
  const auto choose_a = [&] {
    for (int d : next_a)
      if (dc[static_cast<size_t>(d)] == SizeClass::Many && !p.tiles_dim(static_cast<size_t>(d))) {
        p.group_a.push_back(static_cast<size_t>(d));
        return;
      }
  };
  const std::vector<size_t>& out_order = bc.order;
  const auto choose_b = [&] {
    for (size_t k = out_order.size() - 1; k-- > 0;)
      if (dc[out_order[k]] == SizeClass::Many && !p.tiles_dim(out_order[k])) {
        p.group_b.push_back(out_order[k]);
        return;
      }
  };
  const bool group_a = p.dim_a + 1 != r, group_b = p.dim_b + 1 != r;
  if (p.dim_b < p.dim_a) {
    if (group_b) choose_b();
    if (group_a) choose_a();
  } else {
    if (group_a) choose_a();
    if (group_b) choose_b();
  }
  // Outputs stored along a, beside some along b (kf_execute_into with two
  // orders: c0086's result and its pre-activation in the input's order):
  // phase 1 writes them along a, coalesced, where every input they read is
  // contiguous along a or constant along a (a bias along b: one address
  // per warp). Phase 2 would write each across its memory; phase 1 would
  // read an input contiguous along b across its memory instead, so such
  // outputs go through tiles of their own (outputs_staged). A phase-1
  // output writes in place only into a tiled input, after the tiles are
  // filled (in_place.cpp), so phase 1 never changes what phase 2 reads.
  const auto reads_along_a = [&](int64_t o) {
    const AccessMap under = trace_accesses(c, task, {{o, id}}, true);
    for (int64_t u : task.inputs) {
      const std::vector<IndexMap>* maps = under.find(u);
      if (maps == nullptr || f.value(u).is_scalar || f.value(u).rank == 0) continue;
      const std::vector<int>& order = memory_order(c, u);
      if (order.empty()) return false;
      for (const IndexMap& m : *maps) {
        const bool varies = std::any_of(m.begin(), m.end(), [&](int e) {
          return e == kOpaqueIndex || read_dim(e) == static_cast<int>(p.dim_a);
        });
        if (varies && read_dim(m[static_cast<size_t>(order.back())]) != static_cast<int>(p.dim_a)) return false;
      }
    }
    return true;
  };
  for (int64_t o : outs) {
    const std::vector<int>& order = memory_order(c, o);
    if (order.size() == r && order.back() == static_cast<int>(p.dim_a) && reads_along_a(o)) p.outputs_a.push_back(o);
  }
  if (p.outputs_a.size() == outs.size()) p.outputs_a.clear();  // (none along b: phase 2 writes them all, as before)
  // The other outputs stored along a go through tiles of their own
  // (outputs_staged) while shared memory lasts, phase 2 keeping at least
  // one output where b is an output's fast dim (where it is an input's,
  // phase 2 may store none: it computes along the inputs' memory and the
  // staged tiles write every output); the rest are stored across their
  // memory by phase 2.
  for (int64_t o : outs) {
    const std::vector<int>& order = memory_order(c, o);
    if (order.size() != r || order.back() != static_cast<int>(p.dim_a) ||
        std::find(p.outputs_a.begin(), p.outputs_a.end(), o) != p.outputs_a.end() ||
        (bc.from_output && p.outputs_b().size() < 2))
      continue;
    const DType t = f.value(o).dtype;
    const int tile_bytes = kTile * (kTile + 1) * (t == DType::F64 || t == DType::I64 ? 8 : 4);
    if (bytes + tile_bytes > kTileBytes) break;
    bytes += tile_bytes;
    p.outputs_staged.push_back(o);
  }
  if (p.inputs.empty() && p.outputs_staged.empty())
    return reject(why, "no input is contiguous along a dim other than the outputs' fast dim, and no output fits a tile");
  p.vectors = plan_vectors(c, task, p.outputs_b(), dom, p.dim_b, &reads, tiled);
  if (!bc.from_output && p.inputs.empty()) {
    // Phase 2 alone reads the inputs, along their memory: as the pointwise
    // loop does, a slice's or a cat part's reads at a start that keeps
    // vectors whole are vectors too (a fused gate_up's halves).
    std::vector<std::pair<int64_t, IndexMap>> roots;
    for (int64_t o : outs) roots.push_back({o, id});
    const AccessMap shifted = trace_accesses(c, task, roots, true, SliceReads::AtStart);
    p.vectors = plan_vectors(c, task, p.outputs_b(), dom, p.dim_b, &shifted, tiled);
    keep_aligned_shifts(&p.vectors);
  }
  // Outputs written straight into a misaligned input are stored per lane
  // (in_place.h: which inputs a tiled plan updates in place).
  drop_misaligned(c, dom, inputs_read_where_written(c, task, p), &p.vectors);
  // Phase 2 along the outputs' memory where their two innermost dims are
  // B's inner dim and a (TiledParams::walk_b_with_a; A of one dim, so
  // that a tile row is one run of a).
  const std::vector<int64_t> stored_b = p.outputs_b();
  p.walk_b_with_a = tuning.tiled_walk_b_with_a != 0 && p.group_a.empty() && p.group_b.size() == 1 && r >= 2 &&
                    !stored_b.empty() && std::all_of(stored_b.begin(), stored_b.end(), [&](int64_t o) {
                      const std::vector<int>& order = memory_order(c, o);
                      return order.size() == r && order[r - 1] == static_cast<int>(p.dim_b) &&
                             order[r - 2] == static_cast<int>(p.dim_a);
                    });
  p.vectors_without_fill =
      tuning.tiled_vectors_without_fill != 0 && p.vectors.width > 0 &&
      std::count_if(p.inputs.begin(), p.inputs.end(), [&](const TiledInput& in) {
        return f.value(in.value).kind == ValueKind::TensorInput;
      }) == 1;
  return p;
}

// Bytes per domain element a plan moves across memory: each full-size
// input that phase 2 still reads somewhere at a map whose innermost memory
// dim is along another dim than b (its reads traced from the outputs with
// slices and cat parts at their shifts, stopping at the values the tiles
// hold: a fused gate_up whose up half fills a tile is still read across
// its memory through its gate half, and dy through the second part of
// their cat), and each output stored along another dim than b that
// neither phase 1 nor a staged tile writes.
int strided_bytes(const ConcreteFusion& c, const Task& task, const TiledParams& p) {
  const Fusion& f = *c.fusion;
  const int64_t dom = p.outputs[0];
  const auto& dc = c.size_classes[static_cast<size_t>(dom)];
  AccessStops stops;
  for (const TiledInput& in : p.inputs) stops.insert({in.value, in.dims});
  const IndexMap id = identity_map(c, dom);
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : p.outputs) roots.push_back({o, id});
  const AccessMap reads = trace_accesses(c, task, roots, true, SliceReads::Unaligned, &stops);
  int bytes = 0;
  for (int64_t u : task.inputs) {
    const std::vector<IndexMap>* maps = reads.find(u);
    if (maps == nullptr || f.value(u).is_scalar || f.value(u).rank == 0) continue;
    const std::vector<int>& order = memory_order(c, u);
    if (order.empty()) continue;
    for (const IndexMap& m : *maps) {
      if (stops.contains({u, m})) continue;  // (read from its tile)
      const int inner = read_dim(m[static_cast<size_t>(order.back())]);
      bool full = true;  // (a broadcast operand is re-read from the caches)
      for (size_t d = 0; d < dc.size(); ++d)
        if (dc[d] == SizeClass::Many)
          full = full && std::any_of(m.begin(), m.end(), [&](int e) { return read_dim(e) == static_cast<int>(d); });
      if (full && inner >= 0 && dc[static_cast<size_t>(inner)] == SizeClass::Many && inner != static_cast<int>(p.dim_b)) {
        bytes += dtype_size(f.value(u).dtype);
        break;
      }
    }
  }
  const std::vector<int64_t> in_phase_2 = p.outputs_b();
  for (int64_t o : in_phase_2)
    if (fast_dim(c, o, dc) != static_cast<int>(p.dim_b)) bytes += dtype_size(f.value(o).dtype);
  return bytes;
}

// Whether a plan along an output's fast dim strains its tiles: a tile of a
// value computed from an input (read through slices or reshapes), or tiles
// of two full-size inputs (a gated backward's halves, read beside them at
// other shifts across memory). Tuning::tiled_b_from_inputs 3 tries phase 2
// along an input's fast dim only then: on the 37 plans mode 1 changes on
// ten seeds, the 11 such plans ran 0.95-2.48x, the others (a plain
// transposed input tiled: half-rotations, KV-cache cats) down to 0.58x
// (perf-log.md session 49 §5).
bool tiles_strained(const ConcreteFusion& c, const Task& task, const TiledParams& p) {
  const auto& dc = c.size_classes[static_cast<size_t>(p.outputs[0])];
  int full_inputs = 0;
  for (const TiledInput& in : p.inputs) {
    if (std::find(task.inputs.begin(), task.inputs.end(), in.value) == task.inputs.end()) return true;
    bool full = true;
    for (size_t d = 0; d < dc.size(); ++d)
      if (dc[d] == SizeClass::Many)
        full = full && std::any_of(in.dims.begin(), in.dims.end(), [&](int e) { return read_dim(e) == static_cast<int>(d); });
    full_inputs += full ? 1 : 0;
  }
  return full_inputs >= 2;
}

}  // namespace

std::optional<TiledParams> schedule_tiled(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                          std::string* why) {
  const std::vector<std::vector<int64_t>> loops = pointwise_loops(c, task);
  if (loops.size() != 1) return reject(why, "outputs of different sizes");
  const std::vector<int64_t>& outs = loops[0];
  const int64_t dom = outs[0];
  const auto& dc = c.size_classes[static_cast<size_t>(dom)];
  if (dc.size() < 2) return reject(why, "rank below 2");
  // (The outputs' layout is the caller's with kf_execute_into: tiles are
  // never slower than the strided reads they replace.)
  for (int64_t o : outs)
    if (c.size_classes[static_cast<size_t>(o)] != dc) return reject(why, "outputs of different size classes");
  // b: an output's fast dim (a permuted operand makes torch and kfuse
  // produce column-major results). Where the caller's outputs differ, each
  // one's is tried and the plan that moves the fewest bytes across memory
  // wins, then the one with the fewest tiles (each is filled, synced and
  // read: the work, whatever bytes its elements take; by shared memory
  // instead, seed 1940430775 c0118 took the plan with half-size tiles and
  // an output recomputed in phase 1, 0.90x, session 43), then the first
  // output's: an optimizer step whose moment is stored column-major beside
  // row-major parameters tiles the moment alone (along the first output,
  // the moment, three row-major tensors did not fit the tiles' shared
  // memory and were read or written across it: seed 1853590537 c0003 at
  // 0.16x torch.compile).
  if (fast_dim(c, outs[0], dc) < 0) return reject(why, "the outputs' innermost dim is of size class 0/1");
  std::vector<BChoice> choices;  // the first output's first
  const auto add_choice = [&](int d, std::vector<size_t> order, bool from_output) {
    if (d >= 0 && std::none_of(choices.begin(), choices.end(), [&](const BChoice& x) { return x.b == static_cast<size_t>(d); }))
      choices.push_back({static_cast<size_t>(d), std::move(order), from_output});
  };
  for (int64_t o : outs) add_choice(fast_dim(c, o, dc), loop_order(c, o), true);
  const IndexMap id = identity_map(c, dom);
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : outs) roots.push_back({o, id});
  const AccessMap reads = trace_accesses(c, task, roots);
  // Then (Tuning::tiled_b_from_inputs) the fast dims of the full-size
  // inputs (read through slices too: a fused gate_up's halves): phase 2
  // along an input's memory reads it,
  // at whatever shift each cat part or slice takes, coalesced, where tiles
  // hold an input at one map only (a gated activation's backward into a
  // transposed [T, 2F] result reads its inputs at three shifts: seed
  // 1414814702 c0067, 0.28x torch.compile, perf-log.md session 47 §2).
  const AccessMap shifted = tuning.tiled_b_from_inputs >= 1 ? trace_accesses(c, task, roots, true, SliceReads::Unaligned)
                                                            : AccessMap{};
  for (int64_t u : shifted.order) {
    const std::vector<int>& order = memory_order(c, u);
    if (std::find(task.inputs.begin(), task.inputs.end(), u) == task.inputs.end() || order.empty()) continue;
    for (const IndexMap& m : shifted.reads.at(u)) {
      if (order.size() != m.size()) continue;
      std::vector<size_t> dims;  // its memory order in domain dims
      bool whole = true;         // plain or shifted indices, every dim of class >1 read
      for (int k : order) {
        const int d = read_dim(m[static_cast<size_t>(k)]);
        if (d >= 0) dims.push_back(static_cast<size_t>(d));
        else whole = whole && m[static_cast<size_t>(k)] == kZeroIndex;
      }
      for (size_t d = 0; d < dc.size(); ++d)
        whole = whole && (dc[d] != SizeClass::Many || std::find(dims.begin(), dims.end(), d) != dims.end());
      const int inner = read_dim(m[static_cast<size_t>(order.back())]);
      if (whole && inner >= 0 && dc[static_cast<size_t>(inner)] == SizeClass::Many) add_choice(inner, dims, false);
    }
  }
  std::optional<TiledParams> best;
  std::tuple<int, int, int> best_cost;
  std::optional<bool> try_inputs;  // (mode 3: decided by the outputs' best plan)
  for (size_t k = 0; k < choices.size(); ++k) {
    if (tuning.tiled_b_from_inputs == 3 && !choices[k].from_output) {
      if (!try_inputs) try_inputs = !best || tiles_strained(c, task, *best);
      if (!*try_inputs) break;  // (the outputs' choices come first)
    }
    std::optional<TiledParams> p = tiles_along(c, task, tuning, outs, reads, choices[k], k == 0 ? why : nullptr);
    if (!p) continue;
    // (With Tuning::tiled_b_from_inputs 1, a plan along an input's fast
    // dim wins only by moving fewer bytes across memory; at 2 also by
    // fewer tiles: where its vector test fails at run time, an odd row of
    // 11007, phase 2 reads per element, its cat branches one load at a
    // time, at 0.64-0.75x the tiles' plan; perf-log.md session 47 §2.)
    const std::tuple<int, int, int> cost{strided_bytes(c, task, *p),
                                         tuning.tiled_b_from_inputs != 2 && !choices[k].from_output ? 1 : 0,
                                         static_cast<int>(p->inputs.size() + p->outputs_staged.size())};
    if (!best || cost < best_cost) best = std::move(p), best_cost = cost;
  }
  return best;
}

bool a_loop_takes_tiles(const ConcreteFusion& c, const Task& task, const Tuning& tuning) {
  const std::vector<std::vector<int64_t>> loops = pointwise_loops(c, task);
  if (loops.size() < 2) return false;
  const Fusion& f = *c.fusion;
  // Each loop's exprs: the task's producers of its outputs, transitively.
  std::vector<std::set<int64_t>> exprs(loops.size()), needed(loops.size());
  for (size_t l = 0; l < loops.size(); ++l) {
    needed[l].insert(loops[l].begin(), loops[l].end());
    for (auto it = task.exprs.rbegin(); it != task.exprs.rend(); ++it) {  // (run order: consumers last)
      const Expr& e = f.exprs[static_cast<size_t>(*it)];
      if (std::none_of(e.outputs.begin(), e.outputs.end(), [&](int64_t o) { return needed[l].contains(o); })) continue;
      exprs[l].insert(*it);
      needed[l].insert(e.inputs.begin(), e.inputs.end());
    }
  }
  for (size_t l = 0; l < loops.size(); ++l) {
    // (Apart, the values it shares with the other loops are written and
    // read back, a loop's size where they share the loop's inputs: still
    // 2.56x faster on 2023938464 c0180 swiglu backward [8192, 13824]
    // whose silu the split writes, but 0.79x on 678893918 c0001 at 256
    // rows, 44 MB that L2 holds, where reads across memory cost little.)
    Task sub;
    sub.outputs = loops[l];
    for (int64_t ei : task.exprs)
      if (exprs[l].contains(ei)) sub.exprs.push_back(ei);
    for (int64_t in : task.inputs)
      if (needed[l].contains(in)) sub.inputs.push_back(in);
    if (schedule_tiled(c, sub, tuning, nullptr)) return true;
  }
  return false;
}

}  // namespace kf
