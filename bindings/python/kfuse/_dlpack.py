"""DLPack structs and PyCapsules through ctypes.

Consuming (inputs, ``out=``): ``borrow(obj)`` asks a producer for a
versioned capsule (``__dlpack__(max_version=(1, 0))``), falls back to a 0.6
capsule when the producer rejects ``max_version`` (TypeError), and to
``__array_interface__`` when the producer cannot export the array at all
(BufferError: NumPy 1.x for read-only and bool arrays). A consumed capsule
is renamed ``used_dltensor_versioned`` / ``used_dltensor`` and its deleter
is called when kfuse no longer needs the memory: at the end of the call, or
when the output that aliases it (an in-place update) is released.

Producing (outputs): ``export_capsule`` makes a new managed tensor over the
memory of a kfuse output for each ``__dlpack__`` call; it keeps the output
alive until the consumer calls the deleter, or until the capsule is
collected unconsumed (its destructor calls the deleter then).
"""
import ctypes

c_int64_p = ctypes.POINTER(ctypes.c_int64)

kDLCPU, kDLCUDA, kDLCUDAHost, kDLCUDAManaged = 1, 2, 3, 13
kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLBool = 0, 1, 2, 4, 6
kDLFloat8_e4m3fn, kDLFloat8_e5m2 = 10, 12
FLAG_READ_ONLY = 1 << 0   # DLPACK_FLAG_BITMASK_READ_ONLY
FLAG_IS_COPIED = 1 << 1   # DLPACK_FLAG_BITMASK_IS_COPIED
MAJOR, MINOR = 1, 0       # KF_DLPACK_MAJOR_VERSION / KF_DLPACK_MINOR_VERSION


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", c_int64_p), ("strides", c_int64_p),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):  # DLPack 0.6
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):  # DLPack 1.x
    _fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


DL_TENSOR_OFFSET_VERSIONED = DLManagedTensorVersioned.dl_tensor.offset

DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _pyapi(name, restype, *argtypes):
    # Own function objects: setting argtypes on ctypes.pythonapi's shared
    # attributes would change them for every other user in the process.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_is_valid = _pyapi("PyCapsule_IsValid", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_get_pointer = _pyapi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)
_set_name = _pyapi("PyCapsule_SetName", ctypes.c_int, ctypes.py_object, ctypes.c_char_p)
_new = _pyapi("PyCapsule_New", ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, CAPSULE_DESTRUCTOR)
# In a capsule destructor the capsule is dying: take it as a plain pointer.
_is_valid_raw = _pyapi("PyCapsule_IsValid", ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)
_get_pointer_raw = _pyapi("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)

# PyCapsule keeps the name pointer: these bytes live as long as the module.
NAME = b"dltensor"
NAME_VERSIONED = b"dltensor_versioned"
USED = b"used_dltensor"
USED_VERSIONED = b"used_dltensor_versioned"


_DELETERS = {}  # deleter address -> callable (making one costs microseconds)


def call_deleter(deleter, managed):
    if deleter:
        fn = _DELETERS.get(deleter)
        if fn is None:
            fn = DELETER(deleter)
            if len(_DELETERS) < 64:
                _DELETERS[deleter] = fn
        fn(managed)


# ---------------------------------------------------------------------------
# consuming

class Borrowed:
    """A tensor kfuse reads (or writes) during a call: ``ptr`` is the address
    of its DLTensor, ``flags`` its DLPack flags. ``release()`` gives it back
    to its producer (calls the managed tensor's deleter); idempotent, and
    run by the garbage collector too."""

    __slots__ = ("ptr", "flags", "device", "data", "_managed", "_deleter", "_keep", "__weakref__")

    def __init__(self, ptr, flags, managed=None, deleter=None, keep=None):
        self.ptr = ptr
        self.flags = flags
        t = DLTensor.from_address(ptr)
        self.device = (t.device.device_type, t.device.device_id)
        self.data = (t.data or 0) + t.byte_offset
        self._managed = managed
        self._deleter = deleter
        self._keep = keep

    def release(self):
        deleter, self._deleter = self._deleter, None
        self._keep = None
        if deleter:
            call_deleter(deleter, self._managed)

    def __del__(self):
        try:
            self.release()
        except Exception:  # interpreter shutdown
            pass


def from_capsule(capsule, what="tensor"):
    """Consumes a DLPack capsule (versioned or 0.6)."""
    if _is_valid(capsule, NAME_VERSIONED):
        addr = _get_pointer(capsule, NAME_VERSIONED)
        m = DLManagedTensorVersioned.from_address(addr)
        if m.version.major != MAJOR:
            # left unconsumed: the capsule's destructor frees it
            raise BufferError(f"{what}: DLPack version {m.version.major}.{m.version.minor} is not "
                              f"supported (kfuse reads major version {MAJOR})")
        _set_name(capsule, USED_VERSIONED)
        return Borrowed(addr + DL_TENSOR_OFFSET_VERSIONED, m.flags, addr, m.deleter)
    if _is_valid(capsule, NAME):
        addr = _get_pointer(capsule, NAME)
        m = DLManagedTensor.from_address(addr)
        _set_name(capsule, USED)
        return Borrowed(addr, 0, addr, m.deleter)
    raise TypeError(f"{what}: __dlpack__ returned {type(capsule).__name__}, not an unconsumed "
                    "DLPack capsule ('dltensor' or 'dltensor_versioned')")


_TYPESTR = {"f8": (kDLFloat, 64), "f4": (kDLFloat, 32), "f2": (kDLFloat, 16),
            "i8": (kDLInt, 64), "i4": (kDLInt, 32), "i2": (kDLInt, 16), "i1": (kDLInt, 8),
            "u8": (kDLUInt, 64), "u4": (kDLUInt, 32), "u2": (kDLUInt, 16), "u1": (kDLUInt, 8),
            "b1": (kDLBool, 8)}


class _Described:
    """A DLTensor made from metadata (array interface, shapes, scalars) with
    the arrays it points to."""

    __slots__ = ("tensor", "shape", "strides", "keep")

    def __init__(self, data, device, code, bits, shape, strides=None, keep=None):
        n = len(shape)
        self.shape = (ctypes.c_int64 * max(n, 1))(*shape)
        self.strides = (ctypes.c_int64 * max(n, 1))(*strides) if strides is not None else None
        self.tensor = DLTensor(data, DLDevice(*device), n, DLDataType(code, bits, 1),
                               ctypes.cast(self.shape, c_int64_p),
                               ctypes.cast(self.strides, c_int64_p) if self.strides else None, 0)
        self.keep = keep

    def borrowed(self, flags=0):
        return Borrowed(ctypes.addressof(self.tensor), flags, keep=self)


def from_array_interface(obj, what="tensor"):
    ai = obj.__array_interface__
    if ai.get("mask") is not None:
        raise BufferError(f"{what}: masked arrays are not supported")
    typestr = ai["typestr"]
    if typestr[0] == ">" or typestr[1:] not in _TYPESTR:
        raise BufferError(f"{what}: array type {typestr!r} is not supported")
    code, bits = _TYPESTR[typestr[1:]]
    ptr, read_only = ai["data"]
    shape = tuple(ai["shape"])
    strides = ai.get("strides")
    if strides is not None:
        item = bits // 8
        if any(s % item for s in strides):
            raise BufferError(f"{what}: byte strides {strides} are not multiples of the element size {item}")
        strides = [s // item for s in strides]
    d = _Described(ptr, (kDLCPU, 0), code, bits, shape, strides, keep=obj)
    return d.borrowed(FLAG_READ_ONLY if read_only else 0)


def _is_cuda(device_type):
    return device_type in (kDLCUDA, kDLCUDAManaged)


def borrow(obj, stream=None, what="tensor"):
    """A Borrowed for any object with __dlpack__ (or __array_interface__).
    ``stream`` (an int CUstream, None for the default stream) is handed to
    producers of CUDA tensors, which then order their pending work before
    kfuse's (DLPack's stream hand-off)."""
    dlpack = getattr(obj, "__dlpack__", None)
    if dlpack is None:
        if hasattr(obj, "__array_interface__"):
            return from_array_interface(obj, what)
        raise TypeError(f"{what}: {type(obj).__name__} implements neither __dlpack__ nor "
                        "__array_interface__")
    kwargs = {}
    device = getattr(obj, "__dlpack_device__", None)
    if device is not None and _is_cuda(device()[0]):
        # DLPack: 1 is the legacy default stream; 0 is not allowed.
        kwargs["stream"] = stream if stream else 1
    try:
        try:
            capsule = dlpack(max_version=(MAJOR, MINOR), **kwargs)
        except TypeError:  # a producer that predates DLPack 1.0
            capsule = dlpack(**kwargs)
    except BufferError:
        if hasattr(obj, "__array_interface__"):  # NumPy 1.x: read-only or bool arrays
            return from_array_interface(obj, what)
        raise
    return from_capsule(capsule, what)


# ---------------------------------------------------------------------------
# producing

_live = {}  # address of an exported managed tensor -> (struct, owner)


def _export_deleter(addr):
    _live.pop(addr, None)


_EXPORT_DELETER = DELETER(_export_deleter)
_EXPORT_DELETER_ADDR = ctypes.cast(_EXPORT_DELETER, ctypes.c_void_p).value


def _capsule_destructor(capsule):
    # Runs when a capsule dies; a consumed one was renamed and is not ours.
    for name in (NAME_VERSIONED, NAME):
        if _is_valid_raw(capsule, name):
            _export_deleter(_get_pointer_raw(capsule, name))
            return


_CAPSULE_DESTRUCTOR = CAPSULE_DESTRUCTOR(_capsule_destructor)


def export_capsule(owner, src, versioned, flags=0, dtype=None):
    """A new capsule over DLTensor ``src`` (shape and strides arrays are
    shared, so ``owner`` must keep them alive; the capsule keeps ``owner``
    alive until the consumer calls the deleter). ``dtype`` (code, bits)
    overrides the element type (a same-size view)."""
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    if versioned:
        m.version = DLPackVersion(MAJOR, MINOR)
        m.flags = flags
    m.dl_tensor = src
    if dtype is not None:
        m.dl_tensor.dtype = DLDataType(dtype[0], dtype[1], 1)
    addr = ctypes.addressof(m)
    m.manager_ctx = addr
    m.deleter = _EXPORT_DELETER_ADDR
    _live[addr] = (m, owner)
    return _new(addr, NAME_VERSIONED if versioned else NAME, _CAPSULE_DESTRUCTOR)


def live_exports():
    """How many exported managed tensors no consumer has released yet."""
    return len(_live)
