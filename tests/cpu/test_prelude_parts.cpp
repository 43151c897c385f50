// prelude_parts: a unit keeps the prelude declarations it uses and nothing
// else; every overload, operator and macro of a used name goes with it;
// declarations that declare no kf_ name always stay; order is kept. On the
// real prelude: a kernel's part is a fraction of it and holds what the
// kernel calls. (That the CUBIN is the same as with the whole prelude:
// tests/nvrtc/test_prelude_cubin.cpp.)
#include "core/codegen/prelude.h"
#include "core/codegen/prelude_parts.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
extern "C" {
#include <cmocka.h>
}

#include <string>

namespace {

const char* kToy = R"(// toy prelude
#define KF_DEV __device__ __forceinline__
#if __CUDACC_VER_MAJOR__ >= 12
#define KF_NEW(x) (x)
#else
#define KF_NEW(x) (-(x))
#endif
struct kf_pair { float a, b; };
KF_DEV kf_pair operator+(kf_pair x, kf_pair y) { return {x.a + y.a, x.b + y.b}; }
// int overload first, then long long: both go with kf_add
KF_DEV int kf_add(int a, int b) { return a + b; }
KF_DEV float kf_unused(float x) { return x * 2.0f; }
KF_DEV long long kf_add(long long a, long long b) { return a + b; }
template <class T> KF_DEV T kf_twice(T x) { return kf_add(x, x); }
__device__ const float kf_table[2] = {1.0f, 2.0f};
template <int N>
KF_DEV float kf_nth() { return kf_table[N]; }
typedef unsigned int plain_word;
KF_DEV float kf_new_only(float x) { return KF_NEW(x); }
)";

bool has(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

void test_keeps_used_and_overloads(void**) {
  const std::string part = kf::prelude_part(kToy, "extern \"C\" __global__ void k(long long* p) { p[0] = kf_twice(p[0]); }");
  assert_true(has(part, "#define KF_DEV"));
  assert_true(has(part, "KF_DEV int kf_add(int a"));
  assert_true(has(part, "KF_DEV long long kf_add(long long a"));
  assert_true(has(part, "kf_twice"));
  assert_false(has(part, "kf_unused"));
  assert_false(has(part, "kf_table"));
  assert_false(has(part, "KF_NEW"));
  assert_false(has(part, "kf_pair"));
  assert_true(has(part, "typedef unsigned int plain_word;"));  // declares no kf_ name: kept
  // Prelude order.
  assert_true(part.find("#define KF_DEV") < part.find("kf_add(int"));
  assert_true(part.find("kf_add(int") < part.find("kf_add(long long"));
  assert_true(part.find("kf_add(long long") < part.find("kf_twice"));
}

void test_operators_templates_macros(void**) {
  const std::string part = kf::prelude_part(kToy, "kf_pair p = q + r; float t = kf_nth<1>(); float n = kf_new_only(1.f);");
  assert_true(has(part, "struct kf_pair"));
  assert_true(has(part, "operator+(kf_pair x"));
  assert_true(has(part, "template <int N>\nKF_DEV float kf_nth()"));
  assert_true(has(part, "__device__ const float kf_table[2]"));
  assert_true(has(part, "#if __CUDACC_VER_MAJOR__ >= 12\n#define KF_NEW(x) (x)\n#else\n#define KF_NEW(x) (-(x))\n#endif"));
  assert_false(has(part, "kf_add"));
}

void test_nothing_used(void**) {
  const std::string part = kf::prelude_part(kToy, "extern \"C\" __global__ void k() {}");
  assert_false(has(part, "KF_DEV"));
  assert_true(has(part, "plain_word"));
}

// Each directive of a part starts its line, and a declaration's trailing
// comment stays with it: a kept declaration ending in "}  // ..." or
// sharing its line with one left out, then a kept #define, once gave
// "...}#define" (NVRTC: '"#" not expected here'; the corpus's float8
// dequantize kernels, kf_rbf then KF_PM_F2U).
void test_directives_start_lines(void**) {
  const char* toy = R"(#define KF_DEV __device__ __forceinline__
KF_DEV float kf_one(float x) { return x; }      // kf_one's comment
KF_DEV float kf_two(float x) { return kf_one(x); }
#define KF_THREE(x) kf_one(x)
KF_DEV float kf_four(float x) { return x; }KF_DEV float kf_five(float x) { return x; }
#define KF_SIX(x) kf_four(x)
)";
  const std::string part = kf::prelude_part(toy, "float y = KF_THREE(1.f) + KF_SIX(2.f);");
  assert_true(has(part, "{ return x; }      // kf_one's comment\n#define KF_THREE(x) kf_one(x)\n"));
  assert_true(has(part, "KF_DEV float kf_four(float x) { return x; }\n#define KF_SIX(x) kf_four(x)\n"));
  assert_false(has(part, "kf_two"));
  assert_false(has(part, "kf_five"));
  assert_string_equal(kf::prelude_part(toy, toy).c_str(), toy);
  // The real prelude: the float8 conversions (one line each) and kf_rbf
  // before the portable-math macros.
  const std::string fp8 = kf::prelude_for("float a = kf_rbf(kf_e4m3_to_f_hw(b)) + kf_r8e5s(c);");
  for (size_t at = fp8.find('#'); at != std::string::npos; at = fp8.find('#', at + 1))
    if (fp8.compare(at, 7, "#define") == 0 || fp8.compare(at, 3, "#if") == 0 || fp8.compare(at, 6, "#endif") == 0 ||
        fp8.compare(at, 5, "#else") == 0)
      assert_true(at == 0 || fp8[at - 1] == '\n');
}

void test_real_prelude(void**) {
  const std::string whole(kf::cuda_prelude());
  const std::string none = kf::prelude_for("extern \"C\" __global__ void k() {}");
  assert_true(none.size() * 20 < whole.size());
  const std::string reduce = kf::prelude_for("float s = kf_block_reduce(x, kf_sum_op()); float h = kf_h2f(u);");
  assert_true(has(reduce, "kf_block_reduce"));
  assert_true(has(reduce, "struct kf_sum_op"));
  assert_true(has(reduce, "kf_shfl_xor"));
  assert_true(has(reduce, "KF_DEV float kf_h2f("));
  assert_false(has(reduce, "kf_philox"));
  assert_true(reduce.size() < whole.size() / 2);
  // A body naming every declared name gets the whole prelude back.
  assert_string_equal(kf::prelude_part(whole, whole).c_str(), whole.c_str());
}

}  // namespace

int main() {
  const CMUnitTest tests[] = {
      cmocka_unit_test(test_keeps_used_and_overloads),
      cmocka_unit_test(test_operators_templates_macros),
      cmocka_unit_test(test_nothing_used),
      cmocka_unit_test(test_directives_start_lines),
      cmocka_unit_test(test_real_prelude),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
