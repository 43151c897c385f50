//! Just enough of the CUDA driver API, loaded with dlopen, to move test data
//! to and from a GPU. `Cuda::load()` is `None` where there is no usable GPU.

use std::ffi::c_void;
use std::os::raw::{c_char, c_int, c_uint}; // in std::ffi from Rust 1.64

extern "C" {
    fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void;
}

const RTLD_NOW: c_int = 2;

type Init = unsafe extern "C" fn(c_uint) -> c_int;
type DeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type PrimaryCtxRetain = unsafe extern "C" fn(*mut *mut c_void, c_int) -> c_int;
type CtxSetCurrent = unsafe extern "C" fn(*mut c_void) -> c_int;
type CtxSynchronize = unsafe extern "C" fn() -> c_int;
type MemAlloc = unsafe extern "C" fn(*mut u64, usize) -> c_int;
type MemFree = unsafe extern "C" fn(u64) -> c_int;
type MemcpyHtoD = unsafe extern "C" fn(u64, *const c_void, usize) -> c_int;
type MemcpyDtoH = unsafe extern "C" fn(*mut c_void, u64, usize) -> c_int;

pub struct Cuda {
    ctx_set_current: CtxSetCurrent,
    ctx: *mut c_void,
    synchronize: CtxSynchronize,
    alloc: MemAlloc,
    free: MemFree,
    htod: MemcpyHtoD,
    dtoh: MemcpyDtoH,
}

// `name` ends in NUL: byte strings, as C string literals need Rust 1.77.
unsafe fn sym<T: Copy>(lib: *mut c_void, name: &[u8]) -> Option<T> {
    assert_eq!(name.last(), Some(&0), "symbol names end in NUL");
    let p = dlsym(lib, name.as_ptr() as *const c_char);
    (!p.is_null()).then(|| std::mem::transmute_copy(&p))
}

impl Cuda {
    pub fn load() -> Option<Cuda> {
        unsafe {
            let lib = dlopen(b"libcuda.so.1\0".as_ptr() as *const c_char, RTLD_NOW);
            if lib.is_null() {
                return None;
            }
            let init: Init = sym(lib, b"cuInit\0")?;
            let device_get: DeviceGet = sym(lib, b"cuDeviceGet\0")?;
            let retain: PrimaryCtxRetain = sym(lib, b"cuDevicePrimaryCtxRetain\0")?;
            let cuda = Cuda {
                ctx_set_current: sym(lib, b"cuCtxSetCurrent\0")?,
                ctx: std::ptr::null_mut(),
                synchronize: sym(lib, b"cuCtxSynchronize\0")?,
                alloc: sym(lib, b"cuMemAlloc_v2\0")?,
                free: sym(lib, b"cuMemFree_v2\0")?,
                htod: sym(lib, b"cuMemcpyHtoD_v2\0")?,
                dtoh: sym(lib, b"cuMemcpyDtoH_v2\0")?,
            };
            let mut device = 0;
            let mut ctx = std::ptr::null_mut();
            if init(0) != 0 || device_get(&mut device, 0) != 0 || retain(&mut ctx, device) != 0 {
                return None;
            }
            Some(Cuda { ctx, ..cuda })
        }
    }

    fn current(&self) {
        // The primary context is the one kfuse uses; make it current here.
        unsafe { assert_eq!((self.ctx_set_current)(self.ctx), 0) };
    }

    pub fn upload<T: Copy>(&self, host: &[T]) -> u64 {
        self.current();
        let bytes = std::mem::size_of_val(host);
        let mut ptr = 0u64;
        unsafe {
            assert_eq!((self.alloc)(&mut ptr, bytes.max(1)), 0, "cuMemAlloc");
            assert_eq!(
                (self.htod)(ptr, host.as_ptr() as *const c_void, bytes),
                0,
                "cuMemcpyHtoD"
            );
        }
        ptr
    }

    pub fn download<T: Copy + Default>(&self, ptr: u64, len: usize) -> Vec<T> {
        self.current();
        let mut host = vec![T::default(); len];
        unsafe {
            assert_eq!((self.synchronize)(), 0, "cuCtxSynchronize");
            assert_eq!(
                (self.dtoh)(host.as_mut_ptr() as *mut c_void, ptr, std::mem::size_of_val(&host[..])),
                0
            );
        }
        host
    }

    pub fn free(&self, ptr: u64) {
        self.current();
        unsafe { (self.free)(ptr) };
    }
}
