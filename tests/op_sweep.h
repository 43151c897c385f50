/* The ops a pointwise sweep runs, from the library's op table (issue 45:
 * categories and arities come from kf_op_get_info, never from the enum's
 * order, so an op appended to kf_op joins the sweeps by itself). Shared by
 * the GPU differential's sweeps and the CPU test that every swept op builds
 * for some dtype (tests/cpu/test_op_sweep.c). Include after test_util.h. */
#ifndef KFUSE_TEST_OP_SWEEP_H
#define KFUSE_TEST_OP_SWEEP_H

#include "test_util.h"

/* The dtypes a sweep tries each op on. */
static const kf_dtype kSweepDtypes[] = {KF_FLOAT64, KF_FLOAT32, KF_FLOAT16, KF_BFLOAT16,
                                        KF_INT64,   KF_INT32,   KF_BOOL};
#define NUM_SWEEP_DTYPES 7

/* Every op of `category` with `arity` inputs (unary 1, binary 2, ternary
 * 3), in table order, into ops[0..cap); returns how many. */
static inline int sweep_ops(kf_op_category category, int arity, kf_op* ops, int cap) {
  int n = 0;
  for (int op = 0;; ++op) {
    kf_op_info info;
    info.struct_size = sizeof info;
    if (kf_op_get_info((kf_op)op, &info) != KF_OK) break;  /* past the last op */
    if (info.category == category && info.num_inputs == arity && n < cap) ops[n++] = (kf_op)op;
  }
  return n;
}

/* op(args of dtype dt) alone on rank-2 inputs (where's condition: bool);
 * NULL when the op's type rule rejects the dtype. */
static inline kf_fusion sweep_fusion(kf_op op, int arity, kf_dtype dt) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t in[3], out = -1;
  for (int k = 0; k < arity; ++k) {
    kf_dtype t = (op == KF_OP_WHERE && k == 0) ? KF_BOOL : dt;
    KF_CHECK(kf_define_tensor(b, 2, t, &in[k]));
  }
  kf_status s = arity == 1   ? kf_unary(b, op, in[0], &out)
                : arity == 2 ? kf_binary(b, op, in[0], in[1], &out)
                             : kf_ternary(b, op, in[0], in[1], in[2], &out);
  kf_fusion f = NULL;
  if (s == KF_OK) {
    KF_CHECK(kf_add_output(b, out, NULL, 0, -1));
    KF_CHECK(kf_builder_finalize(b, &f));
  }
  kf_builder_destroy(b);
  return f;
}

#endif
