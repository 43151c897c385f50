// How a matmul or linear (with a matmul pattern's bias and activation) maps
// onto a column-major GEMM library (cuBLASLt): which operand goes first,
// transposes, leading dims, batch strides, what must be copied, or why the
// activation cannot be fused. Pure arithmetic on extents, element strides
// and addresses, so it is tested on the CPU (tests/cpu/test_gemm_layout.cpp);
// runtime/cuda/cublaslt.cpp turns a plan into library calls.
//
// Every problem is first described in logical row-major terms:
//   D[batch..., M, N] = act(A[batch..., M, K] @ B[batch..., K, N] (+ bias[N]))
// with per-matrix element strides (rows, columns, each batch dim; a
// broadcast batch dim has stride 0). Then: batch dims are collapsed where
// all three matrices allow it; a batch that only A and D carry (B shared)
// is folded into M; the problem is transposed when D is row-major (the
// library is column-major: D^T = B^T A^T); each operand is read as stored
// (column-major) or transposed (row-major), or is copied into a compact
// scratch when neither fits. The innermost remaining batch dim is a strided
// batch, outer ones a loop of calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kf {

// A tensor as the planner sees it: the byte address of its element 0 (only
// compared, never read), extents and element strides, outermost first.
struct GemmTensor {
  uintptr_t address = 0;
  std::vector<int64_t> sizes, strides;
};

struct GemmInputs {
  bool linear = false;  // x @ y^T (F.linear, y = w of [N, K] or [K]); false: torch.matmul(x, y)
  int elem_size = 4;    // bytes of one element (every tensor has the result's dtype)
  GemmTensor x, y, out;
  std::optional<GemmTensor> bias;  // added along out's last dim: [N] or [1] (one value)
  bool activation = false;         // relu / gelu_tanh after the bias, in the epilogue
};

// A matrix of the problem: rows x cols with element strides, and one stride
// per batch dim (0: broadcast). No address: layouts only.
struct GemmMatrix {
  int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 0;
  std::vector<int64_t> batch_strides;
  bool operator==(const GemmMatrix&) const = default;
};

enum class GemmSource : uint8_t { X, Y };

// Operand A or B of the column-major call D = op(A) op(B).
struct GemmOperand {
  GemmSource source = GemmSource::X;  // the tensor it reads
  GemmMatrix matrix;                  // what the library reads
  // When set, `source` viewed as this matrix is first copied into a compact
  // scratch, laid out as `matrix` (its stride pattern fits neither read).
  std::optional<GemmMatrix> copied_from;
  bool transpose = false;  // stored row-major: the library transposes it (CUBLAS_OP_T)
  int64_t ld = 0;          // leading dim of the stored matrix
};

enum class GemmAction : uint8_t {
  Nothing,  // D is empty (M, N or a batch dim is 0)
  Fill,     // K = 0: D is the broadcast bias, or 0, and no GEMM runs
  Gemm,     // library calls
  Unfused,  // the activation cannot run in the epilogue (`why`): the caller
            // computes the product alone and the rest as a kernel
};

struct GemmPlan {
  GemmAction action = GemmAction::Nothing;
  std::string why;  // for Unfused

  // The problem before collapsing (filling D and copying it out use these).
  std::vector<int64_t> batch;   // broadcast batch extents
  GemmMatrix output;            // the output tensor, [batch..., M, N]
  // D goes through a compact row-major scratch, copied into the output at
  // the end: the library cannot write the output's layout, or the output
  // shares memory with an operand or the bias.
  bool output_scratch = false;
  GemmMatrix written;           // where D is computed: `output` or the scratch
  // Filling D (K = 0, or a bias not added in the epilogue) copies the bias
  // (or one zero) viewed as this: `written` with stride 0 but along the
  // columns, where it steps along the bias (0: one value).
  GemmMatrix fill_from;

  // Action::Gemm: the column-major call, D (m x n) = op(A) (m x k) op(B) (k x n).
  std::vector<int64_t> gemm_batch;  // batch dims left (per-matrix batch strides below)
  bool transposed = false;          // D was row-major: D^T = B^T A^T, A reads y and B reads x
  GemmOperand a, b;
  GemmMatrix d;                     // `written` after collapsing and transposing
  int64_t ldd = 0;
  int64_t m = 0, n = 0, k = 0;
  // The bias is a contiguous vector along D's rows (its N features), which
  // the epilogue can add; otherwise D is filled with it and the product
  // accumulated onto it (beta = 1), which is never combined with an
  // activation.
  bool bias_epilogue = false;
};

// Plans `in`. Throws KF_ERR_INTERNAL when the output's rank does not fit
// the operands (the segment was built wrong).
GemmPlan plan_gemm(const GemmInputs& in);

// The batch dims of a Gemm plan but the innermost are a loop of calls: how
// many, and the element offsets of A, B and D in call `i` (row-major order).
struct GemmOffsets {
  int64_t a = 0, b = 0, d = 0;
  bool operator==(const GemmOffsets&) const = default;
};
int64_t gemm_outer_count(const GemmPlan& p);
GemmOffsets gemm_outer_offsets(const GemmPlan& p, int64_t i);

}  // namespace kf
