// KFUSE_TUNE_* knobs: each is read within its documented range
// (core/schedule/tuning.h); any other value keeps the default and warns
// once. KFUSE_TUNE_ROW_VECTORS=16384 used to be taken (7.8 s and 0.6 GB
// to generate a row kernel).
#include "core/schedule/tuning.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "stderr_capture.h"

// cmocka last: it defines a fail() macro.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

namespace {

// tuning_value(name, 7, 1, 16) with the variable set to `value` (nullptr:
// unset), and what it wrote on stderr.
int read_as(const char* name, const char* value, std::string* warnings) {
  if (value) setenv(name, value, 1);
  else unsetenv(name);
  int got = 0;
  *warnings = stderr_of([&] { got = kf::tuning_value(name, 7, 1, 16); });
  unsetenv(name);
  return got;
}

void test_unset_empty_and_in_range(void** /*state*/) {
  std::string w;
  assert_int_equal(read_as("KFUSE_TEST_TUNE_A", nullptr, &w), 7);
  assert_string_equal(w.c_str(), "");
  assert_int_equal(read_as("KFUSE_TEST_TUNE_A", "", &w), 7);
  assert_string_equal(w.c_str(), "");
  for (int v : {1, 2, 15, 16}) {
    assert_int_equal(read_as("KFUSE_TEST_TUNE_A", std::to_string(v).c_str(), &w), v);
    assert_string_equal(w.c_str(), "");
  }
}

void test_outside_the_range_keeps_the_default(void** /*state*/) {
  std::string w;
  assert_int_equal(read_as("KFUSE_TEST_TUNE_BIG", "16384", &w), 7);
  assert_string_equal(w.c_str(),
                      "kfuse: ignoring KFUSE_TEST_TUNE_BIG=16384: expected an integer from 1 to 16; "
                      "keeping the default (7)\n");
  assert_int_equal(read_as("KFUSE_TEST_TUNE_ABOVE", "17", &w), 7);
  assert_string_equal(w.c_str(),
                      "kfuse: ignoring KFUSE_TEST_TUNE_ABOVE=17: expected an integer from 1 to 16; "
                      "keeping the default (7)\n");
  assert_int_equal(read_as("KFUSE_TEST_TUNE_BELOW", "0", &w), 7);
  assert_true(w.find("KFUSE_TEST_TUNE_BELOW=0: expected an integer from 1 to 16") != std::string::npos);
  assert_int_equal(read_as("KFUSE_TEST_TUNE_NEGATIVE", "-4", &w), 7);
  assert_true(w.find("KFUSE_TEST_TUNE_NEGATIVE=-4:") != std::string::npos);
  // Past int: not wrapped into the range.
  assert_int_equal(read_as("KFUSE_TEST_TUNE_HUGE", "4294967300", &w), 7);
  assert_true(w.find("KFUSE_TEST_TUNE_HUGE=4294967300:") != std::string::npos);
}

void test_not_a_number_keeps_the_default(void** /*state*/) {
  std::string w;
  const char* bad[] = {"4x", " 4", "4 ", "+4", "0x4", "four", "4.0"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    const std::string name = "KFUSE_TEST_TUNE_TEXT_" + std::to_string(i);
    assert_int_equal(read_as(name.c_str(), bad[i], &w), 7);
    const std::string want = "kfuse: ignoring " + name + "=" + bad[i] +
                             ": expected an integer from 1 to 16; keeping the default (7)\n";
    assert_string_equal(w.c_str(), want.c_str());
  }
}

// One warning per variable and process, however often it is read.
void test_warns_once(void** /*state*/) {
  setenv("KFUSE_TEST_TUNE_ONCE", "99", 1);
  const std::string w = stderr_of([] {
    for (int i = 0; i < 5; ++i) (void)kf::tuning_value("KFUSE_TEST_TUNE_ONCE", 3, 1, 8);
  });
  unsetenv("KFUSE_TEST_TUNE_ONCE");
  assert_string_equal(w.c_str(),
                      "kfuse: ignoring KFUSE_TEST_TUNE_ONCE=99: expected an integer from 1 to 8; "
                      "keeping the default (3)\n");
}

// The process default goes through the same reader with each knob's range.
// (default_tuning reads once: this is the only test that calls it.)
void test_default_tuning_ranges(void** /*state*/) {
  setenv("KFUSE_TUNE_ROW_VECTORS", "16384", 1);
  setenv("KFUSE_TUNE_POINTWISE_UNROLL", "8", 1);
  setenv("KFUSE_TUNE_INNER_OUTER_THREADS", "1048576", 1);
  setenv("KFUSE_TUNE_SPLIT_EPILOGUE_REVERSED", "0", 1);  // refused before: least was 1
  setenv("KFUSE_TUNE_TILED_BLOCK", "1024", 1);
  const kf::Tuning defaults;
  const kf::Tuning* t = nullptr;
  const std::string w = stderr_of([&] { t = &kf::default_tuning(); });
  assert_int_equal(t->row_vectors, defaults.row_vectors);
  assert_int_equal(t->pointwise_unroll, 8);
  assert_int_equal(t->inner_outer_threads_per_sm, defaults.inner_outer_threads_per_sm);
  assert_int_equal(t->split_epilogue_reversed, 0);
  assert_int_equal(t->tiled_block, defaults.tiled_block);
  assert_true(w.find("kfuse: ignoring KFUSE_TUNE_ROW_VECTORS=16384: expected an integer from 1 to 16; "
                     "keeping the default (4)\n") != std::string::npos);
  assert_true(w.find("KFUSE_TUNE_INNER_OUTER_THREADS=1048576: expected an integer from 32 to 16384") !=
              std::string::npos);
  assert_true(w.find("KFUSE_TUNE_TILED_BLOCK=1024: expected an integer from 256 to 512") != std::string::npos);
  assert_true(w.find("POINTWISE_UNROLL") == std::string::npos);
  assert_true(w.find("SPLIT_EPILOGUE") == std::string::npos);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_empty_and_in_range),
      cmocka_unit_test(test_outside_the_range_keeps_the_default),
      cmocka_unit_test(test_not_a_number_keeps_the_default),
      cmocka_unit_test(test_warns_once),
      cmocka_unit_test(test_default_tuning_ranges),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
