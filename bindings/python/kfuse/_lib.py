"""Loading libkfuse and declaring the C functions the package calls (ctypes).

The library is looked up, in order, at:
  1. the path in the environment variable KFUSE_LIBRARY;
  2. next to this package (``kfuse/libkfuse.so.0``, as a wheel built by
     CMake packs it);
  3. the build directory of the checkout the package sits in
     (``<repo>/build/libkfuse.so``);
  4. the system loader's search path (``libkfuse.so.0``: an install under
     /usr/local or /usr, or LD_LIBRARY_PATH).
"""
import ctypes
import enum
import os
import threading

c_int64_p = ctypes.POINTER(ctypes.c_int64)
c_void_pp = ctypes.POINTER(ctypes.c_void_p)

API_VERSION = 1  # KF_API_VERSION of the header this package was written for


class Status(enum.IntEnum):
    """kf_status codes (kfuse.h)."""
    OK = 0
    INVALID_ARGUMENT = 1
    UNSUPPORTED = 2
    SHAPE_MISMATCH = 3
    DTYPE_MISMATCH = 4
    DEVICE_MISMATCH = 5
    OUT_OF_MEMORY = 6
    PARSE = 7
    NO_DEVICE = 8
    BACKEND = 9
    VERSION_MISMATCH = 10
    INTERNAL = 11


class KfuseError(RuntimeError):
    """A failed kfuse call: ``status`` (a Status) and kfuse's ``message``
    (kf_last_error of that call, read on the same thread right after it)."""

    def __init__(self, status, message, call=None):
        try:
            status = Status(status)
        except ValueError:
            pass
        self.status = status
        self.message = message
        self.call = call
        name = f"KF_ERR_{status.name}" if isinstance(status, Status) else f"status {status}"
        super().__init__(f"{name}: {message}")


class _Library:
    """The loaded libkfuse with typed functions (attribute access)."""

    def __init__(self, path):
        self.path = path
        self.cdll = ctypes.CDLL(path)
        self._declare()
        st = self.cdll.kf_check_version(API_VERSION)
        if st != 0:
            raise KfuseError(st, self.last_error(), "kf_check_version")

    def _fn(self, name, restype, *argtypes):
        f = getattr(self.cdll, name)
        f.restype = restype
        f.argtypes = list(argtypes)
        setattr(self, name, f)

    def _declare(self):
        S, I, P = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
        Z, Zp = ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)
        cp = ctypes.c_char_p
        self._fn("kf_last_error", cp)
        self._fn("kf_status_name", cp, S)
        self._fn("kf_version", ctypes.c_uint32)
        self._fn("kf_check_version", S, ctypes.c_uint32)
        self._fn("kf_dtype_name", cp, S)
        self._fn("kf_op_num_outputs", S, S)
        self._fn("kf_op_get_info", S, S, ctypes.POINTER(OpInfo))
        self._fn("kf_builder_create", S, c_void_pp)
        self._fn("kf_builder_destroy", None, P)
        self._fn("kf_define_tensor", S, P, S, S, c_int64_p)
        self._fn("kf_define_scalar", S, P, S, c_int64_p)
        self._fn("kf_define_constant_f64", S, P, ctypes.c_double, S, c_int64_p)
        self._fn("kf_define_constant_i64", S, P, I, S, c_int64_p)
        self._fn("kf_builder_op", S, P, S, c_int64_p, Z, c_int64_p, Z, c_int64_p, Z)
        self._fn("kf_add_output", S, P, I, c_int64_p, Z, I)
        self._fn("kf_index_put", S, P, I, I, I, S, ctypes.c_uint32, c_int64_p)
        self._fn("kf_builder_finalize", S, P, c_void_pp)
        self._fn("kf_fusion_retain", S, P)
        self._fn("kf_fusion_release", None, P)
        self._fn("kf_fusion_num_inputs", S, P, Zp)
        self._fn("kf_fusion_num_outputs", S, P, Zp)
        self._fn("kf_fusion_input", S, P, Z, ctypes.POINTER(ValueInfo))
        self._fn("kf_fusion_output", S, P, Z, ctypes.POINTER(ValueInfo))
        self._fn("kf_fusion_to_text", S, P, ctypes.POINTER(P))
        self._fn("kf_fusion_from_text_n", S, cp, Z, c_void_pp)
        self._fn("kf_string_free", None, P)
        self._fn("kf_concretize", S, P, c_void_pp, Z, c_void_pp)
        self._fn("kf_concretize_into", S, P, c_void_pp, Z, c_void_pp, Z, c_void_pp)
        self._fn("kf_concrete_release", None, P)
        self._fn("kf_concrete_describe", S, P, ctypes.POINTER(P))
        self._fn("kf_segment", S, P, c_void_pp)
        self._fn("kf_segmentation_release", None, P)
        self._fn("kf_segmentation_count", S, P, Zp)
        self._fn("kf_segmentation_get", S, P, Z, ctypes.POINTER(SegmentInfo))
        self._fn("kf_segment_child", S, P, Z, Z, ctypes.POINTER(TaskInfo))
        self._fn("kf_segment_to_text", S, P, Z, ctypes.POINTER(P))
        self._fn("kf_segment_schedule", S, P, Z, ctypes.POINTER(P))
        self._fn("kf_segment_schedulers", S, P, Z, ctypes.POINTER(P))
        self._fn("kf_bundle_load", S, cp, ctypes.c_int, Zp)
        self._fn("kf_segment_cuda_source", S, P, Z, ctypes.POINTER(P))
        self._fn("kf_output_shape", S, P, c_void_pp, Z, Z, c_int64_p, Z)
        self._fn("kf_execute_flagged", S, P, c_void_pp, ctypes.POINTER(ctypes.c_uint64), Z,
                 c_void_pp, Z, ctypes.POINTER(ExecOptions))
        self._fn("kf_execute_into_flagged", S, P, c_void_pp, ctypes.POINTER(ctypes.c_uint64), Z,
                 c_void_pp, ctypes.POINTER(ctypes.c_uint64), Z, ctypes.POINTER(ExecOptions))
        self._fn("kf_fusion_is_ready", S, P, c_void_pp, Z, c_void_pp, Z, ctypes.POINTER(ctypes.c_int))
        self._fn("kf_fusion_prepare", S, P, c_void_pp, Z, c_void_pp, Z)
        self._fn("kf_cache_get_stats", S, ctypes.POINTER(CacheStats))
        self._fn("kf_builder_set_mesh", S, P, I)
        self._fn("kf_shard", S, P, I, I)
        self._fn("kf_replicate", S, P, I)
        self._fn("kf_fusion_mesh", S, P, c_int64_p)
        self._fn("kf_output_sharding", S, P, Z, c_int64_p)
        self._fn("kf_communicator_create_local", S, S, c_void_pp)
        self._fn("kf_nccl_get_unique_id", S, ctypes.POINTER(NcclId))
        self._fn("kf_communicator_create_nccl", S, ctypes.POINTER(NcclId), S, S, S, c_void_pp)
        self._fn("kf_communicator_rank", S, P, ctypes.POINTER(S), ctypes.POINTER(S))
        self._fn("kf_communicator_destroy", None, P)

    def last_error(self):
        return self.kf_last_error().decode("utf-8", "replace")

    def check(self, status, call):
        """Raises KfuseError with this thread's message unless status is KF_OK."""
        if status != 0:
            raise KfuseError(status, self.last_error(), call)

    def take_string(self, ptr):
        """A Python str from a char* kfuse allocated, which is then freed."""
        try:
            return ctypes.string_at(ptr).decode("utf-8", "replace")
        finally:
            self.kf_string_free(ptr)


class OpInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("name", ctypes.c_char_p), ("category", ctypes.c_int),
                ("num_inputs", ctypes.c_int), ("num_outputs", ctypes.c_int)]


# kf_op_category
OP_CATEGORY_UNARY, OP_CATEGORY_BINARY, OP_CATEGORY_TERNARY = 0, 1, 2


class ValueInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("id", ctypes.c_int64), ("rank", ctypes.c_int),
                ("dtype", ctypes.c_int), ("is_scalar", ctypes.c_int)]


class SegmentInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("run_order", ctypes.c_size_t),
                ("scheduler", ctypes.c_char_p),
                ("inputs", c_int64_p), ("num_inputs", ctypes.c_size_t),
                ("outputs", c_int64_p), ("num_outputs", ctypes.c_size_t),
                ("dead_after", c_int64_p), ("num_dead_after", ctypes.c_size_t),
                ("num_children", ctypes.c_size_t)]


class TaskInfo(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("pattern", ctypes.c_char_p),
                ("inputs", c_int64_p), ("num_inputs", ctypes.c_size_t),
                ("outputs", c_int64_p), ("num_outputs", ctypes.c_size_t)]


class ExecOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("stream", ctypes.c_void_p),
                ("allocator", ctypes.c_void_p), ("communicator", ctypes.c_void_p)]


class NcclId(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 128)]


class CacheStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t)] + [
        (n, ctypes.c_uint64) for n in ("definitions", "hits", "misses", "evictions", "fusions",
                                       "concretizations", "concretization_hits")]


def _candidates():
    env = os.environ.get("KFUSE_LIBRARY")
    if env:
        return [("KFUSE_LIBRARY", env)]
    here = os.path.dirname(os.path.abspath(__file__))
    out = [("package", os.path.join(here, name)) for name in ("libkfuse.so.0", "libkfuse.so")]
    repo = os.path.abspath(os.path.join(here, "..", "..", ".."))
    out.append(("checkout build", os.path.join(repo, "build", "libkfuse.so")))
    out.append(("loader", "libkfuse.so.0"))
    return out


def once(make):
    """A function that returns make()'s result, made on its first call
    (under a lock: threads racing to it get the same one)."""
    lock = threading.Lock()
    made = []

    def get():
        if not made:
            with lock:
                if not made:
                    made.append(make())
        return made[0]
    return get


def _load():
    tried = []
    for where, path in _candidates():
        if where != "loader" and not os.path.exists(path):
            tried.append(f"{where}: {path} (missing)")
            continue
        try:
            return _Library(path)
        except OSError as e:
            tried.append(f"{where}: {path} ({e})")
    raise ImportError("kfuse: cannot load libkfuse; tried " + "; ".join(tried) +
                      ". Set KFUSE_LIBRARY to the path of libkfuse.so.")


lib = once(_load)
lib.__doc__ = "The loaded library (loaded on first use)."


def library_path():
    """Where libkfuse was loaded from."""
    return lib().path


def version():
    """kf_version(): the library's API version."""
    return int(lib().kf_version())
