#include "core/codegen/op_cuda.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstdio>

#include "core/ir/type_promotion.h"
#include "core/util/error.h"

namespace kf {

namespace {

// One row per op of ops.def, in order. Patterns: $0 $1 $2 are the operands;
// in float forms `@` becomes "f" for float (nothing for double) after a
// math function name and `#` becomes "f" after a literal. An empty pattern:
// the op never computes in that category (or is not pointwise).
struct OpForm {
  Op op;
  const char* flt;      // float32/float16/bfloat16 (as float) and float64
  const char* integer;  // int32/int64 (wrapping; helpers are overloaded)
  const char* boolean;  // bool; nullptr: same as `integer`
};

constexpr OpForm kForms[] = {
    {Op::NEG, "(-$0)", "kf_neg($0)", ""},
    {Op::ABS, "fabs@($0)", "($0 < 0 ? kf_neg($0) : $0)", ""},
    {Op::EXP, "exp@($0)", "", ""},
    {Op::EXP2, "exp2@($0)", "", ""},
    {Op::EXPM1, "expm1@($0)", "", ""},
    {Op::LOG, "log@($0)", "", ""},
    {Op::LOG2, "log2@($0)", "", ""},
    {Op::LOG10, "log10@($0)", "", ""},
    {Op::LOG1P, "log1p@($0)", "", ""},
    {Op::SQRT, "sqrt@($0)", "", ""},
    // rsqrtf (2 ulps; rsqrt for float64: 1 ulp) is one MUFU.RSQ and a
    // fix-up for denormals, against an IEEE sqrt and an IEEE reciprocal
    // (two multi-instruction sequences) for 1/sqrt. torch's rsqrt is the
    // same call. Specials as 1/sqrt: +-0 -> +-inf, inf -> 0, x < 0 -> NaN.
    {Op::RSQRT, "rsqrt@($0)", "", ""},
    // 1/x: with NVRTC's defaults (-prec-div=true) NVVM emits rcp.rn, the
    // correctly rounded reciprocal; __frcp_rn would give the same bits.
    {Op::RECIPROCAL, "(1.0# / $0)", "", ""},
    {Op::SIN, "sin@($0)", "", ""},
    {Op::COS, "cos@($0)", "", ""},
    {Op::TAN, "tan@($0)", "", ""},
    {Op::ASIN, "asin@($0)", "", ""},
    {Op::ACOS, "acos@($0)", "", ""},
    {Op::ATAN, "atan@($0)", "", ""},
    {Op::SINH, "sinh@($0)", "", ""},
    {Op::COSH, "cosh@($0)", "", ""},
    {Op::TANH, "tanh@($0)", "", ""},
    {Op::ASINH, "asinh@($0)", "", ""},
    {Op::ACOSH, "acosh@($0)", "", ""},
    {Op::ATANH, "atanh@($0)", "", ""},
    {Op::SIGMOID, "(1.0# / (1.0# + exp@(-$0)))", "", ""},
    {Op::RELU, "kf_relu($0)", "($0 > 0 ? $0 : 0)", ""},
    {Op::GELU, "($0 * 0.5# * (1.0# + erf@($0 * 0.70710678118654752440#)))", "", ""},
    {Op::GELU_TANH, "kf_gelu_tanh($0)", "", ""},
    {Op::SILU, "($0 / (1.0# + exp@(-$0)))", "", ""},
    {Op::ERF, "erf@($0)", "", ""},
    {Op::ERFC, "erfc@($0)", "", ""},
    {Op::FLOOR, "floor@($0)", "$0", ""},
    {Op::CEIL, "ceil@($0)", "$0", ""},
    {Op::ROUND, "rint@($0)", "$0", ""},  // half to even
    {Op::TRUNC, "trunc@($0)", "$0", ""},
    {Op::SIGN, "(($0 > 0) - ($0 < 0))", "(($0 > 0) - ($0 < 0))", "$0"},
    {Op::ISNAN, "($0 != $0)", "($0 != $0)", "($0 != $0)"},
    {Op::ISINF, "isinf($0)", "($0 != $0)", "($0 != $0)"},
    {Op::ISFINITE, "isfinite($0)", "($0 == $0)", "($0 == $0)"},
    {Op::LOGICAL_NOT, "($0 == 0)", "($0 == 0)", "(!$0)"},
    {Op::BITWISE_NOT, "", "(~$0)", "(!$0)"},
    {Op::ADD, "($0 + $1)", "kf_add($0, $1)", "($0 || $1)"},
    {Op::SUB, "($0 - $1)", "kf_sub($0, $1)", ""},
    {Op::MUL, "($0 * $1)", "kf_mul($0, $1)", "($0 && $1)"},
    {Op::DIV, "($0 / $1)", "", ""},
    {Op::FMOD, "fmod@($0, $1)", "kf_fmod_i($0, $1)", ""},
    {Op::REMAINDER, "kf_remainder($0, $1)", "kf_rem_i($0, $1)", ""},
    {Op::POW, "pow@($0, $1)", "kf_pow_i($0, $1)", ""},
    {Op::ATAN2, "atan2@($0, $1)", "", ""},
    {Op::MAXIMUM, "kf_maximum($0, $1)", "($0 < $1 ? $1 : $0)", "($0 || $1)"},
    {Op::MINIMUM, "kf_minimum($0, $1)", "($1 < $0 ? $1 : $0)", "($0 && $1)"},
    {Op::EQ, "($0 == $1)", "($0 == $1)", nullptr},
    {Op::NE, "($0 != $1)", "($0 != $1)", nullptr},
    {Op::LT, "($0 < $1)", "($0 < $1)", nullptr},
    {Op::LE, "($0 <= $1)", "($0 <= $1)", nullptr},
    {Op::GT, "($0 > $1)", "($0 > $1)", nullptr},
    {Op::GE, "($0 >= $1)", "($0 >= $1)", nullptr},
    {Op::LOGICAL_AND, "($0 != 0 && $1 != 0)", "($0 != 0 && $1 != 0)", "($0 && $1)"},
    {Op::LOGICAL_OR, "($0 != 0 || $1 != 0)", "($0 != 0 || $1 != 0)", "($0 || $1)"},
    {Op::LOGICAL_XOR, "(($0 != 0) != ($1 != 0))", "(($0 != 0) != ($1 != 0))", "($0 != $1)"},
    {Op::BITWISE_AND, "", "($0 & $1)", "($0 && $1)"},
    {Op::BITWISE_OR, "", "($0 | $1)", "($0 || $1)"},
    {Op::BITWISE_XOR, "", "($0 ^ $1)", "($0 != $1)"},
    {Op::SHIFT_LEFT, "", "kf_shl($0, $1)", ""},
    {Op::SHIFT_RIGHT, "", "kf_shr($0, $1)", ""},
    {Op::WHERE, "($0 ? $1 : $2)", "($0 ? $1 : $2)", nullptr},
    {Op::CLAMP, "kf_clamp($0, $1, $2)", "kf_clamp_i($0, $1, $2)", ""},
    {Op::LERP, "kf_lerp($0, $1, $2)", "", ""},
    {Op::FMA, "fma@($0, $1, $2)", "kf_add(kf_mul($0, $1), $2)", ""},
    // Not pointwise (or cast, handled by convert): no forms.
    {Op::CAST, "", "", ""},
    {Op::SUM, "", "", ""},
    {Op::PROD, "", "", ""},
    {Op::MAX, "", "", ""},
    {Op::MIN, "", "", ""},
    {Op::MEAN, "", "", ""},
    {Op::VAR, "", "", ""},
    {Op::VAR_MEAN, "", "", ""},
    {Op::BROADCAST_IN_DIM, "", "", ""},
    {Op::EXPAND, "", "", ""},
    {Op::RESHAPE, "", "", ""},
    {Op::PERMUTE, "", "", ""},
    {Op::SQUEEZE, "", "", ""},
    {Op::UNSQUEEZE, "", "", ""},
    {Op::SLICE, "", "", ""},
    {Op::PAD, "", "", ""},
    {Op::CAT, "", "", ""},
    {Op::INDEX_SELECT, "", "", ""},
    {Op::GATHER, "", "", ""},
    {Op::FULL, "", "", ""},
    {Op::IOTA, "", "", ""},
    {Op::UNIFORM, "", "", ""},
    {Op::NORMAL, "", "", ""},
    {Op::MATMUL, "", "", ""},
    {Op::LINEAR, "", "", ""},
    {Op::SEGMENT_SET, "", "", ""},
    {Op::SIZE, "", "", ""},
    {Op::ALLREDUCE, "", "", ""},
    {Op::ALLGATHER, "", "", ""},
    {Op::REDUCE_SCATTER, "", "", ""},
    {Op::SHARD_SLICE, "", "", ""},
    {Op::ARGMAX, "", "", ""},  // decomposed when defined (core/simplify/decompose.h)
    {Op::ARGMIN, "", "", ""},
    {Op::SCATTER, "", "", ""},  // emit_scatter.cpp
    {Op::INDEX_REDUCE, "", "", ""},
    {Op::CUMSUM, "", "", ""},  // emit_scan.cpp
    {Op::CUMPROD, "", "", ""},
    {Op::CUMMAX, "", "", ""},
};

constexpr bool forms_in_order() {
  for (size_t i = 0; i < std::size(kForms); ++i)
    if (static_cast<size_t>(kForms[i].op) != i) return false;
  return true;
}
static_assert(std::size(kForms) == static_cast<size_t>(Op::COUNT),
              "op_cuda.cpp must have one row per op of ops.def");
static_assert(forms_in_order(), "op_cuda.cpp rows must follow ops.def order");

std::string expand(const char* pattern, const std::vector<std::string>& a, bool is_f32) {
  std::string out;
  for (const char* p = pattern; *p != 0; ++p) {
    if (*p == '$') {
      out += a.at(static_cast<size_t>(p[1] - '0'));
      ++p;
    } else if (*p == '@' || *p == '#') {
      if (is_f32) out += 'f';
    } else {
      out += *p;
    }
  }
  return out;
}

std::string hex_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  return buf;
}

}  // namespace

const char* reg_type(DType t) {
  switch (t) {
    case DType::F64: return "double";
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3:
    case DType::F8E5M2: return "float";
    case DType::I64: return "long long";
    case DType::I32:
    case DType::I8:
    case DType::U8: return "int";  // wrapped to 8 bits after each op (round_form)
    case DType::Bool: return "bool";
  }
  return "void";
}

const char* storage_type(DType t) {
  switch (t) {
    case DType::F64: return "double";
    case DType::F32: return "float";
    case DType::F16:
    case DType::BF16: return "unsigned short";
    case DType::I64: return "long long";
    case DType::I32: return "int";
    case DType::I8: return "signed char";
    case DType::U8:
    case DType::Bool:
    case DType::F8E4M3:
    case DType::F8E5M2: return "unsigned char";
  }
  return "void";
}

std::string convert(DType from, DType to, const std::string& x) {
  if (from == to) return x;
  if (to == DType::Bool) return "(" + x + " != 0)";
  switch (to) {
    case DType::F64: return "((double)" + x + ")";
    case DType::F32: return "((float)" + x + ")";
    case DType::F16:
      if (from == DType::F32 || from == DType::BF16) return "kf_rh(" + x + ")";
      return "kf_rh_d((double)" + x + ")";
    case DType::BF16:
      if (from == DType::F32 || from == DType::F16) return "kf_rbf(" + x + ")";
      return "kf_rbf_d((double)" + x + ")";
    case DType::F8E4M3:
    case DType::F8E5M2: {
      const std::string fn = to == DType::F8E4M3 ? "kf_r8e4" : "kf_r8e5";
      if (from == DType::F32 || from == DType::F16 || from == DType::BF16 || is_fp8(from)) return fn + "(" + x + ")";
      return fn + "_d((double)" + x + ")";
    }
    case DType::I64:
      if (is_float(from)) return "kf_f2i64((double)" + x + ")";
      return "((long long)" + x + ")";
    case DType::I32:
      if (is_float(from)) return "((int)kf_f2i64((double)" + x + "))";
      return "((int)" + x + ")";
    case DType::I8:
    case DType::U8: {
      const std::string byte = to == DType::I8 ? "(int)(signed char)" : "(int)(unsigned char)";
      if (is_float(from)) return "(" + byte + "kf_f2i64((double)" + x + "))";
      return "(" + byte + "(" + x + "))";
    }
    case DType::Bool: break;
  }
  return x;
}

std::string round_form(DType t, const std::string& x) {
  switch (t) {
    case DType::F16: return "kf_rh(" + x + ")";
    case DType::BF16: return "kf_rbf(" + x + ")";
    case DType::F8E4M3: return "kf_r8e4(" + x + ")";
    case DType::F8E5M2: return "kf_r8e5(" + x + ")";
    case DType::I8: return "((int)(signed char)(" + x + "))";
    case DType::U8: return "((int)(unsigned char)(" + x + "))";
    default: return x;
  }
}

std::string load_form(DType t, const std::string& x) {
  switch (t) {
    case DType::F16: return "kf_h2f(" + x + ")";
    case DType::BF16: return "kf_bf2f(" + x + ")";
    case DType::F8E4M3: return "kf_e4m3_to_f_hw(" + x + ")";
    case DType::F8E5M2: return "kf_e5m2_to_f_hw(" + x + ")";
    case DType::Bool: return "(" + x + " != 0)";
    default: return x;
  }
}

std::string vector_lane_form(DType t, const std::string& vec, int lane) {
  const std::string j = std::to_string(lane);
  switch (t) {
    case DType::F16: return "kf_h2f_at(" + vec + ", " + j + ")";
    case DType::BF16: return "kf_bf2f_at(" + vec + ", " + j + ")";
    default: return load_form(t, vec + ".v[" + j + "]");
  }
}

std::string store_form(DType t, const std::string& x) {
  switch (t) {
    case DType::F16: return "kf_f2h(" + x + ")";
    case DType::BF16: return "kf_f2bf(" + x + ")";
    case DType::F8E4M3: return "kf_f_to_e4m3_hw(" + x + ")";
    case DType::F8E5M2: return "kf_f_to_e5m2_hw(" + x + ")";
    case DType::Bool: return "(unsigned char)(" + x + ")";
    default: return x;
  }
}

std::string saturated_round_form(DType t, const std::string& x) {
  return (t == DType::F8E4M3 ? "kf_r8e4s(" : "kf_r8e5s(") + x + ")";
}

std::string saturated_store_form(DType t, const std::string& x) {
  return (t == DType::F8E4M3 ? "kf_f_to_e4m3_sat(" : "kf_f_to_e5m2_sat(") + x + ")";
}

double fp8_max_finite(DType t) { return t == DType::F8E4M3 ? 448.0 : 57344.0; }

std::string literal_f64(DType t, double v) {
  switch (t) {
    case DType::F64:
      if (!std::isfinite(v))
        return "__longlong_as_double(" + std::to_string(std::bit_cast<int64_t>(v)) + "LL)";
      return hex_double(v);
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::F8E4M3:
    case DType::F8E5M2: {
      float f = static_cast<float>(v);
      if (t == DType::F16) f = half_to_float(double_to_half(v));
      if (t == DType::BF16) f = bf16_to_float(double_to_bf16(v));
      if (t == DType::F8E4M3) f = e4m3fn_to_float(double_to_e4m3fn(v));
      if (t == DType::F8E5M2) f = e5m2_to_float(double_to_e5m2(v));
      if (!std::isfinite(f))
        return "__int_as_float(" + std::to_string(std::bit_cast<int32_t>(f)) + ")";
      return hex_double(f) + "f";
    }
    case DType::Bool: return v != 0 ? "true" : "false";
    default: return literal_i64(t, static_cast<int64_t>(v));
  }
}

std::string literal_i64(DType t, int64_t v) {
  switch (t) {
    case DType::I64:
      if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
      return "(" + std::to_string(v) + "LL)";
    case DType::I32: {
      const int32_t w = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
      if (w == INT32_MIN) return "(-2147483647 - 1)";
      return "(" + std::to_string(w) + ")";
    }
    case DType::I8: return "(" + std::to_string(static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(v)))) + ")";
    case DType::U8: return "(" + std::to_string(static_cast<int>(static_cast<uint8_t>(v))) + ")";
    case DType::Bool: return v != 0 ? "true" : "false";
    default: return literal_f64(t, static_cast<double>(v));
  }
}

std::string pointwise_form(Op op, DType compute, const std::vector<std::string>& a,
                           DType* result) {
  const OpForm& form = kForms[static_cast<size_t>(op)];
  const char* pattern = is_float(compute) ? form.flt
                        : is_bool(compute) && form.boolean != nullptr ? form.boolean
                                                                      : form.integer;
  if (pattern == nullptr || *pattern == 0)
    fail(KF_ERR_UNSUPPORTED, "codegen: ", op_name(op), " has no CUDA form for ",
         dtype_name(compute));
  const TypeRule rule = op_info(op).type_rule;
  *result = (rule == TypeRule::Compare || rule == TypeRule::ToBool) ? DType::Bool : compute;
  std::string r = expand(pattern, a, compute != DType::F64);
  // sign's comparisons yield int; bring the result back to the register type.
  if (op == Op::SIGN && !is_bool(compute)) r = "((" + std::string(reg_type(compute)) + ")" + r + ")";
  return r;
}

std::string approximate_form(Op op, const std::vector<std::string>& a, DType* result) {
  *result = DType::F32;
  switch (op) {
    case Op::EXP: return "kf_exp_approx(" + a.at(0) + ")";
    case Op::SIGMOID: return "kf_sigmoid_approx(" + a.at(0) + ")";
    case Op::SILU: return "kf_silu_approx(" + a.at(0) + ")";
    default: break;
  }
  fail(KF_ERR_INTERNAL, "codegen: ", op_name(op), " has no fast form");
}

}  // namespace kf
