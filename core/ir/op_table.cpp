#include "core/ir/op_table.h"

#include <array>

#include "core/ir/op_attrs.h"

namespace kf {

namespace {
constexpr std::array<OpInfo, static_cast<size_t>(Op::COUNT)> kOps = {{
#define OP(E, name, cat, rule, nin, nout) \
  {Op::E, #name, OpCategory::cat, TypeRule::rule, nin, nout},
#include "core/ir/ops.def"
#undef OP
}};

// The table and the public enum must list the same ops in the same order.
static_assert(static_cast<int>(Op::COUNT) == KF_OP_COUNT, "ops.def and kf_op disagree");
#define OP(E, name, cat, rule, nin, nout) \
  static_assert(static_cast<int>(Op::E) == KF_OP_##E, "ops.def order differs from kf_op: " #E);
#include "core/ir/ops.def"
#undef OP
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<size_t>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& info : kOps)
    if (info.name == name) return info.op;
  return std::nullopt;
}

ShapeArgs shape_args(Op op, const std::vector<int64_t>& args) {
  switch (op) {
    case Op::BROADCAST_IN_DIM:
    case Op::EXPAND:
    case Op::RESHAPE: return {1, args.size()};
    case Op::FULL: return {0, args.empty() ? 0 : args.size() - 1};
    case Op::IOTA: return {0, args.empty() ? size_t{0} : size_t{1}};
    case Op::UNIFORM:
    case Op::NORMAL: return {0, args.size() >= 4 ? args.size() - 4 : 0};
    default: return {0, 0};
  }
}

}  // namespace kf

namespace kf {

const char* scatter_reduce_name(ScatterReduce r) {
  switch (r) {
    case ScatterReduce::None: return "none";
    case ScatterReduce::Sum: return "sum";
    case ScatterReduce::Prod: return "prod";
    case ScatterReduce::Mean: return "mean";
    case ScatterReduce::Amax: return "amax";
    case ScatterReduce::Amin: return "amin";
  }
  return "invalid";
}

}  // namespace kf
