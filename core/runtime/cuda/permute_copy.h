// The tiled permutation copy: dst = src for a collapsed copy layout whose
// source is contiguous along another dim than the destination (any
// permutation, collapsed rank 2..8, elements of 1, 2, 4 or 8 bytes).
//
// A tile is TA x TB elements over two groups of dims: group A, the
// source's fastest dims (in source stride order), and group B, the
// destination's fastest dims (the collapsed layout's last dims, innermost
// first). The index along a group is a flat index over its dims, so a dim
// of extent 4 followed by one of 2048 is one group of 8192, not a tile
// 7/8 empty. A block reads a tile along A (the source's contiguous walk)
// into shared memory and writes it along B (the destination's), one tile
// after another in a grid-stride loop; the dims in neither group index the
// tiles. Everything here is host arithmetic (no CUDA header): the plan,
// the kernel's source, and a host walk of the kernel's index math for tests.
#pragma once

#include <array>
#include <compare>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/cuda/strided_copy.h"

namespace kf::cuda {

struct PermuteCopyPlan;

// Everything permute_copy_source reads of a plan, in a few integers: the
// copy kernels are cached under it per device (copy_kernels.h), so a warm
// copy neither generates nor hashes source. The source is generated from a
// variant, not from a plan, so it cannot depend on anything the key leaves
// out.
struct PermuteCopyVariant {
  int8_t element_bytes = 0, rank = 0;
  int8_t size_a = 0, size_b = 0;      // the groups' lengths
  std::array<int8_t, 8> group_a{}, group_b{};  // their dims (the rest 0)
  int16_t tile_a = 0, tile_b = 0, pad = 0, threads = 0;
  bool rows_along_b = false, index32 = false;
  auto operator<=>(const PermuteCopyVariant&) const = default;
  // The plan's kernel fields for this variant (the launch's fields, extents,
  // tiles and grid, are 0), `outer` derived from the groups.
  PermuteCopyPlan kernel_plan() const;
};

struct PermuteCopyPlan {
  int element_bytes = 0;
  int rank = 0;                // collapsed rank
  std::vector<int> group_a;    // collapsed dims, the source's fastest first
  std::vector<int> group_b;    // collapsed dims, the destination's fastest first
  std::vector<int> outer;      // the other dims, innermost (highest index) first
  int tile_a = 0, tile_b = 0;  // tile extents along the groups, powers of two
  bool rows_along_b = false;   // the shared tile's rows: along B (tile_a short), else along A
  int pad = 0;                 // elements after each row of the shared tile
  bool index32 = false;        // every offset of either tensor fits in an int
  int threads = 256;
  int64_t extent_a = 0, extent_b = 0;  // the groups' flat extents
  int64_t tiles = 0;
  int64_t grid = 0;            // blocks: at most the tiles, 4 per multiprocessor (all resident)
  // What the kernel's source depends on (the variant's fields).
  PermuteCopyVariant variant() const;
  // The kernel's name: distinct for distinct variants.
  std::string name() const;
  // The shared tile's row stride, and where element (i along A, j along B) is.
  int row() const { return (rows_along_b ? tile_b : tile_a) + pad; }
  int64_t shared_index(int64_t i, int64_t j) const { return rows_along_b ? i * row() + j : j * row() + i; }
};

// The plan for a collapsed layout, or nullopt where the per-element strided
// copy does as well: the source's stride-1 dim is the destination's
// innermost (or there is none), the destination's innermost is not stride
// 1, the rank is over 8, the copy is small (under 16384 elements), or the
// groups give tiles of fewer than 1024 elements (dims too short on both
// sides: the per-element kernel's warps then read a few sectors each).
//
// Rule: nominal tile (A x B) 128x64 for 1-byte elements, 64x64 for 2,
// 32x64 for 4 and 8 (a tile row along A is 128 or 256 contiguous bytes, a
// thread moves 8 to 32 elements). Group B takes the destination's dims innermost first
// until its extent reaches the nominal B or the next dim is the source's
// stride-1 dim; group A takes the source's dims in stride order until it
// reaches (tile elements / B's tile) or the next dim is in group B; B then
// takes more dims where A stayed short. Tile extents are the groups'
// extents rounded up to powers of two, at most the nominal ones widened by
// what the other group lacks (up to 512). `multiprocessors` 0: unknown.
std::optional<PermuteCopyPlan> plan_permute_copy(const CopyLayout& l, int element_bytes, int multiprocessors,
                                                 int64_t max_grid_x);

// The kernel (arguments as the strided copy's: dst, src, numel, sizes,
// source strides, destination strides). Launch plan.grid blocks of
// plan.threads, no dynamic shared memory. The plan's form is that of its
// variant.
std::string permute_copy_source(const PermuteCopyVariant& v);
std::string permute_copy_source(const PermuteCopyPlan& p);

// The kernel's index math on the host, for tests: calls move(dst offset,
// src offset) for every element the kernel moves, in the order of its
// blocks, tiles and threads (with `grid` blocks).
void permute_copy_walk(const PermuteCopyPlan& p, const CopyLayout& l, int64_t grid,
                       const std::function<void(int64_t, int64_t)>& move);

// The tile's layout in shared memory for the plan's element size and tile
// extents: rows along the wider side (along A unless tile_a is under a
// warp's accesses, 32 elements, 16 of 8 bytes), so the phase that walks
// along rows is conflict-free, and `pad` elements after each row so that
// the other phase (a warp reads down min(lanes, rows) rows, lanes / rows
// elements of each) touches each bank once: the row stride in 4-byte words
// (8-byte units per half warp) is an odd multiple of the words one access
// takes of a row. For 1- and 2-byte elements one element of padding does
// not do it: the stride is counted in words.
void choose_tile_layout(PermuteCopyPlan& p);

// Shared-memory wavefronts of one warp access (threads' byte addresses,
// each `bytes` wide): the most distinct 4-byte words in one bank, per
// half warp for 8-byte accesses (summed). 1 (2 for 8 bytes) is conflict-free.
int shared_wavefronts(const std::vector<int64_t>& addresses, int bytes);

}  // namespace kf::cuda
