#include "core/define/builder.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/define/definition_cache.h"
#include "core/define/op_rules.h"
#include "core/util/error.h"

namespace kf {

namespace {

void check_dtype(DType t, const char* who) {
  if (!is_valid_dtype(static_cast<int>(t)))
    fail(KF_ERR_INVALID_ARGUMENT, who, ": dtype ", static_cast<int>(t),
         " is not a kf_dtype (expected 0..", kNumDTypes - 1, ")");
}
}  // namespace

Builder::Builder(bool communication) : draft_(std::make_shared<Fusion>()), communication_(communication) {}

int64_t Builder::add_value(Value v) {
  v.id = static_cast<int64_t>(draft_->values.size());
  draft_->values.push_back(v);
  depth_.push_back(0);
  return v.id;
}

int64_t Builder::tensor_input(int rank, DType dtype) {
  check_dtype(dtype, "kf_define_tensor");
  if (rank < 0 || rank > kMaxRank)
    fail(KF_ERR_INVALID_ARGUMENT, "kf_define_tensor: rank ", rank, " is out of range (expected 0..",
         kMaxRank, ")");
  draft_->records.push_back({RecordKind::TensorInput, Op::COUNT, dtype, {}, {rank}});
  Value v;
  v.kind = ValueKind::TensorInput;
  v.dtype = dtype;
  v.rank = rank;
  v.input_index = static_cast<int64_t>(draft_->inputs.size());
  int64_t id = add_value(v);
  draft_->inputs.push_back(id);
  if (draft_->mesh != 0) draft_->input_shardings.emplace_back();
  return id;
}

int64_t Builder::scalar_input(DType dtype) {
  check_dtype(dtype, "kf_define_scalar");
  draft_->records.push_back({RecordKind::ScalarInput, Op::COUNT, dtype, {}, {}});
  Value v;
  v.kind = ValueKind::ScalarInput;
  v.dtype = dtype;
  v.is_scalar = true;
  v.input_index = static_cast<int64_t>(draft_->inputs.size());
  int64_t id = add_value(v);
  draft_->inputs.push_back(id);
  if (draft_->mesh != 0) draft_->input_shardings.emplace_back();
  return id;
}

int64_t Builder::constant(Record record, Value v) {
  draft_->records.push_back(std::move(record));
  v.kind = ValueKind::Constant;
  v.is_scalar = true;
  return add_value(v);
}

int64_t Builder::constant_f64(double value, DType dtype) {
  check_dtype(dtype, "kf_define_constant_f64");
  if (!is_float(dtype)) {
    if (!std::isfinite(value) || value != std::trunc(value))
      fail(KF_ERR_INVALID_ARGUMENT, "kf_define_constant_f64: value ", value,
           " is not representable as ", dtype_name(dtype));
    return constant_i64(static_cast<int64_t>(value), dtype);
  }
  Value v;
  v.dtype = dtype;
  v.f64 = value;
  return constant({RecordKind::Constant, Op::COUNT, dtype, {}, {std::bit_cast<int64_t>(value)}}, v);
}

int64_t Builder::constant_i64(int64_t value, DType dtype) {
  check_dtype(dtype, "kf_define_constant_i64");
  if (is_float(dtype)) return constant_f64(static_cast<double>(value), dtype);
  if (is_bool(dtype)) value = value != 0;
  if (dtype == DType::I32 && (value < INT32_MIN || value > INT32_MAX))
    fail(KF_ERR_INVALID_ARGUMENT, "kf_define_constant_i64: value ", value,
         " does not fit int32");
  if ((dtype == DType::I8 && (value < INT8_MIN || value > INT8_MAX)) ||
      (dtype == DType::U8 && (value < 0 || value > UINT8_MAX)))
    fail(KF_ERR_INVALID_ARGUMENT, "kf_define_constant_i64: value ", value, " does not fit ", dtype_name(dtype));
  Value v;
  v.dtype = dtype;
  v.i64 = value;
  v.f64 = static_cast<double>(value);
  return constant({RecordKind::Constant, Op::COUNT, dtype, {}, {value}}, v);
}

std::vector<int64_t> Builder::op(Op op, std::vector<int64_t> args, std::vector<int64_t> attrs) {
  if (!is_valid_op(static_cast<int>(op)))
    fail(KF_ERR_INVALID_ARGUMENT, "kf_builder_op: op ", static_cast<int>(op),
         " is not a kf_op (expected 0..", KF_OP_COUNT - 1, ")");
  std::vector<OutputType> outs = infer_op(*draft_, op, args, attrs, communication_);
  // The chain this op ends (infer_op checked the argument ids).
  int64_t depth = 0;
  for (int64_t a : args) depth = std::max(depth, depth_[static_cast<size_t>(a)]);
  ++depth;
  if (depth > kMaxGraphDepth)
    fail(KF_ERR_INVALID_ARGUMENT, op_name(op), ": a chain of ", depth, " ops exceeds the limit of ", kMaxGraphDepth,
         " (KF_MAX_GRAPH_DEPTH); split the definition into fusions of at most ", kMaxGraphDepth, " chained ops");
  Expr e{op, args, {}, attrs};
  const int64_t expr_index = static_cast<int64_t>(draft_->exprs.size());
  for (const OutputType& t : outs) {
    Value v;
    v.kind = ValueKind::Computed;
    v.dtype = t.dtype;
    v.rank = t.rank;
    v.is_scalar = t.is_scalar;
    v.producer = expr_index;
    e.outputs.push_back(add_value(v));
    depth_.back() = depth;
  }
  draft_->depth = std::max(draft_->depth, depth);
  draft_->records.push_back({RecordKind::Op, op, DType::F32, std::move(args), std::move(attrs)});
  draft_->exprs.push_back(e);
  return e.outputs;
}

void Builder::output(int64_t value, std::vector<int64_t> stride_order, int64_t alias_input) {
  const Fusion& f = *draft_;
  if (value < 0 || value >= static_cast<int64_t>(f.values.size()))
    fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: value id ", value, " is out of range [0, ",
         f.values.size(), ")");
  const Value& v = f.value(value);
  if (v.is_scalar)
    fail(KF_ERR_UNSUPPORTED, "kf_add_output: value ", value,
         " is a scalar; outputs must be tensors (make one with full)");
  if (!stride_order.empty()) {
    if (stride_order.size() != static_cast<size_t>(v.rank))
      fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: stride_order has ", stride_order.size(),
           " entries, expected the value's rank ", v.rank);
    std::vector<bool> seen(static_cast<size_t>(v.rank), false);
    for (int64_t d : stride_order) {
      if (d < 0 || d >= v.rank || seen[static_cast<size_t>(d)])
        fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: stride_order is not a permutation of 0..",
             v.rank - 1);
      seen[static_cast<size_t>(d)] = true;
    }
  }
  if (alias_input != -1) {
    if (alias_input < 0 || alias_input >= static_cast<int64_t>(f.inputs.size()))
      fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: alias_input ", alias_input,
           " is not an input index (expected -1 or 0..", f.inputs.size() - 1, ")");
    const Value& in = f.value(f.inputs[static_cast<size_t>(alias_input)]);
    if (in.is_scalar || in.rank != v.rank || in.dtype != v.dtype)
      fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: alias_input ", alias_input,
           " must be a tensor input of the output's rank ", v.rank, " and dtype ",
           dtype_name(v.dtype));
    for (const Output& o : f.outputs)
      if (o.alias_input == alias_input)
        fail(KF_ERR_INVALID_ARGUMENT, "kf_add_output: input ", alias_input,
             " is already aliased by another output");
  }
  std::vector<int64_t> attrs{alias_input};
  attrs.insert(attrs.end(), stride_order.begin(), stride_order.end());
  draft_->records.push_back({RecordKind::Output, Op::COUNT, DType::F32, {value}, attrs});
  draft_->outputs.push_back({value, std::move(stride_order), alias_input, std::nullopt, Sharding{}});
}

void Builder::mesh(int64_t ranks) {
  Fusion& f = *draft_;
  if (f.mesh != 0)
    fail(KF_ERR_INVALID_ARGUMENT, "kf_builder_set_mesh: the mesh is already set (", f.mesh, " ranks)");
  if (ranks < 1 || ranks > kMaxMeshRanks)
    fail(KF_ERR_INVALID_ARGUMENT, "kf_builder_set_mesh: num_ranks ", ranks, " is out of range (expected 1..",
         kMaxMeshRanks, ")");
  f.records.push_back({RecordKind::Mesh, Op::COUNT, DType::F32, {}, {ranks}});
  f.mesh = ranks;
  f.input_shardings.resize(f.inputs.size());
}

void Builder::shard(int64_t value, int64_t dim, bool replicated) {
  Fusion& f = *draft_;
  const char* fn = replicated ? "kf_replicate" : "kf_shard";
  if (f.mesh == 0) fail(KF_ERR_INVALID_ARGUMENT, fn, ": the fusion has no mesh (call kf_builder_set_mesh first)");
  if (value < 0 || value >= static_cast<int64_t>(f.values.size()))
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": value id ", value, " is out of range [0, ", f.values.size(), ")");
  const Value& v = f.value(value);
  int64_t d = kReplicated;
  if (!replicated) {
    if (v.is_scalar) fail(KF_ERR_INVALID_ARGUMENT, fn, ": value ", value, " is a scalar; only tensors are sharded");
    d = dim < 0 ? dim + v.rank : dim;
    if (d < 0 || d >= v.rank)
      fail(KF_ERR_INVALID_ARGUMENT, fn, ": dim ", dim, " is out of range for a rank-", v.rank, " value");
  }
  // The latest output of the value, else the input.
  for (size_t i = f.outputs.size(); i-- > 0;) {
    if (f.outputs[i].value != value) continue;
    if (f.outputs[i].requested)
      fail(KF_ERR_INVALID_ARGUMENT, fn, ": output ", i, " (value ", value, ") already has a sharding");
    f.outputs[i].requested = Sharding{static_cast<int>(d)};
    f.records.push_back({RecordKind::Shard, Op::COUNT, DType::F32, {value}, {d}});
    return;
  }
  if (!v.is_input() || v.kind != ValueKind::TensorInput)
    fail(KF_ERR_INVALID_ARGUMENT, fn, ": value ", value, " is neither a tensor input nor an output");
  Sharding& s = f.input_shardings[static_cast<size_t>(v.input_index)];
  if (s.sharded()) fail(KF_ERR_INVALID_ARGUMENT, fn, ": input value ", value, " is already sharded");
  s.dim = static_cast<int>(d);
  f.records.push_back({RecordKind::Shard, Op::COUNT, DType::F32, {value}, {d}});
}

std::shared_ptr<Fusion> Builder::finalize() {
  if (draft_->outputs.empty())
    fail(KF_ERR_INVALID_ARGUMENT, "kf_builder_finalize: the fusion has no outputs (call kf_add_output)");
  // The cache adopts a copy of the draft on a miss, so this builder can go on.
  return DefinitionCache::global().find_or_insert(*draft_);
}

}  // namespace kf
