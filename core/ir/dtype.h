// Data types of kfuse values: the seven dtypes of the C API, their sizes,
// their DLPack codes, PyTorch's promotion lattice, and half/bfloat16 bit
// conversions shared by the CPU backend and the tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kfuse/kfuse.h"

namespace kf {

enum class DType : uint8_t {
  F64 = KF_FLOAT64,
  F32 = KF_FLOAT32,
  F16 = KF_FLOAT16,
  BF16 = KF_BFLOAT16,
  I64 = KF_INT64,
  I32 = KF_INT32,
  Bool = KF_BOOL,
  F8E4M3 = KF_FLOAT8_E4M3FN,
  F8E5M2 = KF_FLOAT8_E5M2,
  I8 = KF_INT8,
  U8 = KF_UINT8,
};
constexpr int kNumDTypes = KF_DTYPE_COUNT;

std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Every dtype's name in code order, for messages: "float64, float32, ...,
// int8 or uint8" (from the table itself, so a new dtype cannot be missed).
std::string dtype_name_list();
int dtype_size(DType t);
inline bool is_fp8(DType t) { return t == DType::F8E4M3 || t == DType::F8E5M2; }
inline bool is_float(DType t) {
  return t == DType::F64 || t == DType::F32 || t == DType::F16 || t == DType::BF16 || is_fp8(t);
}
// Floats narrower than float32: held in float registers, rounded to the
// format after each op.
inline bool is_narrow_float(DType t) { return t == DType::F16 || t == DType::BF16 || is_fp8(t); }
inline bool is_integer(DType t) { return t == DType::I64 || t == DType::I32 || t == DType::I8 || t == DType::U8; }
// int8 and uint8: held in int registers, wrapped to 8 bits after each op.
inline bool is_byte_int(DType t) { return t == DType::I8 || t == DType::U8; }
inline bool is_bool(DType t) { return t == DType::Bool; }
inline bool is_valid_dtype(int code) { return code >= 0 && code < kNumDTypes; }

// 0 = bool, 1 = integer, 2 = floating (PyTorch's categories).
int dtype_category(DType t);

// torch.promote_types for these dtypes. Like PyTorch, a float8 dtype
// promotes with no other floating dtype: KF_ERR_DTYPE_MISMATCH (cast first).
DType promote_types(DType a, DType b);

// DLPack mapping. Bool is produced as kDLBool (code 6, 8 bits) and accepted
// as kDLBool, or as kDLUInt/kDLInt of 8 bits where the definition says bool
// (older producers): see accepts_as_bool.
DLDataType to_dlpack(DType t);
// Empty when the DLPack type is not one of kfuse's dtypes (lanes != 1 too).
std::optional<DType> from_dlpack(DLDataType t);
// "float32x1" style description of any DLPack type, for messages.
std::string describe_dlpack(DLDataType t);
// kDLUInt/kDLInt 8-bit, lanes 1: read as bool where a bool is expected.
bool accepts_as_bool(DLDataType t);

// IEEE half and bfloat16 <-> float, round to nearest even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t b);

// double -> half / bfloat16 with one rounding (nearest even), so that a
// double result is not rounded twice through float.
uint16_t double_to_half(double d);
uint16_t double_to_bf16(double d);

// float8 e4m3fn / e5m2 (core/ir/fp8.h): decoding is exact; float -> fp8
// is the generated kernels' own code compiled for the host; double ->
// fp8 rounds once (to odd into float, then to nearest even).
float e4m3fn_to_float(uint8_t b);
float e5m2_to_float(uint8_t b);
uint8_t float_to_e4m3fn(float f);
uint8_t float_to_e5m2(float f);
uint8_t double_to_e4m3fn(double d);
uint8_t double_to_e5m2(double d);

}  // namespace kf
