// The GEMM layout planner (core/runtime/gemm_layout.h) on the CPU: for
// matmul and linear operands of each layout class, the exact column-major
// call (which operand goes first, transposes, leading dims, batch strides,
// folding, copies) that cuBLASLt is given on the GPU, or why the activation
// cannot be fused. tests/gpu/test_gpu_matmul.c checks the same classes for
// results on a device.
// Project headers first: cmocka defines a fail() macro.
#include "core/runtime/gemm_layout.h"
#include "core/util/error.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <sstream>
#include <string>
#include <vector>

using namespace kf;

namespace {

constexpr uintptr_t kX = 0x10000, kY = 0x20000, kOut = 0x30000, kBias = 0x40000;

GemmTensor tensor(uintptr_t address, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return GemmTensor{address, std::move(sizes), std::move(strides)};
}

// Row-major strides of `sizes`.
GemmTensor dense(uintptr_t address, std::vector<int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i];
  }
  return tensor(address, std::move(sizes), std::move(strides));
}

GemmInputs matmul(GemmTensor x, GemmTensor y, GemmTensor out) {
  GemmInputs in;
  in.elem_size = 4;
  in.x = std::move(x);
  in.y = std::move(y);
  in.out = std::move(out);
  return in;
}

GemmInputs linear(GemmTensor x, GemmTensor w, GemmTensor out) {
  GemmInputs in = matmul(std::move(x), std::move(w), std::move(out));
  in.linear = true;
  return in;
}

std::string show(const GemmMatrix& m) {
  std::ostringstream s;
  s << "{" << m.rows << "x" << m.cols << ", rs " << m.row_stride << ", cs " << m.col_stride << ", batch [";
  for (int64_t b : m.batch_strides) s << " " << b;
  s << " ]}";
  return s.str();
}

void expect_matrix(const GemmMatrix& got, const GemmMatrix& want) {
  if (!(got == want)) fail_msg("matrix %s, expected %s", show(got).c_str(), show(want).c_str());
}

void expect_operand(const GemmOperand& o, GemmSource source, bool transpose, int64_t ld,
                    const GemmMatrix& matrix) {
  assert_int_equal(static_cast<int>(o.source), static_cast<int>(source));
  assert_int_equal(o.transpose, transpose);
  assert_int_equal(o.ld, ld);
  expect_matrix(o.matrix, matrix);
  assert_false(o.copied_from.has_value());
}

void expect_mnk(const GemmPlan& p, int64_t m, int64_t n, int64_t k) {
  assert_int_equal(static_cast<int>(p.action), static_cast<int>(GemmAction::Gemm));
  assert_int_equal(p.m, m);
  assert_int_equal(p.n, n);
  assert_int_equal(p.k, k);
}

// [3, 4] @ [4, 5] -> [3, 5], all row-major: D is row-major, so the call is
// transposed (D^T = y^T x^T) and both operands are read as stored.
void test_row_major(void**) {
  const GemmPlan p = plan_gemm(matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), dense(kOut, {3, 5})));
  expect_mnk(p, 5, 3, 4);
  assert_true(p.transposed);
  assert_false(p.output_scratch);
  expect_matrix(p.output, {3, 5, 5, 1, {}});
  expect_matrix(p.written, p.output);
  expect_operand(p.a, GemmSource::Y, false, 5, {5, 4, 1, 5, {}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 3, 1, 4, {}});
  expect_matrix(p.d, {5, 3, 1, 5, {}});
  assert_int_equal(p.ldd, 5);
  assert_true(p.gemm_batch.empty());
  assert_false(p.bias_epilogue);
  assert_int_equal(gemm_outer_count(p), 1);
  assert_true(gemm_outer_offsets(p, 0) == GemmOffsets{});
}

// x a transposed view ([3, 4] with strides (1, 3)) is read in place with
// CUBLAS_OP_T; so is a padded leading dim.
void test_transposed_operand(void**) {
  GemmPlan p = plan_gemm(matmul(tensor(kX, {3, 4}, {1, 3}), dense(kY, {4, 5}), dense(kOut, {3, 5})));
  expect_mnk(p, 5, 3, 4);
  expect_operand(p.a, GemmSource::Y, false, 5, {5, 4, 1, 5, {}});
  expect_operand(p.b, GemmSource::X, true, 3, {4, 3, 3, 1, {}});
  // y with rows 8 elements apart (a [4, 8] tensor sliced to 5 columns).
  p = plan_gemm(matmul(dense(kX, {3, 4}), tensor(kY, {4, 5}, {8, 1}), dense(kOut, {3, 5})));
  expect_operand(p.a, GemmSource::Y, false, 8, {5, 4, 1, 8, {}});
}

// A column-major output: no transposition, both row-major operands read
// with CUBLAS_OP_T; a bias then runs along D's columns, so it is filled
// into D, and never combined with an activation.
void test_column_major_output(void**) {
  GemmInputs in = matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), tensor(kOut, {3, 5}, {1, 3}));
  GemmPlan p = plan_gemm(in);
  expect_mnk(p, 3, 5, 4);
  assert_false(p.transposed);
  assert_false(p.output_scratch);
  expect_operand(p.a, GemmSource::X, true, 4, {3, 4, 4, 1, {}});
  expect_operand(p.b, GemmSource::Y, true, 5, {4, 5, 5, 1, {}});
  expect_matrix(p.d, {3, 5, 1, 3, {}});
  assert_int_equal(p.ldd, 3);

  in.bias = dense(kBias, {5});
  p = plan_gemm(in);
  expect_mnk(p, 3, 5, 4);
  assert_false(p.bias_epilogue);
  expect_matrix(p.fill_from, {3, 5, 0, 1, {}});
  in.activation = true;
  p = plan_gemm(in);
  assert_int_equal(static_cast<int>(p.action), static_cast<int>(GemmAction::Unfused));
  assert_string_equal(p.why.c_str(), "the bias is not an epilogue vector (strided, one value for "
                                     "every feature, or a column-major output)");
}

// linear: B = w^T (w [5, 4] row-major is read with CUBLAS_OP_T), and its
// contiguous bias of N features goes into the epilogue, with an activation.
void test_linear_bias_epilogue(void**) {
  GemmInputs in = linear(dense(kX, {3, 4}), dense(kY, {5, 4}), dense(kOut, {3, 5}));
  in.bias = dense(kBias, {5});
  in.activation = true;
  const GemmPlan p = plan_gemm(in);
  expect_mnk(p, 5, 3, 4);
  assert_true(p.transposed);
  expect_operand(p.a, GemmSource::Y, true, 4, {5, 4, 4, 1, {}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 3, 1, 4, {}});
  assert_true(p.bias_epilogue);
  expect_matrix(p.fill_from, {3, 5, 0, 1, {}});
}

// A strided bias, or one value for every feature, is no epilogue vector:
// filled into D (stride 2 or 0 along the columns), and an activation is
// then left to the unfused path. A single feature (N = 1) still is one.
void test_bias_not_a_vector(void**) {
  GemmInputs in = linear(dense(kX, {3, 4}), dense(kY, {5, 4}), dense(kOut, {3, 5}));
  in.bias = tensor(kBias, {5}, {2});
  GemmPlan p = plan_gemm(in);
  expect_mnk(p, 5, 3, 4);
  assert_false(p.bias_epilogue);
  expect_matrix(p.fill_from, {3, 5, 0, 2, {}});
  in.bias = dense(kBias, {1});
  p = plan_gemm(in);
  assert_false(p.bias_epilogue);
  expect_matrix(p.fill_from, {3, 5, 0, 0, {}});
  in.activation = true;
  assert_int_equal(static_cast<int>(plan_gemm(in).action), static_cast<int>(GemmAction::Unfused));

  in = linear(dense(kX, {3, 4}), dense(kY, {1, 4}), dense(kOut, {3, 1}));
  in.bias = dense(kBias, {1});
  in.activation = true;
  p = plan_gemm(in);
  expect_mnk(p, 1, 3, 4);
  assert_true(p.bias_epilogue);
}

// Batch dims: contiguous ones merge into one strided batch; a dim that
// broadcasts one operand (stride 0) stays apart and the outer dims become
// a loop of calls.
void test_batched(void**) {
  GemmPlan p = plan_gemm(matmul(dense(kX, {2, 3, 2, 4}), dense(kY, {2, 3, 4, 5}), dense(kOut, {2, 3, 2, 5})));
  expect_mnk(p, 5, 2, 4);
  assert_true(p.batch == (std::vector<int64_t>{2, 3}));
  assert_true(p.gemm_batch == std::vector<int64_t>{6});
  expect_operand(p.a, GemmSource::Y, false, 5, {5, 4, 1, 5, {20}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 2, 1, 4, {8}});
  expect_matrix(p.d, {5, 2, 1, 5, {10}});
  assert_int_equal(gemm_outer_count(p), 1);

  // y [3, 4, 5] broadcasts over x's leading dim.
  p = plan_gemm(matmul(dense(kX, {2, 3, 2, 4}), dense(kY, {3, 4, 5}), dense(kOut, {2, 3, 2, 5})));
  assert_true(p.gemm_batch == (std::vector<int64_t>{2, 3}));
  expect_operand(p.a, GemmSource::Y, false, 5, {5, 4, 1, 5, {0, 20}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 2, 1, 4, {24, 8}});
  expect_matrix(p.d, {5, 2, 1, 5, {30, 10}});
  assert_int_equal(gemm_outer_count(p), 2);
  assert_true(gemm_outer_offsets(p, 1) == (GemmOffsets{0, 24, 30}));

  // Size-1 batch dims are dropped, whatever their strides.
  p = plan_gemm(matmul(tensor(kX, {1, 3, 4}, {99, 4, 1}), dense(kY, {1, 4, 5}), dense(kOut, {1, 3, 5})));
  assert_true(p.gemm_batch.empty());
  expect_matrix(p.d, {5, 3, 1, 5, {}});
}

// Shared weights: x [2, 3, 4] @ y [4, 5] is one GEMM of M = 6 when x and
// the output step over the batch by whole matrices (also for M = 1); a
// padded x keeps the batch, with stride 0 for y.
void test_batch_folded_into_m(void**) {
  GemmPlan p = plan_gemm(matmul(dense(kX, {2, 3, 4}), dense(kY, {4, 5}), dense(kOut, {2, 3, 5})));
  expect_mnk(p, 5, 6, 4);
  assert_true(p.gemm_batch.empty());
  expect_operand(p.b, GemmSource::X, false, 4, {4, 6, 1, 4, {}});
  expect_matrix(p.d, {5, 6, 1, 5, {}});

  p = plan_gemm(matmul(dense(kX, {2, 1, 4}), dense(kY, {4, 5}), dense(kOut, {2, 1, 5})));
  expect_mnk(p, 5, 2, 4);
  expect_operand(p.b, GemmSource::X, false, 4, {4, 2, 1, 4, {}});

  p = plan_gemm(matmul(tensor(kX, {2, 3, 4}, {16, 4, 1}), dense(kY, {4, 5}), dense(kOut, {2, 3, 5})));
  expect_mnk(p, 5, 3, 4);
  assert_true(p.gemm_batch == std::vector<int64_t>{2});
  expect_operand(p.a, GemmSource::Y, false, 5, {5, 4, 1, 5, {0}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 3, 1, 4, {16}});

  // M = 1 into an output whose rows are 4 apart and columns 12 apart: each
  // [1, 4] matrix is writable (column-major, ld 12) but the batch folded
  // into M would be neither layout; it stays a strided batch.
  p = plan_gemm(matmul(dense(kX, {3, 1, 4}), dense(kY, {4, 4}), tensor(kOut, {3, 1, 4}, {4, 1, 12})));
  expect_mnk(p, 1, 4, 4);
  assert_true(p.gemm_batch == std::vector<int64_t>{3});
  assert_false(p.output_scratch);
  expect_matrix(p.d, {1, 4, 1, 12, {4}});
}

// 1-D operands: [4] @ [4] is a dot product into a 0-dim output; a 1-D x
// is one row and its output lacks the M dim.
void test_one_dimensional(void**) {
  GemmPlan p = plan_gemm(matmul(dense(kX, {4}), dense(kY, {4}), dense(kOut, {})));
  expect_mnk(p, 1, 1, 4);
  expect_operand(p.a, GemmSource::Y, false, 1, {1, 4, 0, 1, {}});
  expect_operand(p.b, GemmSource::X, false, 4, {4, 1, 1, 0, {}});
  p = plan_gemm(matmul(dense(kX, {4}), dense(kY, {2, 4, 5}), dense(kOut, {2, 5})));
  expect_mnk(p, 5, 1, 4);
  assert_true(p.gemm_batch == std::vector<int64_t>{2});
  expect_matrix(p.output, {1, 5, 0, 1, {5}});
}

// Layouts the library cannot read or write: an operand with a column
// stride of 2 is copied into a compact scratch first; an output with one,
// or one sharing memory with an operand or the bias, is computed in a
// compact scratch and copied out.
void test_unsupported_layouts(void**) {
  GemmPlan p = plan_gemm(matmul(tensor(kX, {3, 4}, {8, 2}), dense(kY, {4, 5}), dense(kOut, {3, 5})));
  expect_mnk(p, 5, 3, 4);
  assert_int_equal(static_cast<int>(p.b.source), static_cast<int>(GemmSource::X));
  assert_true(p.b.copied_from.has_value());
  expect_matrix(*p.b.copied_from, {4, 3, 2, 8, {}});
  expect_matrix(p.b.matrix, {4, 3, 3, 1, {}});
  assert_true(p.b.transpose);
  assert_int_equal(p.b.ld, 3);

  // A batch broadcast in the copied operand stays broadcast in the copy.
  p = plan_gemm(matmul(tensor(kX, {2, 3, 4}, {0, 8, 2}), dense(kY, {2, 4, 5}), dense(kOut, {2, 3, 5})));
  expect_matrix(*p.b.copied_from, {4, 3, 2, 8, {0}});
  expect_matrix(p.b.matrix, {4, 3, 3, 1, {0}});

  p = plan_gemm(matmul(dense(kX, {2, 3, 4}), dense(kY, {2, 4, 5}), tensor(kOut, {2, 3, 5}, {30, 10, 2})));
  assert_true(p.output_scratch);
  expect_matrix(p.output, {3, 5, 10, 2, {30}});
  expect_matrix(p.written, {3, 5, 5, 1, {15}});
  expect_matrix(p.d, {5, 3, 1, 5, {15}});

  // In place over x (bytes [0x10000, 0x10030) against [0x10000, 0x1003c)).
  p = plan_gemm(matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), dense(kX, {3, 5})));
  assert_true(p.output_scratch);
  expect_matrix(p.written, {3, 5, 5, 1, {}});
  // The output right after x does not overlap it; one element earlier does.
  assert_false(plan_gemm(matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), dense(kX + 48, {3, 5}))).output_scratch);
  assert_true(plan_gemm(matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), dense(kX + 44, {3, 5}))).output_scratch);
  GemmInputs in = linear(dense(kX, {3, 4}), dense(kY, {5, 4}), dense(kOut, {3, 5}));
  in.bias = dense(kOut + 8, {5});
  assert_true(plan_gemm(in).output_scratch);
}

// K = 0 is an empty sum: D is filled with the bias (or zeros), and an
// activation is left to the unfused path. Empty M, N or batch: nothing.
void test_empty(void**) {
  GemmInputs in = linear(dense(kX, {3, 0}), dense(kY, {5, 0}), dense(kOut, {3, 5}));
  in.bias = dense(kBias, {5});
  GemmPlan p = plan_gemm(in);
  assert_int_equal(static_cast<int>(p.action), static_cast<int>(GemmAction::Fill));
  expect_matrix(p.written, {3, 5, 5, 1, {}});
  expect_matrix(p.fill_from, {3, 5, 0, 1, {}});
  in.activation = true;
  p = plan_gemm(in);
  assert_int_equal(static_cast<int>(p.action), static_cast<int>(GemmAction::Unfused));
  assert_string_equal(p.why.c_str(), "K = 0: no GEMM to apply the activation in");

  for (const GemmInputs& e : {matmul(dense(kX, {0, 4}), dense(kY, {4, 5}), dense(kOut, {0, 5})),
                              matmul(dense(kX, {3, 4}), dense(kY, {4, 0}), dense(kOut, {3, 0})),
                              matmul(dense(kX, {0, 3, 4}), dense(kY, {4, 5}), dense(kOut, {0, 3, 5}))})
    assert_int_equal(static_cast<int>(plan_gemm(e).action), static_cast<int>(GemmAction::Nothing));
}

// An output whose rank does not fit the operands is a segment built wrong.
void test_output_rank_mismatch(void**) {
  try {
    plan_gemm(matmul(dense(kX, {3, 4}), dense(kY, {4, 5}), dense(kOut, {15})));
    fail_msg("expected KF_ERR_INTERNAL");
  } catch (const kf::Error& e) {
    assert_int_equal(e.status(), KF_ERR_INTERNAL);
    assert_string_equal(e.what(), "matmul output has rank 1, expected 2");
  }
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_row_major),
      cmocka_unit_test(test_transposed_operand),
      cmocka_unit_test(test_column_major_output),
      cmocka_unit_test(test_linear_bias_epilogue),
      cmocka_unit_test(test_bias_not_a_vector),
      cmocka_unit_test(test_batched),
      cmocka_unit_test(test_batch_folded_into_m),
      cmocka_unit_test(test_one_dimensional),
      cmocka_unit_test(test_unsupported_layouts),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_output_rank_mismatch),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
