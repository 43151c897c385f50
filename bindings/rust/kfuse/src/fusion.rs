use std::ffi::{c_void, CStr, CString};
use std::os::raw::c_char; // std::ffi::c_char needs Rust 1.64
use std::ptr::{self, NonNull};

use kfuse_sys as sys;

use crate::dtype::{DType, Element};
use crate::error::{check, Error, Result, Status};
use crate::tensor::{AsDLTensor, AsDLTensorMut, OutputTensor, TensorRef};

/// A finalized fusion: an immutable, reference-counted handle from kfuse's
/// definition cache.
///
/// The C API guarantees that fusions are immutable and may be executed from
/// many threads at once, hence `Send + Sync`. `Clone` adds a reference;
/// equal definitions give equal (`==`) fusions.
pub struct Fusion {
    raw: NonNull<sys::kf_fusion_s>,
    num_outputs: usize,
}

// SAFETY: the C API documents finalized fusions as immutable and safe to use
// from many threads; the reference count is managed by the library.
unsafe impl Send for Fusion {}
unsafe impl Sync for Fusion {}

/// An input or output of a fusion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueInfo {
    /// Value id in the definition.
    pub id: i64,
    /// 0 for scalars.
    pub rank: usize,
    pub dtype: DType,
    pub is_scalar: bool,
}

/// Per-call execution settings.
#[derive(Clone, Copy, Debug)]
pub struct ExecOptions {
    stream: *mut c_void,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            stream: ptr::null_mut(),
        }
    }
}

impl ExecOptions {
    /// Enqueue GPU work on `stream` (a `CUstream`) instead of the default stream.
    ///
    /// # Safety
    /// `stream` must be a valid CUstream of the inputs' device for as long as
    /// the options are used.
    pub unsafe fn with_stream(stream: *mut c_void) -> ExecOptions {
        ExecOptions { stream }
    }

    fn to_raw(self) -> sys::kf_exec_options {
        sys::kf_exec_options {
            struct_size: std::mem::size_of::<sys::kf_exec_options>(),
            stream: self.stream,
            allocator: ptr::null(),
            communicator: ptr::null_mut(),
        }
    }
}

impl Fusion {
    /// Takes ownership of one reference.
    ///
    /// # Safety
    /// `raw` must be a valid fusion reference that the caller gives up.
    pub(crate) unsafe fn from_raw(raw: sys::kf_fusion) -> Result<Fusion> {
        let raw = NonNull::new(raw).ok_or_else(|| Error::new(Status::Internal, "kfuse returned a NULL fusion"))?;
        let mut fusion = Fusion { raw, num_outputs: 0 };
        let mut n = 0usize;
        check(sys::kf_fusion_num_outputs(fusion.as_raw(), &mut n))?;
        fusion.num_outputs = n;
        Ok(fusion)
    }

    /// The raw handle, still owned by `self`.
    pub fn as_raw(&self) -> sys::kf_fusion {
        self.raw.as_ptr()
    }

    /// Parses the text form (docs/text-format.md) through the definition
    /// cache: the same text gives the same fusion.
    ///
    /// ```
    /// let f = kfuse::Fusion::from_text("input x: tensor<float32, 1>\ny = neg(x)\noutput y\n").unwrap();
    /// assert_eq!(f.num_inputs().unwrap(), 1);
    /// let err = kfuse::Fusion::from_text("y = neg(").unwrap_err();
    /// assert_eq!(err.status(), kfuse::Status::Parse);
    /// ```
    pub fn from_text(text: &str) -> Result<Fusion> {
        let text = CString::new(text).map_err(|_| Error::new(Status::InvalidArgument, "text contains a NUL byte"))?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid C string and out-pointer; on success we own `raw`.
        unsafe {
            check(sys::kf_fusion_from_text(text.as_ptr(), &mut raw))?;
            Fusion::from_raw(raw)
        }
    }

    /// The canonical text form.
    pub fn to_text(&self) -> Result<String> {
        let mut out: *mut c_char = ptr::null_mut();
        // SAFETY: on success `out` is a string we free with kf_string_free.
        unsafe {
            check(sys::kf_fusion_to_text(self.as_raw(), &mut out))?;
            let text = CStr::from_ptr(out).to_string_lossy().into_owned();
            sys::kf_string_free(out);
            Ok(text)
        }
    }

    pub fn num_inputs(&self) -> Result<usize> {
        let mut n = 0usize;
        // SAFETY: valid handle and out-pointer.
        check(unsafe { sys::kf_fusion_num_inputs(self.as_raw(), &mut n) })?;
        Ok(n)
    }

    pub fn num_outputs(&self) -> usize {
        self.num_outputs
    }

    /// The inputs in input order (the order `execute` takes them in).
    pub fn inputs(&self) -> Result<Vec<ValueInfo>> {
        (0..self.num_inputs()?)
            .map(|i| self.info(i, sys::kf_fusion_input))
            .collect()
    }

    pub fn outputs(&self) -> Result<Vec<ValueInfo>> {
        (0..self.num_outputs)
            .map(|i| self.info(i, sys::kf_fusion_output))
            .collect()
    }

    fn info(
        &self,
        index: usize,
        get: unsafe extern "C" fn(sys::kf_fusion, usize, *mut sys::kf_value_info) -> sys::kf_status,
    ) -> Result<ValueInfo> {
        let mut info = sys::kf_value_info {
            struct_size: std::mem::size_of::<sys::kf_value_info>(),
            ..Default::default()
        };
        // SAFETY: valid handle; struct_size is set as the header asks.
        check(unsafe { get(self.as_raw(), index, &mut info) })?;
        Ok(ValueInfo {
            id: info.id,
            rank: info.rank as usize,
            dtype: DType::from_raw(info.dtype)
                .ok_or_else(|| Error::new(Status::Internal, format!("unknown dtype {}", info.dtype.0)))?,
            is_scalar: info.is_scalar != 0,
        })
    }

    /// Runs the fusion; kfuse allocates the outputs (on the inputs' device).
    pub fn execute(&self, inputs: &[&dyn AsDLTensor]) -> Result<Vec<OutputTensor>> {
        self.execute_with(inputs, &ExecOptions::default())
    }

    /// `execute` with options (a CUDA stream).
    pub fn execute_with(&self, inputs: &[&dyn AsDLTensor], options: &ExecOptions) -> Result<Vec<OutputTensor>> {
        let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter().map(|t| t.as_dltensor() as *const _).collect();
        let mut outputs: Vec<*mut sys::DLManagedTensor> = vec![ptr::null_mut(); self.num_outputs];
        let options = options.to_raw();
        // SAFETY: the input views outlive the call; `outputs` has room for
        // every output, and on success each entry is ours to delete.
        unsafe {
            check(sys::kf_execute(
                self.as_raw(),
                input_ptrs.as_ptr(),
                input_ptrs.len(),
                outputs.as_mut_ptr(),
                outputs.len(),
                &options,
            ))?;
            outputs
                .into_iter()
                .map(|raw| {
                    NonNull::new(raw)
                        .map(|raw| OutputTensor::from_raw(raw))
                        .ok_or_else(|| Error::new(Status::Internal, "kf_execute returned a NULL output"))
                })
                .collect()
        }
    }

    /// Runs the fusion into caller-provided outputs of the right shapes,
    /// dtypes and device (see [`Fusion::output_shape`]).
    pub fn execute_into(&self, inputs: &[&dyn AsDLTensor], outputs: &mut [&mut dyn AsDLTensorMut]) -> Result<()> {
        let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter().map(|t| t.as_dltensor() as *const _).collect();
        let output_ptrs: Vec<*mut sys::DLTensor> = outputs.iter_mut().map(|t| t.as_dltensor_mut() as *mut _).collect();
        let options = ExecOptions::default().to_raw();
        // SAFETY: all views outlive the call; outputs are exclusively borrowed.
        check(unsafe {
            sys::kf_execute_into(
                self.as_raw(),
                input_ptrs.as_ptr(),
                input_ptrs.len(),
                output_ptrs.as_ptr(),
                output_ptrs.len(),
                &options,
            )
        })
    }

    /// The shape output `index` will have for these inputs.
    pub fn output_shape(&self, inputs: &[&dyn AsDLTensor], index: usize) -> Result<Vec<i64>> {
        let info = self.outputs()?;
        let rank = info
            .get(index)
            .ok_or_else(|| {
                Error::new(
                    Status::InvalidArgument,
                    format!("output {index} does not exist ({} outputs)", info.len()),
                )
            })?
            .rank;
        let input_ptrs: Vec<*const sys::DLTensor> = inputs.iter().map(|t| t.as_dltensor() as *const _).collect();
        let mut shape = vec![0i64; rank];
        // SAFETY: `shape` has room for the output's rank.
        check(unsafe {
            sys::kf_output_shape(
                self.as_raw(),
                input_ptrs.as_ptr(),
                input_ptrs.len(),
                index,
                shape.as_mut_ptr(),
                rank,
            )
        })?;
        Ok(shape)
    }

    /// Convenience for host data of one element type: every input is a
    /// row-major `(data, shape)` pair, every output comes back as
    /// `(data, shape)`.
    ///
    /// ```
    /// let f = kfuse::Fusion::from_text(
    ///     "input a: tensor<float32, 1>\ninput b: tensor<float32, 1>\nc = mul(a, b)\noutput c\n",
    /// ).unwrap();
    /// let out = f.execute_host::<f32>(&[(&[1.0, 2.0], &[2]), (&[3.0, 4.0], &[2])]).unwrap();
    /// assert_eq!(out[0], (vec![3.0, 8.0], vec![2]));
    /// ```
    pub fn execute_host<T: Element>(&self, inputs: &[(&[T], &[i64])]) -> Result<Vec<(Vec<T>, Vec<i64>)>> {
        let views = inputs
            .iter()
            .map(|(data, shape)| TensorRef::from_slice(data, shape))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&dyn AsDLTensor> = views.iter().map(|v| v as &dyn AsDLTensor).collect();
        self.execute(&refs)?
            .into_iter()
            .map(|out| Ok((out.to_vec::<T>()?, out.shape().to_vec())))
            .collect()
    }
}

impl Clone for Fusion {
    fn clone(&self) -> Fusion {
        // SAFETY: valid handle; retain only fails for NULL.
        let status = unsafe { sys::kf_fusion_retain(self.as_raw()) };
        assert_eq!(
            status,
            sys::kf_status::KF_OK,
            "kf_fusion_retain failed on a live fusion"
        );
        Fusion {
            raw: self.raw,
            num_outputs: self.num_outputs,
        }
    }
}

impl Drop for Fusion {
    fn drop(&mut self) {
        // SAFETY: we own one reference.
        unsafe { sys::kf_fusion_release(self.as_raw()) }
    }
}

impl PartialEq for Fusion {
    fn eq(&self, other: &Fusion) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Fusion {}

impl std::fmt::Debug for Fusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Fusion").field(&self.raw).finish()
    }
}
