// libFuzzer target: the execute path on the CPU backend. Each input picks a
// fusion (one of a fixed list of texts, or a few builder calls), makes
// DLTensors for its inputs (ranks, shapes, strides, offsets, dtypes and
// devices from the bytes, sometimes wrong) over one shared 1 MiB buffer, and
// calls kf_output_shape, kf_value_shape, kf_execute, kf_execute_into and,
// sometimes, kf_concretize + kf_segment + kf_execute_segment on segment 0.
// Every call must give KF_OK or a clean error (never KF_ERR_INTERNAL, a
// crash, a sanitizer report, a leak or a hang), and:
//  - a tensor whose metadata any correct check rejects (negative sizes or
//    strides, element counts or offsets beyond kfuse's limits, an address
//    range that wraps, NULL data or a misaligned pointer with elements, a
//    wrong rank, dtype or lanes, an unknown device) must fail the call;
//  - the results of a few fusions with exactly known values (add + relu,
//    int32 add, an in-place add) must equal a reference computed here;
//  - without in-place outputs, kf_execute and kf_execute_into (the
//    caller's layouts) must give the same elements.
// kfuse cannot know buffer sizes, so the target never passes a tensor that
// reaches beyond the buffer yet is valid by its metadata: such tensors are
// shrunk first. Huge stride-0 broadcasts stay in the buffer and are passed;
// the target only executes fusions whose values all have at most 2^16
// elements, or whose first large output cannot be allocated (more than 2^62
// bytes: kfuse fails before computing anything). Tensors on kDLCUDA only go
// with a CPU tensor or a tensor kfuse must reject, so that the call fails
// while binding, before any driver is loaded (CI machines have GPUs).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kfuse/kfuse.h"

namespace {

constexpr size_t kBufBytes = size_t{1} << 20;
constexpr int kMaxRank = 8;
constexpr int64_t kMaxWork = int64_t{1} << 16;  // elements of any value we let run
constexpr unsigned __int128 kAddressEnd = static_cast<unsigned __int128>(1) << 64;

alignas(64) uint8_t g_buf[kBufBytes];
constexpr int kPatterns = 5;
uint8_t* g_patterns[kPatterns];

struct Bytes {
  const uint8_t* p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  uint64_t u64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | byte();
    return v;
  }
  // Rare choices are the nonzero ones, so that the zeros past the end of
  // an input take the common paths.
  bool one_in(int k) { return byte() % k == k - 1; }
  // A size: mostly 0..6, sometimes huge or negative.
  int64_t size() {
    static const int64_t kHuge[] = {int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 61, int64_t{1} << 62,
                                    INT64_MAX, -1, INT64_MIN, 7, 64, 1000};
    uint8_t k = byte();
    if (k < 232) return (k + 2) % 7;
    return kHuge[k % 10];
  }
  // A stride outside the usual layouts.
  int64_t odd_stride() {
    static const int64_t kOdd[] = {0, 1, 2, 3, 5, 8, 64, -1, -8, int64_t{1} << 31, int64_t{1} << 40,
                                   int64_t{1} << 60, int64_t{1} << 61, (int64_t{1} << 61) + 1, int64_t{1} << 62,
                                   INT64_MAX, INT64_MIN, 2884274095081263733LL};
    return kOdd[byte() % (sizeof kOdd / sizeof kOdd[0])];
  }
};

// FUZZ_EXECUTE_VERBOSE=1 prints the tensors and every call's status (to
// study an input).
bool verbose() {
  static const bool on = std::getenv("FUZZ_EXECUTE_VERBOSE") != nullptr;
  return on;
}

// ---------------------------------------------------------------- fusions

const char* const kFusions[] = {
    // 0: pointwise with a broadcast (values checked)
    "input x: tensor<float32, 2>\ninput b: tensor<float32, 1>\ns = add(x, b)\ny = relu(s)\noutput y\n",
    // 1: int32 add, wrapping (values checked)
    "input a: tensor<int32, 2>\ninput b: tensor<int32, 2>\nc = add(a, b)\noutput c\n",
    // 2: in-place add (values checked)
    "input x: tensor<float32, 2>\ninput b: tensor<float32, 2>\ns = add(x, b)\noutput s {alias=0}\n",
    // 3: reduction with keepdim, its result and a use of it
    "input x: tensor<bfloat16, 3>\nm = sum(x) {axes=[0, 2], keepdim=true}\nd = sub(x, m)\noutput d\noutput m\n",
    // 4: layer norm
    "input x: tensor<float32, 2>\ninput w: tensor<float32, 1>\ninput b: tensor<float32, 1>\n"
    "const eps: float32 = 1e-5\nvar, mean = var_mean(x) {axes=[-1], keepdim=true, correction=0}\n"
    "centered = sub(x, mean)\nve = add(var, eps)\ninv = rsqrt(ve)\nn = mul(centered, inv)\n"
    "s = mul(n, w)\ny = add(s, b)\noutput y\n",
    // 5: rms norm in float16 with a scalar eps, softmax next to it
    "input x: tensor<float16, 2>\ninput eps: scalar<float64>\nsq = mul(x, x)\n"
    "ms = mean(sq) {axes=[1], keepdim=true}\nme = add(ms, eps)\nr = rsqrt(me)\ny = mul(x, r)\n"
    "mx = max(x) {axes=[1], keepdim=true}\nsh = sub(x, mx)\ne = exp(sh)\nse = sum(e) {axes=[1], keepdim=true}\n"
    "sm = div(e, se)\noutput y\noutput sm\n",
    // 6: reshape by a scalar input, permute
    "input x: tensor<float64, 2>\ninput n: scalar<int64>\nconst m1: int64 = -1\n"
    "r = reshape(x, [n, m1])\np = permute(r) {perm=[1, 0]}\noutput p\n",
    // 7: cat, slice, pad
    "input a: tensor<int32, 2>\ninput b: tensor<int32, 2>\nc = cat(a, b) {dim=1}\n"
    "s = slice(c) {dim=0, start=1, stop=end, step=2}\nconst z: int32 = 7\np = pad(s, z) {pads=[1, 0, 0, 2]}\n"
    "output p\n",
    // 8: index_select with int64 indices
    "input x: tensor<float16, 2>\ninput i: tensor<int64, 1>\ng = index_select(x, i) {dim=0}\noutput g\n",
    // 9: gather with int32 indices, a squeeze and an unsqueeze
    "input x: tensor<float32, 3>\ninput i: tensor<int32, 3>\ng = gather(x, i) {dim=2}\n"
    "u = unsqueeze(g) {dim=0}\nq = squeeze(u) {dims=[0]}\noutput q\n",
    // 10: scatter with a sum
    "input x: tensor<float32, 2>\ninput i: tensor<int64, 2>\ninput s: tensor<float32, 2>\n"
    "y = scatter(x, i, s) {dim=0, reduce=sum}\noutput y\n",
    // 11: index_reduce in place
    "input x: tensor<float32, 2>\ninput i: tensor<int64, 1>\ninput s: tensor<float32, 2>\n"
    "y = index_reduce(x, i, s) {dim=0, reduce=amax, include_self=false}\noutput y {alias=0}\n",
    // 12: scans
    "input x: tensor<int32, 2>\nc = cumsum(x) {dim=1}\nm = cummax(x) {dim=0, exclusive=true}\n"
    "p = cumprod(x) {dim=-1}\noutput c\noutput m\noutput p\n",
    // 13: full and iota with scalar shape inputs
    "input n: scalar<int64>\ninput m: scalar<int32>\ninput v: scalar<float32>\n"
    "f = full([n, m], v) {dtype=float32}\nconst z: int64 = 0\nconst one: int64 = 1\n"
    "i = iota(m, z, one) {dtype=int64}\nfi = cast(i) {dtype=float32}\ns = add(f, fi)\noutput s\noutput i\n",
    // 14: bool: where, logical ops, comparisons
    "input a: tensor<bool, 2>\ninput x: tensor<float32, 2>\ninput y: tensor<float32, 2>\n"
    "w = where(a, x, y)\nn = logical_not(a)\ng = gt(x, y)\nl = logical_xor(n, g)\noutput w\noutput l\n",
    // 15: integer fmod/remainder (by zero: an error), shifts, int8/uint8
    "input a: tensor<int64, 1>\ninput b: tensor<int64, 1>\nr = remainder(a, b)\nf = fmod(a, b)\n"
    "output r\noutput f\n",
    "input a: tensor<uint8, 2>\ninput s: tensor<uint8, 2>\nl = shift_left(a, s)\nr = shift_right(a, s)\n"
    "c = cast(l) {dtype=int8}\nn = neg(c)\noutput n\noutput r\n",
    // 17: var_mean and argmax
    "input x: tensor<float32, 3>\nv, m = var_mean(x) {axes=[1], keepdim=true, correction=1}\n"
    "a = argmax(x) {axes=[2], keepdim=false}\noutput v\noutput m\noutput a\n",
    // 18: expand by a size and a scalar input, broadcast_in_dim
    "input x: tensor<float32, 1>\ninput n: scalar<int32>\ns = size(x) {dim=0}\ne = expand(x, [n, s])\n"
    "b = broadcast_in_dim(x, [s, n]) {dims=[0]}\nt = permute(b) {perm=[1, 0]}\nd = add(e, t)\noutput d\n",
    // 19: two in-place updates and a fresh output (an optimizer step)
    "input p: tensor<float32, 1>\ninput g: tensor<float32, 1>\ninput m: tensor<float32, 1>\n"
    "const beta: float32 = 0.9\nconst lr: float32 = 0.01\nmb = mul(m, beta)\nm2 = add(mb, g)\n"
    "st = mul(m2, lr)\np2 = sub(p, st)\nn = abs(p2)\noutput p2 {alias=0}\noutput m2 {alias=2}\noutput n\n",
    // 20: casts from floats to ints and float8 (out of range values)
    "input x: tensor<float64, 2>\nc8 = cast(x) {dtype=float8_e4m3fn}\ni8 = cast(x) {dtype=int8}\n"
    "i32 = cast(x) {dtype=int32}\ni64 = cast(x) {dtype=int64}\nu8 = cast(x) {dtype=uint8}\n"
    "output c8\noutput i8\noutput i32\noutput i64\noutput u8\n",
    // 21: int64 prod and max, pow of ints
    "input x: tensor<int64, 2>\np = prod(x) {axes=[1], keepdim=true}\nm = max(x) {axes=[0], keepdim=false}\n"
    "w = pow(x, p)\noutput p\noutput m\noutput w\n",
    // 22: matmul and a relu
    "input a: tensor<float32, 2>\ninput b: tensor<float32, 2>\nc = matmul(a, b)\nr = relu(c)\noutput r\n",
    // 23: random numbers keyed by scalar inputs
    "input n: scalar<int64>\ninput seed: scalar<int64>\ninput off: scalar<int64>\nconst lo: float32 = -1\n"
    "const hi: float32 = 1\nu = uniform([n], lo, hi, seed, off) {dtype=float32}\n"
    "r = normal([n], lo, hi, seed, off) {dtype=float16}\noutput u\noutput r\n",
    // 24: an output with a pinned layout, and the same value twice
    "input x: tensor<float32, 3>\ne = exp(x)\noutput e {stride_order=[2, 0, 1]}\noutput e\n",
    // 25: an output that is an input, and an index_put style update in place
    "input x: tensor<float32, 2>\ninput i: tensor<int32, 1>\ninput v: tensor<float32, 2>\n"
    "y = index_reduce(x, i, v) {dim=0, reduce=sum}\noutput y {alias=0}\noutput v\n",
};
constexpr size_t kNumFusions = sizeof kFusions / sizeof kFusions[0];

kf_fusion text_fusion(size_t i) {
  static kf_fusion cache[kNumFusions] = {};
  if (!cache[i] && kf_fusion_from_text(kFusions[i], &cache[i]) != KF_OK) {
    fprintf(stderr, "fusion %zu does not parse: %s\n", i, kf_last_error());
    std::abort();
  }
  return cache[i];
}

// A few builder calls over a small set of ops; any of them may fail.
kf_fusion builder_fusion(Bytes& in) {
  static const kf_op kOps[] = {KF_OP_ADD,     KF_OP_MUL,       KF_OP_SUB,        KF_OP_DIV,     KF_OP_RELU,
                               KF_OP_EXP,     KF_OP_NEG,       KF_OP_WHERE,      KF_OP_CAST,    KF_OP_SUM,
                               KF_OP_MAX,     KF_OP_MEAN,      KF_OP_VAR,        KF_OP_PERMUTE, KF_OP_RESHAPE,
                               KF_OP_SLICE,   KF_OP_PAD,       KF_OP_CAT,        KF_OP_EXPAND,  KF_OP_SQUEEZE,
                               KF_OP_UNSQUEEZE, KF_OP_INDEX_SELECT, KF_OP_GATHER, KF_OP_SCATTER, KF_OP_CUMSUM,
                               KF_OP_FULL,    KF_OP_IOTA,      KF_OP_SIZE,       KF_OP_MATMUL,  KF_OP_FMOD,
                               KF_OP_EQ,      KF_OP_SHIFT_LEFT, KF_OP_ARGMAX,    KF_OP_INDEX_REDUCE, KF_OP_CUMMAX,
                               KF_OP_SEGMENT_SET, KF_OP_BROADCAST_IN_DIM, KF_OP_CLAMP};
  kf_builder b = nullptr;
  if (kf_builder_create(&b) != KF_OK) std::abort();
  std::vector<int64_t> tensor_inputs;
  int64_t values = 0;
  int n_inputs = 1 + in.byte() % 3;
  for (int k = 0; k < n_inputs; ++k) {
    int64_t id;
    if (in.one_in(4)) {
      if (kf_define_scalar(b, in.one_in(2) ? KF_INT64 : KF_FLOAT32, &id) == KF_OK) ++values;
    } else if (kf_define_tensor(b, in.byte() % 4, static_cast<kf_dtype>(in.byte() % KF_DTYPE_COUNT), &id) == KF_OK) {
      tensor_inputs.push_back(id);
      ++values;
    }
  }
  int64_t id;
  if (kf_define_constant_i64(b, static_cast<int8_t>(in.byte()) % 4, KF_INT64, &id) == KF_OK) ++values;
  if (kf_define_constant_f64(b, 0.5, KF_FLOAT32, &id) == KF_OK) ++values;
  bool has_output = false;
  int steps = 1 + in.byte() % 6;
  for (int step = 0; step < steps && in.n > 0; ++step) {
    kf_op op = kOps[in.byte() % (sizeof kOps / sizeof kOps[0])];
    size_t nargs = in.byte() % 4, nattrs = in.byte() % 5;
    int64_t args[4], attrs[5];
    for (size_t a = 0; a < nargs; ++a) args[a] = values ? in.byte() % values : 0;
    for (size_t a = 0; a < nattrs; ++a) attrs[a] = static_cast<int8_t>(in.byte()) % 5;
    if (op == KF_OP_CAST && nattrs > 0) attrs[0] = in.byte() % KF_DTYPE_COUNT;
    int64_t outs[2];
    if (kf_builder_op(b, op, args, nargs, attrs, nattrs, outs, 2) == KF_OK) {
      values += kf_op_num_outputs(op);
      if (in.one_in(3)) {
        int64_t alias = in.one_in(4) && !tensor_inputs.empty() ? in.byte() % n_inputs : -1;
        if (kf_add_output(b, outs[0], nullptr, 0, alias) == KF_OK) has_output = true;
      }
    }
  }
  if (!has_output && values > 0) kf_add_output(b, values - 1, nullptr, 0, -1);
  kf_fusion f = nullptr;
  if (kf_builder_finalize(b, &f) != KF_OK) f = nullptr;
  kf_builder_destroy(b);
  return f;
}

// ---------------------------------------------------------------- dtypes

int dtype_bytes(kf_dtype d) {
  switch (d) {
    case KF_FLOAT64: case KF_INT64: return 8;
    case KF_FLOAT32: case KF_INT32: return 4;
    case KF_FLOAT16: case KF_BFLOAT16: return 2;
    default: return 1;
  }
}

DLDataType dl_of(kf_dtype d) {
  switch (d) {
    case KF_FLOAT64: return {kDLFloat, 64, 1};
    case KF_FLOAT32: return {kDLFloat, 32, 1};
    case KF_FLOAT16: return {kDLFloat, 16, 1};
    case KF_BFLOAT16: return {kDLBfloat, 16, 1};
    case KF_INT64: return {kDLInt, 64, 1};
    case KF_INT32: return {kDLInt, 32, 1};
    case KF_BOOL: return {KF_DLPACK_BOOL_CODE, 8, 1};
    case KF_FLOAT8_E4M3FN: return {KF_DLPACK_FLOAT8_E4M3FN_CODE, 8, 1};
    case KF_FLOAT8_E5M2: return {KF_DLPACK_FLOAT8_E5M2_CODE, 8, 1};
    case KF_INT8: return {kDLInt, 8, 1};
    case KF_UINT8: return {kDLUInt, 8, 1};
    default: return {kDLFloat, 32, 1};
  }
}

bool dtype_accepted(kf_dtype declared, DLDataType t) {
  if (t.lanes != 1) return false;
  DLDataType e = dl_of(declared);
  if (t.code == e.code && t.bits == e.bits) return true;
  return declared == KF_BOOL && t.bits == 8 && (t.code == kDLInt || t.code == kDLUInt);
}

// ---------------------------------------------------------------- tensors

// One DLTensor made by the target, with the storage its pointers use.
struct Tensor {
  DLTensor t{};
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};
  int declared_rank = 0;
  kf_dtype dtype = KF_FLOAT32;
  bool is_scalar = false;
  bool must_reject = false;  // its metadata fails any correct check
  bool cuda = false;         // on kDLCUDA / kDLCUDAManaged
  int64_t count = 0;
  // Bytes [lo, hi) of the buffer it reaches (empty when count == 0).
  uintptr_t lo = 0, hi = 0;
};

// What kfuse's metadata checks see: sets must_reject, count and the byte
// range. Returns true when the tensor is valid and stays inside the buffer
// (or reaches nothing).
bool analyze(Tensor& x) {
  const DLTensor& t = x.t;
  x.must_reject = false;
  x.count = 0;
  x.lo = x.hi = 0;
  int dev;
  std::memcpy(&dev, &t.device.device_type, sizeof dev);
  bool known_device = dev == kDLCPU || dev == kDLCUDA || dev == kDLCUDAHost || dev == kDLCUDAManaged;
  if (!known_device || t.ndim != x.declared_rank || !dtype_accepted(x.dtype, t.dtype)) x.must_reject = true;
  if (t.ndim < 0 || t.ndim > kMaxRank) return x.must_reject = true;
  if (t.ndim > 0 && t.shape == nullptr) return x.must_reject = true;
  const int r = t.ndim;
  int64_t count = 1;
  bool empty = false;
  for (int d = 0; d < r; ++d) {
    if (t.shape[d] < 0) return x.must_reject = true;
    empty = empty || t.shape[d] == 0;
  }
  // An empty tensor is taken whatever its other dims, wherever its 0 is
  // (core/util/dl_layout.h element_count); any other count must fit.
  if (empty) count = 0;
  for (int d = 0; d < r && !empty; ++d)
    if (__builtin_mul_overflow(count, t.shape[d], &count) || count > (int64_t{1} << 62)) return x.must_reject = true;
  int64_t st[kMaxRank];
  if (t.strides) {
    for (int d = 0; d < r; ++d) {
      if (t.strides[d] < 0) return x.must_reject = true;
      st[d] = t.strides[d];
    }
  } else {
    int64_t s = 1;
    for (int d = r - 1; d >= 0; --d) {
      st[d] = s;
      if (__builtin_mul_overflow(s, std::max<int64_t>(t.shape[d], 1), &s)) s = INT64_MAX;
    }
  }
  x.count = count;
  const unsigned __int128 start = static_cast<unsigned __int128>(reinterpret_cast<uintptr_t>(t.data)) + t.byte_offset;
  if (start >= kAddressEnd) return x.must_reject = true;
  if (count == 0) return !x.must_reject;
  int64_t max_offset = 0;
  for (int d = 0; d < r; ++d) {
    int64_t reach;
    if (__builtin_mul_overflow(t.shape[d] - 1, st[d], &reach) || __builtin_add_overflow(max_offset, reach, &max_offset) ||
        max_offset > (int64_t{1} << 62))
      return x.must_reject = true;
  }
  if (t.data == nullptr) return x.must_reject = true;
  const int esize = dtype_bytes(x.dtype);
  const unsigned __int128 end = start + static_cast<unsigned __int128>(max_offset + 1) * esize;
  if (end > kAddressEnd) return x.must_reject = true;  // wraps around the address space
  if (start % esize != 0) return x.must_reject = true;
  if (x.must_reject) return false;
  const uintptr_t b0 = reinterpret_cast<uintptr_t>(g_buf), b1 = b0 + kBufBytes;
  if (start < b0 || end > b1) return false;
  x.lo = static_cast<uintptr_t>(start);
  x.hi = static_cast<uintptr_t>(end);
  return true;
}

// Shrinks a valid tensor that reaches beyond the buffer until it fits (a
// tensor kfuse must reject is left as it is).
void fit(Tensor& x) {
  for (int iter = 0; iter < 200; ++iter) {
    if (analyze(x) || x.must_reject) return;
    DLTensor& t = x.t;
    int best = -1;
    unsigned __int128 best_reach = 0;
    for (int d = 0; d < t.ndim; ++d) {
      int64_t s = t.strides ? t.strides[d] : 1;
      unsigned __int128 reach = static_cast<unsigned __int128>(t.shape[d] > 0 ? t.shape[d] - 1 : 0) * static_cast<uint64_t>(s);
      if (t.shape[d] > 1 && reach > 0 && reach >= best_reach) {
        best = d;
        best_reach = reach;
      }
    }
    if (best >= 0) {
      int64_t& s = x.shape[best];
      s = std::min<int64_t>(s / 2, 1024);
    } else if (t.byte_offset >= 64) {
      t.byte_offset %= 64;
    } else {
      t.data = g_buf;
    }
  }
  std::abort();  // fit() failed to fit: a bug in this target
}

// A fresh data pointer in the buffer: mostly near its start, so that
// tensors share memory.
void* pick_data(Bytes& in, int esize) {
  uint8_t k = in.byte();
  if (k < 112) return g_buf + (in.byte() % 16) * esize;
  if (k < 192) return g_buf + (in.byte() % 64) * 64;
  if (k < 240) return g_buf + (kBufBytes / 2) + (in.byte() % 128) * 256;
  if (k < 248) return g_buf + (in.u64() % kBufBytes);
  return nullptr;
}

// Per-call shape pool: dims drawn from it make broadcasts line up.
struct ShapePool {
  int64_t dims[4];
};

void make_tensor(Bytes& in, const ShapePool& pool, int rank, kf_dtype dtype, bool is_scalar, Tensor& x) {
  x = Tensor{};
  x.declared_rank = rank;
  x.dtype = dtype;
  x.is_scalar = is_scalar;
  int r = rank;
  if (in.one_in(24)) r = in.byte() % 6;
  DLTensor& t = x.t;
  t.ndim = r;
  for (int d = 0; d < r; ++d) {
    uint8_t k = in.byte() % 8;
    if (k < 5) x.shape[d] = pool.dims[(d + kMaxRank - r) % 4];  // right-aligned
    else if (k < 6) x.shape[d] = 1;
    else x.shape[d] = in.size();
  }
  t.shape = (r > 0 && in.one_in(64)) ? nullptr : x.shape;
  t.dtype = dl_of(dtype);
  if (in.one_in(24)) {
    t.dtype.code = in.byte() % 14;
    t.dtype.bits = static_cast<uint8_t>(8 << (in.byte() % 4));
  }
  if (in.one_in(64)) t.dtype.lanes = in.byte();
  t.device = {kDLCPU, 0};
  if (in.one_in(32)) {
    uint8_t k = in.byte() % 4;
    int code = k == 0 ? kDLCUDA : k == 1 ? kDLCUDAHost : k == 2 ? kDLCUDAManaged : 100 + in.byte();
    std::memcpy(&t.device.device_type, &code, sizeof code);
    t.device.device_id = in.byte() % 3;
  }
  int dev;
  std::memcpy(&dev, &t.device.device_type, sizeof dev);
  x.cuda = dev == kDLCUDA || dev == kDLCUDAManaged;
  const int esize = dtype_bytes(dtype);
  // Strides: none (compact), compact in a permuted order, padded, with
  // broadcast zeros, or odd values.
  uint8_t layout = in.byte() % 8;
  if (layout < 3 || r == 0) {
    t.strides = nullptr;
  } else {
    int order[kMaxRank];
    for (int d = 0; d < r; ++d) order[d] = d;
    if (layout >= 4)
      for (int d = r - 1; d > 0; --d) std::swap(order[d], order[in.byte() % (d + 1)]);
    int64_t s = 1;
    for (int k = r - 1; k >= 0; --k) {
      int d = order[k];
      x.strides[d] = s;
      int64_t pad = layout == 5 ? 1 + in.byte() % 3 : 1;
      if (__builtin_mul_overflow(s, std::max<int64_t>(x.shape[d], 1), &s) || __builtin_mul_overflow(s, pad, &s)) s = 1;
    }
    if (layout == 6)
      for (int d = 0; d < r; ++d)
        if (in.one_in(2)) x.strides[d] = 0;
    if (layout == 7) x.strides[in.byte() % r] = in.odd_stride();
    t.strides = x.strides;
  }
  t.data = pick_data(in, esize);
  t.byte_offset = 0;
  if (in.one_in(8)) {
    static const uint64_t kOffsets[] = {1, 2, 3, 4, 8, 64, 4096, uint64_t{1} << 40, uint64_t{1} << 63,
                                        UINT64_MAX - 3, UINT64_MAX};
    t.byte_offset = kOffsets[in.byte() % (sizeof kOffsets / sizeof kOffsets[0])];
  }
  fit(x);
}

void describe(const char* what, size_t i, const Tensor& x) {
  if (!verbose()) return;
  const DLTensor& t = x.t;
  int dev;
  std::memcpy(&dev, &t.device.device_type, sizeof dev);
  fprintf(stderr, "%s %zu: ndim %d (declared %d) dtype %d/%d/%d dev %d data %+lld offset %llu shape", what, i, t.ndim,
          x.declared_rank, t.dtype.code, t.dtype.bits, t.dtype.lanes, dev,
          t.data ? static_cast<long long>(static_cast<const uint8_t*>(t.data) - g_buf) : -1LL,
          static_cast<unsigned long long>(t.byte_offset));
  for (int d = 0; t.shape && d < t.ndim; ++d) fprintf(stderr, " %lld", static_cast<long long>(t.shape[d]));
  fprintf(stderr, " strides");
  for (int d = 0; t.strides && d < t.ndim; ++d) fprintf(stderr, " %lld", static_cast<long long>(t.strides[d]));
  fprintf(stderr, "%s -> %s\n", t.strides ? "" : " (none)", x.must_reject ? "must reject" : "valid");
}

// Tensors on kDLCUDA are moved to the CPU unless the call must fail while
// binding, before any driver is loaded: another tensor of rank > 0 is on
// the CPU (a device mismatch), or one is rejected by its metadata.
void keep_off_gpus(std::vector<Tensor*>& ts) {
  bool fails = false;
  for (Tensor* x : ts) {
    int dev;
    std::memcpy(&dev, &x->t.device.device_type, sizeof dev);
    if (((dev == kDLCPU || dev == kDLCUDAHost) && x->t.ndim > 0) || x->must_reject) fails = true;
  }
  if (fails) return;
  for (Tensor* x : ts)
    if (x->cuda) {
      x->t.device = {kDLCPU, 0};
      x->cuda = false;
      analyze(*x);
    }
}

// ---------------------------------------------------------------- buffer

void make_patterns() {
  static const uint64_t kWords[] = {
      0, 1, 2, 3, 5, UINT64_MAX, 0x8000000000000000ull, 0x7fffffffffffffffull, 0x7fffffffull, 0x80000000ull,
      0xffffffffull, 0x3ff0000000000000ull /* 1.0 */, 0xc004000000000000ull /* -2.5 */,
      0x7ff8000000000000ull /* nan */, 0x7ff0000000000000ull /* inf */, 0x8000000000000000ull /* -0.0 */,
      0x7e37e43c8800759cull /* 1e300 */, 0x3f8000003f800000ull /* 1.0f 1.0f */, 0xbfc0000040000000ull,
      0x7fc00000ff800000ull, 0x3c00bc0000007c00ull /* halves */, 0x0101010101010101ull, 0x8080808080808080ull,
      0x4f0000004effffffull /* 2^31 floats */, 0x43e0000000000000ull /* 2^63 */};
  constexpr size_t kN = sizeof kWords / sizeof kWords[0];
  for (int p = 0; p < kPatterns; ++p) {
    g_patterns[p] = static_cast<uint8_t*>(std::aligned_alloc(64, kBufBytes));
    uint64_t* w = reinterpret_cast<uint64_t*>(g_patterns[p]);
    uint64_t lcg = 0x9e3779b97f4a7c15ull * (p + 1);
    for (size_t i = 0; i < kBufBytes / 8; ++i) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      switch (p) {
        case 0: w[i] = i % 5; break;  // small int64s: valid indices
        case 1: w[i] = (i % 3) | (((i + 1) % 4) << 32); break;  // small int32s
        case 2: {  // small float32s
          float a = static_cast<float>(static_cast<int>(i % 7) - 3) * 0.5f, b = static_cast<float>(i % 5);
          uint32_t ua, ub;
          std::memcpy(&ua, &a, 4);
          std::memcpy(&ub, &b, 4);
          w[i] = ua | (static_cast<uint64_t>(ub) << 32);
          break;
        }
        case 3: w[i] = kWords[(lcg >> 33) % kN]; break;
        default: w[i] = lcg >> 7; break;
      }
    }
  }
}

void fill_buffer(Bytes& in) {
  std::memcpy(g_buf, g_patterns[in.byte() % kPatterns], kBufBytes);
  // A few words of the fuzzer's choosing, near the start.
  int pokes = in.byte() % 4;
  for (int k = 0; k < pokes; ++k) {
    size_t at = (in.byte() % 128) * 8;
    uint64_t v = in.u64();
    std::memcpy(g_buf + at, &v, 8);
  }
}

// ---------------------------------------------------------------- checks

void check_status(kf_status s, const char* call) {
  if (verbose() && (s != KF_OK || std::strcmp(call, "kf_value_shape") != 0))
    fprintf(stderr, "  %s: %s %s\n", call, kf_status_name(s), s == KF_OK ? "" : kf_last_error());
  if (s == KF_OK) return;
  if (s == KF_ERR_INTERNAL || s < 0 || s > KF_ERR_INTERNAL || kf_last_error() == nullptr ||
      kf_last_error()[0] == '\0') {
    fprintf(stderr, "bad status %d (%s): %s\n", static_cast<int>(s), kf_status_name(s), kf_last_error());
    std::abort();
  }
}

// A call that must fail returned KF_OK.
[[noreturn]] void accepted(const char* call) {
  fprintf(stderr, "%s accepted metadata that any correct check rejects\n", call);
  std::abort();
}

bool disjoint(const Tensor& a, const Tensor& b) { return a.hi <= b.lo || b.hi <= a.lo || a.count == 0 || b.count == 0; }

// Element at a multi-index of `t`, which has `r` dims, read as T with
// right-aligned broadcasting from an index over `out_rank` dims.
template <typename T>
T load(const DLTensor& t, const int64_t* index, int out_rank) {
  int64_t off = 0;
  int64_t compact = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    int64_t i = t.shape[d] == 1 ? 0 : index[out_rank - t.ndim + d];
    int64_t s = t.strides ? t.strides[d] : compact;
    off += i * s;
    compact *= t.shape[d];
  }
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(t.data) + t.byte_offset + off * sizeof(T), sizeof(T));
  return v;
}

bool same_value(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Expected values of the checked fusions (0, 1, 2), in row-major order of
// the output shape, computed from the inputs before the call.
struct Expected {
  int fusion = -1;
  int64_t shape[2] = {};
  std::vector<float> f;
  std::vector<int32_t> i;
};

void expect(int fusion, const std::vector<Tensor>& ts, const int64_t* shape, Expected& e) {
  e.fusion = fusion;
  e.shape[0] = shape[0];
  e.shape[1] = shape[1];
  e.f.clear();
  e.i.clear();
  const DLTensor& a = ts[0].t;
  const DLTensor& b = ts[1].t;
  if (shape[0] == 0 || shape[1] == 0) return;  // [2^31, 0]: nothing to loop over
  int64_t idx[2];
  for (idx[0] = 0; idx[0] < shape[0]; ++idx[0])
    for (idx[1] = 0; idx[1] < shape[1]; ++idx[1]) {
      if (fusion == 1) {
        uint32_t s = static_cast<uint32_t>(load<int32_t>(a, idx, 2)) + static_cast<uint32_t>(load<int32_t>(b, idx, 2));
        e.i.push_back(static_cast<int32_t>(s));
      } else {
        float s = load<float>(a, idx, 2) + load<float>(b, idx, 2);
        if (fusion == 0 && !(s > 0) && !std::isnan(s)) s = 0;
        e.f.push_back(s);
      }
    }
}

void check_result(const Expected& e, const DLTensor& out, const char* call) {
  if (e.fusion < 0) return;
  if (out.ndim != 2 || out.shape[0] != e.shape[0] || out.shape[1] != e.shape[1]) {
    fprintf(stderr, "%s: output shape differs from kf_output_shape\n", call);
    std::abort();
  }
  if (e.shape[0] == 0 || e.shape[1] == 0) return;
  int64_t idx[2];
  size_t k = 0;
  for (idx[0] = 0; idx[0] < e.shape[0]; ++idx[0])
    for (idx[1] = 0; idx[1] < e.shape[1]; ++idx[1], ++k) {
      bool ok = e.fusion == 1 ? load<int32_t>(out, idx, 2) == e.i[k] : same_value(load<float>(out, idx, 2), e.f[k]);
      if (!ok) {
        fprintf(stderr, "%s: fusion %d, element [%lld, %lld] differs from the reference\n", call, e.fusion,
                static_cast<long long>(idx[0]), static_cast<long long>(idx[1]));
        std::abort();
      }
    }
}

// The element bytes of two tensors of one shape (from kf_execute and
// kf_execute_into) must be equal: the same fusion on the same inputs,
// written through different layouts.
void check_same(const DLTensor& a, const DLTensor& b, int esize, size_t output) {
  if (a.ndim != b.ndim) std::abort();
  const int r = a.ndim;
  for (int d = 0; d < r; ++d)
    if (a.shape[d] != b.shape[d] || a.shape[d] == 0) return;  // (shapes were checked by kfuse)
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  auto offset = [&](const DLTensor& t) {
    int64_t off = 0, compact = 1;
    for (int d = r - 1; d >= 0; --d) {
      off += idx[static_cast<size_t>(d)] * (t.strides ? t.strides[d] : compact);
      compact *= t.shape[d];
    }
    return static_cast<const uint8_t*>(t.data) + t.byte_offset + off * esize;
  };
  while (true) {
    if (std::memcmp(offset(a), offset(b), static_cast<size_t>(esize)) != 0) {
      fprintf(stderr, "output %zu: kf_execute and kf_execute_into differ at a flat index\n", output);
      std::abort();
    }
    int d = r - 1;
    for (; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < a.shape[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
    if (d < 0) return;
  }
}

int64_t numel(const int64_t* s, int r, bool* overflow) {
  for (int d = 0; d < r; ++d)
    if (s[d] == 0) return 0;  // (empty whatever the other dims)
  int64_t n = 1;
  for (int d = 0; d < r; ++d)
    if (__builtin_mul_overflow(n, s[d], &n)) *overflow = true;
  return n;
}

// An output tensor for kf_execute_into: the expected shape and dtype
// (sometimes not), a layout, and memory that is fresh, shared with an
// input, or the aliased input's own view.
void make_output(Bytes& in, size_t slot, const kf_value_info& info, const int64_t* shape, bool have_shape, Tensor& x) {
  x = Tensor{};
  x.declared_rank = info.rank;
  x.dtype = info.dtype;
  DLTensor& t = x.t;
  t.ndim = in.one_in(32) ? in.byte() % 4 : std::min(info.rank, kMaxRank);
  for (int d = 0; d < t.ndim; ++d) {
    x.shape[d] = have_shape && d < info.rank ? shape[d] : in.size();
    if (in.one_in(32)) x.shape[d] = in.size();
  }
  t.shape = x.shape;
  t.dtype = dl_of(info.dtype);
  if (in.one_in(32)) t.dtype.code = in.byte() % 14;
  t.device = {kDLCPU, 0};
  if (in.one_in(32)) t.device = {kDLCUDA, 0};  // never runs: the inputs are on the CPU
  int dev = t.device.device_type;
  x.cuda = dev == kDLCUDA;
  const int r = t.ndim;
  uint8_t layout = in.byte() % 6;
  if (layout < 2 || r == 0) {
    t.strides = nullptr;
  } else {
    int order[kMaxRank];
    for (int d = 0; d < r; ++d) order[d] = d;
    if (layout >= 3)
      for (int d = r - 1; d > 0; --d) std::swap(order[d], order[in.byte() % (d + 1)]);
    int64_t s = 1;
    for (int k = r - 1; k >= 0; --k) {
      int d = order[k];
      x.strides[d] = s;
      if (__builtin_mul_overflow(s, std::max<int64_t>(x.shape[d], 1), &s) ||
          __builtin_mul_overflow(s, layout == 4 ? 2 : 1, &s))
        s = 1;
    }
    if (layout == 5) x.strides[in.byte() % r] = in.odd_stride();
    t.strides = x.strides;
  }
  uint8_t k = in.byte() % 8;
  const int esize = dtype_bytes(info.dtype);
  if (k < 5) t.data = g_buf + kBufBytes / 4 + (slot % 8) * 32768 + (in.byte() % 32) * 1024;  // away from the inputs
  else t.data = pick_data(in, esize);
  if (in.one_in(16)) t.byte_offset = in.one_in(2) ? 1 : UINT64_MAX - 3;
  fit(x);
}

struct Run {
  kf_fusion f = nullptr;
  std::vector<kf_value_info> in_info, out_info;
  std::vector<int64_t> alias;
  std::vector<Tensor> ts;
  std::vector<const DLTensor*> ptrs;
  size_t num_inputs = 0;
  bool must_fail = false;  // the inputs as passed must be rejected
  bool bound = false;      // kf_value_shape succeeded for every value
  int64_t max_count = 0;   // largest element count of any value
  std::vector<std::vector<int64_t>> out_shapes;
  std::vector<bool> out_known;
};

// The element counts of every value for these inputs (kf_value_shape).
void measure(Run& run, const DLTensor* const* inputs) {
  run.bound = true;
  run.max_count = 0;
  for (int64_t id = 0; id < 4096; ++id) {
    kf_value_info v{};
    v.struct_size = sizeof v;
    if (kf_fusion_value(run.f, id, &v) != KF_OK) break;
    int64_t shape[64];
    if (v.rank < 0 || v.rank > 64) std::abort();
    kf_status s = kf_value_shape(run.f, inputs, run.num_inputs, id, shape, static_cast<size_t>(v.rank));
    check_status(s, "kf_value_shape");
    if (s != KF_OK) {
      run.bound = false;
      return;
    }
    bool overflow = false;
    int64_t n = numel(shape, v.rank, &overflow);
    if (overflow || n < 0) std::abort();  // kfuse promises counts of at most 2^62
    run.max_count = std::max(run.max_count, n);
  }
}

// Whether kf_execute may run: every value is small, or the first large
// output it allocates exceeds 2^62 bytes (an out-of-memory error before
// anything is computed).
bool may_execute(const Run& run) {
  if (!run.bound) return true;  // binding fails: nothing runs
  if (run.max_count <= kMaxWork) return true;
  for (size_t o = 0; o < run.out_info.size(); ++o) {
    if (run.alias[o] >= 0) continue;
    if (!run.out_known[o]) return false;
    bool overflow = false;
    int64_t n = numel(run.out_shapes[o].data(), run.out_info[o].rank, &overflow);
    if (n <= kMaxWork) continue;
    unsigned __int128 bytes = static_cast<unsigned __int128>(n) * dtype_bytes(run.out_info[o].dtype);
    return bytes > (static_cast<unsigned __int128>(1) << 62);
  }
  return false;
}

void run_segment(Bytes& in, Run& run, const DLTensor* const* inputs) {
  kf_concrete c = nullptr;
  kf_status s = kf_concretize(run.f, inputs, run.num_inputs, &c);
  check_status(s, "kf_concretize");
  if (s != KF_OK) return;
  if (run.must_fail) accepted("kf_concretize");
  kf_segmentation seg = nullptr;
  if (kf_segment(c, &seg) != KF_OK) std::abort();
  size_t count = 0;
  if (kf_segmentation_count(seg, &count) != KF_OK) std::abort();
  kf_segment_info info{};
  info.struct_size = sizeof info;
  if (count > 0 && kf_segmentation_get(seg, 0, &info) == KF_OK && run.bound && run.max_count <= kMaxWork) {
    // The tensors of the segment's inputs: the fusion's inputs it reads.
    std::vector<const DLTensor*> ins;
    std::vector<Tensor*> used;
    bool ok = true;
    for (size_t k = 0; k < info.num_inputs; ++k) {
      size_t which = run.in_info.size();
      for (size_t i = 0; i < run.in_info.size(); ++i)
        if (run.in_info[i].id == info.inputs[k]) which = i;
      if (which == run.in_info.size() || which >= run.ts.size()) {
        ok = false;  // an intermediate: not made here
        break;
      }
      ins.push_back(&run.ts[which].t);
      used.push_back(&run.ts[which]);
    }
    if (ok) {
      keep_off_gpus(used);
      std::vector<Tensor> outs(info.num_outputs);
      std::vector<DLTensor*> out_ptrs;
      bool small = true;
      for (size_t k = 0; k < info.num_outputs; ++k) {
        kf_value_info v{};
        v.struct_size = sizeof v;
        if (kf_fusion_value(run.f, info.outputs[k], &v) != KF_OK) std::abort();
        int64_t shape[64];
        if (v.rank < 0 || v.rank > 64) std::abort();
        kf_status ss = kf_segment_output_shape(seg, 0, ins.data(), ins.size(), k, shape, static_cast<size_t>(v.rank));
        check_status(ss, "kf_segment_output_shape");
        bool overflow = false;
        if (ss == KF_OK && numel(shape, v.rank, &overflow) > kMaxWork) small = false;
        make_output(in, k, v, shape, ss == KF_OK, outs[k]);
        out_ptrs.push_back(&outs[k].t);
      }
      bool cuda = false;
      for (auto& o : outs) cuda = cuda || o.cuda;
      for (size_t k = 0; k < used.size(); ++k) describe("segment input", k, *used[k]);
      for (size_t k = 0; k < outs.size(); ++k) describe("segment output", k, outs[k]);
      if (small && !(cuda && used.empty())) {
        s = kf_execute_segment(seg, 0, ins.data(), ins.size(), out_ptrs.data(), out_ptrs.size(), nullptr);
        check_status(s, "kf_execute_segment");
        bool reject = false;
        for (Tensor* x : used) reject = reject || x->must_reject;
        for (auto& o : outs) reject = reject || (o.must_reject && o.count != 0);
        if (s == KF_OK && reject) accepted("kf_execute_segment");
      }
    }
  }
  kf_segmentation_release(seg);
  kf_concrete_release(c);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  make_patterns();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in{data, size};
  fill_buffer(in);
  Run run;
  int fusion_index = -1;
  bool owned = false;
  if (in.one_in(8)) {
    run.f = builder_fusion(in);
    if (verbose() && run.f) {
      char* text = nullptr;
      if (kf_fusion_to_text(run.f, &text) == KF_OK) fprintf(stderr, "builder fusion:\n%s", text);
      kf_string_free(text);
    }
    if (run.f == nullptr) return 0;
    owned = true;
  } else {
    fusion_index = in.byte() % kNumFusions;
    run.f = text_fusion(static_cast<size_t>(fusion_index));
    if (verbose()) fprintf(stderr, "fusion %d\n", fusion_index);
  }
  size_t n_inputs = 0, n_outputs = 0;
  if (kf_fusion_num_inputs(run.f, &n_inputs) != KF_OK || kf_fusion_num_outputs(run.f, &n_outputs) != KF_OK)
    std::abort();
  for (size_t i = 0; i < n_inputs; ++i) {
    kf_value_info v{};
    v.struct_size = sizeof v;
    if (kf_fusion_input(run.f, i, &v) != KF_OK) std::abort();
    run.in_info.push_back(v);
  }
  for (size_t o = 0; o < n_outputs; ++o) {
    kf_value_info v{};
    v.struct_size = sizeof v;
    int64_t a = -1;
    if (kf_fusion_output(run.f, o, &v) != KF_OK || kf_output_alias(run.f, o, &a) != KF_OK) std::abort();
    run.out_info.push_back(v);
    run.alias.push_back(a);
  }

  // Inputs: one tensor per declared input, sometimes one too few or many.
  ShapePool pool;
  for (auto& d : pool.dims) d = in.size();
  run.num_inputs = n_inputs;
  if (in.one_in(32)) run.num_inputs = n_inputs + (in.one_in(2) ? 1 : 0) - (n_inputs > 0 && in.one_in(2) ? 1 : 0);
  run.ts.resize(std::max(run.num_inputs, n_inputs));
  for (size_t i = 0; i < run.ts.size(); ++i) {
    const kf_value_info& v = i < n_inputs ? run.in_info[i] : run.in_info.empty() ? kf_value_info{} : run.in_info[0];
    make_tensor(in, pool, v.rank, v.dtype, v.is_scalar != 0, run.ts[i]);
    if (v.is_scalar && in.one_in(2)) {  // a scalar of this fusion's shape lists: keep it small
      int64_t small = in.byte() % 7 - (in.one_in(16) ? 7 : 0);
      if (run.ts[i].t.data && run.ts[i].count == 1 && !run.ts[i].must_reject) {
        uint8_t* p = static_cast<uint8_t*>(run.ts[i].t.data) + run.ts[i].t.byte_offset;
        int esize = dtype_bytes(v.dtype);
        if (v.dtype == KF_INT64 || v.dtype == KF_INT32) std::memcpy(p, &small, esize);  // little endian
      }
    }
  }
  {
    std::vector<Tensor*> all;
    for (size_t i = 0; i < n_inputs && i < run.ts.size(); ++i) all.push_back(&run.ts[i]);
    keep_off_gpus(all);
    for (size_t i = 0; i < run.ts.size(); ++i) describe("input", i, run.ts[i]);
  }
  run.must_fail = run.num_inputs != n_inputs;
  for (size_t i = 0; i < run.num_inputs; ++i) {
    run.ptrs.push_back(&run.ts[i].t);
    if (i < n_inputs && run.ts[i].must_reject) run.must_fail = true;
  }
  if (run.num_inputs > 0 && in.one_in(64)) {
    run.ptrs[in.byte() % run.num_inputs] = nullptr;
    run.must_fail = true;
  }
  if (run.num_inputs > 0 && in.one_in(128)) {
    run.ptrs.clear();  // the array itself is NULL
    run.must_fail = true;
  }
  const DLTensor* const* inputs = run.ptrs.empty() ? nullptr : run.ptrs.data();
  if (run.ptrs.empty()) run.ptrs.resize(1);  // .data() below stays valid

  // Shapes of every value, and of the outputs.
  run.out_shapes.assign(n_outputs, std::vector<int64_t>(65, 0));
  run.out_known.assign(n_outputs, false);
  for (size_t o = 0; o < n_outputs; ++o) {
    size_t rank = static_cast<size_t>(run.out_info[o].rank);
    if (rank > 64) std::abort();
    if (in.one_in(64)) rank += 1;  // a wrong rank
    kf_status s = kf_output_shape(run.f, inputs, run.num_inputs, o, run.out_shapes[o].data(), rank);
    check_status(s, "kf_output_shape");
    if (s == KF_OK && run.must_fail) accepted("kf_output_shape");
    run.out_known[o] = s == KF_OK;
  }
  measure(run, inputs);
  if (run.bound && run.must_fail) accepted("kf_value_shape");
  const bool can_run = may_execute(run);

  // The reference of a checked fusion, from the inputs before any call.
  Expected e;
  bool checkable = fusion_index >= 0 && fusion_index <= 2 && run.bound && !run.must_fail && run.out_known[0] &&
                   run.max_count <= kMaxWork;
  if (checkable && fusion_index == 2 && !disjoint(run.ts[0], run.ts[1])) checkable = false;

  // kf_execute: outputs allocated by kfuse, kept to compare with
  // kf_execute_into's when no output updates an input.
  bool in_place = false;
  for (int64_t a : run.alias) in_place = in_place || a >= 0;
  std::vector<DLManagedTensor*> made;
  if (can_run && in.byte() % 4 != 3) {
    if (checkable) expect(fusion_index, run.ts, run.out_shapes[0].data(), e);
    std::vector<DLManagedTensor*> outs(n_outputs + 1, nullptr);
    size_t n = in.one_in(64) ? n_outputs + 1 : n_outputs;
    kf_status s = kf_execute(run.f, inputs, run.num_inputs, outs.data(), n, nullptr);
    check_status(s, "kf_execute");
    if (s == KF_OK) {
      if (run.must_fail || !run.bound || n != n_outputs) accepted("kf_execute");
      if (checkable) check_result(e, outs[0]->dl_tensor, "kf_execute");
      for (size_t o = 0; o < n_outputs; ++o) {
        if (outs[o] == nullptr || outs[o]->deleter == nullptr) std::abort();
        made.push_back(outs[o]);
      }
    } else {
      for (auto* m : outs)
        if (m != nullptr) std::abort();  // a failed call hands out nothing
    }
  }

  // kf_execute_into: outputs in the buffer.
  if (can_run && run.bound && run.max_count <= kMaxWork && in.byte() % 2 == 0) {
    std::vector<Tensor> outs(n_outputs);
    std::vector<DLTensor*> out_ptrs(n_outputs);
    bool reject = false;
    for (size_t o = 0; o < n_outputs; ++o) {
      make_output(in, o, run.out_info[o], run.out_shapes[o].data(), run.out_known[o], outs[o]);
      out_ptrs[o] = &outs[o].t;
      if (run.alias[o] >= 0 && static_cast<size_t>(run.alias[o]) < run.ts.size() && in.one_in(2)) {
        // The aliased input's own tensor (or a copy of it).
        if (in.one_in(2)) out_ptrs[o] = &run.ts[static_cast<size_t>(run.alias[o])].t;
        else outs[o] = run.ts[static_cast<size_t>(run.alias[o])];
      }
      if (out_ptrs[o] == &outs[o].t) {
        outs[o].t.shape = outs[o].shape;
        if (outs[o].t.strides) outs[o].t.strides = outs[o].strides;
      }
      const Tensor& x = out_ptrs[o] == &outs[o].t ? outs[o] : run.ts[static_cast<size_t>(run.alias[o])];
      if (x.must_reject && x.count != 0) reject = true;
      if (x.cuda) reject = true;
    }
    // An output may also overlap another output or an input (kfuse must
    // refuse unless it is the aliased input's own view).
    if (checkable) {
      expect(fusion_index, run.ts, run.out_shapes[0].data(), e);
      const Tensor& o0 = out_ptrs[0] == &outs[0].t ? outs[0] : run.ts[0];
      if (o0.t.data == nullptr) checkable = false;
    }
    for (size_t o = 0; o < n_outputs; ++o) describe("output", o, out_ptrs[o] == &outs[o].t ? outs[o] : run.ts[static_cast<size_t>(run.alias[o])]);
    kf_status s = kf_execute_into(run.f, inputs, run.num_inputs, out_ptrs.data(), n_outputs, nullptr);
    check_status(s, "kf_execute_into");
    if (s == KF_OK) {
      if (run.must_fail || reject) accepted("kf_execute_into");
      if (checkable) check_result(e, *out_ptrs[0], "kf_execute_into");
      if (!in_place && made.size() == n_outputs)
        for (size_t o = 0; o < n_outputs; ++o)
          check_same(made[o]->dl_tensor, *out_ptrs[o], dtype_bytes(run.out_info[o].dtype), o);
    }
  }
  for (DLManagedTensor* m : made) m->deleter(m);

  // Concretize, segment, and run segment 0 on its own.
  if (in.one_in(3)) run_segment(in, run, inputs);

  if (owned) kf_fusion_release(run.f);
  return 0;
}
