// The library pattern: a matmul or linear with the pointwise ops after it
// that cuBLASLt applies in its epilogue, recognized so that one library
// segment (one cuBLASLt call) computes all of it:
//
//   product = matmul(a, b) | linear(x, w) | linear(x, w, bias)
//   [ cast to float32 ]                       (float16/bfloat16 products only)
//   [ add(., bias) or add(bias, .) ]          (not after linear's own bias)
//   [ relu | gelu_tanh ]
//   [ cast back to the product's dtype ]      (required after the cast up)
//
// with a bias add, an activation, or both. The bias is a rank-1 tensor in
// the product's dtype (after the cast up: a cast of one from that dtype,
// absorbed too) that broadcasts over the product's rows: the product has
// its N dim (matmul with a 2-D+ b, linear with a 2-D w) and the bias is as
// long as N or of size class 1. Every value between the product and the
// result has the next op of the pattern as its only reader and is not a
// fusion output (so the bias cannot depend on the product, and a segment
// holding the pattern cannot feed itself). erf gelu is never absorbed:
// cuBLASLt's GELU epilogue is the tanh approximation.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/concretize/concrete_fusion.h"
#include "core/ir/task.h"

namespace kf {

enum class Activation : uint8_t { None, Relu, GeluTanh };

struct MatmulPattern {
  int64_t product_expr = -1;  // the matmul or linear
  int64_t product = -1;       // its result
  int64_t bias = -1;          // bias vector in the product's dtype; -1: none
  bool bias_added = false;    // from an add (false: linear's own argument)
  Activation activation = Activation::None;
  int64_t result = -1;        // what the pattern hands out
};

// For each value: the only live expr that reads it (once), or -1 (no
// reader, several, or a fusion output).
using SoleReaders = std::vector<int64_t>;

// The exprs (sorted) of the pattern that starts at library expr `expr`:
// just {expr} when nothing after it can be absorbed.
std::vector<int64_t> match_matmul_pattern(const ConcreteFusion& c, int64_t expr,
                                          const SoleReaders& sole_readers);

// What `task` computes when it is exactly a matmul pattern (its exprs are
// those match_matmul_pattern gives and its one output is the result);
// otherwise nothing.
std::optional<MatmulPattern> describe_matmul_pattern(const ConcreteFusion& c, const Task& task);

// The pattern's exprs after the product (bias add, casts, activation) as a
// Task reading the product and the bias: what runs as a generated kernel
// when the library cannot apply the epilogue.
Task matmul_epilogue_task(const Fusion& fusion, const Task& pattern, const MatmulPattern& p);

// "linear+bias+gelu_tanh" and the like (static).
std::string_view matmul_pattern_name(const Fusion& fusion, const MatmulPattern& p);

}  // namespace kf
