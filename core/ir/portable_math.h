// log and cos for the normal random op, written once and compiled twice: by
// the host compiler for the CPU reference and, as text, by NVRTC into every
// generated kernel (core/codegen/prelude.cpp). libm's logf/cosf and CUDA's
// differ in the last bit now and then; these use only + - * / and exact bit
// operations, each rounded to nearest (KF_PM_MUL/ADD/SUB stop the compiler
// from fusing a multiply-add), so both sides compute the same bits.
//
// Before expanding KF_PORTABLE_MATH(...), define for the side at hand:
//   KF_PM_MUL(a, b), KF_PM_ADD(a, b), KF_PM_SUB(a, b)  (float and double)
//   KF_PM_F2U(f) -> uint32 bits, KF_PM_U2F(u) -> float
//   KF_PM_D2U(d) -> uint64 bits, KF_PM_U2D(u) -> double
// Accuracy: within a few ulps of the true values (the spec is the code).
#pragma once

#define KF_PM_STRINGIFY(...) #__VA_ARGS__
#define KF_PM_EXPAND_STRINGIFY(...) KF_PM_STRINGIFY(__VA_ARGS__)

// FN is the declaration prefix ("static inline", "__device__ inline").
#define KF_PORTABLE_MATH(FN)                                                                    \
  /* log(x) for normal positive x: x = m * 2^e with m in [sqrt(1/2), sqrt(2)),             \
     log(m) = 2 atanh(s), s = (m - 1) / (m + 1), by its odd series. */                        \
  FN float kf_pm_logf(float x) {                                                             \
    unsigned int u = KF_PM_F2U(x);                                                           \
    int e = (int)((u >> 23) & 0xffu) - 127;                                                  \
    float m = KF_PM_U2F((u & 0x7fffffu) | 0x3f800000u);                                      \
    if (m > 1.41421356f) {                                                                   \
      m = KF_PM_MUL(m, 0.5f);                                                                \
      e = e + 1;                                                                             \
    }                                                                                        \
    float s = KF_PM_SUB(m, 1.0f) / KF_PM_ADD(m, 1.0f);                                       \
    float s2 = KF_PM_MUL(s, s);                                                              \
    float p = KF_PM_ADD(0.111111111f, KF_PM_MUL(s2, 0.0909090936f));                         \
    p = KF_PM_ADD(0.142857149f, KF_PM_MUL(s2, p));                                           \
    p = KF_PM_ADD(0.200000003f, KF_PM_MUL(s2, p));                                           \
    p = KF_PM_ADD(0.333333343f, KF_PM_MUL(s2, p));                                           \
    float two_s = KF_PM_ADD(s, s);                                                           \
    float log_m = KF_PM_ADD(two_s, KF_PM_MUL(two_s, KF_PM_MUL(s2, p)));                      \
    float fe = (float)e;                                                                     \
    return KF_PM_ADD(KF_PM_MUL(fe, 0.693145752f), KF_PM_ADD(KF_PM_MUL(fe, 1.42860677e-06f), log_m)); \
  }                                                                                          \
  /* cos(2 pi t) for t in [0, 1), from turns: the octant is exact, the rest                 \
     a Taylor polynomial on [0, pi/4]. */                                                     \
  FN float kf_pm_sinf_small(float a) {                                                       \
    float a2 = KF_PM_MUL(a, a);                                                              \
    float p = KF_PM_SUB(8.33333377e-03f, KF_PM_MUL(a2, 1.98412701e-04f));                    \
    p = KF_PM_ADD(-0.166666672f, KF_PM_MUL(a2, KF_PM_ADD(p, KF_PM_MUL(a2, 2.75573188e-06f)))); \
    return KF_PM_ADD(a, KF_PM_MUL(KF_PM_MUL(a, a2), p));                                     \
  }                                                                                          \
  FN float kf_pm_cosf_small(float a) {                                                       \
    float a2 = KF_PM_MUL(a, a);                                                              \
    float p = KF_PM_SUB(4.16666679e-02f, KF_PM_MUL(a2, 1.38888892e-03f));                    \
    p = KF_PM_ADD(p, KF_PM_MUL(KF_PM_MUL(a2, a2), KF_PM_SUB(2.48015876e-05f, KF_PM_MUL(a2, 2.75573188e-07f)))); \
    return KF_PM_ADD(KF_PM_SUB(1.0f, KF_PM_MUL(a2, 0.5f)), KF_PM_MUL(KF_PM_MUL(a2, a2), p)); \
  }                                                                                          \
  FN float kf_pm_cos_turns_f(float t) {                                                      \
    float q = KF_PM_MUL(t, 8.0f); /* octants: exact for t = n * 2^-24 */                    \
    int k = (int)q;                                                                          \
    float f = KF_PM_SUB(q, (float)k);                                                        \
    /* angle within the octant, mirrored on odd octants so it stays in [0, pi/4] */          \
    float g = (k & 1) ? KF_PM_SUB(1.0f, f) : f;                                              \
    float a = KF_PM_MUL(g, 0.785398185f);                                                    \
    float c = kf_pm_cosf_small(a), s = kf_pm_sinf_small(a);                                  \
    switch (k & 7) {                                                                         \
      case 0: return c;                                                                      \
      case 1: return s;                                                                      \
      case 2: return -s;                                                                     \
      case 3: return -c;                                                                     \
      case 4: return -c;                                                                     \
      case 5: return -s;                                                                     \
      case 6: return s;                                                                      \
      default: return c;                                                                     \
    }                                                                                        \
  }                                                                                          \
  FN double kf_pm_log(double x) {                                                            \
    unsigned long long u = KF_PM_D2U(x);                                                     \
    int e = (int)((u >> 52) & 0x7ffull) - 1023;                                              \
    double m = KF_PM_U2D((u & 0xfffffffffffffull) | 0x3ff0000000000000ull);                  \
    if (m > 1.4142135623730951) {                                                            \
      m = KF_PM_MUL(m, 0.5);                                                                 \
      e = e + 1;                                                                             \
    }                                                                                        \
    double s = KF_PM_SUB(m, 1.0) / KF_PM_ADD(m, 1.0);                                        \
    double s2 = KF_PM_MUL(s, s);                                                             \
    double p = 1.0 / 23.0;                                                                   \
    for (int j = 21; j >= 3; j -= 2) p = KF_PM_ADD(1.0 / (double)j, KF_PM_MUL(s2, p));       \
    double two_s = KF_PM_ADD(s, s);                                                          \
    double log_m = KF_PM_ADD(two_s, KF_PM_MUL(two_s, KF_PM_MUL(s2, p)));                     \
    double de = (double)e;                                                                   \
    return KF_PM_ADD(KF_PM_MUL(de, 6.93147180369123816490e-01),                              \
                     KF_PM_ADD(KF_PM_MUL(de, 1.90821492927058770002e-10), log_m));           \
  }                                                                                          \
  FN double kf_pm_cos_turns(double t) {                                                      \
    double q = KF_PM_MUL(t, 8.0);                                                            \
    int k = (int)q;                                                                          \
    double f = KF_PM_SUB(q, (double)k);                                                      \
    double g = (k & 1) ? KF_PM_SUB(1.0, f) : f;                                              \
    double a = KF_PM_MUL(g, 0.78539816339744830962);                                         \
    double a2 = KF_PM_MUL(a, a);                                                             \
    double c = 0.0, s = 0.0, tc = 1.0, ts = a;                                               \
    for (int j = 0; j < 11; ++j) { /* terms up to a^20 / a^21 */                             \
      c = KF_PM_ADD(c, tc);                                                                  \
      s = KF_PM_ADD(s, ts);                                                                  \
      tc = KF_PM_MUL(tc, -a2) / (double)((2 * j + 1) * (2 * j + 2));                         \
      ts = KF_PM_MUL(ts, -a2) / (double)((2 * j + 2) * (2 * j + 3));                         \
    }                                                                                        \
    switch (k & 7) {                                                                         \
      case 0: return c;                                                                      \
      case 1: return s;                                                                      \
      case 2: return -s;                                                                     \
      case 3: return -c;                                                                     \
      case 4: return -c;                                                                     \
      case 5: return -s;                                                                     \
      case 6: return s;                                                                      \
      default: return c;                                                                     \
    }                                                                                        \
  }
