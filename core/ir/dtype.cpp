#include "core/ir/dtype.h"

#include "core/ir/fp8.h"
#include "core/util/error.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

namespace kf {

namespace {
constexpr std::string_view kNames[kNumDTypes] = {"float64", "float32",       "float16",     "bfloat16",
                                                 "int64",   "int32",         "bool",        "float8_e4m3fn",
                                                 "float8_e5m2", "int8",      "uint8"};
constexpr int kSizes[kNumDTypes] = {8, 4, 2, 2, 8, 4, 1, 1, 1, 1, 1};
}  // namespace

std::string_view dtype_name(DType t) { return kNames[static_cast<int>(t)]; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

std::string dtype_name_list() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (i > 0) s += i + 1 < kNumDTypes ? ", " : " or ";
    s += kNames[i];
  }
  return s;
}

int dtype_size(DType t) { return kSizes[static_cast<int>(t)]; }

int dtype_category(DType t) {
  if (is_bool(t)) return 0;
  if (is_integer(t)) return 1;
  return 2;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) {  // two integers: the wider; int8 with uint8 needs int16
    if ((a == DType::I8 && b == DType::U8) || (a == DType::U8 && b == DType::I8))
      fail(KF_ERR_DTYPE_MISMATCH, "cannot promote int8 with uint8: torch gives int16, which kfuse lacks; "
           "cast one operand first");
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  if (is_fp8(a) || is_fp8(b))
    fail(KF_ERR_DTYPE_MISMATCH, "cannot promote ", dtype_name(a), " with ", dtype_name(b),
         ": a float8 dtype promotes with no other floating dtype (as in PyTorch); cast one operand first");
  // Two different floats: f16 with bf16 gives f32; otherwise the wider one.
  auto rank = [](DType t) {
    switch (t) {
      case DType::F64: return 3;
      case DType::F32: return 2;
      default: return 1;
    }
  };
  if (rank(a) == 1 && rank(b) == 1) return DType::F32;
  return rank(a) >= rank(b) ? a : b;
}

DLDataType to_dlpack(DType t) {
  DLDataType d{};
  d.lanes = 1;
  d.bits = static_cast<uint8_t>(dtype_size(t) * 8);
  switch (t) {
    case DType::F64:
    case DType::F32:
    case DType::F16: d.code = kDLFloat; break;
    case DType::BF16: d.code = kDLBfloat; break;
    case DType::I64:
    case DType::I32:
    case DType::I8: d.code = kDLInt; break;
    case DType::U8: d.code = kDLUInt; break;
    case DType::Bool: d.code = KF_DLPACK_BOOL_CODE; break;
    case DType::F8E4M3: d.code = KF_DLPACK_FLOAT8_E4M3FN_CODE; break;
    case DType::F8E5M2: d.code = KF_DLPACK_FLOAT8_E5M2_CODE; break;
  }
  return d;
}

std::optional<DType> from_dlpack(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 64) return DType::F64;
      if (t.bits == 32) return DType::F32;
      if (t.bits == 16) return DType::F16;
      return std::nullopt;
    case kDLBfloat:
      if (t.bits == 16) return DType::BF16;
      return std::nullopt;
    case kDLInt:
      if (t.bits == 64) return DType::I64;
      if (t.bits == 32) return DType::I32;
      if (t.bits == 8) return DType::I8;
      return std::nullopt;
    case kDLUInt:
      if (t.bits == 8) return DType::U8;
      return std::nullopt;
    case KF_DLPACK_BOOL_CODE:
      if (t.bits == 8) return DType::Bool;
      return std::nullopt;
    case KF_DLPACK_FLOAT8_E4M3FN_CODE:
      if (t.bits == 8) return DType::F8E4M3;
      return std::nullopt;
    case KF_DLPACK_FLOAT8_E5M2_CODE:
      if (t.bits == 8) return DType::F8E5M2;
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::string describe_dlpack(DLDataType t) {
  std::string code;
  switch (t.code) {
    case kDLFloat: code = "float"; break;
    case kDLBfloat: code = "bfloat"; break;
    case kDLInt: code = "int"; break;
    case kDLUInt: code = "uint"; break;
    case KF_DLPACK_BOOL_CODE: code = "bool"; break;
    case KF_DLPACK_FLOAT8_E4M3FN_CODE: code = "float8_e4m3fn_"; break;
    case KF_DLPACK_FLOAT8_E5M2_CODE: code = "float8_e5m2_"; break;
    default: code = "code" + std::to_string(t.code) + "_"; break;
  }
  std::string s = code + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

bool accepts_as_bool(DLDataType t) {
  return t.lanes == 1 && t.bits == 8 && (t.code == kDLUInt || t.code == kDLInt);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into exp: correct
  return static_cast<uint16_t>(h);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      x = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

namespace {

// Bits (without sign) of |d| rounded to nearest even in a binary format with
// `mant` stored mantissa bits and exponent bias `bias` (max exponent = bias).
// Subnormals share the quantum of the smallest normal, so one scaled
// nearbyint rounds both; a carry out of the mantissa lands in the exponent.
uint16_t round_magnitude(double a, int mant, int bias) {
  const uint32_t inf = static_cast<uint32_t>(2 * bias + 1) << mant;
  if (std::isnan(a)) return static_cast<uint16_t>(inf | (1u << (mant - 1)));
  if (a >= std::ldexp(1.0, bias + 1)) return static_cast<uint16_t>(inf);
  if (a == 0) return 0;  // frexp gives exponent 0, not the subnormal one
  int ex;
  std::frexp(a, &ex);
  const int e = std::max(ex - 1, 1 - bias);
  const double m = std::nearbyint(std::ldexp(a, mant - e));  // exact scaling
  const uint32_t bits = (static_cast<uint32_t>(e + bias - 1) << mant) + static_cast<uint32_t>(m);
  return static_cast<uint16_t>(std::min(bits, inf));
}

uint16_t with_sign(double d, uint16_t magnitude, int width) {
  return std::signbit(d) ? static_cast<uint16_t>(magnitude | (1u << (width - 1))) : magnitude;
}

}  // namespace

uint16_t double_to_half(double d) { return with_sign(d, round_magnitude(std::fabs(d), 10, 15), 16); }

uint16_t double_to_bf16(double d) { return with_sign(d, round_magnitude(std::fabs(d), 7, 127), 16); }

namespace fp8_host {
// The host side of core/ir/fp8.h (built with -ffp-contract=off: each
// operator rounds on its own).
#define KF_PM_ADD(a, b) ((a) + (b))
#define KF_PM_SUB(a, b) ((a) - (b))
#define KF_PM_F2U(f) std::bit_cast<uint32_t>(f)
#define KF_PM_U2F(u) std::bit_cast<float>(static_cast<uint32_t>(u))
KF_FP8_CONVERSIONS(static inline)
#undef KF_PM_ADD
#undef KF_PM_SUB
#undef KF_PM_F2U
#undef KF_PM_U2F
}  // namespace fp8_host

float e4m3fn_to_float(uint8_t b) { return fp8_host::kf_e4m3_to_f(b); }
float e5m2_to_float(uint8_t b) { return fp8_host::kf_e5m2_to_f(b); }
uint8_t float_to_e4m3fn(float f) { return fp8_host::kf_f_to_e4m3(f); }
uint8_t float_to_e5m2(float f) { return fp8_host::kf_f_to_e5m2(f); }

namespace {
// d rounded to odd into float: truncated, then the last bit set when
// inexact, so one later rounding to a format of <= 22 bits is d's own.
float round_to_odd_float(double d) {
  if (std::isnan(d)) return static_cast<float>(d);
  if (std::fabs(d) >= 3.4028234663852886e38) return static_cast<float>(d);  // overflow: +-max or inf, both fp8-overflow
  float f = static_cast<float>(d);
  if (std::fabs(static_cast<double>(f)) > std::fabs(d)) f = std::nextafter(f, 0.0f);  // toward zero
  if (static_cast<double>(f) != d) f = std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 1u);
  return f;
}
}  // namespace

uint8_t double_to_e4m3fn(double d) { return float_to_e4m3fn(round_to_odd_float(d)); }
uint8_t double_to_e5m2(double d) { return float_to_e5m2(round_to_odd_float(d)); }

}  // namespace kf
