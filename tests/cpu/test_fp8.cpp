// float8 e4m3fn / e5m2 conversions (core/ir/fp8.h: the generated kernels'
// own text, compiled here for the host; dtype.cpp: the CPU reference's
// double path). Every code decodes to its value; every value encodes back
// to its code; every midpoint between neighbours rounds to the even one;
// overflow gives NaN (e4m3fn) or inf (e5m2) as PyTorch's cast; and float
// and double inputs round exactly as a brute-force nearest-even search
// over all codes says.
#include "core/ir/dtype.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

using namespace kf;

namespace {

struct Format {
  const char* name;
  float (*decode)(uint8_t);
  uint8_t (*from_float)(float);
  uint8_t (*from_double)(double);
  int mantissa_bits;
  double max;       // largest finite value
  double overflow;  // smallest magnitude that no longer rounds to max
  bool has_inf;
};

const Format kFormats[] = {
    {"e4m3fn", e4m3fn_to_float, float_to_e4m3fn, double_to_e4m3fn, 3, 448.0, 464.0, false},
    {"e5m2", e5m2_to_float, float_to_e5m2, double_to_e5m2, 2, 57344.0, 61440.0, true},
};

// Reference value of a code from its fields.
double reference(const Format& f, uint8_t c) {
  const int m_bits = f.mantissa_bits, e_bits = 7 - m_bits, bias = (1 << (e_bits - 1)) - 1;
  const int e = (c >> m_bits) & ((1 << e_bits) - 1), m = c & ((1 << m_bits) - 1);
  const double sign = (c & 0x80) ? -1.0 : 1.0;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - m_bits);
  return sign * std::ldexp(1.0 + std::ldexp(m, -m_bits), e - bias);
}

bool is_nan_code(const Format& f, uint8_t c) {
  return f.has_inf ? ((c & 0x7c) == 0x7c && (c & 3) != 0) : (c & 0x7f) == 0x7f;
}
bool is_inf_code(const Format& f, uint8_t c) { return f.has_inf && (c & 0x7f) == 0x7c; }

// Positive finite codes in increasing value order.
std::vector<uint8_t> finite_positive(const Format& f) {
  std::vector<uint8_t> out;
  for (int c = 0; c < 0x80; ++c)
    if (!is_nan_code(f, static_cast<uint8_t>(c)) && !is_inf_code(f, static_cast<uint8_t>(c))) out.push_back(static_cast<uint8_t>(c));
  return out;
}

// Nearest-even encoding of d by search (NaN and overflow by the format's rules).
uint8_t brute_force(const Format& f, double d) {
  const uint8_t sign = std::signbit(d) ? 0x80 : 0;
  const double a = std::fabs(d);
  if (std::isnan(d) || (!f.has_inf && a > f.overflow)) return static_cast<uint8_t>(sign | 0x7f);
  if (f.has_inf && a >= f.overflow) return static_cast<uint8_t>(sign | 0x7c);
  const std::vector<uint8_t> codes = finite_positive(f);
  uint8_t best = codes[0];
  for (uint8_t c : codes) {
    const double e = std::fabs(reference(f, c) - a), be = std::fabs(reference(f, best) - a);
    if (e < be || (e == be && (c & 1) == 0)) best = c;
  }
  return static_cast<uint8_t>(sign | best);
}

void test_every_code_decodes(void** state) {
  (void)state;
  for (const Format& f : kFormats)
    for (int c = 0; c < 256; ++c) {
      const uint8_t code = static_cast<uint8_t>(c);
      const float v = f.decode(code);
      if (is_nan_code(f, code)) {
        assert_true(std::isnan(v));
      } else if (is_inf_code(f, code)) {
        assert_true(std::isinf(v));
        assert_int_equal(std::signbit(v), (c & 0x80) != 0);
      } else {
        if (static_cast<double>(v) != reference(f, code)) fail_msg("%s code 0x%02x: %g, expected %g", f.name, c, v, reference(f, code));
        assert_int_equal(std::signbit(v), (c & 0x80) != 0);  // -0 keeps its sign
        assert_int_equal(f.from_float(v), code);              // and encodes back
        assert_int_equal(f.from_double(static_cast<double>(v)), code);
      }
    }
  assert_true(std::fabs(static_cast<double>(e4m3fn_to_float(0x7e)) - 448.0) == 0);
  assert_true(std::fabs(static_cast<double>(e5m2_to_float(0x7b)) - 57344.0) == 0);
}

void test_midpoints_round_to_even(void** state) {
  (void)state;
  for (const Format& f : kFormats) {
    const std::vector<uint8_t> codes = finite_positive(f);
    for (size_t k = 0; k + 1 < codes.size(); ++k) {
      const double lo = reference(f, codes[k]), hi = reference(f, codes[k + 1]);
      const double mid = (lo + hi) / 2;  // exact in float and double
      const uint8_t even = (codes[k] & 1) == 0 ? codes[k] : codes[k + 1];
      for (double s : {1.0, -1.0}) {
        const uint8_t sign = s < 0 ? 0x80 : 0;
        assert_int_equal(f.from_float(static_cast<float>(s * mid)), sign | even);
        assert_int_equal(f.from_double(s * mid), sign | even);
        // Just off the midpoint: the nearer neighbour.
        assert_int_equal(f.from_double(s * std::nextafter(mid, 0.0)), sign | codes[k]);
        assert_int_equal(f.from_double(s * std::nextafter(mid, 1e300)), sign | codes[k + 1]);
        assert_int_equal(f.from_float(static_cast<float>(s) * std::nextafter(static_cast<float>(mid), 0.0f)), sign | codes[k]);
      }
    }
  }
}

void test_overflow_and_specials(void** state) {
  (void)state;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  // e4m3fn: no infinities; past the midpoint above 448 (464) is NaN.
  assert_int_equal(float_to_e4m3fn(448.0f), 0x7e);
  assert_int_equal(float_to_e4m3fn(464.0f), 0x7e);  // tie: to even (448)
  assert_int_equal(float_to_e4m3fn(std::nextafter(464.0f, inf)), 0x7f);
  assert_int_equal(float_to_e4m3fn(-1e9f), 0xff);
  assert_int_equal(float_to_e4m3fn(inf), 0x7f);
  assert_int_equal(float_to_e4m3fn(nan) & 0x7f, 0x7f);
  assert_int_equal(double_to_e4m3fn(1e300), 0x7f);
  assert_int_equal(double_to_e4m3fn(464.0000000001), 0x7f);  // above the midpoint, though float(d) == 464
  // e5m2: IEEE-like; 61440 (the midpoint past 57344) ties to inf.
  assert_int_equal(float_to_e5m2(57344.0f), 0x7b);
  assert_int_equal(float_to_e5m2(61440.0f), 0x7c);
  assert_int_equal(float_to_e5m2(std::nextafter(61440.0f, 0.0f)), 0x7b);
  assert_int_equal(float_to_e5m2(-inf), 0xfc);
  assert_int_equal(float_to_e5m2(nan) & 0x7c, 0x7c);
  assert_true((float_to_e5m2(nan) & 3) != 0);
  assert_int_equal(double_to_e5m2(61439.99999999), 0x7b);  // below the midpoint, though float(d) == 61440
  // Smallest subnormals and what rounds to zero.
  assert_int_equal(float_to_e4m3fn(0.001953125f), 0x01);       // 2^-9
  assert_int_equal(float_to_e4m3fn(0.0009765625f), 0x00);      // 2^-10: tie to even (0)
  assert_int_equal(float_to_e4m3fn(0.00146484375f), 0x01);     // 1.5 * 2^-10
  assert_int_equal(float_to_e5m2(1.52587890625e-05f), 0x01);  // 2^-16
  assert_int_equal(float_to_e5m2(-7.62939453125e-06f), 0x80);  // -2^-17: tie to even (-0)
}

void test_random_inputs_match_search(void** state) {
  (void)state;
  uint64_t s = 0x243f6a8885a308d3ull;
  auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s;
  };
  for (const Format& f : kFormats)
    for (int i = 0; i < 200000; ++i) {
      // Doubles spread over the format's range (and a little past it).
      const double mag = std::ldexp(static_cast<double>(next() >> 11) / 9007199254740992.0, static_cast<int>(next() % 34) - 20);
      const double d = (next() & 1) ? -mag : mag;
      const uint8_t want = brute_force(f, d);
      const uint8_t got = f.from_double(d);
      if (got != want) fail_msg("%s: %.17g -> 0x%02x, expected 0x%02x", f.name, d, got, want);
      const float fl = static_cast<float>(d);
      const uint8_t want_f = brute_force(f, static_cast<double>(fl));
      if (f.from_float(fl) != want_f) fail_msg("%s: float %.9g -> 0x%02x, expected 0x%02x", f.name, fl, f.from_float(fl), want_f);
    }
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_decodes),
      cmocka_unit_test(test_midpoints_round_to_even),
      cmocka_unit_test(test_overflow_and_specials),
      cmocka_unit_test(test_random_inputs_match_search),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
