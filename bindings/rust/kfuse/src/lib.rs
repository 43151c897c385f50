//! Safe Rust interface to kfuse, a fusion compiler for NVIDIA GPUs with a
//! CPU reference backend.
//!
//! Define a fusion once with a [`Builder`] (or from the text form), then
//! execute the [`Fusion`] many times on DLPack tensors: host slices through
//! [`TensorRef::from_slice`], device memory through
//! [`TensorRef::from_raw_parts`], or any [`AsDLTensor`].
//!
//! ```
//! use kfuse::{Builder, DType, Op, TensorRef};
//!
//! // y = (x - mean) * rsqrt(var + eps) over the last dim
//! let mut b = Builder::new()?;
//! let x = b.tensor(2, DType::F32)?;
//! let (var, mean) = b.var_mean(x, &[1], 0, true)?;
//! let eps = b.constant_f64(1e-5, DType::F32)?;
//! let centered = b.sub(x, mean)?;
//! let var_eps = b.add(var, eps)?;
//! let inv_std = b.unary(Op::Rsqrt, var_eps)?;
//! let y = b.mul(centered, inv_std)?;
//! b.output(y)?;
//! let fusion = b.finalize()?;
//!
//! let data = [1.0f32, 3.0, 10.0, 30.0];
//! let out = fusion.execute(&[&TensorRef::from_slice(&data, &[2, 2])?])?;
//! let y = out[0].to_vec::<f32>()?;
//! assert!((y[0] + 1.0).abs() < 1e-3 && (y[3] - 1.0).abs() < 1e-3);
//!
//! // Errors carry kfuse's status and message.
//! let wrong_rank = TensorRef::from_slice(&data, &[4])?;
//! let err = fusion.execute(&[&wrong_rank]).unwrap_err();
//! assert_eq!(err.status(), kfuse::Status::ShapeMismatch);
//! # Ok::<(), kfuse::Error>(())
//! ```
//!
//! Thread safety follows the C API: a [`Fusion`] is `Send + Sync`; a
//! [`Builder`] and an [`OutputTensor`] stay on their thread.

mod builder;
mod dtype;
mod error;
mod fusion;
mod op;
mod tensor;

pub use builder::{Builder, Value};
pub use dtype::{DType, Element};
pub use error::{Error, Result, Status};
pub use fusion::{ExecOptions, Fusion, ValueInfo};
pub use op::Op;
pub use tensor::{AsDLTensor, AsDLTensorMut, Device, OutputTensor, TensorRef};

/// The raw bindings, for what this crate does not wrap (DLPack structs,
/// concretization and segmentation).
pub use kfuse_sys as sys;

use std::sync::Mutex;

/// The library's API version (`kf_version`).
pub fn version() -> u32 {
    // SAFETY: no arguments, no state.
    unsafe { sys::kf_version() }
}

/// Checks once per process that the library implements the header's API.
fn check_version() -> Result<()> {
    // A Mutex, not OnceLock: OnceLock needs Rust 1.70 (rust-version is 1.63).
    static CHECKED: Mutex<Option<Result<()>>> = Mutex::new(None);
    let mut checked = CHECKED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    checked
        .get_or_insert_with(|| error::check(unsafe { sys::kf_check_version(sys::KF_API_VERSION as u32) }))
        .clone()
}

/// The process-wide definition cache.
pub mod cache {
    use super::error::{check, Result};
    use super::sys;

    /// Counters of the definition cache (`kf_cache_stats`).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct Stats {
        pub definitions: u64,
        pub hits: u64,
        pub misses: u64,
        pub evictions: u64,
        pub fusions: u64,
        pub concretizations: u64,
        pub concretization_hits: u64,
    }

    pub fn stats() -> Result<Stats> {
        let mut s = sys::kf_cache_stats {
            struct_size: std::mem::size_of::<sys::kf_cache_stats>(),
            ..Default::default()
        };
        // SAFETY: struct_size is set as the header asks.
        check(unsafe { sys::kf_cache_get_stats(&mut s) })?;
        Ok(Stats {
            definitions: s.definitions,
            hits: s.hits,
            misses: s.misses,
            evictions: s.evictions,
            fusions: s.fusions,
            concretizations: s.concretizations,
            concretization_hits: s.concretization_hits,
        })
    }

    /// Drops every cached fusion (handles held elsewhere stay valid).
    pub fn clear() -> Result<()> {
        check(unsafe { sys::kf_cache_clear() })
    }

    /// Limits the fusions the cache holds (LRU); 0 is rejected.
    pub fn set_limit(max_fusions: usize) -> Result<()> {
        check(unsafe { sys::kf_cache_set_limit(max_fusions) })
    }
}
