#include "core/runtime/cuda/cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/runtime/cuda/driver.h"
#include "core/runtime/cuda/dynlib.h"
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
    const DynLib dl = open_library(CudaLibrary::CublasLt);
    if (dl.handle == nullptr) {
      l->error = "cuBLASLt could not be loaded (matmul/linear on the GPU need it):" + attempts_text(dl);
      return l;
    }
#define KF_LT_RESOLVE(name) resolve(dl, #name, l->name##_, l->error);
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

// A DLTensor over a plan's matrix at `address`: [batch..., rows, cols]; a
// broadcast batch dim (stride 0) is given size 1 when `own` (the matrix's
// own elements).
struct MatView {
  std::vector<int64_t> shape, strides;
  DLTensor t{};
  MatView(const GemmMatrix& m, uintptr_t address, const std::vector<int64_t>& batch, DType dtype,
          int device, bool own) {
    for (size_t i = 0; i < batch.size(); ++i) {
      shape.push_back(own && m.batch_strides[i] == 0 ? 1 : batch[i]);
      strides.push_back(m.batch_strides[i]);
    }
    shape.insert(shape.end(), {m.rows, m.cols});
    strides.insert(strides.end(), {m.row_stride, m.col_stride});
    t.data = reinterpret_cast<void*>(address);
    t.device = {kDLCUDA, device};
    t.ndim = static_cast<int>(shape.size());
    t.dtype = {static_cast<uint8_t>(dtype == DType::BF16 ? kDLBfloat : kDLFloat),
               static_cast<uint8_t>(8 * dtype_size(dtype)), 1};
    t.shape = shape.data();
    t.strides = strides.data();
  }
};

// Scratch memory and strided copies (the backend's) of one call; the
// memory is released stream-ordered, also on errors.
struct Scratch {
  Backend& backend;
  int device;
  const ExecOptions& options;
  DType dtype;
  std::vector<std::pair<void*, size_t>> blocks;
  uintptr_t get(size_t bytes) {
    void* p = backend.allocate(bytes, device, options);
    blocks.emplace_back(p, bytes);
    return reinterpret_cast<uintptr_t>(p);
  }
  // Room for matrix `m` over `batch` (MatView's `own`).
  uintptr_t get(const GemmMatrix& m, const std::vector<int64_t>& batch, bool own) {
    size_t n = static_cast<size_t>(dtype_size(dtype));
    for (int64_t e : MatView(m, 0, batch, dtype, device, own).shape) n *= static_cast<size_t>(e);
    return get(n);
  }
  void copy(const GemmMatrix& from, uintptr_t src, const GemmMatrix& to, uintptr_t dst,
            const std::vector<int64_t>& batch, bool own) {
    MatView s(from, src, batch, dtype, device, own), t(to, dst, batch, dtype, device, own);
    backend.copy(s.t, t.t, options);
  }
  ~Scratch() {
    for (auto& [p, n] : blocks) backend.release(p, n, device, options);
  }
};

struct Algo {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  bool found = false;  // false: cuBLASLt had none (cached too, asked once)
};

// Heuristic results by problem, for the life of the process.
std::mutex algo_mutex;
std::map<std::vector<int64_t>, Algo> algo_cache;

// One cuBLASLt call's configuration.
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

}  // namespace

bool cublaslt_gemm(const GemmPlan& plan, const GemmInputs& in, DType dtype, Activation activation,
                   Backend& backend, int device, const ExecOptions& options) {
  if (plan.action == GemmAction::Nothing) return true;
  if (plan.action == GemmAction::Unfused) return false;
  Scratch scratch{backend, device, options, dtype, {}};
  const auto stream = static_cast<CUstream>(options.stream);
  const int elem = dtype_size(dtype);
  const GemmTensor* bias = in.bias ? &*in.bias : nullptr;
  const uintptr_t written = plan.output_scratch ? scratch.get(plan.written, plan.batch, false) : in.out.address;
  auto finish = [&] {
    if (plan.output_scratch) scratch.copy(plan.written, written, plan.output, in.out.address, plan.batch, false);
    return true;
  };
  // D = the bias broadcast over it, or zero.
  auto fill = [&] {
    uintptr_t from = bias ? bias->address : 0;
    if (!bias) {
      static const double zero = 0;  // static: the async copy may read it later
      from = scratch.get(8);
      check(driver().cuMemcpyHtoDAsync_(static_cast<CUdeviceptr>(from), &zero, 8, stream), "cuMemcpyHtoDAsync");
    }
    scratch.copy(plan.fill_from, from, plan.written, written, plan.batch, false);
  };
  if (plan.action == GemmAction::Fill) {
    fill();
    return finish();
  }

  // Operands the library cannot read in place are compacted first.
  auto address_of = [&](const GemmOperand& o) {
    const uintptr_t source = o.source == GemmSource::X ? in.x.address : in.y.address;
    if (!o.copied_from) return source;
    const uintptr_t c = scratch.get(o.matrix, plan.gemm_batch, true);
    scratch.copy(*o.copied_from, source, o.matrix, c, plan.gemm_batch, true);
    return c;
  };
  const uintptr_t pa = address_of(plan.a), pb = address_of(plan.b);
  const std::vector<int64_t>&sa = plan.a.matrix.batch_strides, &sb = plan.b.matrix.batch_strides,
                             &sd = plan.d.batch_strides;
  // Innermost batch dim: strided batch (chunked to int32); the rest: a loop.
  const int64_t inner = plan.gemm_batch.empty() ? 1 : plan.gemm_batch.back();
  int64_t chunk = std::min<int64_t>(inner, 1 << 30);
  Gemm g{.dtype = dtype,
         .op_a = plan.a.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
         .op_b = plan.b.transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
         .m = plan.m, .n = plan.n, .k = plan.k,
         .lda = plan.a.ld, .ldb = plan.b.ld, .ldd = plan.ldd,
         .sa = sa.empty() ? 0 : sa.back(), .sb = sb.empty() ? 0 : sb.back(), .sd = sd.empty() ? 0 : sd.back(),
         .activation = activation};
  auto align = [&](uintptr_t p, const std::vector<int64_t>& bs) {
    uint32_t a = alignment_of(p);
    for (int64_t s : bs) a = std::min(a, alignment_of(static_cast<uintptr_t>(s * elem)));
    if (chunk < inner && !bs.empty()) a = std::min(a, alignment_of(static_cast<uintptr_t>(bs.back() * chunk * elem)));
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
    g.al_a = align(pa, sa);
    g.al_b = align(pb, sb);
    g.al_d = align(written, sd);
    g.bias = bias_in_epilogue ? reinterpret_cast<const void*>(bias->address) : nullptr;
    g.accumulate = bias && !bias_in_epilogue;
    return try_prepare(true);
  };
  // Best first: a strided batch, else one call per matrix (no strided-batch
  // kernel for these strides, e.g. a stride-0 batch); the bias in the
  // epilogue, else (no epilogue kernel, e.g. fp64; never with an
  // activation) filled into D.
  const bool act = activation != Activation::None;
  bool ok = false;
  for (const int64_t count : {chunk, int64_t{1}}) {
    if (plan.bias_epilogue) ok = try_config(count, true);
    if (!ok && !(act && bias)) ok = try_config(count, false);
    if (ok || count == 1) break;
  }
  if (!ok) {
    if (act) return false;
    try_prepare(false);  // fails with the problem in the message
  }
  if (g.accumulate) fill();
  size_t workspace_size = algo.workspace;
  uintptr_t workspace = workspace_size ? scratch.get(workspace_size) : 0;

  const float f32[] = {0, 1};  // scale factors: fp32 for every dtype but fp64
  const double f64[] = {0, 1};
  const bool wide = dtype == DType::F64;
  const void* alpha = wide ? static_cast<const void*>(&f64[1]) : &f32[1];
  const void* beta = wide ? static_cast<const void*>(&f64[g.accumulate]) : &f32[g.accumulate];
  const cublasLtHandle_t h = handle_for(device);
  auto at = [&](uintptr_t base, int64_t offset) { return reinterpret_cast<char*>(base) + offset * elem; };
  // Outer batch dims (and chunks of the inner one), row-major order.
  for (int64_t o = 0; o < gemm_outer_count(plan); ++o) {
    const GemmOffsets off = gemm_outer_offsets(plan, o);
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
      char* d = at(written, off.d + start * g.sd);
      check_lt(lt().cublasLtMatmul_(h, prep->desc.d, alpha, at(pa, off.a + start * g.sa), prep->a.l,
                                    at(pb, off.b + start * g.sb), prep->b.l, beta, d, prep->d.l, d, prep->d.l,
                                    &algo.algo, reinterpret_cast<void*>(workspace), algo.workspace,
                                    reinterpret_cast<cudaStream_t>(stream)),
               "cublasLtMatmul");
    }
  }
  return finish();
}

bool cublaslt_available(std::string* why) {
  const Lt& l = lt_loaded();
  if (why) *why = l.error;
  return l.error.empty();
}

}  // namespace kf::cuda
