// env_switch: the spelling every KFUSE_* on/off switch shares, and the
// one warning for a value it cannot read.
#include "core/util/env_switch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>

#include "stderr_capture.h"
#include <thread>
#include <vector>

// cmocka last: it defines a fail() macro.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

namespace {

constexpr const char* kName = "KFUSE_TEST_ENV_SWITCH";

size_t lines_in(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

void test_unset_and_empty_keep_the_default(void** /*state*/) {
  unsetenv(kName);
  assert_true(kf::env_switch(kName, true));
  assert_false(kf::env_switch(kName, false));
  setenv(kName, "", 1);
  assert_true(kf::env_switch(kName, true));
  assert_false(kf::env_switch(kName, false));
}

void test_documented_spellings(void** /*state*/) {
  std::string wrong;  // (asserted once stderr is back)
  const std::string warnings = stderr_of([&] {
    for (const char* off : {"0", "false", "off", "no", "FALSE", "Off", "No"}) {
      setenv(kName, off, 1);
      if (kf::env_switch(kName, true)) wrong += std::string(off) + " ";
    }
    for (const char* on : {"1", "true", "on", "yes", "TRUE", "On", "Yes"}) {
      setenv(kName, on, 1);
      if (!kf::env_switch(kName, false)) wrong += std::string(on) + " ";
    }
  });
  assert_string_equal(wrong.c_str(), "");
  assert_string_equal(warnings.c_str(), "");
  unsetenv(kName);
}

// "false" used to mean on (only "0" was off): KFUSE_CPU_DRY_RUN=false
// skipped the computation. Other values now keep the default, with one
// warning per variable however often it is read.
void test_other_values_keep_the_default_and_warn_once(void** /*state*/) {
  constexpr const char* kOther = "KFUSE_TEST_ENV_SWITCH_OTHER";
  std::string wrong;
  const std::string warnings = stderr_of([&] {
    for (const char* other : {"00", "2", "enable", " 1", "y"}) {
      setenv(kOther, other, 1);
      if (kf::env_switch(kOther, false) || !kf::env_switch(kOther, true)) wrong += std::string(other) + " ";
    }
  });
  assert_string_equal(wrong.c_str(), "");
  assert_int_equal(lines_in(warnings), 1);
  assert_string_equal(warnings.c_str(),
                      "kfuse: ignoring KFUSE_TEST_ENV_SWITCH_OTHER=00: expected 0, false, off or no, or 1, true, "
                      "on or yes; keeping the default (off)\n");
  unsetenv(kOther);
}

// Many threads reading one bad switch at once: still one line.
void test_one_warning_across_threads(void** /*state*/) {
  constexpr const char* kThreads = "KFUSE_TEST_ENV_SWITCH_THREADS";
  setenv(kThreads, "maybe\nnot", 1);
  const std::string warnings = stderr_of([] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([] {
        for (int i = 0; i < 100; ++i) (void)kf::env_switch(kThreads, true);
      });
    for (std::thread& t : threads) t.join();
  });
  // The newline in the value is shown as '?': the warning stays one line.
  assert_string_equal(warnings.c_str(),
                      "kfuse: ignoring KFUSE_TEST_ENV_SWITCH_THREADS=maybe?not: expected 0, false, off or no, or 1, "
                      "true, on or yes; keeping the default (on)\n");
  unsetenv(kThreads);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_and_empty_keep_the_default),
      cmocka_unit_test(test_documented_spellings),
      cmocka_unit_test(test_other_values_keep_the_default_and_warn_once),
      cmocka_unit_test(test_one_warning_across_threads),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
