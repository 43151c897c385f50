/* The fusion text form through the public API: printing and parsing give
 * back the same cached fusion for every op and constant, hand-written text
 * equals the builder's definition, and malformed text fails with
 * KF_ERR_PARSE at the exact line and column. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>

#include "test_util.h"

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */

/* Prints f, parses the text, checks the same handle comes back and prints
 * the same text. Returns the text (free with kf_string_free). */
static char* round_trip(kf_fusion f) {
  char* text = NULL;
  KF_CHECK(kf_fusion_to_text(f, &text));
  kf_fusion parsed = NULL;
  if (kf_fusion_from_text(text, &parsed) != KF_OK)
    fail_msg("the printed text does not parse: %s\n%s", kf_last_error(), text);
  if (parsed != f) fail_msg("the printed text parses to another fusion:\n%s", text);
  char* again = NULL;
  KF_CHECK(kf_fusion_to_text(parsed, &again));
  assert_string_equal(text, again);
  kf_string_free(again);
  kf_fusion_release(parsed);
  return text;
}

static kf_fusion finalize(kf_builder b) {
  kf_fusion f = NULL;
  KF_CHECK(kf_builder_finalize(b, &f));
  kf_builder_destroy(b);
  return f;
}

static int64_t tensor(kf_builder b, int rank, kf_dtype dtype) {
  int64_t id;
  KF_CHECK(kf_define_tensor(b, rank, dtype, &id));
  return id;
}

static int64_t scalar(kf_builder b, kf_dtype dtype) {
  int64_t id;
  KF_CHECK(kf_define_scalar(b, dtype, &id));
  return id;
}

static int64_t const_f(kf_builder b, double v, kf_dtype dtype) {
  int64_t id;
  KF_CHECK(kf_define_constant_f64(b, v, dtype, &id));
  return id;
}

static int64_t const_i(kf_builder b, int64_t v, kf_dtype dtype) {
  int64_t id;
  KF_CHECK(kf_define_constant_i64(b, v, dtype, &id));
  return id;
}

static void output(kf_builder b, int64_t v) { KF_CHECK(kf_add_output(b, v, NULL, 0, -1)); }

static kf_fusion parse(const char* text) {
  kf_fusion f = NULL;
  if (kf_fusion_from_text(text, &f) != KF_OK)
    fail_msg("parse failed: %s\n%s", kf_last_error(), text);
  return f;
}

/* Parsing `text` fails with `status` and a message that starts with
 * `prefix` (which holds the exact "line L, column C: "). */
static void expect_error(const char* text, kf_status status, const char* prefix) {
  kf_fusion f = NULL;
  kf_status s = kf_fusion_from_text(text, &f);
  if (s != status)
    fail_msg("parsing:\n%s\n-> %s, expected %s (message: %s)", text, kf_status_name(s),
             kf_status_name(status), kf_last_error());
  if (strncmp(kf_last_error(), prefix, strlen(prefix)) != 0)
    fail_msg("parsing:\n%s\nmessage \"%s\" does not start with \"%s\"", text, kf_last_error(),
             prefix);
  assert_null(f);
}

/* ------------------------------------------------------------------------ */
/* one fusion per op                                                        */

static int is_bitwise(kf_op op) {
  return op == KF_OP_BITWISE_AND || op == KF_OP_BITWISE_OR || op == KF_OP_BITWISE_XOR ||
         op == KF_OP_SHIFT_LEFT || op == KF_OP_SHIFT_RIGHT;
}

/* A shape [n0 (constant 4), n1 (scalar input)] for shape-taking ops. */
static void shape2(kf_builder b, int64_t shape[2]) {
  shape[0] = const_i(b, 4, KF_INT64);
  shape[1] = scalar(b, KF_INT64);
}

static void build_pointwise(kf_builder b, kf_op op) {
  int64_t out;
  if (op <= KF_OP_BITWISE_NOT) {
    const int integral = op == KF_OP_LOGICAL_NOT || op == KF_OP_BITWISE_NOT;
    KF_CHECK(kf_unary(b, op, tensor(b, 2, integral ? KF_INT32 : KF_FLOAT32), &out));
  } else if (op <= KF_OP_SHIFT_RIGHT) {
    if (is_bitwise(op)) {
      int64_t x = tensor(b, 2, KF_INT64);
      KF_CHECK(kf_binary(b, op, x, tensor(b, 1, KF_INT32), &out));
    } else {
      int64_t x = tensor(b, 2, KF_FLOAT32);
      KF_CHECK(kf_binary(b, op, x, scalar(b, KF_FLOAT64), &out));
    }
  } else if (op == KF_OP_WHERE) {
    int64_t cond = tensor(b, 2, KF_BOOL);
    int64_t x = tensor(b, 2, KF_FLOAT16);
    KF_CHECK(kf_ternary(b, op, cond, x, const_f(b, 0.0, KF_FLOAT32), &out));
  } else {
    int64_t x = tensor(b, 2, KF_FLOAT32);
    int64_t y = tensor(b, 2, KF_FLOAT32);
    KF_CHECK(kf_ternary(b, op, x, y, const_f(b, 0.25, KF_FLOAT32), &out));
  }
  output(b, out);
}

static void build_reduction(kf_builder b, kf_op op) {
  int64_t x = tensor(b, 3, KF_FLOAT32), out, mean;
  const int64_t axes[] = {-1, 0};
  if (op == KF_OP_VAR) {
    KF_CHECK(kf_var(b, x, axes, 2, 0, 1, &out));
  } else if (op == KF_OP_VAR_MEAN) {
    KF_CHECK(kf_var_mean(b, x, axes, 1, 1, 0, &out, &mean));
    output(b, mean);
  } else {
    KF_CHECK(kf_reduce(b, op, x, axes, op == KF_OP_SUM ? 0 : 2, op == KF_OP_MAX, &out));
  }
  output(b, out);
}

static void build_shape(kf_builder b, kf_op op) {
  int64_t shape[2], out;
  switch (op) {
    case KF_OP_BROADCAST_IN_DIM: {
      int64_t x = tensor(b, 1, KF_BFLOAT16);
      const int64_t dims[] = {1};
      shape2(b, shape);
      KF_CHECK(kf_broadcast_in_dim(b, x, shape, 2, dims, 1, &out));
      break;
    }
    case KF_OP_EXPAND:
      shape2(b, shape);
      KF_CHECK(kf_expand(b, tensor(b, 1, KF_FLOAT32), shape, 2, &out));
      break;
    case KF_OP_RESHAPE: {
      int64_t x = tensor(b, 3, KF_INT64);
      shape[0] = const_i(b, -1, KF_INT64);
      shape[1] = scalar(b, KF_INT32);
      KF_CHECK(kf_reshape(b, x, shape, 2, &out));
      break;
    }
    case KF_OP_PERMUTE: {
      const int64_t perm[] = {2, 0, -2};
      KF_CHECK(kf_permute(b, tensor(b, 3, KF_FLOAT32), perm, 3, &out));
      break;
    }
    case KF_OP_SQUEEZE: {
      const int64_t dims[] = {2, 0};
      KF_CHECK(kf_squeeze(b, tensor(b, 3, KF_FLOAT32), dims, 2, &out));
      break;
    }
    case KF_OP_UNSQUEEZE: KF_CHECK(kf_unsqueeze(b, tensor(b, 2, KF_BOOL), -1, &out)); break;
    case KF_OP_SLICE: {
      int64_t x = tensor(b, 2, KF_FLOAT32), first;
      KF_CHECK(kf_slice(b, x, 1, 1, INT64_MAX, 2, &first));
      output(b, first);
      KF_CHECK(kf_slice(b, x, -2, -3, 5, 1, &out));
      break;
    }
    case KF_OP_PAD: {
      const int64_t pads[] = {0, 0, 1, 2};
      int64_t x = tensor(b, 2, KF_FLOAT32);
      KF_CHECK(kf_pad(b, x, pads, 4, const_f(b, 0.0, KF_FLOAT32), &out));
      break;
    }
    case KF_OP_CAT: {
      int64_t in[3];
      for (int i = 0; i < 3; ++i) in[i] = tensor(b, 2, i == 1 ? KF_FLOAT64 : KF_FLOAT32);
      KF_CHECK(kf_cat(b, in, 3, -1, &out));
      break;
    }
    default: fail_msg("not a shape op: %s", kf_op_name(op));
  }
  output(b, out);
}

static void build_other(kf_builder b, kf_op op) {
  int64_t shape[2], out;
  switch (op) {
    case KF_OP_INDEX_SELECT: {
      int64_t x = tensor(b, 2, KF_FLOAT32);
      KF_CHECK(kf_index_select(b, x, 0, tensor(b, 1, KF_INT64), &out));
      break;
    }
    case KF_OP_GATHER: {
      int64_t x = tensor(b, 2, KF_FLOAT32);
      KF_CHECK(kf_gather(b, x, 1, tensor(b, 2, KF_INT32), &out));
      break;
    }
    case KF_OP_FULL:
      shape2(b, shape);
      KF_CHECK(kf_full(b, shape, 2, const_f(b, 1.5, KF_FLOAT32), KF_FLOAT16, &out));
      break;
    case KF_OP_IOTA: {
      int64_t n = scalar(b, KF_INT64);
      KF_CHECK(kf_iota(b, n, const_i(b, 3, KF_INT64), const_i(b, -2, KF_INT64), KF_INT32, &out));
      break;
    }
    case KF_OP_UNIFORM:
    case KF_OP_NORMAL: {
      shape2(b, shape);
      int64_t lo = const_f(b, -1.0, KF_FLOAT32), hi = const_f(b, 2.0, KF_FLOAT32);
      int64_t seed = scalar(b, KF_INT64), offset = const_i(b, 7, KF_INT64);
      if (op == KF_OP_UNIFORM)
        KF_CHECK(kf_uniform(b, shape, 2, lo, hi, seed, offset, KF_FLOAT32, &out));
      else
        KF_CHECK(kf_normal(b, shape, 1, lo, hi, seed, offset, KF_BFLOAT16, &out));
      break;
    }
    case KF_OP_MATMUL: {
      int64_t a = tensor(b, 3, KF_FLOAT32);
      KF_CHECK(kf_matmul(b, a, tensor(b, 2, KF_FLOAT32), &out));
      break;
    }
    case KF_OP_LINEAR: {
      int64_t x = tensor(b, 2, KF_FLOAT32), w = tensor(b, 2, KF_FLOAT32), no_bias;
      KF_CHECK(kf_linear(b, x, w, -1, &no_bias));
      output(b, no_bias);
      KF_CHECK(kf_linear(b, x, w, tensor(b, 1, KF_FLOAT32), &out));
      break;
    }
    case KF_OP_SEGMENT_SET: KF_CHECK(kf_segment_set(b, tensor(b, 2, KF_FLOAT32), &out)); break;
    case KF_OP_SIZE: {
      int64_t n;
      KF_CHECK(kf_size(b, tensor(b, 3, KF_BFLOAT16), -2, &n));
      KF_CHECK(kf_binary(b, KF_OP_MUL, tensor(b, 2, KF_FLOAT32), n, &out));
      break;
    }
    case KF_OP_ARGMAX:
    case KF_OP_ARGMIN: {
      const int64_t axis[1] = {-1};
      KF_CHECK(kf_reduce(b, op, tensor(b, 2, KF_BFLOAT16), axis, 1, 1, &out));
      break;
    }
    case KF_OP_SCATTER: {
      int64_t x = tensor(b, 2, KF_BFLOAT16);
      KF_CHECK(kf_scatter(b, x, -1, tensor(b, 2, KF_INT64), tensor(b, 2, KF_BFLOAT16), KF_SCATTER_AMAX,
                          KF_SCATTER_EXCLUDE_SELF | KF_SCATTER_DETERMINISTIC, &out));
      break;
    }
    case KF_OP_INDEX_REDUCE: {
      int64_t x = tensor(b, 3, KF_FLOAT32), v;
      KF_CHECK(kf_index_add(b, x, 1, tensor(b, 1, KF_INT32), tensor(b, 3, KF_FLOAT32), &v));
      KF_CHECK(kf_index_put(b, v, tensor(b, 1, KF_INT64), tensor(b, 1, KF_FLOAT32), 1, KF_SCATTER_DETERMINISTIC, &out));
      break;
    }
    case KF_OP_CUMSUM:
    case KF_OP_CUMPROD:
    case KF_OP_CUMMAX:
      KF_CHECK(kf_scan(b, op, tensor(b, 3, KF_INT32), -1, op == KF_OP_CUMPROD, &out));
      break;
    default: fail_msg("no builder for op %s", kf_op_name(op));
  }
  output(b, out);
}

static kf_fusion build_op(kf_op op) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  if (op <= KF_OP_FMA) {
    build_pointwise(b, op);
  } else if (op == KF_OP_CAST) {
    int64_t out;
    KF_CHECK(kf_cast(b, tensor(b, 2, KF_FLOAT32), KF_BFLOAT16, &out));
    output(b, out);
  } else if (op <= KF_OP_VAR_MEAN) {
    build_reduction(b, op);
  } else if (op <= KF_OP_CAT) {
    build_shape(b, op);
  } else {
    build_other(b, op);
  }
  return finalize(b);
}

/* Every op a definition can hold (the communication ops are kfuse's own:
 * test_multidevice checks that a builder rejects them and that a mesh's
 * definition round-trips). */
static void test_round_trip_every_op(void** state) {
  (void)state;
  for (int i = 0; i < KF_OP_COUNT; ++i) {
    if (i >= KF_OP_ALLREDUCE && i <= KF_OP_SHARD_SLICE) continue;
    kf_fusion f = build_op((kf_op)i);
    char* text = round_trip(f);
    char call[64];
    snprintf(call, sizeof call, "= %s(", kf_op_name((kf_op)i));
    if (strstr(text, call) == NULL) fail_msg("no '%s' in:\n%s", call, text);
    kf_string_free(text);
    kf_fusion_release(f);
  }
}

/* The canonical text spells out every attribute and names values by kind. */
static void test_printed_form(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x = tensor(b, 2, KF_FLOAT32), s = scalar(b, KF_FLOAT64), c = const_f(b, 0.5, KF_FLOAT32);
  int64_t y, m, v, mu, sl, order[] = {1, 0};
  const int64_t axes[] = {-1};
  KF_CHECK(kf_binary(b, KF_OP_ADD, x, c, &y));
  KF_CHECK(kf_reduce(b, KF_OP_SUM, y, axes, 1, 1, &m));
  KF_CHECK(kf_var_mean(b, y, NULL, 0, 1, 0, &v, &mu));
  KF_CHECK(kf_slice(b, x, 1, 0, INT64_MAX, 2, &sl));
  KF_CHECK(kf_add_output(b, m, NULL, 0, -1));
  KF_CHECK(kf_add_output(b, sl, order, 2, 0));
  (void)s;
  kf_fusion f = finalize(b);
  char* text = round_trip(f);
  assert_string_equal(text,
                      "input t0: tensor<float32, 2>\n"
                      "input s1: scalar<float64>\n"
                      "const c2: float32 = 0.5\n"
                      "v3 = add(t0, c2)\n"
                      "v4 = sum(v3) {axes=[1], keepdim=true}\n"
                      "v5, v6 = var_mean(v3) {axes=[0, 1], keepdim=false, correction=1}\n"
                      "v7 = slice(t0) {dim=1, start=0, stop=end, step=2}\n"
                      "output v4\n"
                      "output v7 {stride_order=[1, 0], alias=0}\n");
  kf_string_free(text);
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* constants                                                                */

static double from_bits(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

static void test_constants_of_every_dtype(void** state) {
  (void)state;
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x = tensor(b, 1, KF_FLOAT32), out;
  const double doubles[] = {0.1,       -0.0,      0.0,           INFINITY,  -INFINITY,
                            NAN,       -NAN,      DBL_MAX,       -DBL_MIN,  4.9406564584124654e-324,
                            1.0 / 3.0, 1e300,     from_bits(0x7ff8000000000123ull),
                            from_bits(0xfff0000000000001ull)};
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; ++i) const_f(b, doubles[i], KF_FLOAT64);
  const_f(b, 0.5, KF_FLOAT32);
  const_f(b, 65504.0, KF_FLOAT16);
  const_f(b, -1e-3, KF_BFLOAT16);
  const_i(b, 3, KF_FLOAT32); /* an integer value of a float dtype */
  const_f(b, 12.0, KF_INT32); /* an integral double of an int dtype */
  const_i(b, INT64_MIN, KF_INT64);
  const_i(b, INT64_MAX, KF_INT64);
  const_i(b, INT32_MIN, KF_INT32);
  const_i(b, INT32_MAX, KF_INT32);
  const_i(b, 1, KF_BOOL);
  const_i(b, 0, KF_BOOL);
  KF_CHECK(kf_unary(b, KF_OP_NEG, x, &out));
  output(b, out);
  kf_fusion f = finalize(b);
  char* text = round_trip(f);
  const char* expected[] = {
      "float64 = 0.10000000000000001\n", "float64 = -0\n", "float64 = 0\n", "float64 = inf\n",
      "float64 = -inf\n", "float64 = nan\n", "float64 = -nan\n",
      "float64 = 1.7976931348623157e+308\n", "float64 = -2.2250738585072014e-308\n",
      "float64 = 4.9406564584124654e-324\n", "float64 = 0.33333333333333331\n",
      "float64 = 1.0000000000000001e+300\n", "float64 = nan(0x8000000000123)\n", "float64 = -nan(0x1)\n",
      "float32 = 0.5\n", "float16 = 65504\n", "bfloat16 = -0.001\n", "float32 = 3\n",
      "int32 = 12\n", "int64 = -9223372036854775808\n", "int64 = 9223372036854775807\n",
      "int32 = -2147483648\n", "int32 = 2147483647\n", "bool = true\n", "bool = false\n"};
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; ++i)
    if (strstr(text, expected[i]) == NULL) fail_msg("no '%s' in:\n%s", expected[i], text);
  kf_string_free(text);
  kf_fusion_release(f);
}

/* ------------------------------------------------------------------------ */
/* hand-written text                                                        */

static const char* kLayerNorm =
    "# layer norm over the last dim, written by hand\n"
    "input x: tensor<float32, 2>     # activations\n"
    "input w: tensor<float32, 1>\n"
    "input b: tensor<float32, 1>\n"
    "\n"
    "const eps: float32 = 1e-5\n"
    "var, mean = var_mean(x) {keepdim=true, correction=0, axes=[-1]}  # any order\n"
    "centered = sub(x, mean)\n"
    "   var_eps = add(var, eps)\n"
    "inv_std = rsqrt(var_eps)\n"
    "normed = mul(centered, inv_std); scaled = mul(normed, w)\n"
    "y = add(scaled, b)\n"
    "total = sum(y)              # defaults: all axes, keepdim=false\n"
    "row = slice(y) {dim=0}      # defaults: start=0, stop=end, step=1\n"
    "output y\n"
    "output total\n"
    "output row {alias=0}";

static kf_fusion build_layer_norm(void) {
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x = tensor(b, 2, KF_FLOAT32), w = tensor(b, 1, KF_FLOAT32), bias = tensor(b, 1, KF_FLOAT32);
  int64_t eps = const_f(b, 1e-5, KF_FLOAT32);
  int64_t var, mean, centered, var_eps, inv_std, normed, scaled, y, total, row;
  const int64_t last[] = {1};
  KF_CHECK(kf_var_mean(b, x, last, 1, 0, 1, &var, &mean));
  KF_CHECK(kf_binary(b, KF_OP_SUB, x, mean, &centered));
  KF_CHECK(kf_binary(b, KF_OP_ADD, var, eps, &var_eps));
  KF_CHECK(kf_unary(b, KF_OP_RSQRT, var_eps, &inv_std));
  KF_CHECK(kf_binary(b, KF_OP_MUL, centered, inv_std, &normed));
  KF_CHECK(kf_binary(b, KF_OP_MUL, normed, w, &scaled));
  KF_CHECK(kf_binary(b, KF_OP_ADD, scaled, bias, &y));
  KF_CHECK(kf_reduce(b, KF_OP_SUM, y, NULL, 0, 0, &total));
  KF_CHECK(kf_slice(b, y, 0, 0, INT64_MAX, 1, &row));
  output(b, y);
  output(b, total);
  KF_CHECK(kf_add_output(b, row, NULL, 0, 0));
  return finalize(b);
}

static void test_hand_written_text(void** state) {
  (void)state;
  kf_fusion built = build_layer_norm();
  kf_fusion parsed = parse(kLayerNorm);
  assert_ptr_equal(built, parsed);
  kf_fusion_release(parsed);
  kf_fusion_release(built);
}

/* Statement keywords stay usable as value names. */
static void test_keywords_as_names(void** state) {
  (void)state;
  kf_fusion parsed = parse(
      "input input: tensor<float16, 1>\n"
      "const const: float16 = 2\n"
      "output, end = var_mean(input) {axes=[0], keepdim=true}\n"
      "output output\n"
      "output end\n");
  kf_builder b;
  KF_CHECK(kf_builder_create(&b));
  int64_t x = tensor(b, 1, KF_FLOAT16), var, mean;
  const int64_t axes[] = {0};
  const_f(b, 2.0, KF_FLOAT16);
  KF_CHECK(kf_var_mean(b, x, axes, 1, 1, 1, &var, &mean));
  output(b, var);
  output(b, mean);
  kf_fusion built = finalize(b);
  assert_ptr_equal(built, parsed);
  kf_fusion_release(parsed);
  kf_fusion_release(built);
}

/* ------------------------------------------------------------------------ */
/* errors                                                                   */

#define BASE "input x: tensor<float32, 2>\n"

static void test_syntax_errors(void** state) {
  (void)state;
  expect_error(BASE "y = frobnicate(x)\noutput y\n", KF_ERR_PARSE,
               "line 2, column 5: unknown op 'frobnicate'");
  expect_error(BASE "y = neg(x\noutput y\n", KF_ERR_PARSE,
               "line 2, column 10: expected ')' after argument list, got end of line");
  expect_error(BASE "y = add(x x)\n", KF_ERR_PARSE,
               "line 2, column 11: expected ')' after argument list, got 'x'");
  expect_error(BASE "y = neg(z)\n", KF_ERR_PARSE, "line 2, column 9: unknown name 'z'");
  expect_error(BASE "y = neg(y)\n", KF_ERR_PARSE, "line 2, column 9: unknown name 'y'");
  /* An op name used as an argument: calls do not nest, and the hint says so. */
  expect_error(BASE "y = exp(neg(x))\noutput y\n", KF_ERR_PARSE,
               "line 2, column 9: unknown name 'neg' (calls do not nest: bind neg(x) to a name first)");
  expect_error(BASE "y = add(x, mul(x, exp(x)))\n", KF_ERR_PARSE,
               "line 2, column 12: unknown name 'mul' (calls do not nest: bind mul(x, exp(x)) to a "
               "name first)");
  expect_error(BASE "output neg(x\n", KF_ERR_PARSE,
               "line 2, column 8: unknown name 'neg' (calls do not nest: bind neg(...) to a name first)");
  /* Two names in a row: a misspelt statement keyword. */
  expect_error("inptu x: tensor<float32, 2>\n", KF_ERR_PARSE,
               "line 1, column 1: unknown statement 'inptu' (did you mean 'input'?)");
  expect_error(BASE "outptu x\n", KF_ERR_PARSE,
               "line 2, column 1: unknown statement 'outptu' (did you mean 'output'?)");
  expect_error("cnst c: float32 = 1\n", KF_ERR_PARSE,
               "line 1, column 1: unknown statement 'cnst' (did you mean 'const'?)");
  expect_error("define x: tensor<float32, 2>\n", KF_ERR_PARSE,
               "line 1, column 1: unknown statement 'define' (expected input, const, output, mesh, shard, "
               "replicate or 'name = op(...)')");
  expect_error(BASE "input x: tensor<float32, 1>\n", KF_ERR_PARSE,
               "line 2, column 7: 'x' is already defined on line 1");
  expect_error(BASE "y = neg(x)\ny = exp(x)\n", KF_ERR_PARSE,
               "line 3, column 1: 'y' is already defined on line 2");
  expect_error(BASE "a, a = var_mean(x)\n", KF_ERR_PARSE, "line 2, column 4: 'a' is named twice");
  expect_error(BASE "y = var_mean(x)\n", KF_ERR_PARSE,
               "line 2, column 5: var_mean has 2 results, got 1 name");
  expect_error(BASE "y = add(x)\n", KF_ERR_PARSE, "line 2, column 10: add takes 2 arguments, got 1");
  expect_error(BASE "y = neg(x, x)\n", KF_ERR_PARSE,
               "line 2, column 12: too many arguments for neg (it takes 1 argument)");
  expect_error(BASE "y = add(x, )\n", KF_ERR_PARSE,
               "line 2, column 12: expected a value name as argument 2 of add, got ')'");
  expect_error(BASE "y = reshape(x, x)\n", KF_ERR_PARSE,
               "line 2, column 16: expected a shape list '[...]' as argument 2 of reshape, got 'x'");
  expect_error(BASE "y = add(x, 1)\n", KF_ERR_PARSE,
               "line 2, column 12: expected a value name as argument 2 of add, got '1'");
  expect_error(BASE "y = neg(x) extra\n", KF_ERR_PARSE,
               "line 2, column 12: expected end of line after the statement, got 'extra'");
  expect_error("input x: matrix<float32>\n", KF_ERR_PARSE,
               "line 1, column 10: expected 'tensor' or 'scalar', got 'matrix'");
  expect_error("input x: tensor<float8, 1>\n", KF_ERR_PARSE,
               "line 1, column 17: expected a dtype (float64, float32, float16, bfloat16, int64, "
               "int32, bool, float8_e4m3fn, float8_e5m2, int8 or uint8), got 'float8'");
  /* The list names every dtype there is (it once stopped at bool). */
  {
    char list[512] = "(";
    for (int d = 0; d < KF_DTYPE_COUNT; ++d) {
      strcat(list, d == 0 ? "" : d + 1 < KF_DTYPE_COUNT ? ", " : " or ");
      strcat(list, kf_dtype_name((kf_dtype)d));
    }
    strcat(list, ")");
    if (strstr(kf_last_error(), list) == NULL) fail_msg("'%s' is not in: %s", list, kf_last_error());
  }
  expect_error("const b: bool = 1\n", KF_ERR_PARSE,
               "line 1, column 17: expected true or false, got '1'");
  expect_error("const n: int64 = 1.5\n", KF_ERR_PARSE,
               "line 1, column 18: expected an integer literal, got '1.5'");
  expect_error("const c: float32 = 1.5e\n", KF_ERR_PARSE,
               "line 1, column 20: malformed number '1.5e'");
  expect_error("const c: float32 = nan(0)\n", KF_ERR_PARSE,
               "line 1, column 24: expected a NaN payload 0x1 to 0xfffffffffffff, got '0'");
}

static void test_attribute_errors(void** state) {
  (void)state;
  expect_error(BASE "y = sum(x) {axis=[0]}\n", KF_ERR_PARSE,
               "line 2, column 13: unknown attribute 'axis' for sum (expected axes or keepdim)");
  expect_error(BASE "y = neg(x) {dim=0}\n", KF_ERR_PARSE,
               "line 2, column 13: unknown attribute 'dim' for neg (it takes none)");
  expect_error(BASE "y = sum(x) {keepdim=1}\n", KF_ERR_PARSE,
               "line 2, column 21: expected true or false for attribute 'keepdim', got '1'");
  expect_error(BASE "y = sum(x) {axes=1}\n", KF_ERR_PARSE,
               "line 2, column 18: expected a list '[...]' for attribute 'axes', got '1'");
  expect_error(BASE "y = sum(x) {axes=[0], axes=[1]}\n", KF_ERR_PARSE,
               "line 2, column 23: attribute 'axes' is given twice");
  expect_error(BASE "y = slice(x) {dim=0, stop=last}\n", KF_ERR_PARSE,
               "line 2, column 27: expected an integer or 'end' for attribute 'stop', got 'last'");
  expect_error(BASE "y = cast(x)\n", KF_ERR_PARSE, "line 2, column 5: cast requires attribute 'dtype'");
  expect_error(BASE "y = cast(x) {dtype=float32\n", KF_ERR_PARSE,
               "line 2, column 27: expected '}' after the attributes, got end of line");
  expect_error(BASE "output x {alias=zero}\n", KF_ERR_PARSE,
               "line 2, column 17: expected an integer for attribute 'alias', got 'zero'");
}

static void test_literal_overflow(void** state) {
  (void)state;
  expect_error("const n: int64 = 9223372036854775808\n", KF_ERR_PARSE,
               "line 1, column 18: integer literal '9223372036854775808' does not fit in int64");
  expect_error("const n: int64 = -9223372036854775809\n", KF_ERR_PARSE,
               "line 1, column 18: integer literal '-9223372036854775809' does not fit in int64");
  expect_error(BASE "y = sum(x) {axes=[99999999999999999999999]}\n", KF_ERR_PARSE,
               "line 2, column 19: integer literal '99999999999999999999999' does not fit");
  expect_error("input x: tensor<float32, 18446744073709551616>\n", KF_ERR_PARSE,
               "line 1, column 26: integer literal '18446744073709551616' does not fit in int64");
  expect_error("const c: float64 = 1e999\n", KF_ERR_PARSE,
               "line 1, column 20: float literal '1e999' is out of range for float64");
}

static void test_garbage_truncated_and_empty(void** state) {
  (void)state;
  expect_error("\x01\xff", KF_ERR_PARSE, "line 1, column 1: expected a statement, got byte 0x01");
  expect_error(BASE "y = neg(x) \xc3\xa9\n", KF_ERR_PARSE,
               "line 2, column 12: expected end of line after the statement, got byte 0xc3");
  expect_error(BASE "y = neg(x) @\n", KF_ERR_PARSE,
               "line 2, column 12: expected end of line after the statement, got '@'");
  expect_error("input x: tensor<float32, ", KF_ERR_PARSE,
               "line 1, column 26: expected a rank, got end of input");
  expect_error(BASE "y = sum(x) {axes=[0", KF_ERR_PARSE,
               "line 2, column 20: expected ']' after the list, got end of input");
  expect_error("", KF_ERR_PARSE, "line 1, column 1: the text defines no outputs");
  expect_error("# only a comment\n\n", KF_ERR_PARSE, "line 3, column 1: the text defines no outputs");
  expect_error(BASE "y = neg(x)", KF_ERR_PARSE, "line 2, column 11: the text defines no outputs");
}

/* kf_fusion_from_text_n reads exactly `length` bytes: a NUL among them (in a
 * statement or a comment) is an error with its position, not the end. */
static void test_nul_bytes_with_length(void** state) {
  (void)state;
  static const char in_statement[] = BASE "y = neg(x)\0\noutput y\n";
  static const char in_comment[] = "# a\0b\n" BASE "output x\n";
  kf_fusion f = NULL;
  assert_int_equal(kf_fusion_from_text_n(in_statement, sizeof in_statement - 1, &f), KF_ERR_PARSE);
  assert_string_equal(kf_last_error(),
                      "line 2, column 11: NUL byte (0x00) in the text, expected only text (is the "
                      "file binary or damaged?)");
  assert_null(f);
  assert_int_equal(kf_fusion_from_text_n(in_comment, sizeof in_comment - 1, &f), KF_ERR_PARSE);
  assert_true(strncmp(kf_last_error(), "line 1, column 4: NUL byte", 26) == 0);
  assert_null(f);

  /* No terminator needed: the bytes after `length` are not read. */
  static const char text[] = BASE "output x\n" "garbage(";
  kf_fusion parsed = NULL;
  KF_CHECK(kf_fusion_from_text_n(text, strlen(BASE "output x\n"), &parsed));
  kf_fusion same = parse(BASE "output x\n");
  assert_ptr_equal(parsed, same);
  kf_fusion_release(same);
  kf_fusion_release(parsed);

  KF_EXPECT_ERROR(kf_fusion_from_text_n(NULL, 0, &f), KF_ERR_INVALID_ARGUMENT, "text");
  KF_EXPECT_ERROR(kf_fusion_from_text_n(text, 4, NULL), KF_ERR_INVALID_ARGUMENT, "out");
}

/* Errors of the builder's rules keep their status and gain the position. */
static void test_builder_errors_keep_status(void** state) {
  (void)state;
  expect_error(BASE "input v: tensor<float32, 1>\ny = cat(x, v) {dim=0}\noutput y\n",
               KF_ERR_SHAPE_MISMATCH, "line 3, column 5: cat: argument 1");
  expect_error(BASE "y = bitwise_not(x)\n", KF_ERR_DTYPE_MISMATCH,
               "line 2, column 5: bitwise_not: expected integer or bool operands, got float32");
  expect_error(BASE "y = sum(x) {axes=[2]}\n", KF_ERR_INVALID_ARGUMENT, "line 2, column 5: sum: axis 2");
  expect_error("input x: tensor<float32, 17>\n", KF_ERR_INVALID_ARGUMENT,
               "line 1, column 26: kf_define_tensor: rank 17");
  expect_error("const c: int32 = 3000000000\n", KF_ERR_INVALID_ARGUMENT,
               "line 1, column 18: kf_define_constant_i64: value 3000000000 does not fit int32");
  expect_error(BASE "const c: float32 = 1\noutput c\n", KF_ERR_UNSUPPORTED,
               "line 3, column 8: kf_add_output: value 1 is a scalar");
}

static void test_null_arguments(void** state) {
  (void)state;
  kf_fusion f = NULL;
  char* text = NULL;
  KF_EXPECT_ERROR(kf_fusion_from_text(NULL, &f), KF_ERR_INVALID_ARGUMENT, "text");
  KF_EXPECT_ERROR(kf_fusion_from_text(BASE "output x\n", NULL), KF_ERR_INVALID_ARGUMENT, "out");
  KF_EXPECT_ERROR(kf_fusion_to_text(NULL, &text), KF_ERR_INVALID_ARGUMENT, "fusion");
  f = parse(BASE "output x\n");
  KF_EXPECT_ERROR(kf_fusion_to_text(f, NULL), KF_ERR_INVALID_ARGUMENT, "out");
  kf_fusion_release(f);
  kf_string_free(NULL);
}

/* Every prefix of a valid text, and every one-byte corruption of it, either
 * parses or fails with a positioned message: never a crash. */
static void test_damaged_text_fails_cleanly(void** state) {
  (void)state;
  const size_t n = strlen(kLayerNorm);
  char* buf = malloc(n + 1);
  assert_non_null(buf);
  const char replacements[] = {'\0', '\xff', '(', ')', '[', ',', '=', '-', '\n', '9', 'e'};
  for (size_t len = 0; len <= n; ++len) {
    for (size_t r = 0; r <= sizeof replacements; ++r) {
      memcpy(buf, kLayerNorm, n + 1);
      if (r == sizeof replacements) buf[len] = '\0'; /* the prefix */
      else if (len < n) buf[len] = replacements[r];
      else continue;
      kf_fusion f = NULL;
      kf_status s = kf_fusion_from_text(buf, &f);
      if (s == KF_OK) {
        kf_fusion_release(f);
        continue;
      }
      if (strncmp(kf_last_error(), "line ", 5) != 0)
        fail_msg("%s without a position: %s", kf_status_name(s), kf_last_error());
    }
  }
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_op),
      cmocka_unit_test(test_printed_form),
      cmocka_unit_test(test_constants_of_every_dtype),
      cmocka_unit_test(test_hand_written_text),
      cmocka_unit_test(test_keywords_as_names),
      cmocka_unit_test(test_syntax_errors),
      cmocka_unit_test(test_attribute_errors),
      cmocka_unit_test(test_literal_overflow),
      cmocka_unit_test(test_garbage_truncated_and_empty),
      cmocka_unit_test(test_nul_bytes_with_length),
      cmocka_unit_test(test_builder_errors_keep_status),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_damaged_text_fails_cleanly),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
