// The simplify stage: algebraic rewrites of a definition's exprs, made once
// per definition. The definition cache calls it on a miss, before
// Fusion::finish, so every later stage (binding, concretize, segment,
// schedule, codegen, the CPU reference, `kfuse explain`) sees one simplified
// graph. Rewrites and their precision: docs/semantics.md, "Algebraic
// simplification"; why here: docs/architecture.md, "Decisions".
//
//   pow(x, c), c known when the fusion is defined (a constant, or a `full` of
//   a constant that leaves x's shape alone), in the op's compute dtype T:
//     c = 1 -> cast(x) to T      c = 2 -> x*x        c = 3 -> (x*x)*x
//     c = 0.5 -> sqrt(x)         c = -0.5 -> rsqrt(x)
//     c = -1 -> reciprocal(x)    c = -2 -> reciprocal(x*x)
//   For integer T only 1, 2 and 3 (exact, wrapping, as pow). For float16 and
//   bfloat16, x*x*x and 1/(x*x) compute in float32 and round once.
//   reciprocal(sqrt(x)) -> rsqrt(x); div(1, sqrt(x)) -> rsqrt(x);
//   div(a, sqrt(x)) -> mul(a, rsqrt(x)).
//
// What stays fixed: every value id of the definition keeps its meaning,
// dtype and shape (the C API hands ids out: inputs, outputs, segment
// boundaries, kf_output_shape). The expr that computed a value v is replaced
// by exprs whose last one computes v; intermediates get new ids after all
// of the definition's. Fusion::records (the definition: what the text form
// prints and the definition cache is keyed by) are not touched. An expr
// left without readers (sqrt(x) above) stays; segmentation drops dead exprs.
#pragma once

#include <cstddef>

#include "core/ir/fusion.h"

namespace kf {

// Rewrites fusion.exprs in place (and appends the new intermediate values),
// sets every Value::producer; returns the number of rewrites. Call before
// Fusion::finish. KFUSE_DEBUG=simplify (or all) logs each rewrite to stderr.
size_t simplify(Fusion& fusion);

// False when the switch KFUSE_SIMPLIFY is off (read once; spellings:
// core/util/env_switch.h): the definition cache then keeps fusions as
// defined (to compare, or to measure the rewrites' effect).
bool simplify_enabled();

}  // namespace kf
