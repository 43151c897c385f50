use std::ffi::c_void;
use std::marker::PhantomData;
use std::ptr::NonNull;

use kfuse_sys as sys;

use crate::dtype::{DType, Element};
use crate::error::{Error, Result, Status};

/// Where a tensor's memory lives (the DLPack device).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Device {
    Cpu,
    /// Device memory of CUDA device `n`.
    Cuda(i32),
    /// Page-locked host memory.
    CudaHost,
    /// Managed (unified) memory of CUDA device `n`.
    CudaManaged(i32),
    /// Any other DLPack device: (device_type, device_id).
    Other(u32, i32),
}

impl Device {
    fn to_dlpack(self) -> sys::DLDevice {
        let (t, id) = match self {
            Device::Cpu => (sys::DLDeviceType::kDLCPU, 0),
            Device::Cuda(id) => (sys::DLDeviceType::kDLCUDA, id),
            Device::CudaHost => (sys::DLDeviceType::kDLCUDAHost, 0),
            Device::CudaManaged(id) => (sys::DLDeviceType::kDLCUDAManaged, id),
            Device::Other(t, id) => (sys::DLDeviceType(t), id),
        };
        sys::DLDevice {
            device_type: t,
            device_id: id,
        }
    }

    fn from_dlpack(d: sys::DLDevice) -> Device {
        match d.device_type {
            sys::DLDeviceType::kDLCPU => Device::Cpu,
            sys::DLDeviceType::kDLCUDA => Device::Cuda(d.device_id),
            sys::DLDeviceType::kDLCUDAHost => Device::CudaHost,
            sys::DLDeviceType::kDLCUDAManaged => Device::CudaManaged(d.device_id),
            other => Device::Other(other.0, d.device_id),
        }
    }

    /// Whether the host can read the memory directly.
    pub fn is_host(self) -> bool {
        matches!(self, Device::Cpu | Device::CudaHost)
    }
}

/// Anything that can be handed to kfuse as a DLPack tensor.
pub trait AsDLTensor {
    fn as_dltensor(&self) -> &sys::DLTensor;
}

/// A tensor kfuse may write into (outputs of `execute_into`, aliased inputs).
pub trait AsDLTensorMut: AsDLTensor {
    fn as_dltensor_mut(&mut self) -> &mut sys::DLTensor;
}

impl AsDLTensor for sys::DLTensor {
    fn as_dltensor(&self) -> &sys::DLTensor {
        self
    }
}

/// A DLPack view of memory owned elsewhere: a host slice or a raw pointer.
///
/// The view owns its shape and strides; `'a` ties it to the borrowed data.
pub struct TensorRef<'a> {
    tensor: sys::DLTensor,
    shape: Box<[i64]>,
    strides: Option<Box<[i64]>>,
    _data: PhantomData<&'a mut [u8]>,
}

impl<'a> TensorRef<'a> {
    /// A row-major view of `data` with `shape`, read-only for kfuse.
    ///
    /// ```
    /// let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let x = kfuse::TensorRef::from_slice(&data, &[2, 3]).unwrap();
    /// assert_eq!(x.shape(), &[2, 3]);
    /// assert!(kfuse::TensorRef::from_slice(&data, &[4, 2]).is_err());
    /// ```
    pub fn from_slice<T: Element>(data: &'a [T], shape: &[i64]) -> Result<TensorRef<'a>> {
        check_len(data.len(), shape)?;
        // SAFETY: the slice covers the whole row-major extent of `shape`,
        // and kfuse only reads inputs (unless the fusion aliases an output
        // onto this input: use `from_mut_slice` for those).
        Ok(unsafe { Self::from_raw_parts(data.as_ptr() as *mut c_void, Device::Cpu, T::DTYPE, shape, None) })
    }

    /// A row-major view kfuse may write into (an output of `execute_into`,
    /// or an input that a fusion output aliases).
    pub fn from_mut_slice<T: Element>(data: &'a mut [T], shape: &[i64]) -> Result<TensorRef<'a>> {
        check_len(data.len(), shape)?;
        // SAFETY: as in from_slice; the exclusive borrow allows writes.
        Ok(unsafe { Self::from_raw_parts(data.as_mut_ptr() as *mut c_void, Device::Cpu, T::DTYPE, shape, None) })
    }

    /// A 0-dim host tensor: the value of a scalar input.
    pub fn scalar<T: Element>(value: &'a T) -> TensorRef<'a> {
        // SAFETY: one element, no dims.
        unsafe { Self::from_raw_parts(value as *const T as *mut c_void, Device::Cpu, T::DTYPE, &[], None) }
    }

    /// A view of raw memory, e.g. a CUDA device pointer.
    ///
    /// # Safety
    /// `data` must point to memory on `device` that holds every element the
    /// shape and strides (in elements; `None` = row-major) address, and stay
    /// valid, and not be written by others, for `'a`.
    pub unsafe fn from_raw_parts(
        data: *mut c_void,
        device: Device,
        dtype: DType,
        shape: &[i64],
        strides: Option<&[i64]>,
    ) -> TensorRef<'a> {
        let mut shape: Box<[i64]> = shape.into();
        let mut strides: Option<Box<[i64]>> = strides.map(Into::into);
        let tensor = sys::DLTensor {
            data,
            device: device.to_dlpack(),
            ndim: shape.len() as i32,
            dtype: dtype.to_dlpack(),
            // The boxes' heap memory does not move when `TensorRef` does.
            shape: shape.as_mut_ptr(),
            strides: strides.as_mut().map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
            byte_offset: 0,
        };
        TensorRef {
            tensor,
            shape,
            strides,
            _data: PhantomData,
        }
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub fn strides(&self) -> Option<&[i64]> {
        self.strides.as_deref()
    }

    pub fn device(&self) -> Device {
        Device::from_dlpack(self.tensor.device)
    }
}

impl AsDLTensor for TensorRef<'_> {
    fn as_dltensor(&self) -> &sys::DLTensor {
        &self.tensor
    }
}

impl AsDLTensorMut for TensorRef<'_> {
    fn as_dltensor_mut(&mut self) -> &mut sys::DLTensor {
        &mut self.tensor
    }
}

fn check_len(len: usize, shape: &[i64]) -> Result<()> {
    if let Some(&d) = shape.iter().find(|&&d| d < 0) {
        return Err(Error::new(
            Status::ShapeMismatch,
            format!("negative size {d} in shape {shape:?}"),
        ));
    }
    let count: i64 = shape.iter().product();
    if count as usize != len {
        return Err(Error::new(
            Status::ShapeMismatch,
            format!("shape {shape:?} has {count} elements, the slice has {len}"),
        ));
    }
    Ok(())
}

/// A tensor kfuse allocated (a `DLManagedTensor`); dropping it calls the
/// DLPack deleter. Not `Send`: DLPack does not promise that a deleter may
/// run on another thread.
pub struct OutputTensor {
    raw: NonNull<sys::DLManagedTensor>,
}

impl OutputTensor {
    /// Takes ownership of a managed tensor.
    ///
    /// # Safety
    /// `raw` must be a valid `DLManagedTensor` that nobody else will delete.
    pub unsafe fn from_raw(raw: NonNull<sys::DLManagedTensor>) -> OutputTensor {
        OutputTensor { raw }
    }

    /// Gives up ownership, e.g. to hand the tensor to a framework's
    /// `from_dlpack`; whoever receives it must call its deleter.
    pub fn into_raw(self) -> NonNull<sys::DLManagedTensor> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    fn dl(&self) -> &sys::DLTensor {
        // SAFETY: owned and valid until drop.
        unsafe { &self.raw.as_ref().dl_tensor }
    }

    pub fn shape(&self) -> &[i64] {
        let t = self.dl();
        if t.ndim == 0 {
            return &[];
        }
        // SAFETY: DLPack guarantees ndim entries.
        unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }
    }

    /// Strides in elements; `None` means row-major.
    pub fn strides(&self) -> Option<&[i64]> {
        let t = self.dl();
        if t.strides.is_null() || t.ndim == 0 {
            return None;
        }
        // SAFETY: as for shape.
        Some(unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) })
    }

    pub fn dtype(&self) -> Option<DType> {
        DType::from_dlpack(self.dl().dtype)
    }

    pub fn device(&self) -> Device {
        Device::from_dlpack(self.dl().device)
    }

    /// Pointer to the first element (device memory for CUDA tensors).
    pub fn data_ptr(&self) -> *mut c_void {
        let t = self.dl();
        (t.data as *mut u8).wrapping_add(t.byte_offset as usize) as *mut c_void
    }

    pub fn len(&self) -> usize {
        self.shape().iter().product::<i64>() as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies a host tensor into a row-major `Vec`, following its strides.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if self.dtype() != Some(T::DTYPE) {
            return Err(Error::new(
                Status::DtypeMismatch,
                format!(
                    "to_vec::<{}>: the tensor's dtype is {:?}",
                    T::DTYPE.name(),
                    self.dtype()
                ),
            ));
        }
        if !self.device().is_host() {
            return Err(Error::new(
                Status::DeviceMismatch,
                format!(
                    "to_vec: the tensor is on {:?}; copy device memory yourself",
                    self.device()
                ),
            ));
        }
        let shape = self.shape();
        let strides: Vec<i64> = match self.strides() {
            Some(s) => s.to_vec(),
            None => row_major_strides(shape),
        };
        let base = self.data_ptr() as *const T;
        let mut out = Vec::with_capacity(self.len());
        let mut index = vec![0i64; shape.len()];
        for _ in 0..self.len() {
            let offset: i64 = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
            // SAFETY: the index is inside the shape, so the offset addresses
            // an element of the tensor.
            out.push(unsafe { *base.offset(offset as isize) });
            for d in (0..shape.len()).rev() {
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Ok(out)
    }
}

pub(crate) fn row_major_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1].max(1);
    }
    strides
}

impl AsDLTensor for OutputTensor {
    fn as_dltensor(&self) -> &sys::DLTensor {
        self.dl()
    }
}

impl Drop for OutputTensor {
    fn drop(&mut self) {
        // SAFETY: we own the managed tensor; its deleter frees it once.
        unsafe {
            if let Some(deleter) = self.raw.as_ref().deleter {
                deleter(self.raw.as_ptr());
            }
        }
    }
}

impl std::fmt::Debug for OutputTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputTensor")
            .field("shape", &self.shape())
            .field("dtype", &self.dtype())
            .field("device", &self.device())
            .finish()
    }
}
