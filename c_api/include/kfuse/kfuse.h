/*
 * kfuse: a fusion code generator behind a C ABI.
 *
 * This is the only public header. Conventions (see docs/c-api.md):
 *  - Every function returns a kf_status (KF_OK == 0) unless it says otherwise.
 *    Nothing throws or aborts across this boundary.
 *  - On failure, kf_last_error() returns a message for the failing call. It is
 *    thread-local: read it on the same thread, before the next kfuse call.
 *  - Handles are opaque. Release/destroy functions accept NULL.
 *  - Every out-parameter says who owns what it returns and for how long.
 *  - Options structs start with `size_t struct_size` and only grow at the end.
 *  - Thread safety: a builder is single-threaded; fusions, concrete fusions
 *    and segmentations are immutable and may be used from many threads.
 */
#ifndef KFUSE_KFUSE_H
#define KFUSE_KFUSE_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(KFUSE_BUILDING_LIBRARY)
#define KF_API __attribute__((visibility("default")))
#else
#define KF_API
#endif

/* The API version this header describes. kf_check_version() compares it with
 * the library's; a mismatch is an error, never an abort. */
#define KF_API_VERSION 1

/* DLPack 0.6 lacks kDLBool (type code 6, 8 bits, introduced in DLPack 0.8).
 * kfuse accepts it, and also kDLUInt/kDLInt with 8 bits as bool for dtypes
 * declared KF_BOOL. */
#define KF_DLPACK_BOOL_CODE 6
/* DLPack 1.1's float8 codes (kDLFloat8_e4m3fn, kDLFloat8_e5m2; 8 bits),
 * which older dlpack.h headers lack. */
#define KF_DLPACK_FLOAT8_E4M3FN_CODE 10
#define KF_DLPACK_FLOAT8_E5M2_CODE 12

/* ------------------------------------------------------------------------ */
/* Status codes                                                             */

typedef enum kf_status {
  KF_OK = 0,
  KF_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, out-of-range id, bad attribute */
  KF_ERR_UNSUPPORTED = 2,      /* valid request that kfuse cannot do (says why) */
  KF_ERR_SHAPE_MISMATCH = 3,   /* rank or sizes disagree with the definition */
  KF_ERR_DTYPE_MISMATCH = 4,   /* dtype disagrees with the definition / op */
  KF_ERR_DEVICE_MISMATCH = 5,  /* tensors on different devices */
  KF_ERR_OUT_OF_MEMORY = 6,
  KF_ERR_PARSE = 7,            /* text form: message has "line L, column C" */
  KF_ERR_NO_DEVICE = 8,        /* no CUDA driver / device for kDLCUDA tensors */
  KF_ERR_BACKEND = 9,          /* driver, NVRTC or library call failed */
  KF_ERR_VERSION_MISMATCH = 10,
  KF_ERR_INTERNAL = 11,        /* a kfuse bug: please report the message */
  /* Not a status: makes the enum 32 bits wide, so that any int a caller
   * passes is a valid value of the type (C++ may not load an enum value
   * outside its range). The same holds for kf_dtype and kf_op. */
  KF_STATUS_MAX_ENUM = 0x7fffffff
} kf_status;

/* Thread-local message of the last failed call on this thread. Never NULL
 * (empty string when there is none). Valid until the next kfuse call on this
 * thread. */
KF_API const char* kf_last_error(void);

/* Static name of a status ("KF_ERR_SHAPE_MISMATCH"). Never NULL. */
KF_API const char* kf_status_name(kf_status status);

/* Library API version (KF_API_VERSION of the build). Never changes shape. */
KF_API uint32_t kf_version(void);

/* KF_OK when the library implements `header_version` (pass KF_API_VERSION),
 * KF_ERR_VERSION_MISMATCH otherwise. */
KF_API kf_status kf_check_version(uint32_t header_version);

/* ------------------------------------------------------------------------ */
/* Data types                                                               */

typedef enum kf_dtype {
  KF_FLOAT64 = 0,
  KF_FLOAT32 = 1,
  KF_FLOAT16 = 2,
  KF_BFLOAT16 = 3,
  KF_INT64 = 4,
  KF_INT32 = 5,
  KF_BOOL = 6,
  /* float8 storage (OCP FP8, as torch.float8_e4m3fn / float8_e5m2): math on
   * them runs in float32 and rounds once to the format */
  KF_FLOAT8_E4M3FN = 7,
  KF_FLOAT8_E5M2 = 8,
  /* 8-bit integers: storage and arithmetic that wraps at 8 bits (as torch);
   * int8 and uint8 do not promote with each other (torch gives int16,
   * which kfuse lacks): KF_ERR_DTYPE_MISMATCH, cast one first. */
  KF_INT8 = 9,
  KF_UINT8 = 10,
  KF_DTYPE_COUNT = 11,
  KF_DTYPE_MAX_ENUM = 0x7fffffff
} kf_dtype;

/* Static name ("float32"), or "invalid". */
KF_API const char* kf_dtype_name(kf_dtype dtype);

/* ------------------------------------------------------------------------ */
/* Ops. The argument (value ids) and attribute (int64) layout of each op is
 * documented in docs/c-api.md and docs/text-format.md; the typed helpers
 * below (kf_unary, kf_reduce, ...) fill them in for you. */

typedef enum kf_op {
  /* unary */
  KF_OP_NEG, KF_OP_ABS, KF_OP_EXP, KF_OP_EXP2, KF_OP_EXPM1, KF_OP_LOG,
  KF_OP_LOG2, KF_OP_LOG10, KF_OP_LOG1P, KF_OP_SQRT, KF_OP_RSQRT,
  KF_OP_RECIPROCAL, KF_OP_SIN, KF_OP_COS, KF_OP_TAN, KF_OP_ASIN, KF_OP_ACOS,
  KF_OP_ATAN, KF_OP_SINH, KF_OP_COSH, KF_OP_TANH, KF_OP_ASINH, KF_OP_ACOSH,
  KF_OP_ATANH, KF_OP_SIGMOID, KF_OP_RELU, KF_OP_GELU, KF_OP_GELU_TANH,
  KF_OP_SILU, KF_OP_ERF, KF_OP_ERFC, KF_OP_FLOOR, KF_OP_CEIL, KF_OP_ROUND,
  KF_OP_TRUNC, KF_OP_SIGN, KF_OP_ISNAN, KF_OP_ISINF, KF_OP_ISFINITE,
  KF_OP_LOGICAL_NOT, KF_OP_BITWISE_NOT,
  /* binary */
  KF_OP_ADD, KF_OP_SUB, KF_OP_MUL, KF_OP_DIV, KF_OP_FMOD, KF_OP_REMAINDER,
  KF_OP_POW, KF_OP_ATAN2, KF_OP_MAXIMUM, KF_OP_MINIMUM, KF_OP_EQ, KF_OP_NE,
  KF_OP_LT, KF_OP_LE, KF_OP_GT, KF_OP_GE, KF_OP_LOGICAL_AND, KF_OP_LOGICAL_OR,
  KF_OP_LOGICAL_XOR, KF_OP_BITWISE_AND, KF_OP_BITWISE_OR, KF_OP_BITWISE_XOR,
  KF_OP_SHIFT_LEFT, KF_OP_SHIFT_RIGHT,
  /* ternary */
  KF_OP_WHERE, KF_OP_CLAMP, KF_OP_LERP, KF_OP_FMA,
  /* cast: attrs [dtype] */
  KF_OP_CAST,
  /* reductions: attrs [keepdim, axis...]; var/var_mean: attrs [keepdim,
   * correction, axis...]. No axes = all axes. */
  KF_OP_SUM, KF_OP_PROD, KF_OP_MAX, KF_OP_MIN, KF_OP_MEAN, KF_OP_VAR,
  KF_OP_VAR_MEAN,
  /* shape */
  KF_OP_BROADCAST_IN_DIM, KF_OP_EXPAND, KF_OP_RESHAPE, KF_OP_PERMUTE,
  KF_OP_SQUEEZE, KF_OP_UNSQUEEZE, KF_OP_SLICE, KF_OP_PAD, KF_OP_CAT,
  /* indexing */
  KF_OP_INDEX_SELECT, KF_OP_GATHER,
  /* creation */
  KF_OP_FULL, KF_OP_IOTA, KF_OP_UNIFORM, KF_OP_NORMAL,
  /* library */
  KF_OP_MATMUL, KF_OP_LINEAR,
  /* hint */
  KF_OP_SEGMENT_SET,
  /* query: attrs [dim]; an input's extent along dim as an int64 scalar */
  KF_OP_SIZE,
  /* communication over the fusion's device mesh (docs/multidevice.md):
   * inserted by kfuse where a sharded value changes sharding; a builder
   * cannot record them. allreduce attrs [reduce, ranks]; allgather
   * [dim, ranks]; reduce_scatter [dim, reduce, ranks]; shard_slice (this
   * rank's block of a replicated value, no communication) [dim, ranks]. */
  KF_OP_ALLREDUCE, KF_OP_ALLGATHER, KF_OP_REDUCE_SCATTER, KF_OP_SHARD_SLICE,
  /* arg-reductions: attrs [keepdim, axis] (exactly one axis); int64 index
   * of the first maximum / minimum, NaN counting as both (as torch). Use
   * kf_reduce. */
  KF_OP_ARGMAX, KF_OP_ARGMIN,
  /* scatters (docs/semantics.md#scatter): a copy of input 0 with elements
   * replaced or combined. attrs [dim, reduce (kf_scatter_reduce), flags
   * (kf_scatter_flags)]. scatter(x, index, src): index of x's rank, element
   * index[i] of dim `dim` receives src[i]. index_reduce(x, index, src):
   * index of rank 1, slice index[j] of x along dim receives slice j of src.
   * Use kf_scatter / kf_index_reduce and the helpers after them. */
  KF_OP_SCATTER, KF_OP_INDEX_REDUCE,
  /* scans along one dim (docs/semantics.md#scans): attrs [dim, exclusive].
   * cumsum and cumprod of ints and bool are int64 (as torch); cummax keeps
   * the dtype (its values; NaN propagates). Use kf_scan. */
  KF_OP_CUMSUM, KF_OP_CUMPROD, KF_OP_CUMMAX,
  KF_OP_COUNT,
  KF_OP_MAX_ENUM = 0x7fffffff
} kf_op;

/* Static lower-case name of an op ("gelu_tanh"), or "invalid". */
KF_API const char* kf_op_name(kf_op op);

/* What an op is, from the library's own op table. New ops are appended to
 * kf_op (never inserted), so no caller should read categories or arities
 * from the enum's order: ask here. */
typedef enum kf_op_category {
  KF_OP_CATEGORY_UNARY, KF_OP_CATEGORY_BINARY, KF_OP_CATEGORY_TERNARY, KF_OP_CATEGORY_CAST,
  KF_OP_CATEGORY_REDUCTION, KF_OP_CATEGORY_SHAPE, KF_OP_CATEGORY_INDEXING, KF_OP_CATEGORY_CREATION,
  KF_OP_CATEGORY_LIBRARY, KF_OP_CATEGORY_HINT, KF_OP_CATEGORY_QUERY, KF_OP_CATEGORY_COMMUNICATION,
  KF_OP_CATEGORY_SCATTER, KF_OP_CATEGORY_SCAN,
  KF_OP_CATEGORY_MAX_ENUM = 0x7fffffff
} kf_op_category;

typedef struct kf_op_info {
  size_t struct_size;       /* sizeof(kf_op_info), set by the caller */
  const char* name;         /* static, as kf_op_name */
  kf_op_category category;
  int num_inputs;           /* value arguments; -1: any number (cat, shape sizes, ...) */
  int num_outputs;          /* 2 for var_mean, else 1 */
} kf_op_info;

/* Fills *info for `op`; KF_ERR_INVALID_ARGUMENT for a code that is not an
 * op (loop from 0 until then to list every op the library knows). */
KF_API kf_status kf_op_get_info(kf_op op, kf_op_info* info);

/* ------------------------------------------------------------------------ */
/* Define: a builder records ops; finalize returns a fusion from the
 * process-wide definition cache (a trie of records). Defining the same
 * records in the same order returns the same kf_fusion pointer. */

typedef struct kf_builder_s* kf_builder;
typedef struct kf_fusion_s* kf_fusion;

/* *out: owned by the caller; free with kf_builder_destroy. */
KF_API kf_status kf_builder_create(kf_builder* out);
KF_API void kf_builder_destroy(kf_builder builder);

/* Value ids are dense, >= 0, in definition order. */
KF_API kf_status kf_define_tensor(kf_builder b, int rank, kf_dtype dtype, int64_t* out_id);
KF_API kf_status kf_define_scalar(kf_builder b, kf_dtype dtype, int64_t* out_id);
KF_API kf_status kf_define_constant_f64(kf_builder b, double value, kf_dtype dtype, int64_t* out_id);
KF_API kf_status kf_define_constant_i64(kf_builder b, int64_t value, kf_dtype dtype, int64_t* out_id);

/* The deepest chain of ops a fusion may have: the longest path from an
 * input or constant to a result, counted in ops (as defined, and as the
 * definition's decompositions leave it). An op that would end a longer
 * chain fails with KF_ERR_INVALID_ARGUMENT ("... a chain of N ops exceeds
 * the limit of 10000 ..."): split such a definition into several fusions.
 * docs/guarantees.md, "Deep definitions". */
#define KF_MAX_GRAPH_DEPTH 10000

/* Generic op record. `outs` must have room for kf_op_num_outputs(op) ids. */
KF_API kf_status kf_builder_op(kf_builder b, kf_op op, const int64_t* args, size_t num_args,
                               const int64_t* attrs, size_t num_attrs, int64_t* outs,
                               size_t num_outs);
/* 2 for KF_OP_VAR_MEAN (var, mean), 1 otherwise, 0 for an invalid op. */
KF_API int kf_op_num_outputs(kf_op op);

/* Typed helpers over kf_builder_op. */
KF_API kf_status kf_unary(kf_builder b, kf_op op, int64_t a, int64_t* out);
KF_API kf_status kf_binary(kf_builder b, kf_op op, int64_t a, int64_t c, int64_t* out);
KF_API kf_status kf_ternary(kf_builder b, kf_op op, int64_t a, int64_t c, int64_t d, int64_t* out);
KF_API kf_status kf_cast(kf_builder b, int64_t a, kf_dtype dtype, int64_t* out);
KF_API kf_status kf_reduce(kf_builder b, kf_op op, int64_t a, const int64_t* axes,
                           size_t num_axes, int keepdim, int64_t* out);
KF_API kf_status kf_var(kf_builder b, int64_t a, const int64_t* axes, size_t num_axes,
                        int64_t correction, int keepdim, int64_t* out);
KF_API kf_status kf_var_mean(kf_builder b, int64_t a, const int64_t* axes, size_t num_axes,
                             int64_t correction, int keepdim, int64_t* out_var,
                             int64_t* out_mean);
/* shape[i] are ids of integer scalars (constants or scalar inputs).
 * broadcast_dims[j] is the output dim of input dim j. */
KF_API kf_status kf_broadcast_in_dim(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                                     const int64_t* broadcast_dims, size_t num_dims,
                                     int64_t* out);
/* Right-aligned like torch.expand; a shape scalar of value -1 keeps the size. */
KF_API kf_status kf_expand(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                           int64_t* out);
/* One shape scalar may have value -1 (inferred). */
KF_API kf_status kf_reshape(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                            int64_t* out);
KF_API kf_status kf_permute(kf_builder b, int64_t a, const int64_t* perm, size_t rank,
                            int64_t* out);
KF_API kf_status kf_squeeze(kf_builder b, int64_t a, const int64_t* dims, size_t num_dims,
                            int64_t* out);
KF_API kf_status kf_unsqueeze(kf_builder b, int64_t a, int64_t dim, int64_t* out);
/* Python slice semantics on one dim; stop = INT64_MAX means "to the end". */
KF_API kf_status kf_slice(kf_builder b, int64_t a, int64_t dim, int64_t start, int64_t stop,
                          int64_t step, int64_t* out);
/* pads: (low, high) per dim, dim 0 first, 2*rank entries, each >= 0.
 * value: id of a scalar. */
KF_API kf_status kf_pad(kf_builder b, int64_t a, const int64_t* pads, size_t num_pads,
                        int64_t value, int64_t* out);
KF_API kf_status kf_cat(kf_builder b, const int64_t* inputs, size_t num_inputs, int64_t dim,
                        int64_t* out);
KF_API kf_status kf_index_select(kf_builder b, int64_t a, int64_t dim, int64_t index,
                                 int64_t* out);
KF_API kf_status kf_gather(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t* out);
/* Scatters (docs/semantics.md#scatter). The result is a copy of `a` where
 * the selected elements receive `src`'s (reduce NONE: the value; with
 * duplicate indices one of them, the last in src order when
 * KF_SCATTER_DETERMINISTIC) or are combined with them (SUM, PROD, MEAN,
 * AMAX, AMIN; with KF_SCATTER_EXCLUDE_SELF a selected element starts from
 * the reduction's identity instead of a's value). Indices must lie in
 * [0, a's size along dim): the CPU backend reports the first bad one, the
 * GPU skips it. KF_SCATTER_DETERMINISTIC: float SUM/PROD/MEAN combine in
 * src order in float64 (the same result on every run, equal to the CPU
 * backend's) instead of with atomics.
 * kf_scatter: index has a's rank, index.size(d) <= src.size(d) for every
 * d and <= a.size(d) for d != dim; element i of index sends src[i] to
 * a[i with dim replaced by index[i]] (torch.scatter / scatter_reduce).
 * kf_index_reduce: index has rank 1; slice j of src along dim goes to
 * slice index[j] of a (torch.index_reduce / index_add / index_copy); src
 * has a's rank, its dims of size 1 broadcast. */
typedef enum kf_scatter_reduce {
  KF_SCATTER_NONE = 0,
  KF_SCATTER_SUM = 1,
  KF_SCATTER_PROD = 2,
  KF_SCATTER_MEAN = 3,
  KF_SCATTER_AMAX = 4,
  KF_SCATTER_AMIN = 5,
  KF_SCATTER_REDUCE_MAX_ENUM = 0x7fffffff
} kf_scatter_reduce;
enum { KF_SCATTER_EXCLUDE_SELF = 1, KF_SCATTER_DETERMINISTIC = 2 };
KF_API kf_status kf_scatter(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                            kf_scatter_reduce reduce, uint32_t flags, int64_t* out);
KF_API kf_status kf_index_reduce(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                                 kf_scatter_reduce reduce, uint32_t flags, int64_t* out);
/* torch.scatter_add, torch.index_add: reduce SUM, no flags. */
KF_API kf_status kf_scatter_add(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                                int64_t* out);
KF_API kf_status kf_index_add(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                              int64_t* out);
/* torch.index_put with one index tensor (rank 1, on dim 0): a[index[j]] =
 * values[j] (accumulate: +=); values of lower rank than `a` are aligned
 * to a's trailing dims and broadcast, a scalar fills the rows. Recorded as
 * index_reduce on dim 0. */
KF_API kf_status kf_index_put(kf_builder b, int64_t a, int64_t index, int64_t values,
                              int accumulate, uint32_t flags, int64_t* out);
/* cumsum, cumprod or cummax of `a` along `dim` (negative counts from the
 * end); exclusive: element i combines the elements before i (the first is
 * the identity: 0, 1, or the dtype's lowest value). */
KF_API kf_status kf_scan(kf_builder b, kf_op op, int64_t a, int64_t dim, int exclusive, int64_t* out);
KF_API kf_status kf_full(kf_builder b, const int64_t* shape, size_t rank, int64_t fill,
                         kf_dtype dtype, int64_t* out);
KF_API kf_status kf_iota(kf_builder b, int64_t length, int64_t start, int64_t step,
                         kf_dtype dtype, int64_t* out);
/* Philox 4x32-10 keyed by (seed, offset): see docs/text-format.md#random. */
KF_API kf_status kf_uniform(kf_builder b, const int64_t* shape, size_t rank, int64_t low,
                            int64_t high, int64_t seed, int64_t offset, kf_dtype dtype,
                            int64_t* out);
KF_API kf_status kf_normal(kf_builder b, const int64_t* shape, size_t rank, int64_t mean,
                           int64_t std, int64_t seed, int64_t offset, kf_dtype dtype,
                           int64_t* out);
KF_API kf_status kf_matmul(kf_builder b, int64_t a, int64_t c, int64_t* out);
/* y = x @ w^T (+ bias); bias = -1 for none. */
KF_API kf_status kf_linear(kf_builder b, int64_t x, int64_t w, int64_t bias, int64_t* out);
KF_API kf_status kf_segment_set(kf_builder b, int64_t a, int64_t* out);
/* The extent of tensor `a` along `dim` (negative counts from the end) as
 * an int64 scalar, read when the fusion runs: usable in arithmetic and, with
 * constants, scalar inputs and other extents through add, sub, mul,
 * maximum and minimum, as a shape argument (reshape, expand, full, ...). */
KF_API kf_status kf_size(kf_builder b, int64_t a, int64_t dim, int64_t* out);

/* Marks `value` as an output. stride_order: NULL, or a permutation of the
 * value's dims from outermost to innermost (pins the output layout).
 * alias_input: -1, or the index (in input order) of a tensor input whose
 * memory receives this output (in-place update). */
KF_API kf_status kf_add_output(kf_builder b, int64_t value, const int64_t* stride_order,
                               size_t rank, int64_t alias_input);

/* Several devices (docs/multidevice.md). A fusion with a mesh of
 * num_ranks ranks (1 <= num_ranks <= 1024) runs on every rank with that
 * rank's shard of each sharded input; kfuse propagates shardings through
 * the ops and inserts the communication the definition's (global)
 * semantics need. Call kf_builder_set_mesh once, before kf_shard. */
KF_API kf_status kf_builder_set_mesh(kf_builder b, int64_t num_ranks);
/* Shards `value` along `dim` (negative counts from the end) over the mesh:
 * a tensor input (each rank passes its block of the dim), or the value of
 * the latest output added (each rank receives its block). Inputs are
 * replicated unless sharded; an output without kf_shard/kf_replicate keeps
 * the sharding kfuse propagated to it (kf_output_sharding tells). */
KF_API kf_status kf_shard(kf_builder b, int64_t value, int64_t dim);
/* Asks for the latest output of `value` whole on every rank. */
KF_API kf_status kf_replicate(kf_builder b, int64_t value);

/* Ends the definition. *out: a new reference to the cached fusion; release
 * with kf_fusion_release. The builder stays valid (and may be destroyed). */
KF_API kf_status kf_builder_finalize(kf_builder b, kf_fusion* out);

/* Adds a reference (one more kf_fusion_release is then due). */
KF_API kf_status kf_fusion_retain(kf_fusion fusion);
KF_API void kf_fusion_release(kf_fusion fusion);

typedef struct kf_value_info {
  size_t struct_size;
  int64_t id;      /* value id */
  int rank;        /* 0 for scalars */
  kf_dtype dtype;
  int is_scalar;   /* 1 for scalar inputs/constants */
} kf_value_info;

KF_API kf_status kf_fusion_num_inputs(kf_fusion f, size_t* out);
KF_API kf_status kf_fusion_num_outputs(kf_fusion f, size_t* out);
/* info->struct_size must be set by the caller. */
KF_API kf_status kf_fusion_input(kf_fusion f, size_t index, kf_value_info* info);
KF_API kf_status kf_fusion_output(kf_fusion f, size_t index, kf_value_info* info);
/* *alias_input: the input index output `index` updates in place
 * (kf_add_output's alias_input), or -1. A caller of kf_execute_into passes
 * that input's own tensor as the output to update it in place. */
KF_API kf_status kf_output_alias(kf_fusion f, size_t index, int64_t* alias_input);

/* The mesh size (0: no mesh) and how output `index` is sharded: *dim is
 * the dim each rank holds a block of, or -1 when every rank holds it whole. */
KF_API kf_status kf_fusion_mesh(kf_fusion f, int64_t* num_ranks);
KF_API kf_status kf_output_sharding(kf_fusion f, size_t index, int64_t* dim);

/* Any value of the definition by id (inputs, constants, intermediates): what
 * a caller coordinating segments needs to allocate intermediates. */
KF_API kf_status kf_fusion_value(kf_fusion f, int64_t id, kf_value_info* info);

/* Text form (docs/text-format.md). *out: owned by the caller, free with
 * kf_string_free. */
KF_API kf_status kf_fusion_to_text(kf_fusion f, char** out);
/* Parses through the definition cache: printing and parsing a fusion gives
 * back the same handle. Errors: KF_ERR_PARSE with "line L, column C: ...". */
KF_API kf_status kf_fusion_from_text(const char* text, kf_fusion* out);
/* The same for the `length` bytes at `text` (no terminating NUL needed), as
 * read from a file: a NUL byte among them is KF_ERR_PARSE with its line and
 * column, where kf_fusion_from_text would stop at it. */
KF_API kf_status kf_fusion_from_text_n(const char* text, size_t length, kf_fusion* out);
KF_API void kf_string_free(char* s);

/* ------------------------------------------------------------------------ */
/* Definition cache                                                         */

typedef struct kf_cache_stats {
  size_t struct_size;
  uint64_t definitions;   /* finalize / from_text calls that succeeded */
  uint64_t hits;          /* ... that found an existing fusion */
  uint64_t misses;        /* ... that built a new fusion */
  uint64_t evictions;     /* fusions dropped by the LRU limit */
  uint64_t fusions;       /* fusions held now */
  uint64_t concretizations;      /* concrete fusions built, all fusions */
  uint64_t concretization_hits;  /* concretize calls served from cache */
} kf_cache_stats;

KF_API kf_status kf_cache_get_stats(kf_cache_stats* out);
/* Limits the number of fusions the definition cache holds (LRU). 0 is
 * rejected. Default 1024. Handles held by callers stay valid after eviction. */
KF_API kf_status kf_cache_set_limit(size_t max_fusions);
/* Limits concrete fusions kept per fusion (LRU). Default 64. */
KF_API kf_status kf_cache_set_concrete_limit(size_t max_per_fusion);
/* Drops every cached fusion and zeroes the counters. */
KF_API kf_status kf_cache_clear(void);

/* ------------------------------------------------------------------------ */
/* Concretize: binds the definition to real input metadata (data pointers
 * are not read, except for scalar inputs, which are 0-dim CPU tensors).   */

typedef struct kf_concrete_s* kf_concrete;

/* inputs: borrowed, in input order. *out: a new reference, release with
 * kf_concrete_release. Equal keys give the same handle. The handle is the
 * cached plan of the key's class: the concrete fusion and, already made,
 * its segmentation with each segment's schedule (kernels are generated and
 * compiled at the first execution on a GPU). */
KF_API kf_status kf_concretize(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                               kf_concrete* out);
/* kf_concretize for outputs the caller allocates: the plan kf_execute_into
 * runs with these inputs and outputs. Where an output's memory order differs
 * from the one kfuse would choose (a row-major output of a transposed
 * input), the outputs' orders join the key and the schedulers plan for them.
 * outputs: borrowed, in output order, checked as kf_execute_into checks them
 * (shapes, alignment, overlap); their data is not read or written. */
KF_API kf_status kf_concretize_into(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, kf_concrete* out);
KF_API void kf_concrete_release(kf_concrete c);
/* Readable key and concrete types. *out: free with kf_string_free. */
KF_API kf_status kf_concrete_describe(kf_concrete c, char** out);

/* ------------------------------------------------------------------------ */
/* Segment                                                                  */

typedef struct kf_segmentation_s* kf_segmentation;

/* *out: a new reference to the segmentation of `c` (made with it); release
 * with kf_segmentation_release. */
KF_API kf_status kf_segment(kf_concrete c, kf_segmentation* out);
KF_API void kf_segmentation_release(kf_segmentation s);
KF_API kf_status kf_segmentation_count(kf_segmentation s, size_t* out);

typedef struct kf_segment_info {
  size_t struct_size;
  size_t run_order;        /* position in the run order (0 first) */
  const char* scheduler;   /* "pointwise", "reduction", ..., static */
  /* Ids of the definition: values >= 0, input extents < 0. The arrays are
   * owned by the segmentation and valid while it lives. */
  const int64_t* inputs;
  size_t num_inputs;
  const int64_t* outputs;
  size_t num_outputs;
  /* intermediates (produced by earlier segments) whose last use is here */
  const int64_t* dead_after;
  size_t num_dead_after;
  /* Nested tasks: recognized patterns the segment runs as one call (a
   * library segment's matmul + bias + activation); see kf_segment_child.
   * Filled when struct_size covers it. */
  size_t num_children;
} kf_segment_info;

/* info->struct_size must be set by the caller. Segments are numbered in run
 * order. */
KF_API kf_status kf_segmentation_get(kf_segmentation s, size_t index, kf_segment_info* info);

/* A task nested in a segment: a recognized pattern. */
typedef struct kf_task_info {
  size_t struct_size;
  /* What the pattern computes, e.g. "linear+bias+gelu_tanh" or
   * "matmul+relu"; static. */
  const char* pattern;
  /* Value ids it reads and hands out; owned by the segmentation. */
  const int64_t* inputs;
  size_t num_inputs;
  const int64_t* outputs;
  size_t num_outputs;
} kf_task_info;

/* Nested task `child` (< kf_segment_info.num_children) of segment `index`.
 * info->struct_size must be set by the caller. */
KF_API kf_status kf_segment_child(kf_segmentation s, size_t index, size_t child, kf_task_info* info);

/* The segment as a standalone fusion in the text form; its inputs are the
 * segment's value inputs (>= 0) in the order of info.inputs. */
KF_API kf_status kf_segment_to_text(kf_segmentation s, size_t index, char** out);

/* The schedule chosen for a segment's kernel, as one line of key=value
 * fields (e.g. "row block=1024 domain=2 reduced=[1] phases=2 ..."): its
 * kernel family (pointwise, tiled, row, column) and every parameter. For a
 * library segment holding a matmul pattern, the schedule of the epilogue
 * kernel that runs when cuBLASLt cannot run the pattern as one call.
 * KF_ERR_UNSUPPORTED (saying why) for a segment without one (a library op
 * alone, a no-op). *out: free with kf_string_free. */
KF_API kf_status kf_segment_schedule(kf_segmentation s, size_t index, char** out);

/* The schedulers asked for a segment's kernel, in the registry's priority
 * order, one line each: "<family>: declined: <why>" for each that did not
 * take it, then "<family>: takes it" for the one whose schedule
 * kf_segment_schedule prints (none when no scheduler takes the segment).
 * Families: scan, scatter, tiled, pointwise, column, row, inner_outer.
 * KF_ERR_UNSUPPORTED for a library segment or a no-op. Works without a
 * GPU. *out: free with kf_string_free. */
KF_API kf_status kf_segment_schedulers(kf_segmentation s, size_t index, char** out);

/* The CUDA C++ that kfuse generates for a segment, preceded by a comment
 * with its scheduler, launch rule and parameters (what `kfuse explain
 * --cuda` prints). Works without a GPU. KF_ERR_UNSUPPORTED (saying why)
 * when no GPU scheduler accepts the segment, or for library segments.
 * *out: free with kf_string_free. */
KF_API kf_status kf_segment_cuda_source(kf_segmentation s, size_t index, char** out);

/* ------------------------------------------------------------------------ */
/* Ahead-of-time kernel bundles: the compiled kernels of some fusions at some
 * shape classes for one GPU architecture, in one file. An application that
 * loads one (kf_bundle_load) before its first call runs those kernels
 * without NVRTC: nothing compiles on the call's path, and where every
 * kernel a call needs is in a loaded bundle NVRTC is never loaded. A kernel
 * is taken from a bundle only where its generated source is exactly the one
 * the bundle compiled (its SHA-256 is the key), so a bundle never runs a
 * kernel for another fusion, shape class or library; what it lacks is
 * compiled as usual. `kfuse compile` writes one from the command line
 * (docs/cuda-runtime.md, "Bundles"). Copy kernels (outputs the caller laid
 * out in another order, in-place copies back) are not bundled yet. */
typedef struct kf_bundle_s* kf_bundle;

/* An empty bundle for architecture `sm` (10 * major + minor: 90 for sm_90,
 * 80 to 127). Free with kf_bundle_destroy. */
KF_API kf_status kf_bundle_create(int sm, kf_bundle* out);
KF_API void kf_bundle_destroy(kf_bundle b);

/* Compiles every kernel of the concretization `c` (kf_concretize with
 * kDLCUDA tensors: their sizes, layouts and alignment make the shape
 * class; the data is never read, so host memory may stand in for device
 * memory) that the bundle lacks, each kernel variant a call of that class
 * may take included. Runs NVRTC on a pool; needs no GPU. KF_ERR_BACKEND
 * with NVRTC's log when a compile fails. */
KF_API kf_status kf_bundle_add(kf_bundle b, kf_concrete c);

/* The number of compiled kernels in the bundle. */
KF_API kf_status kf_bundle_count(kf_bundle b, size_t* out);

/* Writes the bundle to `path` (through a temporary file in the same
 * directory, renamed over it). */
KF_API kf_status kf_bundle_save(kf_bundle b, const char* path);

/* Reads the bundle at `path`, checks it and installs it for the process's
 * life (thread-safe; bundles for several architectures may be loaded).
 * `device` >= 0: the bundle's architecture must be that CUDA device's
 * (KF_ERR_DEVICE_MISMATCH naming both; KF_ERR_NO_DEVICE without one); -1
 * checks no device. Errors: KF_ERR_INVALID_ARGUMENT for a file that cannot
 * be read, is not a bundle, or is damaged (its checksum fails);
 * KF_ERR_VERSION_MISMATCH for a bundle of another format version or written
 * by a kfuse whose code generator differs. `kernels` (may be NULL): its
 * kernel count. */
KF_API kf_status kf_bundle_load(const char* path, int device, size_t* kernels);

/* ------------------------------------------------------------------------ */
/* Execute                                                                  */

/* Device memory allocator a framework can supply (for kDLCUDA outputs).
 * alloc returns 0 on success. */
typedef struct kf_allocator {
  size_t struct_size;
  void* context;
  int (*alloc)(void* context, size_t bytes, int device, void* stream, void** ptr);
  void (*free)(void* context, void* ptr, size_t bytes, int device, void* stream);
} kf_allocator;

/* A communicator: one rank of a group that runs a fusion with a mesh
 * (docs/multidevice.md). Collectives are enqueued on the call's stream. */
typedef struct kf_communicator_s* kf_communicator;

typedef struct kf_exec_options {
  size_t struct_size;
  void* stream;                   /* CUstream for kDLCUDA tensors; NULL = default */
  const kf_allocator* allocator;  /* NULL = kfuse's stream-ordered pool */
  /* Required by fusions with a mesh (its size must equal the mesh's);
   * NULL otherwise. Read only when struct_size covers it. */
  kf_communicator communicator;
} kf_exec_options;

/* num_ranks (1..1024) communicators of one group inside this process, for
 * CPU tensors: comms[r] is rank r, used by one thread each (every rank must
 * make the same calls; calls that disagree fail on every rank). Reductions
 * go over ranks in rank order and round once; an integer avg truncates
 * toward zero, as NCCL's. Destroy each with kf_communicator_destroy. */
KF_API kf_status kf_communicator_create_local(int num_ranks, kf_communicator* comms);

/* NCCL (libnccl.so.2, loaded at run time) for CUDA tensors. Errors:
 * KF_ERR_UNSUPPORTED when kfuse was built without nccl.h or the library
 * cannot be loaded (the message says which), KF_ERR_NO_DEVICE without a
 * driver or device, KF_ERR_BACKEND with NCCL's message when a call fails. */
typedef struct kf_nccl_id {
  unsigned char bytes[128]; /* an ncclUniqueId */
} kf_nccl_id;
/* Made by one process (rank 0; it needs no GPU) and handed to every rank. */
KF_API kf_status kf_nccl_get_unique_id(kf_nccl_id* id);
/* A new NCCL communicator for `rank` of `num_ranks` on CUDA device
 * `device` (ncclCommInitRank: blocks until every rank joined). */
KF_API kf_status kf_communicator_create_nccl(const kf_nccl_id* id, int num_ranks, int rank,
                                             int device, kf_communicator* out);
/* Wraps a caller's ncclComm_t (not destroyed by kf_communicator_destroy,
 * which must come first). Its rank, size and device are NCCL's. */
KF_API kf_status kf_communicator_wrap_nccl(void* nccl_comm, kf_communicator* out);
KF_API kf_status kf_communicator_rank(kf_communicator c, int* rank, int* num_ranks);
/* NULL is a no-op. */
KF_API void kf_communicator_destroy(kf_communicator c);

/* Runs the fusion. outputs[i] receives a new DLManagedTensor (call its
 * deleter). An output that aliases an input is a view of that input's
 * memory (its deleter frees only the view). options may be NULL. */
KF_API kf_status kf_execute(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                            DLManagedTensor** outputs, size_t num_outputs,
                            const kf_exec_options* options);
/* Runs the fusion into caller-provided outputs of the right shapes, dtypes
 * and device (any strides that do not overlap). */
KF_API kf_status kf_execute_into(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                 DLTensor* const* outputs, size_t num_outputs,
                                 const kf_exec_options* options);
/* Runs one segment: inputs are the tensors for the segment's value inputs
 * (ids >= 0, in info.inputs order; extents are read from them), outputs the
 * tensors for its outputs. */
KF_API kf_status kf_execute_segment(kf_segmentation s, size_t index, const DLTensor* const* inputs,
                                    size_t num_inputs, DLTensor* const* outputs,
                                    size_t num_outputs, const kf_exec_options* options);
/* The shape of output `output` of segment `index` for these value inputs
 * (as kf_execute_segment takes them), so a caller running segments one by
 * one can allocate their outputs; works for every segment, communication
 * segments included. shape: `rank` entries, the output's rank. */
KF_API kf_status kf_segment_output_shape(kf_segmentation s, size_t index, const DLTensor* const* inputs,
                                         size_t num_inputs, size_t output, int64_t* shape, size_t rank);

/* Ask before you pay. A call's first run in its shape class builds a plan
 * and, on a GPU, compiles (NVRTC, or a disk cache or bundle) and loads its
 * kernels: tens to hundreds of milliseconds. kf_fusion_is_ready says
 * whether kf_execute (outputs NULL, num_outputs 0) or kf_execute_into
 * (the caller's outputs: their layouts join the plan) with these tensors
 * would do any of that: *ready 1 when the plan is cached and every kernel
 * its segments take first is loaded, else 0; it builds, compiles and runs
 * nothing, and reads no tensor data. kf_fusion_prepare does that work now
 * (the compiles on the pool, as a first call would) without running
 * anything, so a later call with tensors of that class starts at once.
 * Both check the inputs and the outputs' count as the call would (same
 * statuses); kf_fusion_is_ready checks the outputs' shapes and layouts
 * once a plan for the inputs exists. On CPU tensors
 * the plan is all there is to prepare. Not counted: a kernel variant
 * chosen only by the data pointers' alignment (the scalar twin of a vector
 * kernel), and the copy kernels of layout copies, each compiled once per
 * process and device on first need. Without a usable GPU, *ready is 0 for
 * CUDA tensors and kf_fusion_prepare returns KF_ERR_NO_DEVICE. */
KF_API kf_status kf_fusion_is_ready(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                    DLTensor* const* outputs, size_t num_outputs, int* ready);
KF_API kf_status kf_fusion_prepare(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                   DLTensor* const* outputs, size_t num_outputs);

/* Shape of output `index` for these inputs (so a caller can allocate for
 * kf_execute_into). shape: room for the output's rank. */
KF_API kf_status kf_output_shape(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                 size_t index, int64_t* shape, size_t rank);

/* Sizes of any value (by id) for these inputs, e.g. an intermediate that a
 * caller running segments one by one must allocate. shape: room for the
 * value's rank. */
KF_API kf_status kf_value_shape(kf_fusion f, const DLTensor* const* inputs, size_t num_inputs,
                                int64_t value, int64_t* shape, size_t rank);

/* ======================================================================== */
/* DLPack 1.x: versioned tensors (DLManagedTensorVersioned)                 */
/*                                                                          */
/* DLPack 1.0 added DLManagedTensorVersioned: a version, a flags word       */
/* (read-only, is-copied) and the DLTensor. kfuse reads and writes it next  */
/* to the 0.6 structs above. Where the included dlpack.h predates 1.0       */
/* (DLPACK_MAJOR_VERSION undefined: Debian 12 ships 0.6), the 1.x layout    */
/* is declared here, exactly as dlpack.h 1.0/1.1 declares it; with a 1.x    */
/* dlpack.h its own declarations are used. Define                           */
/* KF_DLPACK_VERSIONED_DECLARED before including kfuse.h if your program    */
/* declares these types itself for an old dlpack.h. The Java and Go         */
/* bindings (SWIG) do not wrap this section; Python and Rust use it.        */

#ifndef SWIG

#if !defined(DLPACK_MAJOR_VERSION) && !defined(KF_DLPACK_VERSIONED_DECLARED)
#define KF_DLPACK_VERSIONED_DECLARED 1
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#endif

/* The DLPack version kfuse writes into the versioned tensors it makes, and
 * the major version it reads (an input of another major is
 * KF_ERR_UNSUPPORTED, as DLPack asks of consumers). */
#define KF_DLPACK_MAJOR_VERSION 1
#define KF_DLPACK_MINOR_VERSION 0

/* Runs the fusion on versioned inputs and makes versioned outputs.
 *
 * inputs: borrowed, in input order; read during the call (kfuse never calls
 * their deleters). version.major must be 1. An input with
 * DLPACK_FLAG_BITMASK_READ_ONLY is never written: an output declared to
 * alias it (kf_add_output's alias_input) is KF_ERR_INVALID_ARGUMENT naming
 * the output and the input, and nothing runs.
 *
 * outputs[i]: a new DLManagedTensorVersioned owned by the caller (call
 * outputs[i]->deleter(outputs[i]), or hand it to a consumer). version is
 * {KF_DLPACK_MAJOR_VERSION, KF_DLPACK_MINOR_VERSION}; flags are 0 (writable,
 * not a copy: a fresh output, or a view of the writable input it aliases).
 * Its shape and strides are never NULL. options may be NULL. */
KF_API kf_status kf_execute_versioned(kf_fusion f,
                                      const DLManagedTensorVersioned* const* inputs,
                                      size_t num_inputs, DLManagedTensorVersioned** outputs,
                                      size_t num_outputs, const kf_exec_options* options);

/* The same with borrowed DLTensors and their DLPack flags side by side: what
 * a binding holding a mix of 0.6 and 1.x tensors passes (&m->dl_tensor with
 * m->flags, or flags 0 for a 0.6 tensor). input_flags: NULL (all writable)
 * or num_inputs words of DLPACK_FLAG_BITMASK_* bits. Outputs as for
 * kf_execute_versioned. */
KF_API kf_status kf_execute_flagged(kf_fusion f, const DLTensor* const* inputs,
                                    const uint64_t* input_flags, size_t num_inputs,
                                    DLManagedTensorVersioned** outputs, size_t num_outputs,
                                    const kf_exec_options* options);

/* kf_execute_into with flags: input_flags and output_flags are NULL (all
 * writable) or one word per tensor. A read-only output, or an output that
 * aliases a read-only input, is KF_ERR_INVALID_ARGUMENT and nothing runs. */
KF_API kf_status kf_execute_into_flagged(kf_fusion f, const DLTensor* const* inputs,
                                         const uint64_t* input_flags, size_t num_inputs,
                                         DLTensor* const* outputs, const uint64_t* output_flags,
                                         size_t num_outputs, const kf_exec_options* options);

#endif /* !SWIG: DLPack 1.x */

#ifdef __cplusplus
}
#endif

#endif /* KFUSE_KFUSE_H */
