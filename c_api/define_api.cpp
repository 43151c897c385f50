// Builder calls of the C API: thin wrappers that check pointers and forward
// to kf::Builder (core/define).
#include <memory>
#include <vector>

#include "c_api/api_guard.h"
#include "c_api/handles.h"
#include "core/util/handle_registry.h"
#include "core/define/builder.h"

using kf::capi::code;
using kf::capi::guard;
using kf::capi::require;

namespace {

kf::Builder* builder_of(kf_builder b, const char* fn) {
  return static_cast<kf::Builder*>(require(b, fn, "builder"));
}

// Checked before narrowing: kf::DType is 8 bits, so 257 would wrap to a
// valid code.
kf::DType dtype_of(const kf_dtype& t, const char* fn) {
  if (!kf::is_valid_dtype(code(t)))
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": dtype ", code(t),
             " is not a kf_dtype (expected 0..", kf::kNumDTypes - 1, ")");
  return static_cast<kf::DType>(code(t));
}

// Name of an op code for messages ("invalid" when out of range).
const char* op_label(int op) {
  return kf::is_valid_op(op) ? kf::op_name(static_cast<kf::Op>(op)).data() : "invalid";
}

// No op takes more than this many ids in one list (a count of SIZE_MAX
// would make p + n wrap before anything is read).
constexpr size_t kMaxListLength = size_t{1} << 20;

std::vector<int64_t> ids(const int64_t* p, size_t n, const char* fn, const char* what) {
  if (n > kMaxListLength)
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": argument '", what, "' has ", n, " entries, more than the limit of ",
             kMaxListLength);
  if (n > 0) require(p, fn, what);
  return std::vector<int64_t>(p, p + n);
}

// Records a one-output op and writes its id; throws on error.
void one_output(kf_builder b, int op, std::vector<int64_t> args, std::vector<int64_t> attrs,
                int64_t* out, const char* fn) {
  kf::Builder* builder = builder_of(b, fn);
  require(out, fn, "out");
  auto outs = builder->op(static_cast<kf::Op>(op), std::move(args), std::move(attrs));
  *out = outs.at(0);
}

void require_category(int op, kf::OpCategory category, const char* fn, const char* what) {
  if (!kf::is_valid_op(op) || kf::op_info(static_cast<kf::Op>(op)).category != category)
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": op ", op, " (", op_label(op), ") is not ", what);
}

std::vector<int64_t> with_prefix(std::vector<int64_t> prefix, std::vector<int64_t> rest) {
  prefix.insert(prefix.end(), rest.begin(), rest.end());
  return prefix;
}

}  // namespace

extern "C" {

KF_API kf_status kf_builder_create(kf_builder* out) {
  return guard([&] {
    require(out, "kf_builder_create", "out");
    auto builder = std::make_unique<kf::Builder>();
    kf::handles::hold_locked(static_cast<kf_builder>(builder.get()));
    *out = builder.release();
  });
}

KF_API void kf_builder_destroy(kf_builder b) {
  if (b == nullptr) return;
  if (!kf::handles::drop_locked(b)) return kf::capi::report_not_held("kf_builder_destroy", "b", b);
  delete static_cast<kf::Builder*>(b);
}

KF_API kf_status kf_define_tensor(kf_builder b, int rank, kf_dtype dtype, int64_t* out_id) {
  return guard([&] {
    auto* builder = builder_of(b, "kf_define_tensor");
    require(out_id, "kf_define_tensor", "out_id");
    *out_id = builder->tensor_input(rank, dtype_of(dtype, "kf_define_tensor"));
  });
}

KF_API kf_status kf_define_scalar(kf_builder b, kf_dtype dtype, int64_t* out_id) {
  return guard([&] {
    auto* builder = builder_of(b, "kf_define_scalar");
    require(out_id, "kf_define_scalar", "out_id");
    *out_id = builder->scalar_input(dtype_of(dtype, "kf_define_scalar"));
  });
}

KF_API kf_status kf_define_constant_f64(kf_builder b, double value, kf_dtype dtype,
                                        int64_t* out_id) {
  return guard([&] {
    auto* builder = builder_of(b, "kf_define_constant_f64");
    require(out_id, "kf_define_constant_f64", "out_id");
    *out_id = builder->constant_f64(value, dtype_of(dtype, "kf_define_constant_f64"));
  });
}

KF_API kf_status kf_define_constant_i64(kf_builder b, int64_t value, kf_dtype dtype,
                                        int64_t* out_id) {
  return guard([&] {
    auto* builder = builder_of(b, "kf_define_constant_i64");
    require(out_id, "kf_define_constant_i64", "out_id");
    *out_id = builder->constant_i64(value, dtype_of(dtype, "kf_define_constant_i64"));
  });
}

KF_API kf_status kf_builder_op(kf_builder b, kf_op op, const int64_t* args, size_t num_args,
                               const int64_t* attrs, size_t num_attrs, int64_t* outs,
                               size_t num_outs) {
  return guard([&] {
    const char* fn = "kf_builder_op";
    auto* builder = builder_of(b, fn);
    require(outs, fn, "outs");
    const int op_code = code(op);
    if (!kf::is_valid_op(op_code))
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": op ", op_code, " is not a kf_op (expected 0..",
               KF_OP_COUNT - 1, ")");
    const kf::Op kop = static_cast<kf::Op>(op_code);
    size_t expected = static_cast<size_t>(kf::op_info(kop).num_outputs);
    if (num_outs < expected)
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": num_outs is ", num_outs, ", ",
               kf::op_name(kop), " has ", expected, " outputs");
    auto result = builder->op(kop, ids(args, num_args, fn, "args"),
                              ids(attrs, num_attrs, fn, "attrs"));
    for (size_t i = 0; i < result.size(); ++i) outs[i] = result[i];
  });
}

KF_API kf_status kf_unary(kf_builder b, kf_op op, int64_t a, int64_t* out) {
  return guard([&] {
    require_category(code(op), kf::OpCategory::Unary, "kf_unary", "a unary op");
    one_output(b, code(op), {a}, {}, out, "kf_unary");
  });
}

KF_API kf_status kf_binary(kf_builder b, kf_op op, int64_t a, int64_t c, int64_t* out) {
  return guard([&] {
    require_category(code(op), kf::OpCategory::Binary, "kf_binary", "a binary op");
    one_output(b, code(op), {a, c}, {}, out, "kf_binary");
  });
}

KF_API kf_status kf_ternary(kf_builder b, kf_op op, int64_t a, int64_t c, int64_t d,
                            int64_t* out) {
  return guard([&] {
    require_category(code(op), kf::OpCategory::Ternary, "kf_ternary", "a ternary op");
    one_output(b, code(op), {a, c, d}, {}, out, "kf_ternary");
  });
}

namespace {

// keepdim is a C boolean that the header documents as 0 or 1: another value
// is more likely a swapped argument than a truthy one.
int64_t keepdim_flag(int keepdim, const char* fn) {
  if (keepdim != 0 && keepdim != 1)
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": keepdim must be 0 or 1, got ", keepdim);
  return keepdim;
}

}  // namespace

KF_API kf_status kf_cast(kf_builder b, int64_t a, kf_dtype dtype, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_CAST, {a}, {static_cast<int64_t>(code(dtype))}, out, "kf_cast"); });
}

KF_API kf_status kf_reduce(kf_builder b, kf_op op, int64_t a, const int64_t* axes,
                           size_t num_axes, int keepdim, int64_t* out) {
  return guard([&] {
    const char* fn = "kf_reduce";
    const int op_code = code(op);
    if (op_code == KF_OP_VAR || op_code == KF_OP_VAR_MEAN)
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": use kf_var / kf_var_mean for ", op_label(op_code));
    require_category(op_code, kf::OpCategory::Reduction, fn, "a reduction");
    one_output(b, op_code, {a}, with_prefix({keepdim_flag(keepdim, fn)}, ids(axes, num_axes, fn, "axes")), out, fn);
  });
}

KF_API kf_status kf_var(kf_builder b, int64_t a, const int64_t* axes, size_t num_axes,
                        int64_t correction, int keepdim, int64_t* out) {
  return guard([&] {
    const char* fn = "kf_var";
    one_output(b, KF_OP_VAR, {a},
               with_prefix({keepdim_flag(keepdim, fn), correction}, ids(axes, num_axes, fn, "axes")), out, fn);
  });
}

KF_API kf_status kf_var_mean(kf_builder b, int64_t a, const int64_t* axes, size_t num_axes,
                             int64_t correction, int keepdim, int64_t* out_var,
                             int64_t* out_mean) {
  return guard([&] {
    const char* fn = "kf_var_mean";
    auto* builder = builder_of(b, fn);
    require(out_var, fn, "out_var");
    require(out_mean, fn, "out_mean");
    auto outs = builder->op(kf::Op::VAR_MEAN, {a},
                            with_prefix({keepdim_flag(keepdim, fn), correction}, ids(axes, num_axes, fn, "axes")));
    *out_var = outs.at(0);
    *out_mean = outs.at(1);
  });
}

KF_API kf_status kf_broadcast_in_dim(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                                     const int64_t* broadcast_dims, size_t num_dims,
                                     int64_t* out) {
  return guard([&] {
    const char* fn = "kf_broadcast_in_dim";
    one_output(b, KF_OP_BROADCAST_IN_DIM, with_prefix({a}, ids(shape, rank, fn, "shape")),
               ids(broadcast_dims, num_dims, fn, "broadcast_dims"), out, fn);
  });
}

KF_API kf_status kf_expand(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                           int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_EXPAND, with_prefix({a}, ids(shape, rank, "kf_expand", "shape")), {}, out,
               "kf_expand");
  });
}

KF_API kf_status kf_reshape(kf_builder b, int64_t a, const int64_t* shape, size_t rank,
                            int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_RESHAPE, with_prefix({a}, ids(shape, rank, "kf_reshape", "shape")), {},
               out, "kf_reshape");
  });
}

KF_API kf_status kf_permute(kf_builder b, int64_t a, const int64_t* perm, size_t rank,
                            int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_PERMUTE, {a}, ids(perm, rank, "kf_permute", "perm"), out, "kf_permute");
  });
}

KF_API kf_status kf_squeeze(kf_builder b, int64_t a, const int64_t* dims, size_t num_dims,
                            int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_SQUEEZE, {a}, ids(dims, num_dims, "kf_squeeze", "dims"), out,
               "kf_squeeze");
  });
}

KF_API kf_status kf_unsqueeze(kf_builder b, int64_t a, int64_t dim, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_UNSQUEEZE, {a}, {dim}, out, "kf_unsqueeze"); });
}

KF_API kf_status kf_slice(kf_builder b, int64_t a, int64_t dim, int64_t start, int64_t stop,
                          int64_t step, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_SLICE, {a}, {dim, start, stop, step}, out, "kf_slice"); });
}

KF_API kf_status kf_pad(kf_builder b, int64_t a, const int64_t* pads, size_t num_pads,
                        int64_t value, int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_PAD, {a, value}, ids(pads, num_pads, "kf_pad", "pads"), out, "kf_pad");
  });
}

KF_API kf_status kf_cat(kf_builder b, const int64_t* inputs, size_t num_inputs, int64_t dim,
                        int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_CAT, ids(inputs, num_inputs, "kf_cat", "inputs"), {dim}, out, "kf_cat");
  });
}

KF_API kf_status kf_index_select(kf_builder b, int64_t a, int64_t dim, int64_t index,
                                 int64_t* out) {
  return guard([&] { one_output(b, KF_OP_INDEX_SELECT, {a, index}, {dim}, out, "kf_index_select"); });
}

KF_API kf_status kf_gather(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_GATHER, {a, index}, {dim}, out, "kf_gather"); });
}

// Scatter attrs [dim, reduce, include_self, deterministic] from the C
// API's reduce code and flags.
// `reduce` by reference: a copy would load an out-of-range enum value (UB).
std::vector<int64_t> scatter_attrs(int64_t dim, const kf_scatter_reduce& reduce, uint32_t flags, const char* fn) {
  const int r = code(reduce);
  if (r < KF_SCATTER_NONE || r > KF_SCATTER_AMIN)
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": reduce ", r, " is not a kf_scatter_reduce (expected 0..", KF_SCATTER_AMIN, ")");
  if ((flags & ~static_cast<uint32_t>(KF_SCATTER_EXCLUDE_SELF | KF_SCATTER_DETERMINISTIC)) != 0)
    kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": flags ", flags,
             " holds bits other than KF_SCATTER_EXCLUDE_SELF and KF_SCATTER_DETERMINISTIC");
  return {dim, r, (flags & KF_SCATTER_EXCLUDE_SELF) ? 0 : 1, (flags & KF_SCATTER_DETERMINISTIC) ? 1 : 0};
}

KF_API kf_status kf_scatter(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                            kf_scatter_reduce reduce, uint32_t flags, int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_SCATTER, {a, index, src}, scatter_attrs(dim, reduce, flags, "kf_scatter"), out, "kf_scatter");
  });
}

KF_API kf_status kf_index_reduce(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                                 kf_scatter_reduce reduce, uint32_t flags, int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_INDEX_REDUCE, {a, index, src}, scatter_attrs(dim, reduce, flags, "kf_index_reduce"), out,
               "kf_index_reduce");
  });
}

KF_API kf_status kf_scatter_add(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                                int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_SCATTER, {a, index, src}, scatter_attrs(dim, KF_SCATTER_SUM, 0, "kf_scatter_add"), out,
               "kf_scatter_add");
  });
}

KF_API kf_status kf_index_add(kf_builder b, int64_t a, int64_t dim, int64_t index, int64_t src,
                              int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_INDEX_REDUCE, {a, index, src}, scatter_attrs(dim, KF_SCATTER_SUM, 0, "kf_index_add"), out,
               "kf_index_add");
  });
}

KF_API kf_status kf_index_put(kf_builder b, int64_t a, int64_t index, int64_t values, int accumulate,
                              uint32_t flags, int64_t* out) {
  return guard([&] {
    constexpr const char* fn = "kf_index_put";
    kf::Builder* builder = builder_of(b, fn);
    require(out, fn, "out");
    const kf::Fusion& d = builder->draft();
    if (a < 0 || static_cast<size_t>(a) >= d.values.size() || values < 0 ||
        static_cast<size_t>(values) >= d.values.size())
      kf::fail(KF_ERR_INVALID_ARGUMENT, fn, ": a (", a, ") and values (", values, ") must be values of this builder");
    // values aligned to a's trailing dims: leading size-1 dims up to a's
    // rank; a scalar becomes a tensor of a's dtype with every size 1.
    int64_t v = values;
    if (d.value(values).is_scalar) {
      std::vector<int64_t> ones(static_cast<size_t>(d.value(a).rank), builder->constant_i64(1, kf::DType::I64));
      ones.push_back(values);
      v = builder->op(kf::Op::FULL, ones, {static_cast<int64_t>(d.value(a).dtype)}).at(0);
    }
    for (int r = builder->draft().value(v).rank; r < d.value(a).rank; ++r)
      v = builder->op(kf::Op::UNSQUEEZE, {v}, {0}).at(0);
    *out = builder->op(kf::Op::INDEX_REDUCE, {a, index, v},
                       scatter_attrs(0, accumulate ? KF_SCATTER_SUM : KF_SCATTER_NONE, flags, fn)).at(0);
  });
}

KF_API kf_status kf_scan(kf_builder b, kf_op op, int64_t a, int64_t dim, int exclusive, int64_t* out) {
  return guard([&] {
    require_category(code(op), kf::OpCategory::Scan, "kf_scan", "a scan (cumsum, cumprod, cummax)");
    one_output(b, code(op), {a}, {dim, exclusive ? 1 : 0}, out, "kf_scan");
  });
}

KF_API kf_status kf_full(kf_builder b, const int64_t* shape, size_t rank, int64_t fill,
                         kf_dtype dtype, int64_t* out) {
  return guard([&] {
    auto args = ids(shape, rank, "kf_full", "shape");
    args.push_back(fill);
    one_output(b, KF_OP_FULL, args, {static_cast<int64_t>(code(dtype))}, out, "kf_full");
  });
}

KF_API kf_status kf_iota(kf_builder b, int64_t length, int64_t start, int64_t step,
                         kf_dtype dtype, int64_t* out) {
  return guard([&] {
    one_output(b, KF_OP_IOTA, {length, start, step}, {static_cast<int64_t>(code(dtype))}, out, "kf_iota");
  });
}

KF_API kf_status kf_uniform(kf_builder b, const int64_t* shape, size_t rank, int64_t low,
                            int64_t high, int64_t seed, int64_t offset, kf_dtype dtype,
                            int64_t* out) {
  return guard([&] {
    auto args = ids(shape, rank, "kf_uniform", "shape");
    args.insert(args.end(), {low, high, seed, offset});
    one_output(b, KF_OP_UNIFORM, args, {static_cast<int64_t>(code(dtype))}, out, "kf_uniform");
  });
}

KF_API kf_status kf_normal(kf_builder b, const int64_t* shape, size_t rank, int64_t mean,
                           int64_t std, int64_t seed, int64_t offset, kf_dtype dtype,
                           int64_t* out) {
  return guard([&] {
    auto args = ids(shape, rank, "kf_normal", "shape");
    args.insert(args.end(), {mean, std, seed, offset});
    one_output(b, KF_OP_NORMAL, args, {static_cast<int64_t>(code(dtype))}, out, "kf_normal");
  });
}

KF_API kf_status kf_matmul(kf_builder b, int64_t a, int64_t c, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_MATMUL, {a, c}, {}, out, "kf_matmul"); });
}

KF_API kf_status kf_linear(kf_builder b, int64_t x, int64_t w, int64_t bias, int64_t* out) {
  return guard([&] {
    std::vector<int64_t> args{x, w};
    if (bias != -1) args.push_back(bias);
    one_output(b, KF_OP_LINEAR, args, {}, out, "kf_linear");
  });
}

KF_API kf_status kf_segment_set(kf_builder b, int64_t a, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_SEGMENT_SET, {a}, {}, out, "kf_segment_set"); });
}

KF_API kf_status kf_size(kf_builder b, int64_t a, int64_t dim, int64_t* out) {
  return guard([&] { one_output(b, KF_OP_SIZE, {a}, {dim}, out, "kf_size"); });
}

KF_API kf_status kf_add_output(kf_builder b, int64_t value, const int64_t* stride_order,
                               size_t rank, int64_t alias_input) {
  return guard([&] {
    const char* fn = "kf_add_output";
    auto* builder = builder_of(b, fn);
    std::vector<int64_t> order;
    if (stride_order != nullptr) order.assign(stride_order, stride_order + rank);
    builder->output(value, std::move(order), alias_input);
  });
}

KF_API kf_status kf_builder_set_mesh(kf_builder b, int64_t num_ranks) {
  return guard([&] { builder_of(b, "kf_builder_set_mesh")->mesh(num_ranks); });
}

KF_API kf_status kf_shard(kf_builder b, int64_t value, int64_t dim) {
  return guard([&] { builder_of(b, "kf_shard")->shard(value, dim, false); });
}

KF_API kf_status kf_replicate(kf_builder b, int64_t value) {
  return guard([&] { builder_of(b, "kf_replicate")->shard(value, 0, true); });
}

KF_API kf_status kf_builder_finalize(kf_builder b, kf_fusion* out) {
  return guard([&] {
    auto* builder = builder_of(b, "kf_builder_finalize");
    require(out, "kf_builder_finalize", "out");
    std::shared_ptr<kf::Fusion> fusion = builder->finalize();
    fusion->retain_external();
    *out = fusion.get();
  });
}

}  // extern "C"
