// The index rules (core/ir/index_rules.h) on their own: for each op, the
// terms at which it reads an operand for a given output index, with size-1
// dims read at 0, and the reshape rule both ways. Codegen and the access
// map consume these terms; their own tests check the code and maps built
// from them.
#include "core/ir/index_rules.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <vector>

namespace {

using kf::IndexTerm;
using kf::Op;
using kf::OperandIndex;
using kf::SizeClass;
using Kind = IndexTerm::Kind;

constexpr SizeClass M = SizeClass::Many, I = SizeClass::One, Z = SizeClass::Zero;

kf::Expr expr(Op op, std::vector<int64_t> attrs, size_t operands = 1) {
  kf::Expr e{op, {}, {100}, std::move(attrs)};
  for (size_t k = 0; k < operands; ++k) e.inputs.push_back(static_cast<int64_t>(k));
  return e;
}

IndexTerm out(int d) { return IndexTerm::out(static_cast<size_t>(d)); }
IndexTerm zero() { return IndexTerm::zero(); }
IndexTerm term(Kind k, int dim, int dims, int64_t a, int64_t b = 0) { return {k, dim, dims, a, b}; }

void expect(const OperandIndex& got, const OperandIndex& want) {
  assert_int_equal(got.size(), want.size());
  for (size_t d = 0; d < want.size(); ++d) {
    if (got[d] == want[d]) continue;
    print_error("dim %zu: got kind %d dim %d dims %d a %lld b %lld, want kind %d dim %d dims %d a %lld b %lld\n", d,
                static_cast<int>(got[d].kind), got[d].dim, got[d].dims, static_cast<long long>(got[d].a),
                static_cast<long long>(got[d].b), static_cast<int>(want[d].kind), want[d].dim, want[d].dims,
                static_cast<long long>(want[d].a), static_cast<long long>(want[d].b));
    fail();
  }
}

OperandIndex rule(const kf::Expr& e, size_t k, std::vector<SizeClass> o, std::vector<SizeClass> in,
                  const kf::ReshapeGroups* groups = nullptr) {
  return kf::operand_index(e, k, o, in, groups);
}

void test_pointwise_right_aligned(void**) {
  const kf::Expr add = expr(Op::ADD, {}, 2);
  expect(rule(add, 0, {M, M, M}, {M, M, M}), {out(0), out(1), out(2)});
  expect(rule(add, 1, {M, M, M}, {I, M}), {zero(), out(2)});  // a broadcast dim reads 0
  expect(rule(add, 1, {M, M}, {}), {});                       // a scalar
  expect(rule(expr(Op::EXPAND, {}), 0, {M, M, M}, {M, I}), {out(1), zero()});
  expect(rule(expr(Op::SEGMENT_SET, {}), 0, {M, I}, {M, I}), {out(0), out(1)});  // a hint: the same index
}

void test_permute(void**) {
  // Output dim i is input dim perm[i].
  const kf::Expr p = expr(Op::PERMUTE, {2, 0, 1});
  expect(rule(p, 0, {M, M, M}, {M, M, M}), {out(1), out(2), out(0)});
  expect(rule(p, 0, {M, M, I}, {M, I, M}), {out(1), zero(), out(0)});
}

void test_broadcast_squeeze_unsqueeze(void**) {
  expect(rule(expr(Op::BROADCAST_IN_DIM, {0, 2}), 0, {M, M, M}, {M, M}), {out(0), out(2)});
  expect(rule(expr(Op::BROADCAST_IN_DIM, {1}), 0, {M, M}, {I}), {zero()});
  expect(rule(expr(Op::SQUEEZE, {1}), 0, {M, M}, {M, I, M}), {out(0), zero(), out(1)});
  expect(rule(expr(Op::SQUEEZE, {0, 2}), 0, {M}, {I, M, I}), {zero(), out(0), zero()});
  expect(rule(expr(Op::UNSQUEEZE, {1}), 0, {M, I, M}, {M, M}), {out(0), out(2)});
  expect(rule(expr(Op::UNSQUEEZE, {2}), 0, {M, M, I}, {M, M}), {out(0), out(1)});
}

void test_slice_pad(void**) {
  // slice: [dim, start, stop, step]; a size-1 (or empty) dim reads as is.
  const kf::Expr s = expr(Op::SLICE, {1, -5, 100, 2});
  expect(rule(s, 0, {M, M}, {M, M}), {out(0), term(Kind::Slice, 1, 0, -5, 2)});
  expect(rule(s, 0, {M, I}, {M, I}), {out(0), zero()});
  expect(rule(s, 0, {M, Z}, {M, Z}), {out(0), out(1)});
  // pad: [low0, high0, low1, high1]: a padded dim, even of size 1, reads
  // out - low inside the input.
  const kf::Expr p = expr(Op::PAD, {0, 0, 3, 1}, 2);
  expect(rule(p, 0, {M, M}, {M, M}), {out(0), term(Kind::Pad, 1, 0, 3)});
  expect(rule(p, 0, {I, M}, {I, I}), {zero(), term(Kind::Pad, 1, 0, 3)});
  assert_false(kf::has_index_rule(p, 1));  // the pad value: a scalar
}

void test_cat(void**) {
  const kf::Expr c = expr(Op::CAT, {0}, 3);
  expect(rule(c, 0, {M, M}, {M, M}), {term(Kind::CatPart, 0, 0, 0), out(1)});
  expect(rule(c, 2, {M, M}, {M, I}), {term(Kind::CatPart, 0, 0, 2), zero()});
  expect(rule(c, 1, {M, M}, {I, M}), {zero(), out(1)});  // a part of one row
  assert_true(kf::has_index_rule(c, 2));
}

void test_reshape(void**) {
  // [B, C, HW] as [B, G, C/G, HW]: B and HW kept, C split in two.
  const kf::ReshapeGroups g = {{1, 1}, {1, 2}, {1, 1}};
  const kf::Expr r = expr(Op::RESHAPE, {}, 1);
  const OperandIndex in = rule(r, 0, {M, M, M, M}, {M, M, M}, &g);
  expect(in, {term(Kind::Regroup, 0, 1, 1, 1), term(Kind::Regroup, 1, 2, 1, 2), term(Kind::Regroup, 3, 1, 1, 1)});
  assert_true(in[0].passes_through());
  assert_false(in[1].passes_through());
  assert_true(in[2].passes_through());
  // The inverse (a stored view): the output's dims from the input's.
  expect(kf::reshape_index(g, false, std::vector<SizeClass>{M, M, M}, std::vector<SizeClass>{M, M, M, M}),
         {term(Kind::Regroup, 0, 1, 1, 1), term(Kind::Regroup, 1, 1, 2, 1), term(Kind::Regroup, 1, 1, 2, 1),
          term(Kind::Regroup, 2, 1, 1, 1)});
  // Size-1 dims read 0; a group of G = 1 leaves C/G whole.
  const kf::ReshapeGroups g1 = {{1, 1}, {1, 2}};
  expect(rule(r, 0, {M, I, M}, {M, M}, &g1), {term(Kind::Regroup, 0, 1, 1, 1), term(Kind::Regroup, 1, 2, 1, 1)});
  // No grouping: one group of every dim.
  expect(rule(r, 0, {M, M}, {M}), {term(Kind::Regroup, 0, 2, 1, 2)});
  // No element: the output has no dim of size class Many, the index is 0.
  const kf::ReshapeGroups all = {{2, 2}};
  expect(rule(r, 0, {Z, M}, {M, Z}, &all), {term(Kind::Regroup, 0, 2, 2, 1), zero()});
  expect(rule(r, 0, {Z, I}, {M, Z}, &all), {term(Kind::Regroup, 0, 2, 2, 0), zero()});
  assert_false(kf::has_index_rule(expr(Op::RESHAPE, {}, 3), 1));  // target sizes: scalars
}

void test_indexing(void**) {
  const kf::Expr sel = expr(Op::INDEX_SELECT, {1}, 2);
  expect(rule(sel, 1, {M, M, M}, {M}), {out(1)});
  expect(rule(sel, 1, {M, I, M}, {I}), {zero()});
  expect(rule(sel, 0, {M, M, M}, {M, M, I}), {out(0), term(Kind::Gathered, 1, 0, 0), zero()});
  expect(rule(sel, 0, {M, M, M}, {M, I, M}), {out(0), zero(), out(2)});
  const kf::Expr gather = expr(Op::GATHER, {0}, 2);
  expect(rule(gather, 1, {M, I}, {M, I}), {out(0), out(1)});  // the output's shape, read as is
  expect(rule(gather, 0, {M, I}, {M, I}), {term(Kind::Gathered, 0, 0, 0), zero()});
}

void test_no_rule(void**) {
  const kf::Expr sum = expr(Op::SUM, {0, 1});
  assert_false(kf::has_index_rule(sum, 0));
  bool thrown = false;
  try {
    rule(sum, 0, {M}, {M, M});
  } catch (const kf::Error&) {
    thrown = true;
  }
  assert_true(thrown);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_right_aligned),
      cmocka_unit_test(test_permute),
      cmocka_unit_test(test_broadcast_squeeze_unsqueeze),
      cmocka_unit_test(test_slice_pad),
      cmocka_unit_test(test_cat),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_indexing),
      cmocka_unit_test(test_no_rule),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
