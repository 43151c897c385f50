use std::ffi::CStr;
use std::fmt;

use kfuse_sys as sys;

/// The kind of failure, one per `kf_status` of the C API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Status {
    /// NULL pointer, out-of-range id, bad attribute.
    InvalidArgument,
    /// A valid request that kfuse cannot do; the message says why.
    Unsupported,
    /// Rank or sizes disagree with the definition.
    ShapeMismatch,
    /// A dtype disagrees with the definition or the op.
    DtypeMismatch,
    /// Tensors on different devices.
    DeviceMismatch,
    OutOfMemory,
    /// The text form did not parse; the message has "line L, column C".
    Parse,
    /// No CUDA driver or device for kDLCUDA tensors.
    NoDevice,
    /// A driver, NVRTC or library call failed.
    Backend,
    VersionMismatch,
    /// A kfuse bug: please report the message.
    Internal,
    /// A status this binding does not know (from a newer library).
    Other(u32),
}

impl Status {
    pub(crate) fn from_raw(status: sys::kf_status) -> Status {
        match status {
            sys::kf_status::KF_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            sys::kf_status::KF_ERR_UNSUPPORTED => Status::Unsupported,
            sys::kf_status::KF_ERR_SHAPE_MISMATCH => Status::ShapeMismatch,
            sys::kf_status::KF_ERR_DTYPE_MISMATCH => Status::DtypeMismatch,
            sys::kf_status::KF_ERR_DEVICE_MISMATCH => Status::DeviceMismatch,
            sys::kf_status::KF_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            sys::kf_status::KF_ERR_PARSE => Status::Parse,
            sys::kf_status::KF_ERR_NO_DEVICE => Status::NoDevice,
            sys::kf_status::KF_ERR_BACKEND => Status::Backend,
            sys::kf_status::KF_ERR_VERSION_MISMATCH => Status::VersionMismatch,
            sys::kf_status::KF_ERR_INTERNAL => Status::Internal,
            other => Status::Other(other.0),
        }
    }

    /// The numeric `kf_status` code.
    pub fn code(self) -> u32 {
        let raw = match self {
            Status::InvalidArgument => sys::kf_status::KF_ERR_INVALID_ARGUMENT,
            Status::Unsupported => sys::kf_status::KF_ERR_UNSUPPORTED,
            Status::ShapeMismatch => sys::kf_status::KF_ERR_SHAPE_MISMATCH,
            Status::DtypeMismatch => sys::kf_status::KF_ERR_DTYPE_MISMATCH,
            Status::DeviceMismatch => sys::kf_status::KF_ERR_DEVICE_MISMATCH,
            Status::OutOfMemory => sys::kf_status::KF_ERR_OUT_OF_MEMORY,
            Status::Parse => sys::kf_status::KF_ERR_PARSE,
            Status::NoDevice => sys::kf_status::KF_ERR_NO_DEVICE,
            Status::Backend => sys::kf_status::KF_ERR_BACKEND,
            Status::VersionMismatch => sys::kf_status::KF_ERR_VERSION_MISMATCH,
            Status::Internal => sys::kf_status::KF_ERR_INTERNAL,
            Status::Other(code) => return code,
        };
        raw.0
    }

    /// The C name of the status, e.g. `"KF_ERR_SHAPE_MISMATCH"`.
    pub fn name(self) -> &'static str {
        // SAFETY: kf_status_name returns a static, never-NULL string.
        unsafe { CStr::from_ptr(sys::kf_status_name(sys::kf_status(self.code()))) }
            .to_str()
            .unwrap_or("KF_ERR_UNKNOWN")
    }
}

/// A failed kfuse call: its status and kfuse's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error raised by this binding itself, before reaching the library.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    /// kfuse's message, e.g. `"input 1 (x): expected rank 2, got rank 3"`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// Turns a status into a `Result`, reading the thread-local message right
/// away: the next kfuse call on this thread would overwrite it.
pub(crate) fn check(status: sys::kf_status) -> Result<()> {
    if status == sys::kf_status::KF_OK {
        return Ok(());
    }
    // SAFETY: kf_last_error never returns NULL and the string lives until
    // the next kfuse call on this thread; it is copied before that.
    let message = unsafe { CStr::from_ptr(sys::kf_last_error()) }
        .to_string_lossy()
        .into_owned();
    Err(Error {
        status: Status::from_raw(status),
        message,
    })
}
