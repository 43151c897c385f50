// The IR: a Fusion is an immutable DAG of Exprs over Values, built from a
// list of Records (one per builder call). Values have dense ids >= 0 in
// definition order. A Value is a tensor (rank >= 0) or a scalar (rank 0,
// is_scalar): scalar inputs and constants are scalars, and an op whose
// operands are all scalars yields a scalar.
//
// Semantics follow PyTorch: binary/ternary ops broadcast right-aligned
// (size-1 dims stretch), type promotion treats scalars like Python numbers,
// integer arithmetic wraps, float16/bfloat16 values are rounded after every
// op.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/ir/record.h"
#include "core/util/lazy.h"
#include "core/ir/dtype.h"
#include "core/ir/op_table.h"
#include "core/util/handle.h"

struct kf_fusion_s {};  // the C handle type: a Fusion is one

namespace kf {

// Largest rank of any value (inputs and results): the builder and the op
// rules check it, so per-call shape work can use fixed-size storage.
constexpr int kMaxRank = 16;
// Largest device mesh (ranks) a definition may declare.
constexpr int64_t kMaxMeshRanks = 1024;
// Deepest chain of ops (the longest producer -> consumer path, counted in
// exprs) a fusion may have, as defined and as its exprs stand after the
// definition-time rewrites (decompositions add a few levels). The stages
// that recurse per level run on a stack sized for it (core/util/deep_stack.h);
// the builder refuses a deeper definition (docs/guarantees.md).
constexpr int64_t kMaxGraphDepth = KF_MAX_GRAPH_DEPTH;

enum class ValueKind : uint8_t { TensorInput, ScalarInput, Constant, Computed };

struct Value {
  int64_t id = 0;
  ValueKind kind = ValueKind::Computed;
  DType dtype = DType::F32;
  int rank = 0;
  bool is_scalar = false;
  int64_t producer = -1;     // index of the Expr that computes it
  int64_t input_index = -1;  // position among the fusion's inputs
  // Constants: value as double (floats) or int64 (ints, bool).
  double f64 = 0;
  int64_t i64 = 0;
  bool is_input() const {
    return kind == ValueKind::TensorInput || kind == ValueKind::ScalarInput;
  }
};

struct Expr {
  Op op;
  std::vector<int64_t> inputs;   // value ids
  std::vector<int64_t> outputs;  // value ids
  std::vector<int64_t> attrs;    // normalized attributes (docs/c-api.md)
};

// Attributes of a communication op (kfuse.h lists their order per op).
struct CommAttrs {
  int dim = -1;        // allgather, reduce_scatter, shard_slice
  int reduce = 0;      // allreduce, reduce_scatter: a CommReduce (core/runtime/comm)
  int64_t ranks = 1;   // the mesh size
  explicit CommAttrs(const Expr& e);
};

// How a value is laid out over a device mesh: every rank holds it whole
// (dim -1) or holds block `rank` of dim `dim`.
struct Sharding {
  int dim = -1;
  bool sharded() const { return dim >= 0; }
  bool operator==(const Sharding&) const = default;
};

struct Output {
  int64_t value = 0;
  std::vector<int64_t> stride_order;  // empty: follows the inputs
  int64_t alias_input = -1;           // index among inputs, or -1
  // With a mesh: what the definition asks for (nullopt: what propagation
  // gives, core/shard), then (after the shard stage) what it gets.
  std::optional<Sharding> requested;
  Sharding sharding;
};

struct PlanCache;  // core/pipeline: LRU of plans by concretization key

class Fusion : public kf_fusion_s, public ExternallyHeld<Fusion, kf_fusion_s> {
 public:
  std::vector<Record> records;
  std::vector<Value> values;
  std::vector<Expr> exprs;
  std::vector<int64_t> inputs;  // value ids, in input order
  std::vector<Output> outputs;
  // A device mesh (0: none): its rank count, each input's sharding as
  // declared, and (after the shard stage) every value's sharding.
  int64_t mesh = 0;
  std::vector<Sharding> input_shardings;  // per input
  std::vector<Sharding> shardings;        // per value id
  // Input extents get negative ids: -1 - (first_extent_id[i] + dim).
  std::vector<int64_t> first_extent_index;  // per input; -1 for scalars
  int64_t num_extents = 0;
  // Scalar inputs whose values decide shapes (they join the concretization key).
  std::vector<int64_t> shape_scalars;
  // Reshape exprs (their dims' grouping joins the concretization key).
  std::vector<int64_t> reshapes;
  // For each value, the index of the last Expr that reads it (-1: none).
  std::vector<int64_t> last_use;
  // Per expr: live when an output needs one of its results (segmentation
  // runs live exprs only). Per value: whether it is an output, and the live
  // exprs that read it (live_readers[reader_begin[id] .. reader_begin[id + 1])).
  std::vector<bool> live;
  std::vector<bool> is_output;
  std::vector<uint32_t> reader_begin;
  std::vector<int64_t> live_readers;
  // Per value: where its extents start in a flat table of every value's
  // sizes (ValueSizes); size_table_length is the table's length.
  std::vector<uint32_t> size_offsets;
  size_t size_table_length = 0;
  // The longest chain of exprs (0: no exprs). Kept by the builder as ops
  // are added; recomputed by finish over the rewritten exprs.
  int64_t depth = 0;

  // Made by the pipeline (core/pipeline/plan.h) on the first call.
  Lazy<PlanCache> plan_cache;

  const Value& value(int64_t id) const { return values.at(static_cast<size_t>(id)); }
  // Whether value `id` is an output or read by a live expr not in `exprs`
  // (sorted expr indices). Dead exprs do not count: they never run.
  bool needed_outside(int64_t id, std::span<const int64_t> exprs) const;
  int64_t extent_id(size_t input_index, int dim) const {
    return -1 - (first_extent_index[input_index] + dim);
  }
  // Fills the derived tables (last_use, liveness, extents, shape_scalars,
  // size offsets, depth) after the records were applied.
  void finish();

  // New values for the stages that rewrite exprs before finish (simplify,
  // decompose, shard): an intermediate (producer set by the caller's
  // rewrite), and an int64 constant.
  int64_t add_computed(DType dtype, int rank, bool is_scalar);
  int64_t add_constant_i64(int64_t value);
};

// Whether `id` is an integer scalar whose value is known when a call's
// inputs are bound, before any kernel runs: a constant, a scalar input,
// an extent (size), or add, sub, mul, maximum, minimum of such values.
// Shape arguments (reshape, expand, full, ...) must be; bind-time
// evaluation (shape_inference.cpp) computes them.
bool is_shape_scalar(const Fusion& f, int64_t id);
// The scalar inputs a shape scalar's value depends on (appended to `out`).
void shape_scalar_inputs(const Fusion& f, int64_t id, std::vector<int64_t>* out);
// Ops that combine shape scalars.
inline bool is_shape_arithmetic(Op op) {
  return op == Op::ADD || op == Op::SUB || op == Op::MUL || op == Op::MAXIMUM || op == Op::MINIMUM;
}

}  // namespace kf
