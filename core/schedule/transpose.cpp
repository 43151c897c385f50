// The tiled (transpose) scheduler: a pointwise loop some of whose inputs
// are contiguous along another domain dim (a) than the one the outputs are
// written along (b), in any rank and permutation. Those inputs go through
// shared-memory tiles of dims (a, b); everything else is read as in a
// pointwise loop, the other dims outer.
#include <algorithm>

#include "core/schedule/access_map.h"
#include "core/schedule/why_not.h"
#include "core/schedule/schedulers.h"
#include "core/schedule/vector_plan.h"

namespace kf {

namespace {

constexpr int kTile = 64;
// Static shared memory a kernel may hold under the default 48 KiB limit,
// leaving room for the block reductions' scratch.
constexpr int kTileBytes = 40 * 1024;

// Whether `map` reads every domain dim of class >1.
bool reads_every_dim(const IndexMap& map, const std::vector<SizeClass>& dc) {
  for (size_t d = 0; d < dc.size(); ++d)
    if (dc[d] == SizeClass::Many && std::find(map.begin(), map.end(), static_cast<int>(d)) == map.end()) return false;
  return true;
}

}  // namespace

std::optional<TiledParams> schedule_tiled(const ConcreteFusion& c, const Task& task, const Tuning& tuning,
                                          std::string* why) {
  const Fusion& f = *c.fusion;
  const std::vector<std::vector<int64_t>> loops = pointwise_loops(c, task);
  if (loops.size() != 1) return reject(why, "outputs of different sizes");
  const std::vector<int64_t>& outs = loops[0];
  const int64_t dom = outs[0];
  const auto& dc = c.size_classes[static_cast<size_t>(dom)];
  const size_t r = dc.size();
  if (r < 2) return reject(why, "rank below 2");
  // (The outputs' layout is the caller's with kf_execute_into: tiles are
  // never slower than the strided reads they replace.)
  for (int64_t o : outs)
    if (c.size_classes[static_cast<size_t>(o)] != dc) return reject(why, "outputs of different size classes");
  TiledParams p;
  p.outputs = outs;
  p.tile = kTile;
  p.block = tuning.tiled_block == 512 ? 512 : 256;  // (64-wide tiles: rows per step divide the tile)
  p.order = tuning.tiled_order >= 1 && tuning.tiled_order <= 3 ? tuning.tiled_order : 3;
  // b: the outputs' fast dim, their produced layout's innermost (a permuted
  // operand makes torch and kfuse produce column-major results).
  p.dim_b = loop_order(c, dom).back();
  if (dc[p.dim_b] != SizeClass::Many) return reject(why, "the outputs' innermost dim is of size class 0/1");
  const IndexMap id = identity_map(c, dom);
  std::vector<std::pair<int64_t, IndexMap>> roots;
  for (int64_t o : outs) roots.push_back({o, id});
  const AccessMap reads = trace_accesses(c, task, roots);
  // a: the domain dim along which the first such input is contiguous;
  // later inputs join the tiles when they are contiguous along the same.
  bool have_a = false;
  int bytes = 0;
  std::vector<int64_t> tiled;
  for (int64_t v : reads.order) {
    const Value& val = f.value(v);
    if (std::find(task.inputs.begin(), task.inputs.end(), v) == task.inputs.end()) continue;
    const std::vector<int>& order = val.kind == ValueKind::TensorInput
                                        ? c.input_layouts[static_cast<size_t>(val.input_index)].stride_order
                                        : c.stride_orders[static_cast<size_t>(v)];
    if (order.empty()) continue;
    // The first map at which v is read at plain domain indices only, with
    // its innermost memory dim along a domain dim of class >1 other than b
    // that also varies along b (an input constant along b is read by a warp
    // at one address: no tile needed), and along every other dim of class
    // >1: an input broadcast over some (a DiT modulation's [2, 4096]
    // transposed shift over 4095 rows) is re-read from the caches, and its
    // dim a may be tiny (tiles 64 wide over a dim of 2 ran at 0.04x
    // torch.compile, seed 730114261 c0104, session 30).
    const std::vector<IndexMap>& maps = reads.reads.at(v);
    auto m = std::find_if(maps.begin(), maps.end(), [&](const IndexMap& map) {
      const int inner = map[static_cast<size_t>(order.back())];
      return inner >= 0 && inner != static_cast<int>(p.dim_b) && dc[static_cast<size_t>(inner)] == SizeClass::Many &&
             (!have_a || inner == static_cast<int>(p.dim_a)) &&
             std::find(map.begin(), map.end(), static_cast<int>(p.dim_b)) != map.end() &&
             std::find(map.begin(), map.end(), kOpaqueIndex) == map.end() && reads_every_dim(map, dc);
    });
    if (m == maps.end()) continue;
    const int size = val.dtype == DType::F64 || val.dtype == DType::I64 ? 8 : 4;
    const int tile_bytes = kTile * (kTile + 1) * size;  // rows padded by one element
    if (bytes + tile_bytes > kTileBytes) break;
    bytes += tile_bytes;
    p.dim_a = static_cast<size_t>((*m)[static_cast<size_t>(order.back())]);
    have_a = true;
    p.inputs.push_back({v, *m});
    tiled.push_back(v);
  }
  if (p.inputs.empty()) return reject(why, "no input is contiguous along a dim other than the outputs' fast dim");
  p.vectors = plan_vectors(c, task, outs, dom, p.dim_b, &reads, tiled);
  return p;
}

}  // namespace kf
