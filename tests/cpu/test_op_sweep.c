/* The GPU differential's op sweeps, checked where CI runs: the ops they take
 * from the library's table (tests/op_sweep.h) are every unary, binary and
 * ternary op, each builds alone for at least one dtype (an op the sweep
 * would skip for every dtype fails here, not silently on the GPU), and the
 * CPU backend runs each op on every dtype its type rule accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "op_sweep.h"
#include "gpu/dl_values.h"  /* (kfuse dtype <-> DLPack: no GPU needed) */

static void check_category(kf_op_category category, int arity, int at_least) {
  kf_op ops[256];
  const int n = sweep_ops(category, arity, ops, 256);
  if (n < at_least) fail_msg("%d ops of arity %d listed, expected at least %d", n, arity, at_least);
  /* Every op of the category in the table has that arity: none is left out. */
  for (int op = 0;; ++op) {
    kf_op_info info;
    info.struct_size = sizeof info;
    if (kf_op_get_info((kf_op)op, &info) != KF_OK) break;
    if (info.category == category && info.num_inputs != arity)
      fail_msg("%s: category of arity %d but %d inputs", info.name, arity, info.num_inputs);
  }
  int cases = 0;
  for (int i = 0; i < n; ++i) {
    int dtypes = 0;
    for (int k = 0; k < NUM_SWEEP_DTYPES; ++k) {
      const kf_dtype dt = kSweepDtypes[k];
      kf_fusion f = sweep_fusion(ops[i], arity, dt);
      if (f == NULL) continue;
      /* 2 x 3 inputs of ones (where's condition: true), on the CPU backend */
      int64_t shape[2] = {2, 3};
      unsigned char storage[3][2 * 3 * 8];
      DLTensor in[3];
      const DLTensor* ptrs[3];
      for (int a = 0; a < arity; ++a) {
        const kf_dtype t = (ops[i] == KF_OP_WHERE && a == 0) ? KF_BOOL : dt;
        const DLDataType d = dl_of(t);
        memset(storage[a], 0, sizeof storage[a]);
        for (int e = 0; e < 6; ++e) {
          unsigned char* p = storage[a] + e * dtype_bytes(t);
          switch (t) {
            case KF_FLOAT64: { double v = 1; memcpy(p, &v, 8); break; }
            case KF_FLOAT32: { float v = 1; memcpy(p, &v, 4); break; }
            case KF_FLOAT16: p[1] = 0x3c; break;  /* 1.0 */
            case KF_BFLOAT16: p[1] = 0x3f; p[0] = 0x80; break;
            case KF_INT64: { int64_t v = 1; memcpy(p, &v, 8); break; }
            case KF_INT32: { int32_t v = 1; memcpy(p, &v, 4); break; }
            default: p[0] = 1; break;
          }
        }
        in[a] = kf_test_tensor(storage[a], d, 2, shape, NULL);
        ptrs[a] = &in[a];
      }
      DLManagedTensor* out = NULL;
      const kf_status s = kf_execute(f, ptrs, (size_t)arity, &out, 1, NULL);
      if (s != KF_OK) fail_msg("%s on %s: %s", kf_op_name(ops[i]), kf_dtype_name(dt), kf_last_error());
      out->deleter(out);
      kf_fusion_release(f);
      ++dtypes;
    }
    if (dtypes == 0) fail_msg("%s: builds for no dtype (the GPU sweep would skip it)", kf_op_name(ops[i]));
    cases += dtypes;
  }
  print_message("%d ops of arity %d, %d op/dtype cases\n", n, arity, cases);
}

static void test_unary(void** state) {
  (void)state;
  check_category(KF_OP_CATEGORY_UNARY, 1, 30);
}

static void test_binary(void** state) {
  (void)state;
  check_category(KF_OP_CATEGORY_BINARY, 2, 20);
}

static void test_ternary(void** state) {
  (void)state;
  check_category(KF_OP_CATEGORY_TERNARY, 3, 3);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_ternary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
