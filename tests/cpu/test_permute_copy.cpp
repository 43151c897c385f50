// The tiled permutation copy on the host (core/runtime/cuda/permute_copy.h):
// the plan's groups and tiles for the measured cases and for ranks 4-5,
// size-1 dims and a group of three dims; the kernel's index math walked on
// the host writes every destination element exactly once, from the right
// source element, for random permutations, extents, pitches, element sizes
// and grids; the tile padding leaves the shared-memory accesses free of
// bank conflicts for every element size and tile shape; and a plan's
// variant (the kernel cache key) holds all its kernel fields.
#include "core/runtime/cuda/permute_copy.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <numeric>
#include <random>
#include <vector>

using namespace kf::cuda;

namespace {

// Strides of a dense tensor of `sizes` laid out in memory `order` (dims
// outermost first); `pitch` elements more per step of the outermost dim's
// inner neighbour (a sliced row).
std::vector<int64_t> strides_in(const std::vector<int64_t>& sizes, const std::vector<int>& order, int64_t pitch = 0) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t i = order.size(); i-- > 0;) {
    strides[order[i]] = step;
    step *= sizes[order[i]];
    if (i + 1 == order.size()) step += pitch;
  }
  return strides;
}

std::vector<int> row_major(size_t rank) {
  std::vector<int> o(rank);
  std::iota(o.begin(), o.end(), 0);
  return o;
}

// A random order of `rank` dims.
std::vector<int> shuffled(size_t rank, std::mt19937& rng) {
  std::vector<int> o = row_major(rank);
  std::shuffle(o.begin(), o.end(), rng);
  return o;
}

// Sizes of 2 to `max_rank` dims drawn from `extents`; their product in *numel.
template <size_t N>
std::vector<int64_t> random_sizes(std::mt19937& rng, const int64_t (&extents)[N], size_t max_rank, int64_t* numel) {
  std::vector<int64_t> sizes(2 + rng() % (max_rank - 1));
  *numel = 1;
  for (auto& s : sizes) *numel *= s = extents[rng() % N];
  return sizes;
}

// A row-major source copied into a destination laid out in `order`.
CopyLayout permuted(const std::vector<int64_t>& sizes, const std::vector<int>& order) {
  return collapse_copy(sizes, strides_in(sizes, row_major(sizes.size())), strides_in(sizes, order));
}

PermuteCopyPlan plan_of(const CopyLayout& l, int e) {
  const auto p = plan_permute_copy(l, e, 132, int64_t{1} << 31);
  assert_true(p.has_value());
  return *p;
}

void assert_dims(const std::vector<int>& got, const std::vector<int>& want) {
  assert_int_equal(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) assert_int_equal(got[i], want[i]);
}

void test_measured_cases(void**) {
  // [16512, 12288] fp16 into [1, 0]: collapsed [12288, 16512].
  PermuteCopyPlan p = plan_of(permuted({16512, 12288}, {1, 0}), 2);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {1});
  assert_true(p.outer.empty());
  assert_int_equal(p.tile_a, 64);
  assert_int_equal(p.tile_b, 64);
  assert_int_equal(p.tiles, 192 * 258);
  assert_int_equal(p.grid, 132 * 4);
  assert_true(p.index32);
  assert_string_equal(p.name().c_str(), "kf_permute_copy_e2_r2_a0_b1_t64x64_sa2_i32");
  // [4, 2048, 12288] bf16 into [2, 1, 0]: collapsed [12288, 2048, 4]; the
  // destination's dims of 4 and 2048 are one group of 8192.
  p = plan_of(permuted({4, 2048, 12288}, {2, 1, 0}), 2);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {2, 1});
  assert_int_equal(p.tile_a, 64);
  assert_int_equal(p.tile_b, 64);
  assert_int_equal(p.extent_b, 8192);
  assert_int_equal(p.tiles, 192 * 128);
  // [8, 2047, 12288] into [1, 2, 0]: the 2047 x 12288 are contiguous in
  // both, so this is a transpose of [8, 25153536]; the tile is 512 x 8 (the
  // destination's writes run over the whole tile) and its 8 rows are along A.
  p = plan_of(permuted({8, 2047, 12288}, {1, 2, 0}), 2);
  assert_int_equal(p.rank, 2);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {1});
  assert_int_equal(p.tile_a, 512);
  assert_int_equal(p.tile_b, 8);
  assert_int_equal(p.tiles, 25153536 / 512);
  assert_false(p.rows_along_b);
  assert_int_equal(p.pad, 4);
  // 4- and 8-byte elements: 32 x 64 tiles; 1-byte: 128 x 64.
  p = plan_of(permuted({16512, 12288}, {1, 0}), 4);
  assert_int_equal(p.tile_a, 32);
  assert_int_equal(p.tile_b, 64);
  assert_int_equal(plan_of(permuted({16512, 12288}, {1, 0}), 8).tile_a, 32);
  assert_int_equal(plan_of(permuted({16512, 12288}, {1, 0}), 1).tile_a, 128);
}

void test_other_shapes(void**) {
  // Rank 4, [B, S, H, D] into [B, H, D, S] memory order ([0, 2, 3, 1]):
  // collapsed [2, 8, 64, 512] (B, H, D, S); A = D (64), B = S.
  PermuteCopyPlan p = plan_of(permuted({2, 512, 8, 64}, {0, 2, 3, 1}), 2);
  assert_int_equal(p.rank, 3);  // H and D merge: adjacent in both
  assert_dims(p.group_a, {1});
  assert_dims(p.group_b, {2});
  assert_dims(p.outer, {0});
  // Rank 5 into [4, 2, 0, 3, 1]: collapsed (by the destination) [16, 6,
  // 5, 9, 7]; group B takes the destination's 7, 9 and 5 (315 >= 64);
  // group A the source's 16 and stops at the 9 (in B), so B widens to 128.
  p = plan_of(permuted({5, 7, 6, 9, 16}, {4, 2, 0, 3, 1}), 4);
  assert_int_equal(p.rank, 5);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {4, 3, 2});
  assert_dims(p.outer, {1});
  assert_int_equal(p.tile_a, 16);
  assert_int_equal(p.tile_b, 128);
  // Size-1 dims drop out: [4096, 1, 1, 128] into [3, 1, 2, 0] is a transpose.
  p = plan_of(permuted({4096, 1, 1, 128}, {3, 1, 2, 0}), 2);
  assert_int_equal(p.rank, 2);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {1});
  // A group of three dims: [256, 4, 4, 4] into [3, 2, 1, 0] collapses to
  // [4, 4, 4, 256]; the source's 4 x 4 x 4 reach the tile width together.
  p = plan_of(permuted({256, 4, 4, 4}, {3, 2, 1, 0}), 2);
  assert_dims(p.group_a, {0, 1, 2});
  assert_dims(p.group_b, {3});
  assert_int_equal(p.tile_a, 64);
  assert_int_equal(p.extent_a, 64);
  // Offsets past 2^31 elements: 64-bit indexing.
  const CopyLayout wide = collapse_copy({256, 128}, {1, int64_t{1} << 25}, {128, 1});
  p = plan_of(wide, 4);
  assert_false(p.index32);
  assert_non_null(std::strstr(p.name().c_str(), "_i64"));
  // A source broadcast along the destination's innermost dim: still tiled.
  p = plan_of(collapse_copy({1024, 64}, {0, 1}, {1, 1024}), 2);
  assert_dims(p.group_a, {0});
  assert_dims(p.group_b, {1});
  // Per element instead: the source's stride-1 dim is the destination's
  // innermost (a row pitch), a small copy, a source without a stride-1 dim,
  // tiles under 1024 elements (dims of 4 and 8 in both orders), a rank over 8.
  assert_false(plan_permute_copy(collapse_copy({500, 64}, {100, 1}, {64, 1}), 2, 132, 1 << 30).has_value());
  assert_false(plan_permute_copy(permuted({64, 64}, {1, 0}), 2, 132, 1 << 30).has_value());
  assert_false(plan_permute_copy(collapse_copy({1024, 64}, {2, 2048}, {1, 1024}), 2, 132, 1 << 30).has_value());
  assert_false(plan_permute_copy(permuted({4096, 8, 4}, {0, 2, 1}), 2, 132, 1 << 30).has_value());
  std::vector<int64_t> nine(9, 3);
  std::vector<int> reversed = row_major(9);
  std::reverse(reversed.begin(), reversed.end());
  assert_false(plan_permute_copy(permuted(nine, reversed), 2, 132, 1 << 30).has_value());
}

// Walks the kernel's index math for one copy and checks every destination
// element is written once, from its source element. Returns false (and
// checks nothing) where the plan is the per-element copy.
bool walk_checks(const std::vector<int64_t>& sizes, const std::vector<int64_t>& src, const std::vector<int64_t>& dst,
                 int e, int64_t grid) {
  const CopyLayout l = collapse_copy(sizes, src, dst);
  const auto p = plan_permute_copy(l, e, 132, int64_t{1} << 31);
  if (!p) return false;
  int64_t dst_span = 1;
  for (size_t d = 0; d < sizes.size(); ++d) dst_span += (sizes[d] - 1) * dst[d];
  std::vector<int64_t> want(dst_span, -1);
  std::vector<int> written(dst_span, 0);
  std::vector<int64_t> idx(sizes.size(), 0);
  for (int64_t n = 0; n < l.numel; ++n) {
    int64_t s = 0, o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) s += idx[d] * src[d], o += idx[d] * dst[d];
    want[o] = s;
    for (size_t d = sizes.size(); d-- > 0;)
      if (++idx[d] < sizes[d]) break;
      else idx[d] = 0;
  }
  bool ok = true;
  permute_copy_walk(*p, l, grid > 0 ? grid : p->grid, [&](int64_t o, int64_t s) {
    if (o < 0 || o >= dst_span || want[o] != s) ok = false;
    else ++written[o];
  });
  for (int64_t o = 0; o < dst_span; ++o)
    if (written[o] != (want[o] >= 0 ? 1 : 0)) ok = false;
  if (!ok) fail_msg("wrong copy: %s", p->name().c_str());
  return true;
}

void test_walk_measured_shapes_scaled(void**) {
  // The measured cases' structure at smaller extents (ragged everywhere).
  assert_true(walk_checks({165, 123}, strides_in({165, 123}, {0, 1}), strides_in({165, 123}, {1, 0}), 2, 0));
  assert_true(walk_checks({4, 204, 123}, strides_in({4, 204, 123}, {0, 1, 2}), strides_in({4, 204, 123}, {2, 1, 0}),
                          2, 0));
  assert_true(walk_checks({8, 27, 1229}, strides_in({8, 27, 1229}, {0, 1, 2}), strides_in({8, 27, 1229}, {1, 2, 0}),
                          2, 7));
  assert_true(walk_checks({256, 4, 4, 4}, strides_in({256, 4, 4, 4}, {0, 1, 2, 3}),
                          strides_in({256, 4, 4, 4}, {3, 2, 1, 0}), 1, 5));
  // Rank 8 after collapsing.
  const std::vector<int64_t> s8 = {2, 2, 2, 2, 2, 2, 3, 1029};
  assert_true(walk_checks(s8, strides_in(s8, row_major(8)), strides_in(s8, {7, 0, 2, 4, 6, 1, 3, 5}), 8, 0));
}

void test_walk_random(void**) {
  std::mt19937 rng(20261130);
  const int64_t extents[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 33, 64, 100, 130, 257};
  int planned = 0;
  for (int c = 0; c < 20000 && planned < 150; ++c) {
    int64_t n = 0;
    const std::vector<int64_t> sizes = random_sizes(rng, extents, 6, &n);
    const size_t rank = sizes.size();
    if (n < 16384 || n > 150000) continue;
    const std::vector<int> src_order = shuffled(rank, rng), dst_order = shuffled(rank, rng);
    const int64_t pitch = rng() % 3 == 0 ? rng() % 5 : 0;
    const int e = 1 << (rng() % 4);
    const int64_t grid = rng() % 2 ? 0 : 1 + rng() % 11;
    if (walk_checks(sizes, strides_in(sizes, src_order, pitch), strides_in(sizes, dst_order), e, grid)) ++planned;
  }
  assert_true(planned >= 150);
}

// The variant (the copy kernels' cache key) carries all the plan's kernel
// fields: a plan rebuilt from it has the same fields, `outer` included, and
// the name; and names and variants match one to one, so two plans that
// share a key share a kernel, and plans with different kernels never share
// a key.
void test_variant_keys(void**) {
  std::mt19937 rng(20261129);
  const int64_t extents[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 31, 33, 64, 100, 130, 257, 1029};
  std::map<PermuteCopyVariant, std::string> names;
  std::map<std::string, PermuteCopyVariant> variants;
  int planned = 0;
  for (int c = 0; c < 200000 && planned < 2000; ++c) {
    int64_t n = 0;
    const std::vector<int64_t> sizes = random_sizes(rng, extents, 8, &n);
    const size_t rank = sizes.size();
    if (n < 16384 || n > (int64_t{1} << 34)) continue;
    const int e = 1 << (rng() % 4);
    const CopyLayout l = collapse_copy(sizes, strides_in(sizes, shuffled(rank, rng), rng() % 3 == 0 ? rng() % 5 : 0),
                                       strides_in(sizes, shuffled(rank, rng)));
    const auto p = plan_permute_copy(l, e, 132, int64_t{1} << 31);
    if (!p) continue;
    ++planned;
    const PermuteCopyVariant v = p->variant();
    const PermuteCopyPlan q = v.kernel_plan();
    assert_true(q.variant() == v);
    assert_int_equal(q.element_bytes, p->element_bytes);
    assert_int_equal(q.rank, p->rank);
    assert_dims(q.group_a, p->group_a);
    assert_dims(q.group_b, p->group_b);
    assert_dims(q.outer, p->outer);
    assert_int_equal(q.tile_a, p->tile_a);
    assert_int_equal(q.tile_b, p->tile_b);
    assert_int_equal(q.pad, p->pad);
    assert_int_equal(q.threads, p->threads);
    assert_int_equal(q.rows_along_b, p->rows_along_b);
    assert_int_equal(q.index32, p->index32);
    const std::string name = p->name();
    assert_string_equal(q.name().c_str(), name.c_str());
    const auto [by_variant, new_variant] = names.try_emplace(v, name);
    const auto [by_name, new_name] = variants.try_emplace(name, v);
    assert_int_equal(new_variant, new_name);
    assert_string_equal(by_variant->second.c_str(), name.c_str());
    assert_true(by_name->second == v);
  }
  assert_true(planned >= 2000);
  assert_true(names.size() > 50);  // the keys tell many kernels apart
}

void test_no_bank_conflicts(void**) {
  for (int e : {1, 2, 4, 8}) {
    const int elements = (e == 1 ? 128 : e == 2 ? 64 : 32) * 64;
    const int ideal = e == 8 ? 2 : 1;
    for (int ta = 2; ta <= 512; ta *= 2)
      for (int tb = 2; tb <= 512; tb *= 2) {
        if (ta * tb < 1024 || ta * tb > elements) continue;
        PermuteCopyPlan p;
        p.element_bytes = e;
        p.tile_a = ta;
        p.tile_b = tb;
        choose_tile_layout(p);
        assert_int_equal(p.row() * e % std::max(e, 4), 0);
        assert_true(p.pad <= 16);
        // Every warp access of both phases (the read phase's stores along
        // A, the write phase's loads along B) touches each bank once.
        for (int k = 0; k < ta * tb / 256; ++k)
          for (int w = 0; w < 8; ++w) {
            std::vector<int64_t> store, gather;
            for (int t = 32 * w; t < 32 * w + 32; ++t) {
              const int x = t + 256 * k;
              store.push_back(p.shared_index(x % ta, x / ta) * e);
              gather.push_back(p.shared_index(x / tb, x % tb) * e);
            }
            assert_int_equal(shared_wavefronts(store, e), ideal);
            assert_int_equal(shared_wavefronts(gather, e), ideal);
          }
      }
  }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_measured_cases),
      cmocka_unit_test(test_other_shapes),
      cmocka_unit_test(test_walk_measured_shapes_scaled),
      cmocka_unit_test(test_walk_random),
      cmocka_unit_test(test_no_bank_conflicts),
      cmocka_unit_test(test_variant_keys),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
