// The divisor words that generated kernels divide indices with (ArgSlot
// Divisor, fastdiv_word in core/codegen/kernel_plan.h): the kernel's
// (umulhi(n, m) + n) >> s, evaluated here on the host, equals n / d for
// every extent class kfuse meets (small, powers of two and their
// neighbours, head dims, vocabularies, up to 2^31 - 1) and for indices
// across the whole int range, including each multiple of d and its
// neighbours.
#include "core/codegen/kernel_plan.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <vector>

namespace {


std::vector<int64_t> divisors() {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= 4096; ++k) d.push_back(k);
  for (int b = 12; b <= 31; ++b)
    for (int64_t delta = -2; delta <= 2; ++delta) {
      const int64_t v = (int64_t{1} << b) + delta;
      if (v >= 1 && v <= INT32_MAX) d.push_back(v);
    }
  for (int64_t v : {3000, 32000, 50257, 128256, 151936, 1000003, 99999989, 1234567891}) d.push_back(v);
  return d;
}

void check(uint64_t word, int64_t d, int64_t n) {
  if (n < 0 || n > INT32_MAX) return;
  const uint32_t got = kf::fastdiv_divide(word, static_cast<uint32_t>(n));
  if (got != static_cast<uint64_t>(n / d)) fail_msg("%lld / %lld: got %u, expected %lld", (long long)n, (long long)d, got, (long long)(n / d));
}

void test_every_quotient_exact(void** state) {
  (void)state;
  uint64_t lcg = 0x9e3779b97f4a7c15ull;
  for (int64_t d : divisors()) {
    const uint64_t w = kf::fastdiv_word(d);
    for (int64_t n = 0; n < 2048; ++n) check(w, d, n);
    for (int64_t q : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000}, INT32_MAX / d - 1, INT32_MAX / d})
      for (int64_t e = -1; e <= 1; ++e) check(w, d, q * d + e);
    check(w, d, INT32_MAX);
    for (int i = 0; i < 256; ++i) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      check(w, d, static_cast<int64_t>(lcg >> 33));  // uniform in [0, 2^31)
    }
  }
}

void test_word_fields(void** state) {
  (void)state;
  assert_int_equal(kf::fastdiv_word(0), 0);  // empty extents divide nothing
  assert_int_equal(kf::fastdiv_word(1) >> 32, 0);
  assert_int_equal(kf::fastdiv_word(128) >> 32, 7);
  assert_int_equal(kf::fastdiv_word(129) >> 32, 8);
  assert_int_equal(kf::fastdiv_word(INT32_MAX) >> 32, 31);
}

}  // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_quotient_exact),
      cmocka_unit_test(test_word_fields),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
