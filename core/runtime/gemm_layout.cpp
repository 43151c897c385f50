#include "core/runtime/gemm_layout.h"

#include <algorithm>
#include <utility>

#include "core/util/dl_layout.h"
#include "core/util/error.h"

namespace kf {

namespace {

GemmMatrix transposed(const GemmMatrix& m) {
  GemmMatrix t = m;
  std::swap(t.rows, t.cols);
  std::swap(t.row_stride, t.col_stride);
  return t;
}

// Stored as a column-major (rows x cols) matrix with leading dim *ld?
bool col_ok(const GemmMatrix& m, int64_t* ld) {
  if (m.rows > 1 && m.row_stride != 1) return false;
  *ld = m.cols > 1 ? m.col_stride : std::max<int64_t>(m.rows, 1);
  return *ld >= std::max<int64_t>(m.rows, 1);
}
// Stored row-major, i.e. its transpose is column-major?
bool row_ok(const GemmMatrix& m, int64_t* ld) { return col_ok(transposed(m), ld); }

// [lo, hi) bytes that extents `sizes` with element strides `strides` (>= 0:
// the tensors passed the entry checks) touch from `address` (empty when
// there are no elements).
std::pair<uintptr_t, uintptr_t> span_of(uintptr_t address, const std::vector<int64_t>& sizes,
                                        const std::vector<int64_t>& strides, int elem) {
  const int64_t max_offset = element_reach(sizes, strides).max_offset;
  if (max_offset < 0) return {0, 0};
  uintptr_t end;
  byte_end(address, max_offset, elem, &end);
  return {address, end};
}

// The span of a matrix of the problem; a broadcast batch dim counts once
// when `own` (the matrix's own elements).
std::pair<uintptr_t, uintptr_t> span_of(uintptr_t address, const GemmMatrix& m,
                                        const std::vector<int64_t>& batch, bool own, int elem) {
  std::vector<int64_t> sizes, strides;
  for (size_t i = 0; i < batch.size(); ++i) {
    sizes.push_back(own && m.batch_strides[i] == 0 ? 1 : batch[i]);
    strides.push_back(m.batch_strides[i]);
  }
  sizes.insert(sizes.end(), {m.rows, m.cols});
  strides.insert(strides.end(), {m.row_stride, m.col_stride});
  return span_of(address, sizes, strides, elem);
}

bool overlap(std::pair<uintptr_t, uintptr_t> a, std::pair<uintptr_t, uintptr_t> b) {
  return a.first < a.second && b.first < b.second && a.first < b.second && b.first < a.second;
}

// `m` laid out compactly row-major; a broadcast batch dim stays one matrix
// when `keep_broadcast`.
GemmMatrix compact(const GemmMatrix& m, const std::vector<int64_t>& batch, bool keep_broadcast) {
  GemmMatrix c = m;
  c.row_stride = m.cols;
  c.col_stride = 1;
  int64_t step = m.rows * m.cols;
  for (size_t i = batch.size(); i-- > 0;) {
    const bool broadcast = keep_broadcast && m.batch_strides[i] == 0;
    c.batch_strides[i] = broadcast ? 0 : step;
    step *= broadcast ? 1 : batch[i];
  }
  return c;
}

// The problem in logical row-major terms, as torch.matmul and F.linear
// define it (batch dims broadcast right-aligned; a 1-D x is one row, a 1-D
// y or w one column, and the output lacks that dim).
void describe(const GemmInputs& in, GemmPlan& p, GemmMatrix& a, GemmMatrix& b) {
  const GemmTensor &x = in.x, &y = in.y, &out = in.out;
  const int xr = static_cast<int>(x.sizes.size()), yr = static_cast<int>(y.sizes.size());
  const bool a1 = xr == 1;
  a.rows = a1 ? 1 : x.sizes[xr - 2];
  a.cols = x.sizes[xr - 1];
  a.row_stride = a1 ? 0 : x.strides[xr - 2];
  a.col_stride = x.strides[xr - 1];
  const int xb = a1 ? 0 : xr - 2;  // x's batch dims
  const bool b1 = yr == 1;
  const bool n_dim = !b1;           // whether the output has the N dim
  int yb = 0;                       // y's batch dims (matmul)
  if (!in.linear) {
    b.rows = y.sizes[b1 ? 0 : yr - 2];
    b.cols = b1 ? 1 : y.sizes[yr - 1];
    b.row_stride = y.strides[b1 ? 0 : yr - 2];
    b.col_stride = b1 ? 0 : y.strides[yr - 1];
    yb = b1 ? 0 : yr - 2;
  } else {  // B = w^T: its strides swapped, no copy
    b.rows = y.sizes[yr - 1];
    b.cols = b1 ? 1 : y.sizes[0];
    b.row_stride = y.strides[yr - 1];
    b.col_stride = b1 ? 0 : y.strides[0];
  }
  const int nb = std::max(xb, yb);
  p.batch.assign(static_cast<size_t>(nb), 1);
  a.batch_strides.assign(static_cast<size_t>(nb), 0);
  b.batch_strides.assign(static_cast<size_t>(nb), 0);
  for (int i = 0; i < nb; ++i) {
    const int ia = i - (nb - xb), ib = i - (nb - yb);
    const int64_t sa = ia >= 0 ? x.sizes[ia] : 1, sb = ib >= 0 ? y.sizes[ib] : 1;
    p.batch[i] = sa == 1 ? sb : sa;
    if (sa != 1) a.batch_strides[i] = x.strides[ia];
    if (sb != 1) b.batch_strides[i] = y.strides[ib];
  }
  const int rank = nb + (a1 ? 0 : 1) + (n_dim ? 1 : 0);
  if (static_cast<int>(out.sizes.size()) != rank)
    fail(KF_ERR_INTERNAL, in.linear ? "linear" : "matmul", " output has rank ", out.sizes.size(),
         ", expected ", rank);
  GemmMatrix& d = p.output;
  d.rows = a.rows;
  d.cols = b.cols;
  d.row_stride = a1 ? 0 : out.strides[nb];
  d.col_stride = n_dim ? out.strides[rank - 1] : 0;
  d.batch_strides.assign(out.strides.begin(), out.strides.begin() + nb);
}

// Drops size-1 batch dims and merges neighbours contiguous in all three.
void collapse_batch(std::vector<int64_t>& batch, GemmMatrix& a, GemmMatrix& b, GemmMatrix& d) {
  std::vector<int64_t> kept, sa, sb, sd;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i] == 1) continue;
    if (!kept.empty() && sa.back() == a.batch_strides[i] * batch[i] &&
        sb.back() == b.batch_strides[i] * batch[i] && sd.back() == d.batch_strides[i] * batch[i]) {
      kept.back() *= batch[i];
      sa.back() = a.batch_strides[i];
      sb.back() = b.batch_strides[i];
      sd.back() = d.batch_strides[i];
      continue;
    }
    kept.push_back(batch[i]);
    sa.push_back(a.batch_strides[i]);
    sb.push_back(b.batch_strides[i]);
    sd.push_back(d.batch_strides[i]);
  }
  batch = kept;
  a.batch_strides = sa;
  b.batch_strides = sb;
  d.batch_strides = sd;
}

// One batch dim that B does not have, stepped over by whole matrices of A
// and D: one GEMM with M * batch rows, when D folded is still a matrix the
// library can write (with M = 1 a batch stride that is neither 1 nor the
// column stride's partner makes D neither column- nor row-major).
void fold_batch_into_m(std::vector<int64_t>& batch, GemmMatrix& a, GemmMatrix& b, GemmMatrix& d) {
  if (batch.size() != 1 || b.batch_strides[0] != 0) return;
  const int64_t m = d.rows;
  const int64_t ra = m == 1 ? a.batch_strides[0] : a.row_stride;
  const int64_t rd = m == 1 ? d.batch_strides[0] : d.row_stride;
  if (a.batch_strides[0] != m * ra || d.batch_strides[0] != m * rd) return;
  GemmMatrix folded = d;
  folded.rows = m * batch[0];
  folded.row_stride = rd;
  int64_t ld = 0;
  if (!col_ok(folded, &ld) && !row_ok(folded, &ld)) return;
  a.rows = d.rows = m * batch[0];
  a.row_stride = ra;
  d.row_stride = rd;
  batch.clear();
  a.batch_strides.clear();
  b.batch_strides.clear();
  d.batch_strides.clear();
}

// Reads `m` as stored, transposed, or from a compact row-major copy.
GemmOperand operand(GemmSource source, const GemmMatrix& m, const std::vector<int64_t>& batch) {
  GemmOperand o;
  o.source = source;
  o.matrix = m;
  if (col_ok(m, &o.ld)) return o;
  o.transpose = true;
  if (row_ok(m, &o.ld)) return o;
  o.copied_from = m;
  o.matrix = compact(m, batch, true);
  if (!row_ok(o.matrix, &o.ld)) fail(KF_ERR_INTERNAL, "GEMM layout: compact operand not row-major");
  return o;
}

}  // namespace

GemmPlan plan_gemm(const GemmInputs& in) {
  GemmPlan p;
  GemmMatrix a, b;
  describe(in, p, a, b);
  const int64_t M = p.output.rows, N = p.output.cols, K = a.cols;
  if (M == 0 || N == 0 || checked_numel(p.batch) == 0) return p;

  const GemmTensor* bias = in.bias ? &*in.bias : nullptr;
  int64_t ld = 0;
  p.output_scratch = !(row_ok(p.output, &ld) || col_ok(p.output, &ld));
  if (!p.output_scratch) {
    const int elem = in.elem_size;
    const auto d_span = span_of(in.out.address, p.output, p.batch, false, elem);
    p.output_scratch = overlap(d_span, span_of(in.x.address, a, p.batch, true, elem)) ||
                       overlap(d_span, span_of(in.y.address, b, p.batch, true, elem)) ||
                       (bias && overlap(d_span, span_of(bias->address, bias->sizes, bias->strides, elem)));
  }
  p.written = p.output_scratch ? compact(p.output, p.batch, false) : p.output;
  // The bias along D's columns (one value when it has one element).
  const int64_t bias_stride = bias && bias->sizes.size() == 1 && bias->sizes[0] != 1 ? bias->strides[0] : 0;
  p.fill_from = p.written;
  std::fill(p.fill_from.batch_strides.begin(), p.fill_from.batch_strides.end(), 0);
  p.fill_from.row_stride = 0;
  p.fill_from.col_stride = bias_stride;
  if (K == 0) {  // an empty sum: D = bias or 0
    p.action = in.activation ? GemmAction::Unfused : GemmAction::Fill;
    if (in.activation) p.why = "K = 0: no GEMM to apply the activation in";
    return p;
  }

  GemmMatrix d = p.written;
  p.gemm_batch = p.batch;
  collapse_batch(p.gemm_batch, a, b, d);
  fold_batch_into_m(p.gemm_batch, a, b, d);

  p.transposed = row_ok(d, &ld);
  if (p.transposed) {
    std::swap(a, b);
    a = transposed(a);
    b = transposed(b);
    d = transposed(d);
  }
  p.bias_epilogue = bias && p.transposed && (bias_stride == 1 || N == 1);
  if (in.activation && bias && !p.bias_epilogue) {
    p.action = GemmAction::Unfused;
    p.why = "the bias is not an epilogue vector (strided, one value for every feature, "
            "or a column-major output)";
    return p;
  }
  if (!col_ok(d, &p.ldd)) fail(KF_ERR_INTERNAL, "GEMM layout: output not column-major");
  p.action = GemmAction::Gemm;
  p.a = operand(p.transposed ? GemmSource::Y : GemmSource::X, a, p.gemm_batch);
  p.b = operand(p.transposed ? GemmSource::X : GemmSource::Y, b, p.gemm_batch);
  p.d = d;
  p.m = d.rows;
  p.n = d.cols;
  p.k = a.cols;
  return p;
}

int64_t gemm_outer_count(const GemmPlan& p) {
  int64_t n = 1;
  for (size_t i = 0; i + 1 < p.gemm_batch.size(); ++i) n *= p.gemm_batch[i];
  return n;
}

GemmOffsets gemm_outer_offsets(const GemmPlan& p, int64_t i) {
  GemmOffsets o;
  for (size_t dim = p.gemm_batch.empty() ? 0 : p.gemm_batch.size() - 1; dim-- > 0;) {  // innermost first
    const int64_t idx = i % p.gemm_batch[dim];
    i /= p.gemm_batch[dim];
    o.a += idx * p.a.matrix.batch_strides[dim];
    o.b += idx * p.b.matrix.batch_strides[dim];
    o.d += idx * p.d.batch_strides[dim];
  }
  return o;
}

}  // namespace kf
