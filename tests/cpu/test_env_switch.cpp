// env_switch: the spelling every KFUSE_* on/off switch shares.
#include "core/util/env_switch.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <cstdlib>
#include <initializer_list>

namespace {

constexpr const char* kName = "KFUSE_TEST_ENV_SWITCH";

void test_unset_and_empty_keep_the_default(void** /*state*/) {
  unsetenv(kName);
  assert_true(kf::env_switch(kName, true));
  assert_false(kf::env_switch(kName, false));
  setenv(kName, "", 1);
  assert_true(kf::env_switch(kName, true));
  assert_false(kf::env_switch(kName, false));
}

void test_zero_is_off_anything_else_on(void** /*state*/) {
  setenv(kName, "0", 1);
  assert_false(kf::env_switch(kName, true));
  assert_false(kf::env_switch(kName, false));
  for (const char* on : {"1", "yes", "00", "off"}) {  // only "0" is off
    setenv(kName, on, 1);
    assert_true(kf::env_switch(kName, false));
  }
  unsetenv(kName);
}

}  // namespace

int main() {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_and_empty_keep_the_default),
      cmocka_unit_test(test_zero_is_off_anything_else_on),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
