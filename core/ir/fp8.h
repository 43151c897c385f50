// float8 storage (OCP FP8: e4m3fn, e5m2, as PyTorch's float8_e4m3fn and
// float8_e5m2) <-> float, written once and compiled twice: by the host
// compiler for tests, and as text by NVRTC into every generated kernel
// (core/codegen/prelude.cpp). The CPU reference converts from double with
// one rounding (dtype.cpp); tests/cpu/test_fp8.cpp checks that both agree on
// every float they may see and decode every code.
//
//   e4m3fn: bias 7, no infinities, S.1111.111 is NaN, max 448; a float
//           above 464 (the midpoint past 448) or NaN gives NaN (PyTorch's
//           non-saturating cast).
//   e5m2:   bias 15, IEEE-like (inf S.11111.00, NaN S.11111.xx), max
//           57344; 61440 and above round to inf.
// Rounding is to nearest even, subnormals included.
//
// Before expanding KF_FP8_CONVERSIONS(FN), define KF_PM_F2U(f) (float ->
// uint32 bits), KF_PM_U2F(u), KF_PM_ADD(a, b) and KF_PM_SUB(a, b) (float,
// each rounded on its own) as for core/ir/portable_math.h.
#pragma once

#define KF_FP8_CONVERSIONS(FN)                                                                 \
  FN float kf_e4m3_to_f(unsigned char b) {                                                    \
    const unsigned int s = (unsigned int)(b & 0x80u) << 24;                                   \
    const unsigned int e = (b >> 3) & 0xfu, m = b & 7u;                                       \
    if ((b & 0x7fu) == 0x7fu) return KF_PM_U2F(s | 0x7fc00000u);                              \
    if (e == 0) return KF_PM_U2F(s | KF_PM_F2U((float)m * 0.001953125f)); /* m * 2^-9 */      \
    return KF_PM_U2F(s | ((e + 120u) << 23) | (m << 20));                                     \
  }                                                                                           \
  FN float kf_e5m2_to_f(unsigned char b) {                                                    \
    const unsigned int s = (unsigned int)(b & 0x80u) << 24;                                   \
    const unsigned int e = (b >> 2) & 0x1fu, m = b & 3u;                                      \
    if (e == 31u) return KF_PM_U2F(s | (m == 0 ? 0x7f800000u : 0x7fc00000u));                 \
    if (e == 0) return KF_PM_U2F(s | KF_PM_F2U((float)m * 0.0000152587890625f)); /* 2^-16 */  \
    return KF_PM_U2F(s | ((e + 112u) << 23) | (m << 21));                                     \
  }                                                                                           \
  /* Subnormals: adding and removing 1.5 * 2^k rounds |x| < 2^k to a multiple of       */    \
  /* 2^(k - 23), the format's subnormal quantum (to nearest even, as every add).       */    \
  FN unsigned char kf_f_to_e4m3(float f) {                                                    \
    const unsigned int u = KF_PM_F2U(f), a = u & 0x7fffffffu;                                 \
    const unsigned char s = (unsigned char)((u >> 24) & 0x80u);                               \
    if (a > 0x43e80000u) return (unsigned char)(s | 0x7fu); /* > 464, inf, NaN */             \
    if (a < 0x3c800000u) { /* below 2^-6: multiples of 2^-9 */                                \
      const float q = KF_PM_SUB(KF_PM_ADD(KF_PM_U2F(a), 24576.0f), 24576.0f); /* 1.5*2^14 */  \
      return (unsigned char)(s | (unsigned int)(q * 512.0f));                                 \
    }                                                                                         \
    const unsigned int r = a + 0x7ffffu + ((a >> 20) & 1u);                                   \
    return (unsigned char)(s | ((((r >> 23) - 120u) << 3) | ((r >> 20) & 7u)));               \
  }                                                                                           \
  FN unsigned char kf_f_to_e5m2(float f) {                                                    \
    const unsigned int u = KF_PM_F2U(f), a = u & 0x7fffffffu;                                 \
    const unsigned char s = (unsigned char)((u >> 24) & 0x80u);                               \
    if (a > 0x7f800000u) return (unsigned char)(s | 0x7fu);  /* NaN */                        \
    if (a >= 0x47700000u) return (unsigned char)(s | 0x7cu); /* >= 61440: inf */              \
    if (a < 0x38800000u) { /* below 2^-14: multiples of 2^-16 */                              \
      const float q = KF_PM_SUB(KF_PM_ADD(KF_PM_U2F(a), 192.0f), 192.0f); /* 1.5*2^7 */      \
      return (unsigned char)(s | (unsigned int)(q * 65536.0f));                               \
    }                                                                                         \
    const unsigned int r = a + 0xfffffu + ((a >> 21) & 1u);                                   \
    return (unsigned char)(s | ((((r >> 23) - 112u) << 2) | ((r >> 21) & 3u)));               \
  }
