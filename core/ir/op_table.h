// The op table (ops.def): one row per op, iterated by the builder's type
// rules, the printer and parser, the CPU backend, codegen and the tests.
// Adding an op is one row in ops.def, one case per backend, and tests; the
// static_asserts in op_table.cpp keep the table and kf_op in step.
#pragma once

#include <vector>

#include <optional>
#include <string_view>

#include "kfuse/kfuse.h"

namespace kf {

enum class OpCategory : uint8_t {
  Unary, Binary, Ternary, Cast, Reduction, Shape, Indexing, Creation, Library, Hint,
  Query,  // reads an input's metadata only (size: an extent as an int64 scalar)
  // Moves data between the ranks of a device mesh (or takes this rank's
  // block): inserted by the shard stage (core/shard), run by a communicator.
  Communication,
  // Writes a copy of its first input with some elements replaced or
  // combined at computed indices (scatter, index_reduce): a segment of its own.
  Scatter,
  // Combines each element with those before it along one dim (cumsum,
  // cumprod, cummax): a segment of its own, like a scatter.
  Scan,
};


// How an op's output dtype follows from its inputs (PyTorch's rules).
enum class TypeRule : uint8_t {
  Same,             // output dtype = input dtype (first tensor input)
  SameNumeric,      // same; bool rejected
  ToFloat,          // floats keep their dtype; ints and bool become float32
  ToBool,           // output bool
  IntegralOnly,     // int or bool input, same dtype
  Promote,          // promoted dtype of all operands
  PromoteNumeric,   // promoted; bool result rejected... operands bool allowed only if promoted is numeric
  PromoteToFloat,   // promoted, then int/bool -> float32
  PromoteFloatOnly, // promoted; must be floating
  PromoteIntegral,  // promoted; must be int or bool
  PromoteIntOnly,   // promoted; must be int
  Compare,          // bool output, operands promoted for comparison
  Where,            // cond bool; output = promotion of the two branches
  ReduceSum,        // int/bool -> int64; floats keep dtype
  FloatOnly,        // input must be floating; output same dtype
  Attr,             // output dtype is an attribute
};

enum class Op : uint16_t {
#define OP(E, name, cat, rule, nin, nout) E,
#include "core/ir/ops.def"
#undef OP
  COUNT
};

struct OpInfo {
  Op op;
  std::string_view name;
  OpCategory category;
  TypeRule type_rule;
  int num_inputs;  // -1: variadic
  int num_outputs;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);
inline bool is_valid_op(int code) { return code >= 0 && code < static_cast<int>(Op::COUNT); }
inline Op to_op(kf_op op) { return static_cast<Op>(op); }
inline bool is_pointwise(Op op) {
  auto c = op_info(op).category;
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary ||
         c == OpCategory::Cast;
}

// Index layout of shape-taking ops: where the shape ids sit in args.
struct ShapeArgs {
  size_t begin = 0, end = 0;  // args[begin, end) are shape scalar ids
};
ShapeArgs shape_args(Op op, const std::vector<int64_t>& args);

}  // namespace kf
