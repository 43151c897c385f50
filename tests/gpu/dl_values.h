/* DLPack dtypes and element access shared by the GPU tests: kfuse dtype <->
 * DLPack type, round-to-nearest float16/bfloat16 conversions, loads and
 * stores of any kfuse dtype through double/int64, and the element span of a
 * strided tensor. Include after <cmocka.h> and kfuse.h. */
#ifndef KFUSE_TESTS_GPU_DL_VALUES_H
#define KFUSE_TESTS_GPU_DL_VALUES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kfuse/kfuse.h"

static inline int dtype_bytes(kf_dtype t) {
  switch (t) {
    case KF_FLOAT64: case KF_INT64: return 8;
    case KF_FLOAT32: case KF_INT32: return 4;
    case KF_FLOAT16: case KF_BFLOAT16: return 2;
    default: return 1;
  }
}

static inline DLDataType dl_of(kf_dtype t) {
  DLDataType d = {kDLFloat, 32, 1};
  switch (t) {
    case KF_FLOAT64: d.bits = 64; break;
    case KF_FLOAT32: break;
    case KF_FLOAT16: d.bits = 16; break;
    case KF_BFLOAT16: d.code = kDLBfloat; d.bits = 16; break;
    case KF_INT64: d.code = kDLInt; d.bits = 64; break;
    case KF_INT32: d.code = kDLInt; d.bits = 32; break;
    case KF_INT8: d.code = kDLInt; d.bits = 8; break;
    case KF_UINT8: d.code = kDLUInt; d.bits = 8; break;
    case KF_FLOAT8_E4M3FN: d.code = KF_DLPACK_FLOAT8_E4M3FN_CODE; d.bits = 8; break;
    case KF_FLOAT8_E5M2: d.code = KF_DLPACK_FLOAT8_E5M2_CODE; d.bits = 8; break;
    default: d.code = KF_DLPACK_BOOL_CODE; d.bits = 8; break;
  }
  return d;
}

/* kfuse dtype of a DLPack type (outputs). */
static inline kf_dtype dtype_of_dl(DLDataType d) {
  if (d.code == kDLFloat) return d.bits == 64 ? KF_FLOAT64 : d.bits == 32 ? KF_FLOAT32 : KF_FLOAT16;
  if (d.code == kDLBfloat) return KF_BFLOAT16;
  if (d.code == kDLInt) return d.bits == 64 ? KF_INT64 : d.bits == 32 ? KF_INT32 : KF_INT8;
  if (d.code == kDLUInt && d.bits == 8) return KF_UINT8;
  if (d.code == KF_DLPACK_FLOAT8_E4M3FN_CODE) return KF_FLOAT8_E4M3FN;
  if (d.code == KF_DLPACK_FLOAT8_E5M2_CODE) return KF_FLOAT8_E5M2;
  return KF_BOOL;
}

static inline double tolerance(kf_dtype t) {
  switch (t) {
    case KF_FLOAT64: return 1e-12;
    case KF_FLOAT32: return 1e-5;
    case KF_FLOAT16: return 1e-2;
    case KF_BFLOAT16: return 2e-2;
    /* one unit in the last place: the GPU rounds a float result, the CPU
     * a double one */
    case KF_FLOAT8_E4M3FN: return 0.125;
    case KF_FLOAT8_E5M2: return 0.25;
    default: return 0;
  }
}

/* float8 e4m3fn / e5m2 values by their fields, and the nearest-even code
 * of a value by search (test inputs only: exact grid values). */
static inline double fp8_value(kf_dtype t, int c) {
  const int mb = t == KF_FLOAT8_E4M3FN ? 3 : 2, eb = 7 - mb, bias = (1 << (eb - 1)) - 1;
  const int e = (c >> mb) & ((1 << eb) - 1), m = c & ((1 << mb) - 1);
  double v;
  if (t == KF_FLOAT8_E4M3FN && (c & 0x7f) == 0x7f) return NAN;
  if (t == KF_FLOAT8_E5M2 && e == 31) v = m ? NAN : INFINITY;
  else v = e == 0 ? ldexp(m, 1 - bias - mb) : ldexp(1.0 + ldexp(m, -mb), e - bias);
  return (c & 0x80) ? -v : v;
}
static inline uint8_t fp8_code(kf_dtype t, double v) {
  int best = 0;
  const double a = fabs(v);
  for (int c = 0; c < 0x7f; ++c) {
    const double x = fp8_value(t, c);
    if (isnan(x) || isinf(x)) continue;
    const double e = fabs(x - a), be = fabs(fp8_value(t, best) - a);
    if (e < be || (e == be && (c & 1) == 0)) best = c;
  }
  return (uint8_t)((signbit(v) ? 0x80 : 0) | best);
}

static inline uint16_t f32_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return (uint16_t)(sign | h);
}

static inline float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
  if (exp == 0) {
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (exp == 31) x = sign | 0x7f800000u | (mant << 13);
  else x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

static inline float bf16_to_f32(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static inline void store(kf_dtype t, void* p, double v) {
  switch (t) {
    case KF_FLOAT64: memcpy(p, &v, 8); break;
    case KF_FLOAT32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case KF_FLOAT16: { uint16_t h = f32_to_half((float)v); memcpy(p, &h, 2); break; }
    case KF_BFLOAT16: { uint16_t h = f32_to_bf16((float)v); memcpy(p, &h, 2); break; }
    case KF_INT64: { int64_t i = (int64_t)v; memcpy(p, &i, 8); break; }
    case KF_INT32: { int32_t i = (int32_t)v; memcpy(p, &i, 4); break; }
    case KF_INT8:
    case KF_UINT8: *(uint8_t*)p = (uint8_t)(int64_t)v; break;
    case KF_FLOAT8_E4M3FN:
    case KF_FLOAT8_E5M2: *(uint8_t*)p = fp8_code(t, v); break;
    default: *(uint8_t*)p = v != 0; break;
  }
}

static inline double load_f(kf_dtype t, const void* p) {
  switch (t) {
    case KF_FLOAT64: { double d; memcpy(&d, p, 8); return d; }
    case KF_FLOAT32: { float f; memcpy(&f, p, 4); return f; }
    case KF_FLOAT16: { uint16_t h; memcpy(&h, p, 2); return half_to_f32(h); }
    case KF_BFLOAT16: { uint16_t h; memcpy(&h, p, 2); return bf16_to_f32(h); }
    case KF_FLOAT8_E4M3FN:
    case KF_FLOAT8_E5M2: return fp8_value(t, *(const uint8_t*)p);
    default: return 0;
  }
}

static inline int64_t load_i(kf_dtype t, const void* p) {
  switch (t) {
    case KF_INT64: { int64_t i; memcpy(&i, p, 8); return i; }
    case KF_INT32: { int32_t i; memcpy(&i, p, 4); return i; }
    case KF_INT8: return *(const int8_t*)p;
    case KF_UINT8: return *(const uint8_t*)p;
    default: return *(const uint8_t*)p != 0;
  }
}

static inline int64_t stride_at(const DLTensor* t, int d) {
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int k = t->ndim - 1; k > d; --k) s *= t->shape[k];
  return s;
}

/* Elements from element 0 to the last one the tensor touches. */
static inline int64_t span_of(const DLTensor* t) {
  int64_t last = 0;
  for (int d = 0; d < t->ndim; ++d) {
    if (t->shape[d] == 0) return 0;
    last += (t->shape[d] - 1) * stride_at(t, d);
  }
  return last + 1;
}

#endif
