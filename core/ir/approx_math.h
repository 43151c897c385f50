// Where a kernel may use approximate hardware math (issue 13, item 7).
//
// An op may take its fast form (exp: ex2.approx of x * log2 e; sigmoid:
// rcp.approx(1 + exp(-|x|)), times exp(-|x|) for x < 0, so that it never
// overflows; silu: x * that; a division by a shared divisor: one
// multiplication by its reciprocal) only where every output the result reaches is a narrow
// float (bfloat16, float16, float8) and the approximation's error, carried
// to that output, stays far below the output's rounding step: the stored
// result is then the exact-math one, or the float next to it (within 1
// ulp). Exact math everywhere else: a float32/float64 output, an integer
// or bool, a comparison, anything that cancels (a - b with a ~ b), or a
// function whose input error becomes a relative error of its own (exp,
// log, pow, ...).
//
// The analysis carries a bound on each value's relative error against the
// exact-math evaluation forward through the graph:
//   mul, div, reciprocal, sqrt, rsqrt: the operands' errors add;
//   neg, abs, casts between wide floats, shape ops, cat, pad, max/min
//   (pointwise, reductions, relu, clamp), where (exact condition),
//   gathers (exact index): the largest operand error;
//   add of two values of one sign (known from the graph: exp, sigmoid,
//   abs, squares, sums of those, ...), sub of values of opposite signs,
//   and sum/mean of values of one sign: the largest operand error (no
//   cancellation);
//   every other op: no bound (its inputs must be exact).
// A narrow-float value that carries an error is the rounding of a value
// within the bound: allowed as a stored output when the bound is under a
// quarter of the output's relative rounding step (2^-8 for bfloat16,
// 2^-11 for float16, 2^-4/2^-3 for float8), unbounded for any later use.
//
// The bounds are per op (kExpError ...); tests/gpu/test_gpu_approx_math
// measures each fast form over every float32 input and fails when one
// exceeds its bound or a bfloat16/float16 result is more than 1 ulp from
// the correctly rounded exact one. A subnormal float32 result keeps an
// absolute error of a few 2^-149 (as exact math's own rounding there),
// under any bfloat16/float16 output's step unless a later op scales it up
// by more than 2^10: the one case the relative bound does not cover.
#pragma once

#include <vector>

#include "core/ir/fusion.h"

namespace kf {

// Relative error bounds of the fast forms (see the test above).
inline constexpr double kExpError = 0x1p-16;      // ex2.approx(x * log2 e)
inline constexpr double kSigmoidError = 0x1p-15;  // exp's, rcp.approx's and a product's
inline constexpr double kDivError = 0x1p-22;      // x * rn(1 / d)

// Per expr: whether it may take its fast form. Only EXP, SIGMOID, SILU and
// DIV computing in float32 are ever set. Empty when KFUSE_APPROX_MATH=0.
std::vector<bool> approximate_exprs(const Fusion& f);

// False when the switch KFUSE_APPROX_MATH is off (read once; spellings:
// core/util/env_switch.h).
bool approx_math_enabled();

}  // namespace kf
