// The CUDA form of every pointwise op and the dtype conversions between
// register forms. A value lives in a register as reg_type(dtype): double for
// float64, float for float32/float16/bfloat16 (float16/bfloat16 values are
// kept rounded to their dtype, so a float16 register always holds a float16
// number), long long, int, bool. Ops compute in float for
// float32/float16/bfloat16 and in double for float64; integers are exact and
// wrap. Every form matches the CPU reference's semantics (PyTorch's), up to
// the float32-vs-double compute precision; divergences are listed in
// docs/codegen.md.
#pragma once

#include <string>
#include <vector>

#include "core/ir/fusion.h"

namespace kf {

// C type of a dtype in registers and in memory.
const char* reg_type(DType t);
const char* storage_type(DType t);

// `expr` (a register of dtype `from`) as a register of dtype `to`, with the
// CPU reference's conversion rules (one rounding into float16/bfloat16,
// float -> int truncation with NaN -> 0, wrapping integer narrowing).
std::string convert(DType from, DType to, const std::string& expr);

// A storage element (`expr` of storage_type(t)) as a register, and back.
std::string load_form(DType t, const std::string& expr);
// Lane `lane` of the kf_vec `vec` of dtype t, as load_form gives it; 16-bit
// lanes come from their 32-bit word (the vector stays in registers as words).
std::string vector_lane_form(DType t, const std::string& vec, int lane);
// A float register rounded to narrow float `t` (half, bfloat16, float8),
// still a float: "kf_rh(x)", "kf_rbf(x)", "kf_r8e4(x)", "kf_r8e5(x)".
std::string round_form(DType t, const std::string& expr);
std::string store_form(DType t, const std::string& expr);
// A float8 conversion that saturates (the format's largest finite value for
// anything beyond it, +NaN for NaN): what cast(clamp(x, -max, max)) gives,
// in one hardware conversion (KernelWriter::pointwise).
std::string saturated_round_form(DType t, const std::string& expr);
std::string saturated_store_form(DType t, const std::string& expr);
// The largest finite value of a float8 format (448, 57344).
double fp8_max_finite(DType t);

// A constant as a register expression of dtype `t`.
std::string literal_f64(DType t, double v);
std::string literal_i64(DType t, int64_t v);


// The CUDA expression of pointwise op `op` (unary/binary/ternary, not cast)
// on operands already converted to `compute` (where: condition as bool,
// branches as `compute`). The result is a register of dtype `compute` for
// arithmetic ops or bool for comparisons and predicates; `result` receives
// which. Throws kf::Error(KF_ERR_UNSUPPORTED) for an op/dtype pair the type
// rules never produce.
std::string pointwise_form(Op op, DType compute, const std::vector<std::string>& a,
                           DType* result);

// The fast form of exp, sigmoid or silu on float32 operands (hardware
// approximations: where approximate_exprs allows them, core/ir/approx_math.h).
// `result` receives float32.
std::string approximate_form(Op op, const std::vector<std::string>& a, DType* result);

}  // namespace kf
