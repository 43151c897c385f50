#include "core/runtime/cpu/philox.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "core/ir/portable_math.h"

namespace kf::cpu {

namespace {

// The host side of core/ir/portable_math.h (built with -ffp-contract=off, so
// plain operators round each step).
#define KF_PM_MUL(a, b) ((a) * (b))
#define KF_PM_ADD(a, b) ((a) + (b))
#define KF_PM_SUB(a, b) ((a) - (b))
#define KF_PM_F2U(f) std::bit_cast<uint32_t>(f)
#define KF_PM_U2F(u) std::bit_cast<float>(static_cast<uint32_t>(u))
#define KF_PM_D2U(d) std::bit_cast<uint64_t>(d)
#define KF_PM_U2D(u) std::bit_cast<double>(static_cast<uint64_t>(u))
KF_PORTABLE_MATH(inline)
#undef KF_PM_MUL
#undef KF_PM_ADD
#undef KF_PM_SUB
#undef KF_PM_F2U
#undef KF_PM_U2F
#undef KF_PM_D2U
#undef KF_PM_U2D

constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;

PhiloxWords round(const PhiloxWords& c, const std::array<uint32_t, 2>& k) {
  const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
  const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
  return {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
          static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
}

float u24(uint32_t w) { return static_cast<float>(w >> 8) * 0x1p-24f; }
float u24_open_zero(uint32_t w) { return static_cast<float>((w >> 8) + 1) * 0x1p-24f; }
uint64_t bits53(uint32_t a, uint32_t b) { return ((static_cast<uint64_t>(a) << 32) | b) >> 11; }
double u53(uint32_t a, uint32_t b) { return static_cast<double>(bits53(a, b)) * 0x1p-53; }
double u53_open_zero(uint32_t a, uint32_t b) {
  return static_cast<double>(bits53(a, b) + 1) * 0x1p-53;
}

}  // namespace

PhiloxWords philox4x32_10(PhiloxWords counter, std::array<uint32_t, 2> key) {
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    counter = round(counter, key);
  }
  return counter;
}

PhiloxWords philox_element(uint64_t seed, uint64_t offset, uint64_t index) {
  return philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                        static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

// The steps are separate statements in the order of the specification.
float uniform_f32(const PhiloxWords& w, float low, float high) {
  const float u = u24(w[0]);
  const float d = high - low;
  const float p = d * u;
  return low + p;
}

double uniform_f64(const PhiloxWords& w, double low, double high) {
  const double u = u53(w[0], w[1]);
  const double d = high - low;
  const double p = d * u;
  return low + p;
}

float normal_f32(const PhiloxWords& w, float mean, float std) {
  const float u1 = u24_open_zero(w[0]);
  const float u2 = u24(w[1]);
  const float s = std::sqrt(-2.0f * kf_pm_logf(u1));
  const float c = kf_pm_cos_turns_f(u2);
  const float z = s * c;
  const float p = std * z;
  return mean + p;
}

double normal_f64(const PhiloxWords& w, double mean, double std) {
  const double u1 = u53_open_zero(w[0], w[1]);
  const double u2 = u53(w[2], w[3]);
  const double s = std::sqrt(-2.0 * kf_pm_log(u1));
  const double c = kf_pm_cos_turns(u2);
  const double z = s * c;
  const double p = std * z;
  return mean + p;
}

}  // namespace kf::cpu
