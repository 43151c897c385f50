#include "core/codegen/prelude.h"

#include <string>

#include "core/ir/fp8.h"
#include "core/ir/portable_math.h"

namespace kf {

namespace {

// Register forms: double (float64), float (float32, and float16/bfloat16
// values rounded to their dtype after every op), long long, int, bool.
// Storage forms: float16/bfloat16 as unsigned short bits, bool as one byte.
constexpr std::string_view kPrelude = R"KFCUDA(// kfuse device prelude
#define KF_DEV __device__ __forceinline__
// A kernel of up to `block` threads under a register budget (__maxnreg__,
// CUDA 12.4 and later; before, the 1024-thread block's 64).
#if __CUDACC_VER_MAJOR__ * 100 + __CUDACC_VER_MINOR__ >= 1204
#define KF_MAXNREG(block, n) __maxnreg__(n)
#else
#define KF_MAXNREG(block, n) __launch_bounds__(block, 1)
#endif

// ---- half / bfloat16 (round to nearest even) ----
KF_DEV float kf_h2f(unsigned short h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
KF_DEV unsigned short kf_f2h(float f) { unsigned short h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
KF_DEV unsigned short kf_d2h(double d) { unsigned short h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
KF_DEV float kf_bf2f(unsigned short b) { return __int_as_float(((int)b) << 16); }
KF_DEV unsigned short kf_f2bf(float f) { unsigned short b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b; }
// double -> bfloat16 with one rounding: round to odd into float (24 bits
// >= 8 + 2 guard bits), then nearest even into bfloat16.
KF_DEV unsigned short kf_d2bf(double d) {
  if (d != d) return (unsigned short)0x7fc0;
  float f = __double2float_rz(d);
  if ((double)f != d) f = __int_as_float(__float_as_int(f) | 1);
  return kf_f2bf(f);
}
KF_DEV float kf_rh(float x) { return kf_h2f(kf_f2h(x)); }       // float -> float16 -> float
KF_DEV float kf_rbf(float x) { return kf_bf2f(kf_f2bf(x)); }    // float -> bfloat16 -> float
KF_DEV float kf_rh_d(double x) { return kf_h2f(kf_d2h(x)); }
KF_DEV float kf_rbf_d(double x) { return kf_bf2f(kf_d2bf(x)); }

// ---- float -> integer as the CPU reference: truncation, NaN -> 0,
// out of range -> INT64_MIN (x86's result), then wrap to the width ----
KF_DEV long long kf_f2i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18 || v <= -9.2233720368547758e18) return (-9223372036854775807LL - 1);
  return (long long)v;
}

// ---- wrapping integer arithmetic ----
KF_DEV long long kf_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
KF_DEV long long kf_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
KF_DEV long long kf_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
KF_DEV long long kf_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
KF_DEV int kf_add(int a, int b) { return (int)((unsigned)a + (unsigned)b); }
KF_DEV int kf_sub(int a, int b) { return (int)((unsigned)a - (unsigned)b); }
KF_DEV int kf_mul(int a, int b) { return (int)((unsigned)a * (unsigned)b); }
KF_DEV int kf_neg(int a) { return (int)(0u - (unsigned)a); }
// Integer fmod/remainder by zero give 0 on the GPU (the CPU reference
// reports an error); x % -1 is 0 (INT_MIN % -1 would trap).
template <class T> KF_DEV T kf_fmod_i(T a, T b) { return (b == 0 || b == -1) ? (T)0 : (T)(a % b); }
template <class T> KF_DEV T kf_rem_i(T a, T b) {
  T r = kf_fmod_i(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r = kf_add(r, b);
  return r;
}
// Negative exponents give what torch's CUDA kernel gives: 1 for base 1,
// +-1 for base -1, 0 otherwise (the CPU reference reports an error).
template <class T> KF_DEV T kf_pow_i(T base, T e) {
  if (e < 0) return base == 1 ? (T)1 : base == -1 ? ((e & 1) ? (T)-1 : (T)1) : (T)0;
  T r = 1;
  while (e != 0) {
    if (e & 1) r = kf_mul(r, base);
    base = kf_mul(base, base);
    e >>= 1;
  }
  return r;
}
// Shifts by a negative amount or >= the width give 0 (left) or the sign fill (right).
template <class T> KF_DEV T kf_shl(T a, T b) {
  return (b < 0 || b >= (T)(8 * sizeof(T))) ? (T)0 : (T)((unsigned long long)a << b);
}
template <class T> KF_DEV T kf_shr(T a, T b) {
  return (b < 0 || b >= (T)(8 * sizeof(T))) ? (T)(a >> (8 * sizeof(T) - 1)) : (T)(a >> b);
}

// ---- float helpers with torch's semantics ----
KF_DEV float kf_maximum(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : (a < b ? b : a); }
KF_DEV float kf_minimum(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : (b < a ? b : a); }
KF_DEV double kf_maximum(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : (a < b ? b : a); }
KF_DEV double kf_minimum(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : (b < a ? b : a); }
KF_DEV float kf_remainder(float a, float b) { float m = fmodf(a, b); if (m != 0 && ((b < 0) != (m < 0))) m += b; return m; }
KF_DEV double kf_remainder(double a, double b) { double m = fmod(a, b); if (m != 0 && ((b < 0) != (m < 0))) m += b; return m; }
KF_DEV float kf_lerp(float a, float b, float w) { return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w); }
KF_DEV double kf_lerp(double a, double b, double w) { return fabs(w) < 0.5 ? a + w * (b - a) : b - (b - a) * (1.0 - w); }
template <class T> KF_DEV T kf_clamp(T x, T lo, T hi) { return kf_minimum(kf_maximum(x, lo), hi); }
template <class T> KF_DEV T kf_clamp_i(T x, T lo, T hi) { T m = x < lo ? lo : x; return hi < m ? hi : m; }
KF_DEV float kf_relu(float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); }
KF_DEV double kf_relu(double x) { return x != x ? x : (x > 0.0 ? x : 0.0); }
KF_DEV float kf_gelu_tanh(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}
KF_DEV double kf_gelu_tanh(double x) {
  const double k = 0.7978845608028654;
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}

// ---- Python slice start, as slice_range in shape_inference.cpp ----
KF_DEV long long kf_slice_start(long long extent, long long start) {
  if (start < 0) start = (start < -extent) ? 0 : start + extent;
  return start < extent ? start : extent;
}

// ---- Philox 4x32-10 and kfuse's random scheme (core/runtime/cpu/philox.h) ----
struct kf_u4 { unsigned x, y, z, w; };
KF_DEV kf_u4 kf_philox(unsigned long long seed, unsigned long long offset, unsigned long long i) {
  unsigned c0 = (unsigned)i, c1 = (unsigned)(i >> 32), c2 = (unsigned)offset, c3 = (unsigned)(offset >> 32);
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;
  }
  kf_u4 w; w.x = c0; w.y = c1; w.z = c2; w.w = c3;
  return w;
}
KF_DEV float kf_u24(unsigned w) { return __fmul_rn((float)(w >> 8), 5.9604644775390625e-08f); }
KF_DEV float kf_u24o(unsigned w) { return __fmul_rn((float)((w >> 8) + 1u), 5.9604644775390625e-08f); }
KF_DEV unsigned long long kf_bits53(unsigned a, unsigned b) { return (((unsigned long long)a << 32) | b) >> 11; }
KF_DEV double kf_u53(unsigned a, unsigned b) { return __dmul_rn((double)kf_bits53(a, b), 1.1102230246251565e-16); }
KF_DEV double kf_u53o(unsigned a, unsigned b) { return __dmul_rn((double)(kf_bits53(a, b) + 1ull), 1.1102230246251565e-16); }
KF_DEV float kf_uniform_f32(kf_u4 w, float lo, float hi) {
  const float u = kf_u24(w.x);
  const float d = __fsub_rn(hi, lo);
  const float p = __fmul_rn(d, u);
  return __fadd_rn(lo, p);
}
KF_DEV double kf_uniform_f64(kf_u4 w, double lo, double hi) {
  const double u = kf_u53(w.x, w.y);
  const double d = __dsub_rn(hi, lo);
  const double p = __dmul_rn(d, u);
  return __dadd_rn(lo, p);
}
KF_DEV float kf_normal_f32(kf_u4 w, float mean, float std) {
  const float u1 = kf_u24o(w.x);
  const float u2 = kf_u24(w.y);
  const float l = kf_pm_logf(u1);
  const float s = __fsqrt_rn(__fmul_rn(-2.0f, l));
  const float c = kf_pm_cos_turns_f(u2);
  const float z = __fmul_rn(s, c);
  const float p = __fmul_rn(std, z);
  return __fadd_rn(mean, p);
}
KF_DEV double kf_normal_f64(kf_u4 w, double mean, double std) {
  const double u1 = kf_u53o(w.x, w.y);
  const double u2 = kf_u53(w.z, w.w);
  const double l = kf_pm_log(u1);
  const double s = __dsqrt_rn(__dmul_rn(-2.0, l));
  const double c = kf_pm_cos_turns(u2);
  const double z = __dmul_rn(s, c);
  const double p = __dmul_rn(std, z);
  return __dadd_rn(mean, p);
}

// ---- vector access: N elements of T in one aligned load/store ----
template <class T, int N> struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) kf_vec {
  using elem = T;
  T v[N];
};
// Lane j of a kf_vec of 16-bit elements, read from its 32-bit word: the
// vector then stays in registers as words (4 for 8 lanes) where each lane
// read on its own takes a register of its own (docs/perf-log.md, session 15).
template <class V> KF_DEV unsigned kf_lane_word(const V& v, int j) {
  if constexpr (sizeof(v.v) == 2) {
    return v.v[0];
  } else {
    const unsigned u = reinterpret_cast<const unsigned*>(&v)[j >> 1];
    return (j & 1) ? u >> 16 : u & 0xffffu;
  }
}
template <class V> KF_DEV float kf_bf2f_at(const V& v, int j) {
  if constexpr (sizeof(v.v) == 2) {
    return kf_bf2f(v.v[0]);
  } else {
    const unsigned u = reinterpret_cast<const unsigned*>(&v)[j >> 1];
    return __int_as_float((j & 1) ? (u & 0xffff0000u) : (u << 16));
  }
}
template <class V> KF_DEV float kf_h2f_at(const V& v, int j) { return kf_h2f((unsigned short)kf_lane_word(v, j)); }

// ---- vectors at any element alignment (column kernels at odd widths) ----
// Only 16-byte aligned chunks are read or written whole: an aligned chunk
// holding a byte of the tensor never leaves that byte's page, so a chunk
// is read only where it holds an element that exists.
struct alignas(16) kf_chunk { unsigned w[4]; };
// 16 bytes from byte s (0-15) of the 32 bytes lo:hi: two word selections
// and a funnel shift (s is a run-time value: no local-memory indexing).
KF_DEV kf_chunk kf_bytes_at(const kf_chunk& lo, const kf_chunk& hi, unsigned s) {
  const bool w2 = s & 8, w1 = s & 4;
  const unsigned u0 = w2 ? lo.w[2] : lo.w[0], u1 = w2 ? lo.w[3] : lo.w[1], u2 = w2 ? hi.w[0] : lo.w[2],
                 u3 = w2 ? hi.w[1] : lo.w[3], u4 = w2 ? hi.w[2] : hi.w[0], u5 = w2 ? hi.w[3] : hi.w[1];
  const unsigned t0 = w1 ? u1 : u0, t1 = w1 ? u2 : u1, t2 = w1 ? u3 : u2, t3 = w1 ? u4 : u3, t4 = w1 ? u5 : u4;
  const unsigned b = (s & 3) * 8;
  return {{__funnelshift_r(t0, t1, b), __funnelshift_r(t1, t2, b), __funnelshift_r(t2, t3, b), __funnelshift_r(t3, t4, b)}};
}
// The vector at p (element-aligned), of which the first `left` elements
// exist (left >= 1; lanes past them hold whatever the chunks held, or 0).
// [begin, end): the bytes from the tensor's first element to its last; a
// chunk reaching outside them (the tensor's first or last) is read element
// by element instead, so that no byte outside the tensor is read.
template <class V> KF_DEV V kf_vload_any(const void* p, int left, const void* begin, const void* end) {
  constexpr int B = sizeof(V), E = sizeof(typename V::elem), N = B / E, n = (B + 15) / 16;
  const int valid = left < N ? left : N;
  const unsigned long long a = (unsigned long long)p;
  const unsigned s = (unsigned)(a & 15);
  const kf_chunk* c = (const kf_chunk*)(a - s);
  const int bytes = (int)s + valid * E;  // up to the last element that exists
  if (a - s < (unsigned long long)begin || a - s + ((bytes + 15) & ~15) > (unsigned long long)end) {
    V r = {};
    const auto* e = (const typename V::elem*)p;
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < valid) r.v[i] = e[i];
    return r;
  }
  kf_chunk w[n + 1];
#pragma unroll
  for (int j = 0; j <= n; ++j) w[j] = 16 * j < bytes ? c[j] : kf_chunk{{0, 0, 0, 0}};
  union { kf_chunk u[n]; V v; } r;
#pragma unroll
  for (int j = 0; j < n; ++j) r.u[j] = kf_bytes_at(w[j], w[j + 1], s);
  return r.v;
}
// Stores the first `left` elements of v at p (element-aligned; left >= 1,
// the elements from p to its row's end, capped at 2N). The lanes of `mask`
// (a prefix of the warp, each lane N elements after the one below, all at
// the same misalignment) store together: each aligned chunk whole where it
// is all elements that exist, taking the lane below's last bytes by a
// shuffle; single elements at a row's two edges.
template <class V> KF_DEV void kf_vstore_any(void* p, const V& v, int left, unsigned mask) {
  constexpr int B = sizeof(V), E = sizeof(typename V::elem), N = B / E, n = B / 16;
  auto* e = (typename V::elem*)p;
  const int valid = left < N ? left : N;
  const unsigned long long a = (unsigned long long)p;
  const unsigned s = (unsigned)(a & 15);  // the same in every lane of the mask
  if constexpr (B % 16 != 0) {
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (i < valid) e[i] = v.v[i];
  } else if (s == 0) {
    if (valid == N) {
      *(V*)p = v;
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < valid) e[i] = v.v[i];
    }
  } else {
    union { V v; kf_chunk u[n]; } d;
    d.v = v;
    kf_chunk below;
#pragma unroll
    for (int k = 0; k < 4; ++k) below.w[k] = __shfl_up_sync(mask, d.u[n - 1].w[k], 1);
    const int lane = threadIdx.x & 31, head = (int)(16 - s) / E, next = left - N < N ? left - N : N;
    kf_chunk* c = (kf_chunk*)(a - s);
    // Chunk 0: the lane below's last s bytes, then this lane's first head
    // elements; chunks 1..n-1: this lane's own; its last s / E elements are
    // the lane above's chunk 0.
    if (lane > 0 && valid >= head) {
      c[0] = kf_bytes_at(below, d.u[0], 16 - s);
    } else {
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i < head && i < valid) e[i] = v.v[i];
    }
#pragma unroll
    for (int j = 1; j < n; ++j) {
      if (valid * E >= 16 * j + 16 - (int)s) {
        c[j] = kf_bytes_at(d.u[j - 1], d.u[j], 16 - s);
      } else {
#pragma unroll
        for (int i = 0; i < N; ++i)
          if (i * E >= 16 * j - (int)s && i * E < 16 * j + 16 - (int)s && i < valid) e[i] = v.v[i];
      }
    }
    if (!(lane < 31 && next >= head)) {
#pragma unroll
      for (int i = 0; i < N; ++i)
        if (i >= N - (int)s / E && i < valid) e[i] = v.v[i];
    }
  }
}

// ---- reductions ----
// x / d for a divisor shared by many divisions (a row's sum), given
// rd = kf_rcp_for_div(d): Markstein's sequence. The residual of
// q = x * rd is exact with an FMA, and one correction step gives the
// correctly rounded quotient wherever nothing over- or underflows
// (checked: 4e8 random pairs, docs/perf-log.md); elsewhere (rd = 0 for an
// extreme divisor, zero/inf/NaN/tiny/huge quotients) the plain division.
KF_DEV float kf_rcp_for_div(float d) {
  const float a = fabsf(d);
  return a > 0x1p-100f && a < 0x1p100f ? 1.0f / d : 0.0f;
}
__device__ __noinline__ float kf_div_slow(float x, float d) { return x / d; }  // one copy of the cold path
KF_DEV float kf_div_by(float x, float d, float rd) {
  const float q = x * rd, a = fabsf(q);
  if (a > 0x1p-100f && a < 0x1p100f) return fmaf(fmaf(-q, d, x), rd, q);
  return kf_div_slow(x, d);
}

// Fast forms (core/ir/approx_math.h: only where the stored result
// stays within 1 ulp of exact math): exp as ex2.approx of x * log2(e) and
// the reciprocal as rcp.approx, both keeping subnormals (no .ftz); a
// division by a shared divisor as one multiplication by its reciprocal.
KF_DEV float kf_exp_approx(float x) { float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.44269504088896341f)); return y; }
KF_DEV float kf_rcp_approx(float x) { float y; asm("rcp.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
KF_DEV float kf_div_approx(float x, float d, float rd) { return rd != 0.0f ? x * rd : kf_div_slow(x, d); }
// sigmoid from exp(-|x|) (never overflows: for x << 0 the result is
// exp(x) itself, down to the subnormals), silu as x * sigmoid(x).
KF_DEV float kf_sigmoid_approx(float x) {
  const float t = kf_exp_approx(-fabsf(x)), s = kf_rcp_approx(1.0f + t);
  return x >= 0.0f ? s : t * s;
}
KF_DEV float kf_silu_approx(float x) { return x * kf_sigmoid_approx(x); }

// NaN-propagating max/min in one instruction (sm_80+; the result of a NaN
// operand is the canonical NaN, which tests compare as NaN).
KF_DEV float kf_max_acc(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
KF_DEV double kf_max_acc(double a, double b) { return a != a ? a : (b != b ? b : (b > a ? b : a)); }
KF_DEV long long kf_max_acc(long long a, long long b) { return b > a ? b : a; }
KF_DEV float kf_min_acc(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
KF_DEV double kf_min_acc(double a, double b) { return a != a ? a : (b != b ? b : (b < a ? b : a)); }
KF_DEV long long kf_min_acc(long long a, long long b) { return b < a ? b : a; }

template <class T> struct kf_welford { T n, mean, m2; };
template <class T> KF_DEV void kf_welford_add(kf_welford<T>& a, T x) {
  a.n += (T)1;
  const T d = x - a.mean;
  a.mean += d / a.n;
  a.m2 += d * (x - a.mean);
}
// Chan's merge of nb values with mean mb and squared deviations m2b (a
// vector step's lanes): one division per step instead of one per element.
template <class T> KF_DEV void kf_welford_add_block(kf_welford<T>& a, T nb, T mb, T m2b) {
  const T n = a.n + nb;
  const T d = mb - a.mean;
  const T f = nb / n;
  a.mean += d * f;
  a.m2 += m2b + d * d * (a.n * f);
  a.n = n;
}
template <class T> KF_DEV kf_welford<T> kf_welford_merge(kf_welford<T> a, kf_welford<T> b) {
  if (b.n == (T)0) return a;
  if (a.n == (T)0) return b;
  kf_welford<T> r;
  r.n = a.n + b.n;
  const T d = b.mean - a.mean;
  r.mean = a.mean + d * (b.n / r.n);
  r.m2 = a.m2 + b.m2 + d * d * (a.n * (b.n / r.n));
  return r;
}

// Index division by an extent fixed for the launch (unravelling a linear
// index) with a multiply-high and a shift: the word comes from the host
// (fastdiv_word in kernel_plan.h), as a division by a run-time value costs
// some 20 instructions each time.
struct kf_fastdiv { unsigned m, s; };
KF_DEV kf_fastdiv kf_fastdiv_of(long long w) { return {(unsigned)w, (unsigned)(w >> 32)}; }
KF_DEV int kf_fastdiv_div(kf_fastdiv f, int n) { return (int)((__umulhi((unsigned)n, f.m) + (unsigned)n) >> f.s); }

// Bytes of dynamic shared memory this launch has (the staged row path
// checks that its row fits).
KF_DEV unsigned kf_dynamic_smem() { unsigned r; asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r)); return r; }
template <class T> KF_DEV T kf_shfl_xor(T v, int lane_mask) { return __shfl_xor_sync(0xffffffffu, v, lane_mask); }
template <class T> KF_DEV kf_welford<T> kf_shfl_xor(kf_welford<T> v, int lane_mask) {
  kf_welford<T> r;
  r.n = __shfl_xor_sync(0xffffffffu, v.n, lane_mask);
  r.mean = __shfl_xor_sync(0xffffffffu, v.mean, lane_mask);
  r.m2 = __shfl_xor_sync(0xffffffffu, v.m2, lane_mask);
  return r;
}

// Online softmax (core/schedule/online_softmax.h): a running max m and
// s = sum of exp(x - m). A side without elements is (-inf, 0); exp of
// -inf - -inf (NaN) is never taken, so rows holding -inf keep the two-pass
// result, and kf_online_sum gives NaN for a row of -inf only, as
// sum(exp(x - max(x))) does.
struct kf_online { float m, s; };
KF_DEV kf_online kf_shfl_xor(kf_online v, int lane_mask) {
  return {__shfl_xor_sync(0xffffffffu, v.m, lane_mask), __shfl_xor_sync(0xffffffffu, v.s, lane_mask)};
}
struct kf_online_op {
  KF_DEV kf_online operator()(kf_online a, kf_online b) const {
    const float m = kf_max_acc(a.m, b.m);
    return {m, (a.m == m ? a.s : a.s * expf(a.m - m)) + (b.m == m ? b.s : b.s * expf(b.m - m))};
  }
};
// The running sum s of exp(x - m) as a sum of exp(x - mn), mn >= m the new
// running max (0 while m is -inf: what was summed then was exp(-inf - -inf)).
KF_DEV float kf_online_rescale(float s, float m, float mn) {
  return m == mn ? s : (m == -__int_as_float(0x7f800000) ? 0.f : s * expf(m - mn));
}
KF_DEV float kf_online_sum(kf_online r) { return r.m == -__int_as_float(0x7f800000) ? __int_as_float(0x7fffffff) : r.s; }

struct kf_sum_op { template <class T> KF_DEV T operator()(T a, T b) const { return a + b; } };
struct kf_isum_op { KF_DEV long long operator()(long long a, long long b) const { return kf_add(a, b); } };
struct kf_prod_op { template <class T> KF_DEV T operator()(T a, T b) const { return a * b; } };
struct kf_iprod_op { KF_DEV long long operator()(long long a, long long b) const { return kf_mul(a, b); } };
struct kf_max_op { template <class T> KF_DEV T operator()(T a, T b) const { return kf_max_acc(a, b); } };
struct kf_min_op { template <class T> KF_DEV T operator()(T a, T b) const { return kf_min_acc(a, b); } };
struct kf_welford_op {
  template <class T> KF_DEV kf_welford<T> operator()(kf_welford<T> a, kf_welford<T> b) const { return kf_welford_merge(a, b); }
};
// Several values of one type reduced by one op at once (reduce_block): one
// set of block barriers for all of them, each value combined in the order
// a reduction of its own takes (the same bits).
template <class T, int N> struct kf_many { T v[N]; };
template <class T, int N> KF_DEV kf_many<T, N> kf_shfl_xor(kf_many<T, N> a, int lane_mask) {
#pragma unroll
  for (int k = 0; k < N; ++k) a.v[k] = __shfl_xor_sync(0xffffffffu, a.v[k], lane_mask);
  return a;
}
template <class Op> struct kf_each {
  template <class T, int N> KF_DEV kf_many<T, N> operator()(kf_many<T, N> a, const kf_many<T, N>& b) const {
#pragma unroll
    for (int k = 0; k < N; ++k) a.v[k] = Op()(a.v[k], b.v[k]);
    return a;
  }
};

// Reduces v over the block (blockDim.x a multiple of 32, at most 1024) and
// returns the result to every thread. Threads without elements hold the
// identity. Safe to call repeatedly: it synchronizes before reusing its
// shared scratch.
template <class T, class Op> KF_DEV T kf_block_reduce(T v, Op op) {
  __shared__ T scratch[33];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, kf_shfl_xor(v, o));
  const int warp = (int)(threadIdx.x >> 5), lane = (int)(threadIdx.x & 31);
  const int warps = (int)((blockDim.x + 31) >> 5);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = scratch[lane < warps ? lane : 0];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const T other = kf_shfl_xor(v, o);
      if ((lane ^ o) < warps) v = op(v, other);
    }
    if (lane == 0) scratch[32] = v;
  }
  __syncthreads();
  return scratch[32];
}

// Reduces v over the blockDim.x threads of one row in the short-row kernel
// (RowKernel::ShortRows: blockDim.x a power of two up to 32, so a group is
// aligned lanes of one warp, and every lane of the warp calls it alike)
// and returns the result to each thread of the group. Both lanes of a pair
// compute op(lower, upper), so every thread of a group gets the same bits
// (they all normalize their elements by it). No shared memory, no barrier.
template <class T, class Op> KF_DEV T kf_group_reduce(T v, Op op) {
  const unsigned lane = threadIdx.x;
  for (unsigned o = blockDim.x >> 1; o > 0; o >>= 1) {
    const T other = kf_shfl_xor(v, (int)o);
    v = (lane & o) ? op(other, v) : op(v, other);
  }
  return v;
}

// N bytes (4, 8 or 16: one vector of a staged input) from global to
// shared memory without registers (cp.async, sm_80; .cg, which skips L1,
// takes 16 bytes only), and the wait for this thread's copies.
template <int N>
KF_DEV void kf_copy_async(void* to, const void* from) {
  static_assert(N == 4 || N == 8 || N == 16, "cp.async copies 4, 8 or 16 bytes");
  unsigned long long s;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"((unsigned long long)to));
  if constexpr (N == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((unsigned)s), "l"(from) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"((unsigned)s), "l"(from), "n"(N) : "memory");
}
KF_DEV void kf_copy_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Thread-block clusters (sm_90; the cluster row kernel, RowKernel::Cluster):
// the block's rank in its cluster and the cluster's size (0 and 1 on older
// devices, where such a kernel is never launched with clusters).
KF_DEV unsigned kf_cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
#else
  return 0;
#endif
}
KF_DEV unsigned kf_cluster_size() {
#if __CUDA_ARCH__ >= 900
  unsigned r; asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r)); return r;
#else
  return 1;
#endif
}
#if __CUDA_ARCH__ >= 900
KF_DEV void kf_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// `p` (this block's shared memory) as block `rank` of the cluster holds it.
template <class T> KF_DEV T kf_cluster_load(const T* p, unsigned rank) {
  unsigned long long g = (unsigned long long)p, s;
  asm("cvta.to.shared.u64 %0, %1;" : "=l"(s) : "l"(g));
  unsigned a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"((unsigned)s), "r"(rank));
  static_assert(sizeof(T) % 4 == 0, "cluster values are whole words");
  T v;
  unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
  for (unsigned i = 0; i < sizeof(T) / 4; ++i) asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(w[i]) : "r"(a + 4 * i) : "memory");
  return v;
}
#endif
// Reduces v over the cluster's blocks (each reduces over itself first) and
// returns the result to every thread of every block: the blocks' values
// combined by a fixed tree over their ranks, so the result does not depend
// on timing. Every thread of the cluster calls it alike.
template <class T, class Op> KF_DEV T kf_cluster_reduce(T v, Op op) {
  v = kf_block_reduce(v, op);
#if __CUDA_ARCH__ >= 900
  const unsigned n = kf_cluster_size();
  if (n == 1) return v;
  __shared__ T slot;
  if (threadIdx.x == 0) slot = v;
  kf_cluster_sync();  // every block's value is in place
  // Each group of n lanes (n a power of two, at most 32) reads the ranks'
  // values in order and combines them by a butterfly in which both lanes
  // of a pair compute op(lower, upper): every lane ends with the same bits.
  const unsigned lane = threadIdx.x & 31u;
  v = kf_cluster_load(&slot, lane & (n - 1u));
  for (unsigned o = n >> 1; o > 0; o >>= 1) {
    const T other = kf_shfl_xor(v, (int)o);
    v = (lane & o) ? op(other, v) : op(v, other);
  }
  kf_cluster_sync();  // every block has read: the slots may change, and no block leaves while read
#endif
  return v;
}
)KFCUDA";

// The device side of core/ir/portable_math.h: every step rounded on its own
// (NVRTC would otherwise fuse multiply-adds), so normal() matches the CPU.
constexpr std::string_view kPortableMathDefs = R"KFCUDA(
__device__ inline float kf_pm_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline float kf_pm_add(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float kf_pm_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double kf_pm_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ inline double kf_pm_add(double a, double b) { return __dadd_rn(a, b); }
__device__ inline double kf_pm_sub(double a, double b) { return __dsub_rn(a, b); }
#define KF_PM_MUL(a, b) kf_pm_mul(a, b)
#define KF_PM_ADD(a, b) kf_pm_add(a, b)
#define KF_PM_SUB(a, b) kf_pm_sub(a, b)
#define KF_PM_F2U(f) __float_as_uint(f)
#define KF_PM_U2F(u) __uint_as_float(u)
#define KF_PM_D2U(d) ((unsigned long long)__double_as_longlong(d))
#define KF_PM_U2D(u) __longlong_as_double((long long)(u))
)KFCUDA";
constexpr std::string_view kPortableMath = KF_PM_EXPAND_STRINGIFY(KF_PORTABLE_MATH(__device__ inline));
// float8 storage (core/ir/fp8.h, the same text the host tests run), and a
// float rounded to each format; from double: round to odd into float, then
// once to the format (as kf_d2bf).
constexpr std::string_view kFp8 = KF_PM_EXPAND_STRINGIFY(KF_FP8_CONVERSIONS(__device__ inline));
constexpr std::string_view kFp8Rounding = R"KFCUDA(
// The same conversions by the hardware where it has them (sm_89+): its
// cvt.rn.satfinite rounds to nearest even like kf_f_to_e4m3 for values in
// range; NaN and out-of-range values take the portable path, which gives
// PyTorch's NaN (e4m3fn) or inf (e5m2) where satfinite would clamp. The
// portable conversion cost a quantize epilogue 87% of the SM's issue
// slots (docs/perf-log.md, session 9). float8 -> float is exact either way.
KF_DEV unsigned char kf_f_to_e4m3_hw(float x) {
#if __CUDA_ARCH__ >= 890
  if (fabsf(x) < 464.0f) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    return (unsigned char)(r & 0xff);
  }
#endif
  return kf_f_to_e4m3(x);
}
KF_DEV unsigned char kf_f_to_e5m2_hw(float x) {
#if __CUDA_ARCH__ >= 890
  if (fabsf(x) < 61440.0f) {
    unsigned short r;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
    return (unsigned char)(r & 0xff);
  }
#endif
  return kf_f_to_e5m2(x);
}
// Saturating: cast(clamp(x, -max, max)) with kf_clamp's NaN (+NaN, 0x7f in
// both formats), in one satfinite conversion and a NaN test instead of two
// clamps and a range test (the quantize epilogue was ALU-bound:
// docs/perf-log.md, session 12).
KF_DEV unsigned char kf_f_to_e4m3_sat(float x) {
#if __CUDA_ARCH__ >= 890
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return x != x ? (unsigned char)0x7f : (unsigned char)(r & 0xff);
#else
  return kf_f_to_e4m3(kf_clamp(x, -448.0f, 448.0f));
#endif
}
KF_DEV unsigned char kf_f_to_e5m2_sat(float x) {
#if __CUDA_ARCH__ >= 890
  unsigned short r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(x));
  return x != x ? (unsigned char)0x7f : (unsigned char)(r & 0xff);
#else
  return kf_f_to_e5m2(kf_clamp(x, -57344.0f, 57344.0f));
#endif
}
KF_DEV float kf_e4m3_to_f_hw(unsigned char b) {
#if __CUDA_ARCH__ >= 890
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"((unsigned short)b));
  return kf_h2f((unsigned short)(r & 0xffff));
#else
  return kf_e4m3_to_f(b);
#endif
}
// e5m2 is the high byte of a float16.
KF_DEV float kf_e5m2_to_f_hw(unsigned char b) { return kf_h2f((unsigned short)(b << 8)); }
KF_DEV float kf_r8e4(float x) { return kf_e4m3_to_f_hw(kf_f_to_e4m3_hw(x)); }
KF_DEV float kf_r8e5(float x) { return kf_e5m2_to_f_hw(kf_f_to_e5m2_hw(x)); }
KF_DEV float kf_r8e4s(float x) { return kf_e4m3_to_f_hw(kf_f_to_e4m3_sat(x)); }
KF_DEV float kf_r8e5s(float x) { return kf_e5m2_to_f_hw(kf_f_to_e5m2_sat(x)); }
KF_DEV float kf_d2f_odd(double d) {
  if (d != d) return (float)d;
  float f = __double2float_rz(d);
  if ((double)f != d) f = __int_as_float(__float_as_int(f) | 1);
  return f;
}
KF_DEV float kf_r8e4_d(double x) { return kf_r8e4(kf_d2f_odd(x)); }
KF_DEV float kf_r8e5_d(double x) { return kf_r8e5(kf_d2f_odd(x)); }
)KFCUDA";

}  // namespace

std::string_view cuda_prelude() {
  static const std::string text = [] {
    const std::string prelude(kPrelude);
    const size_t at = prelude.find("KF_DEV float kf_normal_f32");
    return prelude.substr(0, at) + std::string(kPortableMathDefs) + std::string(kPortableMath) + "\n" +
           std::string(kFp8) + "\n" + std::string(kFp8Rounding) + prelude.substr(at);
  }();
  return text;
}

}  // namespace kf
