// The per-element copy's host arithmetic (core/runtime/cuda/strided_copy.h):
// widen_copy's element width for the rows a copy keeps (padded rows,
// storage offsets, odd widths, an inner dim read at a step), and, for
// random layouts, element sizes and addresses, the widened copy walked on
// the host writes exactly the bytes the element-wise copy writes, each wide
// access aligned to its width; copy_fits_int32 at its limits.
#include "core/runtime/cuda/strided_copy.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <cstring>
#include <random>
#include <vector>

using namespace kf::cuda;

namespace {

// The bytes of a copy of `l` (elements of `e` bytes) from src + src_at into
// dst + dst_at, walked as the kernel indexes it; every access checked
// aligned to e against the buffers' 16-byte-aligned bases.
void walk_copy(const CopyLayout& l, int e, const std::vector<unsigned char>& src, size_t src_at,
               std::vector<unsigned char>* dst, size_t dst_at) {
  strided_copy_walk(l, copy_fits_int32(l), [&](int64_t s, int64_t d) {
    const size_t from = src_at + static_cast<size_t>(s) * static_cast<size_t>(e);
    const size_t to = dst_at + static_cast<size_t>(d) * static_cast<size_t>(e);
    if (from % static_cast<size_t>(e) != 0 || to % static_cast<size_t>(e) != 0)
      fail_msg("a %d-byte access at source byte %zu, destination byte %zu", e, from, to);
    if (from + static_cast<size_t>(e) > src.size() || to + static_cast<size_t>(e) > dst->size())
      fail_msg("a %d-byte access past a buffer", e);
    std::memcpy(dst->data() + to, src.data() + from, static_cast<size_t>(e));
  });
}

void test_widths(void**) {
  // c0133's deferred copy: rows of 128 floats into q's rows of 192.
  CopyLayout l = collapse_copy({8 * 2047 * 32, 128}, {128, 1}, {192, 1});
  assert_int_equal(widen_copy(&l, 4, 0x10000, 0x20000), 16);
  assert_true(l.sizes == (std::vector<int64_t>{8 * 2047 * 32, 32}));
  assert_true(l.src_strides == (std::vector<int64_t>{32, 1}) && l.dst_strides == (std::vector<int64_t>{48, 1}));
  assert_int_equal(l.numel, int64_t{8} * 2047 * 32 * 32);
  // The destination at 8 bytes past a 16-byte boundary: 8-byte elements.
  l = collapse_copy({1000, 128}, {128, 1}, {192, 1});
  assert_int_equal(widen_copy(&l, 4, 0x10000, 0x20008), 8);
  assert_int_equal(l.sizes[1], 64);
  // bfloat16 rows of 4095: the rows' bytes fit no wider element.
  l = collapse_copy({64, 4095}, {4095, 1}, {4096, 1});
  const CopyLayout odd = l;
  assert_int_equal(widen_copy(&l, 2, 0x10000, 0x20000), 2);
  assert_true(l.sizes == odd.sizes && l.src_strides == odd.src_strides && l.numel == odd.numel);
  // A storage offset of one bfloat16: 2 bytes.
  l = collapse_copy({64, 4096}, {4096, 1}, {4104, 1});
  assert_int_equal(widen_copy(&l, 2, 0x10002, 0x20000), 2);
  // Rows of 12 bfloat16 (24 bytes): 8-byte elements.
  l = collapse_copy({64, 12}, {12, 1}, {16, 1});
  assert_int_equal(widen_copy(&l, 2, 0x10000, 0x20000), 8);
  // The source's inner dim read at a step of 2: unchanged.
  l = collapse_copy({64, 64}, {128, 2}, {72, 1});
  assert_int_equal(widen_copy(&l, 4, 0x10000, 0x20000), 4);
  // One contiguous block would not get here; a 1-D strided one stays.
  l = collapse_copy({1000}, {3}, {1});
  assert_int_equal(widen_copy(&l, 8, 0x10000, 0x20000), 8);
}

void test_fits_int32(void**) {
  CopyLayout l = collapse_copy({1024, 1024}, {1024, 1}, {1040, 1});
  assert_true(copy_fits_int32(l));
  // numel 2^31
  l = collapse_copy({int64_t{1} << 20, 2048}, {2048, 1}, {2056, 1});
  assert_false(copy_fits_int32(l));
  // numel below 2^31, an offset past it (1023 x (2^21 + 4096) > 2^31)
  l = collapse_copy({1024, 1024}, {(int64_t{1} << 21) + 4096, 1}, {1040, 1});
  assert_false(copy_fits_int32(l));
  // the largest offset just below 2^31 (1023 x 2^21 + 1023)
  l = collapse_copy({1024, 1024}, {int64_t{1} << 21, 1}, {1040, 1});
  assert_true(copy_fits_int32(l));
  l = collapse_copy({64, 64}, {-64, 1}, {72, 1});
  assert_false(copy_fits_int32(l));
}

void test_widened_copies_the_same_bytes(void**) {
  std::mt19937 rng(45);
  const int64_t extents[] = {1, 2, 3, 4, 7, 8, 12, 16, 31, 64, 96, 130};
  int widened = 0, cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int e = 1 << (rng() % 4);
    const size_t rank = 1 + rng() % 4;
    std::vector<int64_t> sizes(rank), src_strides(rank), dst_strides(rank);
    for (size_t d = 0; d < rank; ++d) sizes[d] = extents[rng() % (sizeof extents / sizeof extents[0])];
    // Row-major in both, each row padded by 0-9 elements, or (every other
    // trial) by whole 16-byte chunks; an inner dim at a step of 2 in one
    // trial of eight.
    const bool chunks = trial % 2 == 0;
    const int64_t unit = chunks ? 16 / e : 1, span = chunks ? 3 : 10;
    const int64_t src_pad = unit * static_cast<int64_t>(rng() % span), dst_pad = unit * static_cast<int64_t>(rng() % span);
    const int64_t src_step = rng() % 8 == 0 ? 2 : 1;
    int64_t s = src_step, t = 1;
    for (size_t d = rank; d-- > 0;) {
      src_strides[d] = s;
      dst_strides[d] = t;
      s *= sizes[d];
      t *= sizes[d];
      if (d + 1 == rank) {
        s += src_pad;
        t += dst_pad;
      }
    }
    CopyLayout l = collapse_copy(sizes, src_strides, dst_strides);
    int64_t src_last = 0, dst_last = 0;
    for (size_t d = 0; d < l.sizes.size(); ++d) {
      src_last += (l.sizes[d] - 1) * l.src_strides[d];
      dst_last += (l.sizes[d] - 1) * l.dst_strides[d];
    }
    // The tensors' first bytes at element-aligned offsets of 0-31 bytes
    // past 16-byte-aligned bases (buffer index 0; 0 or 16 with chunks).
    const size_t offsets = chunks ? 2 : static_cast<size_t>(32 / e), at_unit = chunks ? 16 : static_cast<size_t>(e);
    const size_t src_at = at_unit * (rng() % offsets), dst_at = at_unit * (rng() % offsets);
    std::vector<unsigned char> src(src_at + static_cast<size_t>((src_last + 1) * e) + 16);
    for (auto& b : src) b = static_cast<unsigned char>(rng());
    std::vector<unsigned char> want(dst_at + static_cast<size_t>((dst_last + 1) * e) + 16, 0xEE), got = want;
    walk_copy(l, e, src, src_at, &want, dst_at);
    CopyLayout wide = l;
    const int w = widen_copy(&wide, e, 0x100000 + src_at, 0x200000 + dst_at);
    assert_true(w >= e && w <= 16 && (w & (w - 1)) == 0);
    assert_true(wide.numel * w == l.numel * e);
    walk_copy(wide, w, src, src_at, &got, dst_at);
    if (got != want)
      fail_msg("trial %d: %d-byte elements widened to %d bytes copy other bytes (rank %zu, pads %lld %lld)", trial, e, w,
               rank, static_cast<long long>(src_pad), static_cast<long long>(dst_pad));
    widened += w > e ? 1 : 0;
    ++cases;
  }
  // (the draw gives both kinds: widened copies and copies left as they were)
  if (!(widened > cases / 10 && widened < cases)) fail_msg("%d of %d copies widened", widened, cases);
}

void test_kernel_names(void**) {
  assert_string_equal(strided_copy_name(4, 2).c_str(), "kf_strided_copy_e4_r2");
  assert_string_equal(strided_copy_name(16, 2, true).c_str(), "kf_strided_copy_e16_r2_i32");
  const StridedCopyVariant a{16, 2, true}, b{16, 2, false};
  assert_true(a != b && a.name() != b.name());
  assert_non_null(std::strstr(a.source().c_str(), "typedef int I;"));
  assert_non_null(std::strstr(b.source().c_str(), "typedef long long I;"));
  assert_non_null(std::strstr(a.source().c_str(), "typedef kf_chunk16 T;"));
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_widths),
      cmocka_unit_test(test_fits_int32),
      cmocka_unit_test(test_widened_copies_the_same_bytes),
      cmocka_unit_test(test_kernel_names),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
