// matmul / linear segments through cuBLASLt (see cublaslt.h).
//
// Every problem is first described in logical row-major terms:
//   D[batch..., M, N] = act(A[batch..., M, K] @ B[batch..., K, N] (+ bias[N]))
// (act: a matmul pattern's relu or gelu_tanh, or none)
// with per-matrix element strides (rows, columns, each batch dim; a
// broadcast batch dim has stride 0). Then: batch dims are collapsed where
// all three matrices allow it; a batch that only A and D carry (B shared)
// is folded into M; the problem is transposed when D is row-major (cuBLAS
// is column-major: D^T = B^T A^T); each operand becomes CUBLAS_OP_N or
// CUBLAS_OP_T, or is copied into a compact scratch when neither fits.
// The innermost remaining batch dim is a strided batch, outer ones a loop.
#include "core/runtime/cuda/cublaslt.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "core/runtime/cuda/driver.h"
#include "core/segment/matmul_pattern.h"
#include "core/util/error.h"

namespace kf::cuda {

namespace {

#define KF_CUBLASLT_FUNCTIONS(X)                                                         \
  X(cublasLtCreate) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulDescDestroy) X(cublasLtMatrixLayoutCreate)                            \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatrixLayoutDestroy)                    \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceSetAttribute)             \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul) \
  X(cublasLtGetStatusName) X(cublasLtGetStatusString) X(cublasLtGetVersion)

struct Lt {
#define KF_LT_MEMBER(name) decltype(&::name) name##_ = nullptr;
  KF_CUBLASLT_FUNCTIONS(KF_LT_MEMBER)
#undef KF_LT_MEMBER
  std::string error;  // why it could not be loaded ("" when loaded)
};

const Lt& lt_loaded() {
  static const Lt* lib = [] {
    auto* l = new Lt;  // never freed: handles live until exit
    std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so"};
    std::vector<std::string> candidates = names;
    std::vector<std::string> dirs;
    if (const char* home = std::getenv("CUDA_HOME"); home && *home) dirs.push_back(std::string(home) + "/lib64");
    dirs.push_back("/usr/local/cuda/lib64");
    for (const auto& d : dirs)
      for (const auto& n : names) candidates.push_back(d + "/" + n);
    void* handle = nullptr;
    std::string errors;
    for (const auto& c : candidates) {
      handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      const char* e = dlerror();
      errors += "\n  " + c + ": " + (e ? e : "not found");
    }
    if (handle == nullptr) {
      l->error = "cuBLASLt could not be loaded (matmul/linear on the GPU need it):" + errors;
      return l;
    }
#define KF_LT_RESOLVE(name)                                                   \
  l->name##_ = reinterpret_cast<decltype(l->name##_)>(dlsym(handle, #name)); \
  if (l->name##_ == nullptr && l->error.empty()) l->error = "cuBLASLt lacks " #name;
    KF_CUBLASLT_FUNCTIONS(KF_LT_RESOLVE)
#undef KF_LT_RESOLVE
    return l;
  }();
  return *lib;
}

const Lt& lt() {
  const Lt& l = lt_loaded();
  if (!l.error.empty()) throw Error(KF_ERR_BACKEND, l.error);
  return l;
}

void check_lt(cublasStatus_t s, const char* function) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const Lt& l = lt();
  const char* name = l.cublasLtGetStatusName_(s);
  const char* text = l.cublasLtGetStatusString_(s);
  fail(s == CUBLAS_STATUS_ALLOC_FAILED ? KF_ERR_OUT_OF_MEMORY : KF_ERR_BACKEND,
       "cuBLASLt call failed: ", function, ": ", name ? name : "status " + std::to_string(int(s)),
       " (", text ? text : "", ")");
}

// One handle per device, created on first use under the device's context.
cublasLtHandle_t handle_for(int device) {
  static std::mutex mutex;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard lock(mutex);
  if (handles.size() <= static_cast<size_t>(device)) handles.resize(static_cast<size_t>(device) + 1);
  auto& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) check_lt(lt().cublasLtCreate_(&h), "cublasLtCreate");
  return h;
}

constexpr uint64_t kMaxWorkspace = 32ull << 20;

// RAII for cuBLASLt descriptors.
struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  ~Layout() { if (l) lt().cublasLtMatrixLayoutDestroy_(l); }
};
struct Desc {
  cublasLtMatmulDesc_t d = nullptr;
  ~Desc() { if (d) lt().cublasLtMatmulDescDestroy_(d); }
};
struct Pref {
  cublasLtMatmulPreference_t p = nullptr;
  ~Pref() { if (p) lt().cublasLtMatmulPreferenceDestroy_(p); }
};

// A matrix of the logical row-major problem (element strides).
struct Mat {
  uintptr_t ptr = 0;  // address of element [0, 0] of batch 0
  int64_t rows = 0, cols = 0, rs = 0, cs = 0;
  std::vector<int64_t> bs;  // per batch dim; 0 = broadcast
};

Mat transposed(const Mat& m) {
  Mat t = m;
  std::swap(t.rows, t.cols);
  std::swap(t.rs, t.cs);
  return t;
}

// Stored as a column-major (rows x cols) matrix with leading dim *ld?
bool col_ok(const Mat& m, int64_t* ld) {
  if (m.rows > 1 && m.rs != 1) return false;
  *ld = m.cols > 1 ? m.cs : std::max<int64_t>(m.rows, 1);
  return *ld >= std::max<int64_t>(m.rows, 1);
}
// Stored row-major, i.e. its transpose is column-major?
bool row_ok(const Mat& m, int64_t* ld) { return col_ok(transposed(m), ld); }

int64_t stride_of(const DLTensor& t, int d) {
  if (t.strides) return t.strides[d];
  int64_t s = 1;
  for (int k = t.ndim - 1; k > d; --k) s *= t.shape[k];
  return s;
}

uintptr_t base_of(const DLTensor& t) { return reinterpret_cast<uintptr_t>(t.data) + t.byte_offset; }

// [lo, hi) bytes a tensor touches (empty when it has no elements).
std::pair<uintptr_t, uintptr_t> span_of(const DLTensor& t, int elem) {
  intptr_t lo = 0, hi = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) return {0, 0};
    const intptr_t step = static_cast<intptr_t>((t.shape[d] - 1) * stride_of(t, d));
    (step < 0 ? lo : hi) += step;
  }
  const uintptr_t b = base_of(t);
  return {b + static_cast<uintptr_t>(lo * elem), b + static_cast<uintptr_t>((hi + 1) * elem)};
}

bool overlap(const DLTensor& a, const DLTensor& b, int elem) {
  auto [a0, a1] = span_of(a, elem);
  auto [b0, b1] = span_of(b, elem);
  return a0 < a1 && b0 < b1 && a0 < b1 && b0 < a1;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F64: return CUDA_R_64F;
    case DType::F32: return CUDA_R_32F;
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: fail(KF_ERR_INTERNAL, "cuBLASLt: no CUDA type for ", dtype_name(t));
  }
}

uint32_t alignment_of(uintptr_t p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0) a /= 2;
  return a;
}

// Scratch memory of one call, released stream-ordered (also on errors).
struct Scratch {
  Backend& backend;
  int device;
  const ExecOptions& options;
  std::vector<std::pair<void*, size_t>> blocks;
  void* get(size_t bytes) {
    void* p = backend.allocate(bytes, device, options);
    blocks.emplace_back(p, bytes);
    return p;
  }
  ~Scratch() {
    for (auto& [p, n] : blocks) backend.release(p, n, device, options);
  }
};

// A DLTensor over a Mat's elements: [batch..., rows, cols]; a broadcast
// batch dim (stride 0) is given size 1 when `own` (the matrix's own data).
struct MatView {
  std::vector<int64_t> shape, strides;
  DLTensor t{};
  MatView(const Mat& m, const std::vector<int64_t>& batch, DType dtype, int device, bool own) {
    for (size_t i = 0; i < batch.size(); ++i) {
      shape.push_back(own && m.bs[i] == 0 ? 1 : batch[i]);
      strides.push_back(m.bs[i]);
    }
    shape.insert(shape.end(), {m.rows, m.cols});
    strides.insert(strides.end(), {m.rs, m.cs});
    t.data = reinterpret_cast<void*>(m.ptr);
    t.device = {kDLCUDA, device};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = {static_cast<uint8_t>(dtype == DType::BF16 ? kDLBfloat : kDLFloat),
               static_cast<uint8_t>(8 * dtype_size(dtype)), 1};
    t.shape = shape.data();
    t.strides = strides.data();
  }
};

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

// Copies `m` (its own elements) into a compact scratch; returns the new Mat.
Mat to_compact(const Mat& m, const std::vector<int64_t>& batch, DType dtype, Scratch& scratch) {
  MatView src(m, batch, dtype, scratch.device, true);
  const int elem = dtype_size(dtype);
  Mat c = m;
  c.ptr = reinterpret_cast<uintptr_t>(scratch.get(static_cast<size_t>(numel(src.shape)) * elem));
  c.rs = m.cols;
  c.cs = 1;
  int64_t step = m.rows * m.cols;
  for (size_t i = batch.size(); i-- > 0;) {
    c.bs[i] = m.bs[i] == 0 ? 0 : step;
    step *= src.shape[i];
  }
  MatView dst(c, batch, dtype, scratch.device, true);
  scratch.backend.copy(src.t, dst.t, scratch.options);
  return c;
}

// D = broadcast of `bias` (a vector along D's columns, stride `bstride`,
// 0 = one value) or of zero when bias is null.
void fill(const Mat& d, const std::vector<int64_t>& batch, DType dtype, const DLTensor* bias,
          int64_t bstride, Scratch& scratch, CUstream stream) {
  Mat src = d;
  std::fill(src.bs.begin(), src.bs.end(), 0);
  src.rs = 0;
  src.cs = bias ? bstride : 0;
  if (bias) {
    src.ptr = base_of(*bias);
  } else {
    static const double zero = 0;  // static: the async copy may read it later
    void* z = scratch.get(8);
    check(driver().cuMemcpyHtoDAsync_(reinterpret_cast<CUdeviceptr>(z), &zero, 8, stream),
          "cuMemcpyHtoDAsync");
    src.ptr = reinterpret_cast<uintptr_t>(z);
  }
  MatView s(src, batch, dtype, scratch.device, false), t(d, batch, dtype, scratch.device, false);
  scratch.backend.copy(s.t, t.t, scratch.options);
}

struct Algo {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  bool found = false;  // false: cuBLASLt had none (cached too, asked once)
};

// Heuristic results by problem, for the life of the process.
std::mutex algo_mutex;
std::map<std::vector<int64_t>, Algo> algo_cache;

// The whole problem after the layout decisions.
struct Gemm {
  DType dtype;
  cublasOperation_t op_a = CUBLAS_OP_N, op_b = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;              // column-major D is m x n
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t count = 1, sa = 0, sb = 0, sd = 0;  // strided batch
  uint32_t al_a = 256, al_b = 256, al_d = 256;
  const void* bias = nullptr;               // epilogue bias (length m)
  Activation activation = Activation::None; // epilogue activation
  bool accumulate = false;                  // beta = 1, C = D
};

// CUBLASLT_EPILOGUE_DEFAULT, or the bias and activation epilogue.
uint32_t epilogue_of(const Gemm& g) {
  uint32_t e = g.bias ? CUBLASLT_EPILOGUE_BIAS : 0;
  if (g.activation == Activation::Relu) e |= CUBLASLT_EPILOGUE_RELU;
  if (g.activation == Activation::GeluTanh) e |= CUBLASLT_EPILOGUE_GELU;  // tanh approximation
  return e ? e : static_cast<uint32_t>(CUBLASLT_EPILOGUE_DEFAULT);
}

void make_layout(Layout& l, cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld,
                 int64_t count, int64_t stride) {
  const Lt& L = lt();
  check_lt(L.cublasLtMatrixLayoutCreate_(&l.l, type, static_cast<uint64_t>(rows),
                                         static_cast<uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
  if (count > 1) {
    const auto c32 = static_cast<int32_t>(count);
    check_lt(L.cublasLtMatrixLayoutSetAttribute_(l.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c32, sizeof c32),
             "cublasLtMatrixLayoutSetAttribute");
    check_lt(L.cublasLtMatrixLayoutSetAttribute_(l.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &stride, sizeof stride),
             "cublasLtMatrixLayoutSetAttribute");
  }
}

struct Prepared {
  Desc desc;
  Layout a, b, d;
  Prepared() = default;
  Prepared(const Prepared&) = delete;
  Prepared& operator=(const Prepared&) = delete;
};

// Builds descriptors; returns false when no algorithm fits (only asked
// with `may_fail`, where the caller has another way).
bool prepare(const Gemm& g, int device, Prepared& p, Algo& algo, bool may_fail) {
  const Lt& L = lt();
  const cudaDataType_t type = cuda_type(g.dtype);
  const bool f64 = g.dtype == DType::F64;
  check_lt(L.cublasLtMatmulDescCreate_(&p.desc.d, f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
                                       f64 ? CUDA_R_64F : CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  auto set = [&](cublasLtMatmulDescAttributes_t a, const void* v, size_t n) {
    check_lt(L.cublasLtMatmulDescSetAttribute_(p.desc.d, a, v, n), "cublasLtMatmulDescSetAttribute");
  };
  const int32_t ta = g.op_a, tb = g.op_b;
  set(CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  set(CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  const uint32_t epi = epilogue_of(g);
  if (epi != CUBLASLT_EPILOGUE_DEFAULT) set(CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  if (g.bias) set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias);
  const bool ta_n = g.op_a == CUBLAS_OP_N, tb_n = g.op_b == CUBLAS_OP_N;
  make_layout(p.a, type, ta_n ? g.m : g.k, ta_n ? g.k : g.m, g.lda, g.count, g.sa);
  make_layout(p.b, type, tb_n ? g.k : g.n, tb_n ? g.n : g.k, g.ldb, g.count, g.sb);
  make_layout(p.d, type, g.m, g.n, g.ldd, g.count, g.sd);

  const std::vector<int64_t> key = {device, static_cast<int64_t>(g.dtype), ta, tb, g.m, g.n, g.k,
                                    g.lda, g.ldb, g.ldd, g.count, g.sa, g.sb, g.sd, g.al_a, g.al_b,
                                    g.al_d, g.bias ? alignment_of(reinterpret_cast<uintptr_t>(g.bias)) : 0,
                                    epi, g.accumulate};
  {
    std::lock_guard lock(algo_mutex);
    if (auto it = algo_cache.find(key); it != algo_cache.end() && (it->second.found || may_fail)) {
      algo = it->second;
      return algo.found;
    }
  }
  Pref pref;
  check_lt(L.cublasLtMatmulPreferenceCreate_(&pref.p), "cublasLtMatmulPreferenceCreate");
  auto pset = [&](cublasLtMatmulPreferenceAttributes_t a, const void* v, size_t n) {
    check_lt(L.cublasLtMatmulPreferenceSetAttribute_(pref.p, a, v, n),
             "cublasLtMatmulPreferenceSetAttribute");
  };
  pset(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kMaxWorkspace, sizeof kMaxWorkspace);
  // The real alignments: the default (256) would admit kernels that fault
  // on offset views.
  pset(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &g.al_a, sizeof g.al_a);
  pset(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &g.al_b, sizeof g.al_b);
  pset(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &g.al_d, sizeof g.al_d);
  pset(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &g.al_d, sizeof g.al_d);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t s = L.cublasLtMatmulAlgoGetHeuristic_(handle_for(device), p.desc.d, p.a.l, p.b.l,
                                                       p.d.l, p.d.l, pref.p, 1, &result, &found);
  if (s != CUBLAS_STATUS_SUCCESS || found == 0) {
    if (may_fail) {
      std::lock_guard lock(algo_mutex);
      algo_cache.emplace(key, Algo{});
      return false;
    }
    if (s != CUBLAS_STATUS_SUCCESS) check_lt(s, "cublasLtMatmulAlgoGetHeuristic");
    fail(KF_ERR_UNSUPPORTED, "cuBLASLt has no algorithm for this ", dtype_name(g.dtype),
         " matmul (m ", g.m, ", n ", g.n, ", k ", g.k, ", lda ", g.lda, ", ldb ", g.ldb, ", ldd ",
         g.ldd, ", batch ", g.count, ", alignments ", g.al_a, "/", g.al_b, "/", g.al_d, " bytes)");
  }
  algo = {result.algo, result.workspaceSize, true};
  std::lock_guard lock(algo_mutex);
  if (algo_cache.size() > 4096) algo_cache.clear();  // bound memory under shape churn
  algo_cache.emplace(key, algo);
  return true;
}

// The problem of one segment, in logical row-major terms.
struct Problem {
  DType dtype = DType::F32;
  std::vector<int64_t> batch;
  Mat a, b, d;
  const DLTensor* bias = nullptr;  // a vector along D's columns
  int64_t bias_stride = 0;         // 0: one value for every column
  Activation activation = Activation::None;
};

// Enqueues the problem. Returns false, having written nothing to D, when it
// has an activation that cuBLASLt cannot apply here (no epilogue algorithm,
// a bias that is not an epilogue vector, K = 0).
bool gemm(Problem p, int device, Scratch& scratch, CUstream stream) {
  const int elem = dtype_size(p.dtype);
  const int64_t M = p.d.rows, N = p.d.cols, K = p.a.cols;
  if (M == 0 || N == 0 || numel(p.batch) == 0) return true;
  const bool activation = p.activation != Activation::None;
  int64_t ld = 0;

  // D that cuBLASLt cannot write (or that shares memory with an operand)
  // goes through a compact scratch, copied out at the end.
  const Mat d_out = p.d;
  bool d_scratch = !(row_ok(p.d, &ld) || col_ok(p.d, &ld));
  if (!d_scratch) {
    MatView dv(p.d, p.batch, p.dtype, device, false);
    for (const Mat* op : {&p.a, &p.b}) {
      MatView ov(*op, p.batch, p.dtype, device, true);
      if (overlap(dv.t, ov.t, elem)) d_scratch = true;
    }
    if (p.bias && overlap(dv.t, *p.bias, elem)) d_scratch = true;
  }
  if (d_scratch) {
    Mat c = p.d;
    c.ptr = reinterpret_cast<uintptr_t>(scratch.get(static_cast<size_t>(numel(p.batch) * M * N) * elem));
    c.rs = N;
    c.cs = 1;
    int64_t step = M * N;
    for (size_t i = p.batch.size(); i-- > 0;) {
      c.bs[i] = step;
      step *= p.batch[i];
    }
    p.d = c;
  }
  // D and the batch dims before collapsing (p changes below).
  const Mat d_full = p.d;
  const std::vector<int64_t> batch_full = p.batch;
  auto finish = [&] {
    if (!d_scratch) return true;
    MatView s(d_full, batch_full, p.dtype, device, false), t(d_out, batch_full, p.dtype, device, false);
    scratch.backend.copy(s.t, t.t, scratch.options);
    return true;
  };
  if (K == 0) {  // an empty sum: D = bias or 0
    if (activation) return false;
    fill(p.d, p.batch, p.dtype, p.bias, p.bias_stride, scratch, stream);
    return finish();
  }

  // Collapse batch dims: drop size 1, merge neighbours contiguous in all.
  {
    std::vector<int64_t> batch, sa, sb, sd;
    for (size_t i = 0; i < p.batch.size(); ++i) {
      if (p.batch[i] == 1) continue;
      if (!batch.empty() && sa.back() == p.a.bs[i] * p.batch[i] && sb.back() == p.b.bs[i] * p.batch[i] &&
          sd.back() == p.d.bs[i] * p.batch[i]) {
        batch.back() *= p.batch[i];
        sa.back() = p.a.bs[i];
        sb.back() = p.b.bs[i];
        sd.back() = p.d.bs[i];
        continue;
      }
      batch.push_back(p.batch[i]);
      sa.push_back(p.a.bs[i]);
      sb.push_back(p.b.bs[i]);
      sd.push_back(p.d.bs[i]);
    }
    p.batch = batch;
    p.a.bs = sa;
    p.b.bs = sb;
    p.d.bs = sd;
  }
  // One batch dim that B does not have: fold it into M (one larger GEMM).
  if (p.batch.size() == 1 && p.b.bs[0] == 0) {
    const int64_t c = p.batch[0];
    const int64_t ra = M == 1 ? p.a.bs[0] : p.a.rs, rd = M == 1 ? p.d.bs[0] : p.d.rs;
    if (p.a.bs[0] == M * ra && p.d.bs[0] == M * rd) {
      p.a.rows = p.d.rows = M * c;
      p.a.rs = ra;
      p.d.rs = rd;
      p.batch.clear();
      p.a.bs.clear();
      p.b.bs.clear();
      p.d.bs.clear();
    }
  }

  // Column-major problem: transpose when D is row-major.
  Gemm g;
  g.dtype = p.dtype;
  Mat A = p.a, B = p.b, D = p.d;
  const bool transpose = row_ok(D, &ld);
  if (transpose) {
    D = transposed(p.d);
    A = transposed(p.b);
    B = transposed(p.a);
  }
  // The bias goes into the epilogue when cuBLASLt can read it as a
  // contiguous vector along the rows of (transposed) D; otherwise D is
  // filled with it first and the product accumulated onto it (beta = 1),
  // which is not combined with an activation.
  const bool bias_vector = p.bias && transpose && (p.bias_stride == 1 || N == 1);
  if (activation && p.bias && !bias_vector) return false;
  if (!col_ok(D, &g.ldd)) fail(KF_ERR_INTERNAL, "cuBLASLt: output layout not column-major");
  auto operand = [&](Mat& m, cublasOperation_t& op, int64_t& ldm) {
    if (col_ok(m, &ldm)) op = CUBLAS_OP_N;
    else if (row_ok(m, &ldm)) op = CUBLAS_OP_T;
    else {
      m = to_compact(m, p.batch, p.dtype, scratch);
      if (!row_ok(m, &ldm)) fail(KF_ERR_INTERNAL, "cuBLASLt: compact operand not row-major");
      op = CUBLAS_OP_T;
    }
  };
  operand(A, g.op_a, g.lda);
  operand(B, g.op_b, g.ldb);
  g.m = D.rows;
  g.n = D.cols;
  g.k = A.cols;
  g.activation = p.activation;

  // Innermost batch dim: strided batch (chunked to int32); the rest: a loop.
  const size_t nb = p.batch.size();
  const int64_t inner = nb ? p.batch[nb - 1] : 1;
  int64_t chunk = std::min<int64_t>(inner, 1 << 30);
  if (nb) {
    g.sa = A.bs[nb - 1];
    g.sb = B.bs[nb - 1];
    g.sd = D.bs[nb - 1];
  }
  auto align = [&](const Mat& m) {
    uint32_t a = alignment_of(m.ptr);
    for (int64_t s : m.bs) a = std::min(a, alignment_of(static_cast<uintptr_t>(s * elem)));
    if (chunk < inner && !m.bs.empty())
      a = std::min(a, alignment_of(static_cast<uintptr_t>(m.bs.back() * chunk * elem)));
    return a;
  };

  auto prep = std::make_unique<Prepared>();
  Algo algo;
  auto try_prepare = [&](bool may_fail) {
    prep = std::make_unique<Prepared>();
    return prepare(g, device, *prep, algo, may_fail);
  };
  auto try_config = [&](int64_t count, bool bias_in_epilogue) {
    chunk = count;
    g.count = count;
    g.al_a = align(A);
    g.al_b = align(B);
    g.al_d = align(D);
    g.bias = bias_in_epilogue ? reinterpret_cast<const void*>(base_of(*p.bias)) : nullptr;
    g.accumulate = p.bias && !bias_in_epilogue;
    return try_prepare(true);
  };
  // Best first: a strided batch, else one call per matrix (no strided-batch
  // kernel for these strides, e.g. a stride-0 batch); the bias in the
  // epilogue, else (no epilogue kernel, e.g. fp64; never with an
  // activation) filled into D.
  bool ok = false;
  for (const int64_t count : {chunk, int64_t{1}}) {
    if (bias_vector) ok = try_config(count, true);
    if (!ok && !(activation && p.bias)) ok = try_config(count, false);
    if (ok || count == 1) break;
  }
  if (!ok) {
    if (activation) return false;
    try_prepare(false);  // fails with the problem in the message
  }
  if (g.accumulate) fill(d_full, batch_full, p.dtype, p.bias, p.bias_stride, scratch, stream);
  size_t workspace_size = algo.workspace;
  void* workspace = workspace_size ? scratch.get(workspace_size) : nullptr;

  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  const bool f64 = p.dtype == DType::F64;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = g.accumulate ? (f64 ? static_cast<const void*>(&one64) : &one32)
                                  : (f64 ? static_cast<const void*>(&zero64) : &zero32);
  const cublasLtHandle_t h = handle_for(device);
  // Outer batch dims (and chunks of the inner one), row-major order.
  std::vector<int64_t> idx(nb ? nb - 1 : 0, 0);
  const int64_t outer = nb ? numel(std::vector<int64_t>(p.batch.begin(), p.batch.end() - 1)) : 1;
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = 0, ob = 0, od = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      oa += idx[i] * A.bs[i];
      ob += idx[i] * B.bs[i];
      od += idx[i] * D.bs[i];
    }
    for (int64_t start = 0; start < inner; start += chunk) {
      if (std::min(chunk, inner - start) != g.count) {  // the last, shorter chunk
        g.count = inner - start;
        prep = std::make_unique<Prepared>();
        prepare(g, device, *prep, algo, false);
        if (algo.workspace > workspace_size) {
          workspace_size = algo.workspace;
          workspace = scratch.get(workspace_size);
        }
      }
      const int64_t sa = oa + start * g.sa, sb = ob + start * g.sb, sd = od + start * g.sd;
      auto* a = reinterpret_cast<const char*>(A.ptr) + sa * elem;
      auto* b = reinterpret_cast<const char*>(B.ptr) + sb * elem;
      auto* d = reinterpret_cast<char*>(D.ptr) + sd * elem;
      check_lt(lt().cublasLtMatmul_(h, prep->desc.d, alpha, a, prep->a.l, b, prep->b.l, beta, d,
                                    prep->d.l, d, prep->d.l, &algo.algo, workspace, algo.workspace,
                                    reinterpret_cast<cudaStream_t>(stream)),
               "cublasLtMatmul");
    }
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < p.batch[i]) break;
      idx[i] = 0;
    }
  }
  return finish();
}

}  // namespace

bool cublaslt_available(std::string* why) {
  const Lt& l = lt_loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

namespace {

// Whether $KFUSE_EPILOGUE_FALLBACK asks to run every matmul pattern unfused
// (tests use it to reach the fallback).
bool fallback_forced() {
  const char* v = std::getenv("KFUSE_EPILOGUE_FALLBACK");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Runs the library op of segment `index` into `out`: with the segment's
// matmul pattern (bias, activation) unless `product_only`. Returns what
// gemm returns.
bool run_library(Backend& backend, const ConcreteFusion& c, const Segmentation& s, size_t index,
                 const DLTensor* const* inputs, const DLTensor& out, bool product_only,
                 const ExecOptions& options) {
  const Segment& seg = s.segments[index];
  const Fusion& f = *c.fusion;
  MatmulPattern pattern;
  if (!seg.task.children.empty()) {
    const std::optional<MatmulPattern> described = describe_matmul_pattern(c, seg.task.children[0]);
    if (!described) fail(KF_ERR_INTERNAL, "segment ", index, ": its nested task is no matmul pattern");
    pattern = *described;
  } else if (seg.task.exprs.size() == 1) {
    pattern.product_expr = seg.task.exprs[0];
  } else {
    fail(KF_ERR_INTERNAL, "segment ", index, ": a library segment holds one op or a matmul pattern, holds ",
         seg.task.exprs.size(), " ops");
  }
  const Expr& e = f.exprs.at(static_cast<size_t>(pattern.product_expr));
  const char* op = e.op == Op::MATMUL ? "matmul" : "linear";
  if (e.op != Op::MATMUL && e.op != Op::LINEAR)
    fail(KF_ERR_INTERNAL, "segment ", index, ": ", op_name(e.op), " is not a library op");
  auto value = [&](int64_t id, const char* what) -> const DLTensor& {
    const auto& in = seg.task.inputs;
    auto it = std::find(in.begin(), in.end(), id);
    if (it == in.end()) fail(KF_ERR_INTERNAL, "segment ", index, ": ", op, " ", what, " is not a segment input");
    return *inputs[it - in.begin()];
  };
  auto input = [&](size_t arg) -> const DLTensor& { return value(e.inputs[arg], "argument"); };

  const DType dtype = f.value(e.outputs[0]).dtype;
  if (dtype != DType::F32 && dtype != DType::F16 && dtype != DType::BF16 && dtype != DType::F64)
    fail(KF_ERR_UNSUPPORTED, "segment ", index, ": ", op, " on the GPU supports float32, float16, "
         "bfloat16 and float64 results, got ", dtype_name(dtype));
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    const DType t = f.value(e.inputs[i]).dtype;
    if (t != dtype)
      fail(KF_ERR_UNSUPPORTED, "segment ", index, ": ", op, " on the GPU needs every argument in the "
           "result dtype ", dtype_name(dtype), "; argument ", i, " is ", dtype_name(t),
           " (cast it first)");
  }
  auto on_device = [&](const DLTensor& t, const char* what, size_t i) {
    if (t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged)
      fail(KF_ERR_DEVICE_MISMATCH, "segment ", index, ": ", op, " ", what, " ", i,
           " is not in CUDA device memory (device type ", int(t.device.device_type), ")");
  };
  for (size_t i = 0; i < e.inputs.size(); ++i) on_device(input(i), "argument", i);
  // The pattern's bias: linear's own or that of a bias add (same dtype).
  const DLTensor* bias = nullptr;
  if (e.inputs.size() == 3) bias = &input(2);
  if (!product_only && pattern.bias_added) {
    bias = &value(pattern.bias, "bias");
    on_device(*bias, "bias", 0);
  }

  Problem p;
  p.dtype = dtype;
  if (!product_only) p.activation = pattern.activation;
  if (bias) {
    p.bias = bias;
    p.bias_stride = bias->ndim == 1 && bias->shape[0] != 1 ? stride_of(*bias, 0) : 0;
  }
  const DLTensor& x = input(0);
  const DLTensor& y = input(1);
  // A from x: a 1-D operand is one row.
  const bool a1 = x.ndim == 1;
  const int xr = x.ndim;
  p.a.ptr = base_of(x);
  p.a.rows = a1 ? 1 : x.shape[xr - 2];
  p.a.cols = x.shape[xr - 1];
  p.a.rs = a1 ? 0 : stride_of(x, xr - 2);
  p.a.cs = stride_of(x, xr - 1);
  const int xb = a1 ? 0 : xr - 2;  // x's batch dims
  bool n_dim;                       // whether the output has the N dim
  int yb = 0;                       // y's batch dims (matmul)
  p.b.ptr = base_of(y);
  if (e.op == Op::MATMUL) {
    const bool b1 = y.ndim == 1;
    p.b.rows = y.shape[b1 ? 0 : y.ndim - 2];
    p.b.cols = b1 ? 1 : y.shape[y.ndim - 1];
    p.b.rs = stride_of(y, b1 ? 0 : y.ndim - 2);
    p.b.cs = b1 ? 0 : stride_of(y, y.ndim - 1);
    yb = b1 ? 0 : y.ndim - 2;
    n_dim = !b1;
  } else {
    // B = w^T: w is [n, k] (or [k]: n = 1, no N dim in the output).
    const bool w1 = y.ndim == 1;
    p.b.rows = y.shape[y.ndim - 1];
    p.b.cols = w1 ? 1 : y.shape[0];
    p.b.rs = stride_of(y, y.ndim - 1);
    p.b.cs = w1 ? 0 : stride_of(y, 0);
    n_dim = !w1;
  }
  // Batch dims: torch.matmul broadcasting, right-aligned.
  const int nb = std::max(xb, yb);
  p.batch.assign(static_cast<size_t>(nb), 1);
  p.a.bs.assign(static_cast<size_t>(nb), 0);
  p.b.bs.assign(static_cast<size_t>(nb), 0);
  p.d.bs.assign(static_cast<size_t>(nb), 0);
  for (int i = 0; i < nb; ++i) {
    const int ia = i - (nb - xb), ib = i - (nb - yb);
    const int64_t sa = ia >= 0 ? x.shape[ia] : 1, sb = ib >= 0 ? y.shape[ib] : 1;
    p.batch[i] = sa == 1 ? sb : sa;
    if (sa != 1) p.a.bs[i] = stride_of(x, ia);
    if (sb != 1) p.b.bs[i] = stride_of(y, ib);
  }
  // D from the output: [batch..., M if x is not 1-D, N if present].
  if (out.ndim != nb + (a1 ? 0 : 1) + (n_dim ? 1 : 0))
    fail(KF_ERR_INTERNAL, "segment ", index, ": ", op, " output has rank ", out.ndim);
  p.d.ptr = base_of(out);
  p.d.rows = p.a.rows;
  p.d.cols = p.b.cols;
  p.d.rs = a1 ? 0 : stride_of(out, nb);
  p.d.cs = n_dim ? stride_of(out, out.ndim - 1) : 0;
  for (int i = 0; i < nb; ++i) p.d.bs[i] = stride_of(out, i);

  const int device = c.device.id;
  Scratch scratch{backend, device, options, {}};
  return gemm(std::move(p), device, scratch, static_cast<CUstream>(options.stream));
}

}  // namespace

bool run_library_segment(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, DLTensor* const* outputs,
                         const ExecOptions& options) {
  const Segment& seg = s.segments[index];
  if (seg.task.outputs.size() != 1)
    fail(KF_ERR_INTERNAL, "segment ", index, ": a library segment has one output, has ", seg.task.outputs.size());
  if (!seg.task.children.empty() && fallback_forced()) return false;
  return run_library(backend, c, s, index, inputs, *outputs[0], false, options);
}

void run_library_product(Backend& backend, const ConcreteFusion& c, const Segmentation& s,
                         size_t index, const DLTensor* const* inputs, const DLTensor& product,
                         const ExecOptions& options) {
  run_library(backend, c, s, index, inputs, product, true, options);
}

}  // namespace kf::cuda
