use std::ffi::CStr;

use kfuse_sys as sys;

/// Element type of a kfuse value (`kf_dtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F64,
    F32,
    F16,
    BF16,
    I64,
    I32,
    Bool,
    /// float8 storage (OCP e4m3fn, DLPack 1.1 code 10); math runs in float32.
    F8E4M3FN,
    /// float8 storage (OCP e5m2, DLPack 1.1 code 12).
    F8E5M2,
    /// 8-bit integers; arithmetic wraps at 8 bits.
    I8,
    U8,
}

impl DType {
    pub(crate) fn to_raw(self) -> sys::kf_dtype {
        match self {
            DType::F64 => sys::kf_dtype::KF_FLOAT64,
            DType::F32 => sys::kf_dtype::KF_FLOAT32,
            DType::F16 => sys::kf_dtype::KF_FLOAT16,
            DType::BF16 => sys::kf_dtype::KF_BFLOAT16,
            DType::I64 => sys::kf_dtype::KF_INT64,
            DType::I32 => sys::kf_dtype::KF_INT32,
            DType::Bool => sys::kf_dtype::KF_BOOL,
            DType::F8E4M3FN => sys::kf_dtype::KF_FLOAT8_E4M3FN,
            DType::F8E5M2 => sys::kf_dtype::KF_FLOAT8_E5M2,
            DType::I8 => sys::kf_dtype::KF_INT8,
            DType::U8 => sys::kf_dtype::KF_UINT8,
        }
    }

    pub(crate) fn from_raw(raw: sys::kf_dtype) -> Option<DType> {
        [
            DType::F64,
            DType::F32,
            DType::F16,
            DType::BF16,
            DType::I64,
            DType::I32,
            DType::Bool,
            DType::F8E4M3FN,
            DType::F8E5M2,
            DType::I8,
            DType::U8,
        ]
        .into_iter()
        .find(|d| d.to_raw() == raw)
    }

    /// kfuse's name of the dtype, e.g. `"float32"`.
    pub fn name(self) -> &'static str {
        // SAFETY: kf_dtype_name returns a static, never-NULL string.
        unsafe { CStr::from_ptr(sys::kf_dtype_name(self.to_raw())) }
            .to_str()
            .unwrap_or("invalid")
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 | DType::BF16 => 2,
            DType::Bool | DType::F8E4M3FN | DType::F8E5M2 | DType::I8 | DType::U8 => 1,
        }
    }

    /// The DLPack type of this dtype (bool as `KF_DLPACK_BOOL_CODE`: 8-bit
    /// kDLUInt is uint8 now; kfuse still reads it as bool where a definition
    /// says bool).
    pub fn to_dlpack(self) -> sys::DLDataType {
        let code = match self {
            DType::F64 | DType::F32 | DType::F16 => sys::DLDataTypeCode::kDLFloat,
            DType::BF16 => sys::DLDataTypeCode::kDLBfloat,
            DType::I64 | DType::I32 | DType::I8 => sys::DLDataTypeCode::kDLInt,
            DType::Bool => sys::DLDataTypeCode(sys::KF_DLPACK_BOOL_CODE as u32),
            DType::U8 => sys::DLDataTypeCode::kDLUInt,
            DType::F8E4M3FN => sys::DLDataTypeCode(sys::KF_DLPACK_FLOAT8_E4M3FN_CODE as u32),
            DType::F8E5M2 => sys::DLDataTypeCode(sys::KF_DLPACK_FLOAT8_E5M2_CODE as u32),
        };
        sys::DLDataType {
            code: code.0 as u8,
            bits: (self.size() * 8) as u8,
            lanes: 1,
        }
    }

    /// The dtype of a DLPack type, if kfuse has one (8-bit kDLInt is int8,
    /// kDLUInt uint8, `KF_DLPACK_BOOL_CODE` bool).
    pub fn from_dlpack(t: sys::DLDataType) -> Option<DType> {
        if t.lanes != 1 {
            return None;
        }
        let code = t.code as u32;
        let is = |c: sys::DLDataTypeCode| code == c.0;
        Some(match t.bits {
            64 if is(sys::DLDataTypeCode::kDLFloat) => DType::F64,
            32 if is(sys::DLDataTypeCode::kDLFloat) => DType::F32,
            16 if is(sys::DLDataTypeCode::kDLFloat) => DType::F16,
            16 if is(sys::DLDataTypeCode::kDLBfloat) => DType::BF16,
            64 if is(sys::DLDataTypeCode::kDLInt) => DType::I64,
            32 if is(sys::DLDataTypeCode::kDLInt) => DType::I32,
            8 if code == sys::KF_DLPACK_FLOAT8_E4M3FN_CODE as u32 => DType::F8E4M3FN,
            8 if code == sys::KF_DLPACK_FLOAT8_E5M2_CODE as u32 => DType::F8E5M2,
            8 if is(sys::DLDataTypeCode::kDLInt) => DType::I8,
            8 if is(sys::DLDataTypeCode::kDLUInt) => DType::U8,
            8 if code == sys::KF_DLPACK_BOOL_CODE as u32 => DType::Bool,
            _ => return None,
        })
    }
}

/// A Rust type whose values are laid out as one kfuse dtype.
///
/// # Safety
/// `DTYPE.size()` must equal `size_of::<Self>()` and every bit pattern kfuse
/// writes for `DTYPE` must be a valid `Self`.
pub unsafe trait Element: Copy + Default + 'static {
    const DTYPE: DType;
}

unsafe impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
unsafe impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
unsafe impl Element for i64 {
    const DTYPE: DType = DType::I64;
}
unsafe impl Element for i32 {
    const DTYPE: DType = DType::I32;
}
unsafe impl Element for i8 {
    const DTYPE: DType = DType::I8;
}
unsafe impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
// kfuse writes bools as 0 or 1, the only valid `bool` bytes.
unsafe impl Element for bool {
    const DTYPE: DType = DType::Bool;
}
