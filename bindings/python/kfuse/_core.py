"""Definitions, fusions and output tensors over libkfuse's C API."""
import ctypes
import os
import struct
import sys

from . import _dlpack as dl
from . import _ext
from . import _lib
from ._lib import ExecOptions, KfuseError, NcclId, SegmentInfo, TaskInfo, ValueInfo, lib

INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------
# dtypes

class DType:
    """A kfuse dtype (kf_dtype); ``kfuse.float32`` etc."""

    __slots__ = ("name", "code", "dl_code", "bits", "numpy_name")

    def __init__(self, name, code, dl_code, bits, numpy_name):
        self.name, self.code, self.dl_code, self.bits, self.numpy_name = name, code, dl_code, bits, numpy_name

    @property
    def itemsize(self):
        return self.bits // 8

    def __repr__(self):
        return f"kfuse.{self.name}"

    def __reduce__(self):
        return (dtype, (self.name,))


float64 = DType("float64", 0, dl.kDLFloat, 64, "float64")
float32 = DType("float32", 1, dl.kDLFloat, 32, "float32")
float16 = DType("float16", 2, dl.kDLFloat, 16, "float16")
bfloat16 = DType("bfloat16", 3, dl.kDLBfloat, 16, None)
int64 = DType("int64", 4, dl.kDLInt, 64, "int64")
int32 = DType("int32", 5, dl.kDLInt, 32, "int32")
bool_ = DType("bool", 6, dl.kDLBool, 8, "bool")
# float8 storage (DLPack 1.1 codes 10 and 12); NumPy has no such dtypes.
float8_e4m3fn = DType("float8_e4m3fn", 7, dl.kDLFloat8_e4m3fn, 8, None)
float8_e5m2 = DType("float8_e5m2", 8, dl.kDLFloat8_e5m2, 8, None)
int8 = DType("int8", 9, dl.kDLInt, 8, "int8")
uint8 = DType("uint8", 10, dl.kDLUInt, 8, "uint8")
DTYPES = (float64, float32, float16, bfloat16, int64, int32, bool_, float8_e4m3fn, float8_e5m2, int8, uint8)
_BY_NAME = {d.name: d for d in DTYPES}
_BY_NAME.update({"bool_": bool_, "float": float32, "double": float64, "half": float16, "long": int64,
                 "int": int32})


def dtype(x):
    """A DType from a DType, its name ("float32"), a kf_dtype code, or a
    NumPy/torch dtype whose name matches ("torch.float32", np.float32)."""
    if isinstance(x, DType):
        return x
    if isinstance(x, int) and not isinstance(x, bool) and 0 <= x < len(DTYPES):
        return DTYPES[x]
    name = x if isinstance(x, str) else str(getattr(x, "name", None) or getattr(x, "__name__", None) or x)
    name = name.replace("torch.", "").replace("numpy.", "")
    if name in _BY_NAME:
        return _BY_NAME[name]
    raise TypeError(f"not a kfuse dtype: {x!r} (expected one of {', '.join(d.name for d in DTYPES)})")


def _dtype_of_dl(code, bits):
    for d in DTYPES:
        if d.dl_code == code and d.bits == bits:
            return d
    if bits == 8 and code in (dl.kDLUInt, dl.kDLInt):
        return None  # bytes (bool where a definition says bool)
    return None


# ---------------------------------------------------------------------------
# ops (from the library's own table: kf_op_get_info over the codes)

class _Ops:
    def __init__(self):
        # Categories come from the library (kf_op_get_info), never from the
        # enum's order: new ops are appended wherever their category is.
        L = lib()
        names, category = [], {}
        while True:
            info = _lib.OpInfo(ctypes.sizeof(_lib.OpInfo))
            if L.kf_op_get_info(len(names), ctypes.byref(info)) != 0:
                break
            names.append(info.name.decode())
            category[names[-1]] = info.category
        self.names = names
        self.code = {n: i for i, n in enumerate(names)}
        self.unary = {n for n in names if category[n] == _lib.OP_CATEGORY_UNARY}
        self.binary = {n for n in names if category[n] == _lib.OP_CATEGORY_BINARY}
        self.ternary = {n for n in names if category[n] == _lib.OP_CATEGORY_TERNARY}


_ops = None


def _op_table():
    global _ops
    if _ops is None:
        _ops = _Ops()
    return _ops


def ops():
    """Every op name the loaded library knows, in kf_op order."""
    return list(_op_table().names)


# ---------------------------------------------------------------------------
# define

class Value:
    """A value of a Definition (a tensor, scalar or constant) by id. The
    arithmetic operators record ops: ``x + 1.0``, ``a * b``, ``-x``,
    ``x ** 2``, ``x < y``."""

    __slots__ = ("definition", "id")

    def __init__(self, definition, id_):
        self.definition, self.id = definition, id_

    def __repr__(self):
        return f"Value({self.id})"

    def __index__(self):
        raise TypeError("a kfuse Value is not an integer; pass it to Definition methods")

    def _bin(self, op, other, reflected=False):
        fd = self.definition
        return fd._record(op, [other, self] if reflected else [self, other])

    __add__ = lambda s, o: s._bin("add", o)
    __radd__ = lambda s, o: s._bin("add", o, True)
    __sub__ = lambda s, o: s._bin("sub", o)
    __rsub__ = lambda s, o: s._bin("sub", o, True)
    __mul__ = lambda s, o: s._bin("mul", o)
    __rmul__ = lambda s, o: s._bin("mul", o, True)
    __truediv__ = lambda s, o: s._bin("div", o)
    __rtruediv__ = lambda s, o: s._bin("div", o, True)
    __pow__ = lambda s, o: s._bin("pow", o)
    __rpow__ = lambda s, o: s._bin("pow", o, True)
    __mod__ = lambda s, o: s._bin("remainder", o)
    __lt__ = lambda s, o: s._bin("lt", o)
    __le__ = lambda s, o: s._bin("le", o)
    __gt__ = lambda s, o: s._bin("gt", o)
    __ge__ = lambda s, o: s._bin("ge", o)
    __and__ = lambda s, o: s._bin("logical_and", o)
    __or__ = lambda s, o: s._bin("logical_or", o)
    __neg__ = lambda s: s.definition._record("neg", [s])
    __abs__ = lambda s: s.definition._record("abs", [s])
    __invert__ = lambda s: s.definition._record("logical_not", [s])


def _ids(values):
    a = (ctypes.c_int64 * max(len(values), 1))(*values)
    return a, len(values)


class Definition:
    """Records a fusion, op by op, like kfuse's C builder::

        with kfuse.Definition() as fd:
            x = fd.tensor(rank=2, dtype=kfuse.float32)
            b = fd.tensor(rank=1, dtype=kfuse.float32)
            fd.output(fd.relu(x + b))
        fusion = fd.fusion

    Every op of the library is a method: unary (``fd.exp(x)``), binary
    (``fd.maximum(a, b)``), ternary (``fd.where(c, a, b)``) by name, and
    the ops with attributes below. Python numbers become constants
    (float64 or int64: they act like Python scalars in torch's promotion).
    Leaving the ``with`` block without an exception finalizes (through the
    definition cache: the same ops give the same fusion) and frees the
    builder. A Definition belongs to one thread at a time."""

    def __init__(self):
        self._lib = lib()
        h = ctypes.c_void_p()
        self._lib.check(self._lib.kf_builder_create(ctypes.byref(h)), "kf_builder_create")
        self._h = h
        self._fusion = None

    # lifecycle
    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None and self._fusion is None:
                self.finalize()
        finally:
            self.close()
        return False

    def close(self):
        """Frees the builder (the fusion, if finalized, stays valid)."""
        h, self._h = getattr(self, "_h", None), None
        if h is not None and h.value:
            self._lib.kf_builder_destroy(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _builder(self):
        if self._h is None:
            raise ValueError("this Definition is closed")
        return self._h

    def finalize(self):
        """Ends the definition and returns its Fusion (also ``fd.fusion``)."""
        f = ctypes.c_void_p()
        self._lib.check(self._lib.kf_builder_finalize(self._builder(), ctypes.byref(f)),
                        "kf_builder_finalize")
        self._fusion = Fusion(f)
        return self._fusion

    @property
    def fusion(self):
        if self._fusion is None:
            raise ValueError("the definition is not finalized yet (leave the with block or call finalize())")
        return self._fusion

    # values
    def _out(self, status, call, out):
        self._lib.check(status, call)
        return Value(self, out.value)

    def tensor(self, rank, dtype=float32):
        """A tensor input of this rank and dtype (sizes and strides are
        decided by the tensors of each call)."""
        out = ctypes.c_int64()
        return self._out(self._lib.kf_define_tensor(self._builder(), int(rank), _dt(dtype).code,
                                                    ctypes.byref(out)), "kf_define_tensor", out)

    def scalar(self, dtype=float32):
        """A scalar input: a Python number (or 0-dim CPU tensor) at each call."""
        out = ctypes.c_int64()
        return self._out(self._lib.kf_define_scalar(self._builder(), _dt(dtype).code, ctypes.byref(out)),
                         "kf_define_scalar", out)

    def constant(self, value, dtype=None):
        """A constant; dtype defaults to float64 for floats, int64 for ints,
        bool for bools."""
        out = ctypes.c_int64()
        if dtype is None:
            dtype = bool_ if isinstance(value, bool) else int64 if isinstance(value, int) else float64
        d = _dt(dtype)
        if isinstance(value, (bool, int)) and d in (int64, int32, bool_):
            st = self._lib.kf_define_constant_i64(self._builder(), int(value), d.code, ctypes.byref(out))
            return self._out(st, "kf_define_constant_i64", out)
        st = self._lib.kf_define_constant_f64(self._builder(), float(value), d.code, ctypes.byref(out))
        return self._out(st, "kf_define_constant_f64", out)

    def _arg(self, v):
        if isinstance(v, Value):
            if v.definition is not self:
                raise ValueError(f"{v!r} belongs to another Definition")
            return v.id
        if isinstance(v, (bool, int, float)):
            return self.constant(v).id
        raise TypeError(f"expected a kfuse Value or a Python number, got {type(v).__name__}")

    def op(self, op, args, attrs=(), num_outputs=None):
        """The generic op record (kf_builder_op): ``op`` a name or kf_op
        code, ``args`` values (or numbers), ``attrs`` ints. Returns a Value,
        or a tuple for ops with several outputs."""
        table = _op_table()
        code = table.code[op] if isinstance(op, str) else int(op)
        n = num_outputs or self._lib.kf_op_num_outputs(code) or 1
        a, na = _ids([self._arg(v) for v in args])
        t, nt = _ids([int(x) for x in attrs])
        outs = (ctypes.c_int64 * n)()
        name = op if isinstance(op, str) else str(code)
        self._lib.check(self._lib.kf_builder_op(self._builder(), code, a, na, t, nt, outs, n),
                        f"kf_builder_op({name})")
        vals = tuple(Value(self, outs[i]) for i in range(n))
        return vals[0] if n == 1 else vals

    _record = op

    def __getattr__(self, name):
        # unary, binary and ternary ops by name: fd.exp(x), fd.maximum(a, b)
        if name.startswith("_"):
            raise AttributeError(name)
        table = _op_table()
        arity = (1 if name in table.unary else 2 if name in table.binary
                 else 3 if name in table.ternary else 0)
        if not arity:
            raise AttributeError(f"Definition has no op or attribute {name!r}")

        def record(*args):
            if len(args) != arity:
                raise TypeError(f"{name} takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}")
            return self.op(name, args)
        record.__name__ = name
        return record

    def _shape(self, shape):
        return [s if isinstance(s, Value) else self.constant(int(s), int64) for s in shape]

    def cast(self, x, dtype):
        return self.op("cast", [x], [_dt(dtype).code])

    def _reduce(self, op, x, axes, keepdim, extra=()):
        axes = [] if axes is None else [axes] if isinstance(axes, int) else list(axes)
        return self.op(op, [x], [int(bool(keepdim)), *extra, *axes])

    def sum(self, x, axes=None, keepdim=False):
        return self._reduce("sum", x, axes, keepdim)

    def prod(self, x, axes=None, keepdim=False):
        return self._reduce("prod", x, axes, keepdim)

    def max(self, x, axes=None, keepdim=False):
        return self._reduce("max", x, axes, keepdim)

    def argmax(self, x, dim, keepdim=False):
        """int64 index of the first maximum along ``dim`` (NaN counts as the maximum)."""
        return self._reduce("argmax", x, [dim], keepdim)

    def argmin(self, x, dim, keepdim=False):
        """int64 index of the first minimum along ``dim`` (NaN counts as the minimum)."""
        return self._reduce("argmin", x, [dim], keepdim)

    def min(self, x, axes=None, keepdim=False):
        return self._reduce("min", x, axes, keepdim)

    def mean(self, x, axes=None, keepdim=False):
        return self._reduce("mean", x, axes, keepdim)

    def var(self, x, axes=None, correction=1, keepdim=False):
        return self._reduce("var", x, axes, keepdim, (int(correction),))

    def var_mean(self, x, axes=None, correction=1, keepdim=False):
        """(var, mean)"""
        return self._reduce("var_mean", x, axes, keepdim, (int(correction),))

    def broadcast_in_dim(self, x, shape, broadcast_dims):
        return self.op("broadcast_in_dim", [x, *self._shape(shape)], list(broadcast_dims))

    def expand(self, x, shape):
        return self.op("expand", [x, *self._shape(shape)])

    def reshape(self, x, shape):
        return self.op("reshape", [x, *self._shape(shape)])

    def permute(self, x, perm):
        return self.op("permute", [x], list(perm))

    def squeeze(self, x, dims):
        return self.op("squeeze", [x], [dims] if isinstance(dims, int) else list(dims))

    def unsqueeze(self, x, dim):
        return self.op("unsqueeze", [x], [dim])

    def slice(self, x, dim, start=0, stop=None, step=1):
        return self.op("slice", [x], [dim, start, INT64_MAX if stop is None else stop, step])

    def pad(self, x, pads, value=0.0):
        return self.op("pad", [x, value], list(pads))

    def cat(self, tensors, dim=0):
        return self.op("cat", list(tensors), [dim])

    def index_select(self, x, dim, index):
        return self.op("index_select", [x, index], [dim])

    def gather(self, x, dim, index):
        return self.op("gather", [x, index], [dim])

    def cumsum(self, x, dim, exclusive=False):
        return self.op("cumsum", [x], [dim, 1 if exclusive else 0])

    def cumprod(self, x, dim, exclusive=False):
        return self.op("cumprod", [x], [dim, 1 if exclusive else 0])

    def cummax(self, x, dim, exclusive=False):
        """The running maximum's values (torch.cummax(...).values)."""
        return self.op("cummax", [x], [dim, 1 if exclusive else 0])

    _SCATTER_REDUCE = {"none": 0, "sum": 1, "prod": 2, "mean": 3, "amax": 4, "amin": 5}

    def _scatter_attrs(self, dim, reduce, include_self, deterministic):
        if reduce not in self._SCATTER_REDUCE:
            raise ValueError(f"reduce must be one of {sorted(self._SCATTER_REDUCE)}, got {reduce!r}")
        return [dim, self._SCATTER_REDUCE[reduce], 1 if include_self else 0, 1 if deterministic else 0]

    def scatter(self, x, dim, index, src, reduce="none", include_self=True, deterministic=False):
        """torch.scatter / scatter_reduce: x with element index[i] of ``dim`` receiving src[i]
        (``reduce``: none, sum, prod, mean, amax, amin). ``deterministic``: float sum/prod/mean
        combine in src order (the same bits every run; plain scatter keeps the last duplicate)."""
        return self.op("scatter", [x, index, src], self._scatter_attrs(dim, reduce, include_self, deterministic))

    def scatter_add(self, x, dim, index, src):
        return self.scatter(x, dim, index, src, "sum")

    def index_reduce(self, x, dim, index, src, reduce="none", include_self=True, deterministic=False):
        """torch.index_reduce / index_add / index_copy: slice index[j] of x along ``dim``
        receives slice j of src (size-1 dims of src broadcast)."""
        return self.op("index_reduce", [x, index, src], self._scatter_attrs(dim, reduce, include_self, deterministic))

    def index_add(self, x, dim, index, src, deterministic=False):
        return self.index_reduce(x, dim, index, src, "sum", deterministic=deterministic)

    def index_put(self, x, index, values, accumulate=False, deterministic=False):
        """torch.index_put with one index tensor on dim 0; values of lower rank broadcast."""
        out = ctypes.c_int64()
        status = self._lib.kf_index_put(self._builder(), self._arg(x), self._arg(index), self._arg(values),
                                        1 if accumulate else 0, 2 if deterministic else 0, ctypes.byref(out))
        return self._out(status, "kf_index_put", out)

    def full(self, shape, fill, dtype=float32):
        return self.op("full", [*self._shape(shape), fill], [_dt(dtype).code])

    def iota(self, length, start=0, step=1, dtype=int64):
        return self.op("iota", [*self._shape([length]), start, step], [_dt(dtype).code])

    def uniform(self, shape, low, high, seed, offset, dtype=float32):
        return self.op("uniform", [*self._shape(shape), low, high, seed, offset], [_dt(dtype).code])

    def normal(self, shape, mean, std, seed, offset, dtype=float32):
        return self.op("normal", [*self._shape(shape), mean, std, seed, offset], [_dt(dtype).code])

    def matmul(self, a, b):
        return self.op("matmul", [a, b])

    def linear(self, x, w, bias=None):
        return self.op("linear", [x, w] if bias is None else [x, w, bias])

    def segment_set(self, x):
        return self.op("segment_set", [x])

    def output(self, value, stride_order=None, alias=None):
        """Marks a tensor value as an output. ``stride_order`` pins its
        layout (outermost dim first); ``alias`` is the index of a tensor
        input whose memory receives it (an in-place update)."""
        order = None if stride_order is None else list(stride_order)
        arr, n = (None, 0) if order is None else _ids(order)
        self._lib.check(self._lib.kf_add_output(self._builder(), self._arg(value), arr, n,
                                                -1 if alias is None else int(alias)), "kf_add_output")

    # -- device mesh (docs/multidevice.md) ----------------------------------
    def mesh(self, ranks):
        """Runs the fusion on ``ranks`` ranks (call before shard/replicate)."""
        self._lib.check(self._lib.kf_builder_set_mesh(self._builder(), int(ranks)), "kf_builder_set_mesh")

    def shard(self, value, dim):
        """Shards a tensor input (each rank passes its block of ``dim``) or
        the latest output of ``value`` (each rank receives its block)."""
        self._lib.check(self._lib.kf_shard(self._builder(), self._arg(value), int(dim)), "kf_shard")

    def replicate(self, value):
        """Asks for the latest output of ``value`` whole on every rank."""
        self._lib.check(self._lib.kf_replicate(self._builder(), self._arg(value)), "kf_replicate")


def _dt(x):
    return dtype(x)


# ---------------------------------------------------------------------------
# call-time tensors

def _scalar_tensor(value, d):
    """A 0-dim CPU DLTensor holding a Python number as dtype d."""
    if d in (float64, float32):
        buf = (ctypes.c_double if d is float64 else ctypes.c_float)(float(value))
    elif d is float16:
        buf = ctypes.c_uint16(struct.unpack("<H", struct.pack("<e", float(value)))[0])
    elif d is bfloat16:
        bits = struct.unpack("<I", struct.pack("<f", float(value)))[0]
        if (bits & 0x7F800000) == 0x7F800000 and bits & 0xFFFF:  # NaN stays NaN
            bits |= 0x10000
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
        buf = ctypes.c_uint16((bits >> 16) & 0xFFFF)
    elif d in (int64, int32):
        buf = (ctypes.c_int64 if d is int64 else ctypes.c_int32)(int(value))
    elif d in (int8, uint8):
        buf = (ctypes.c_int8 if d is int8 else ctypes.c_uint8)(int(value))
    else:  # bool; float8 too, for which numbers are not converted yet (a known gap)
        buf = ctypes.c_uint8(1 if value else 0)
    t = dl._Described(ctypes.addressof(buf), (dl.kDLCPU, 0), d.dl_code, d.bits, (), keep=buf)
    return t.borrowed()


def _caller(handle, inputs, num_outputs):
    """The C extension's call path for a fusion, or None (ctypes only)."""
    ext = _ext.module()
    if ext is None:
        return None
    h = handle.value if isinstance(handle, ctypes.c_void_p) else int(handle)
    info = tuple((i["is_scalar"], i["dtype"].code, i["dtype"].dl_code, i["dtype"].bits, i["dtype"]) for i in inputs)
    return ext.Caller(h, info, num_outputs)


def _is_number(x):
    return isinstance(x, (bool, int, float))


_ALIGNED_DUMMY = (ctypes.c_uint8 * 512)()


def _shape_only(shape, cuda):
    """Metadata standing for a tensor of this shape (explain: concretization
    reads no data)."""
    base = (ctypes.addressof(_ALIGNED_DUMMY) + 255) & ~255
    return shape, base, (dl.kDLCUDA if cuda else dl.kDLCPU, 0)


class _TorchBridge:
    """Reads torch tensors without the DLPack protocol: torch's
    ``__dlpack__`` runs about 22 us of Python per tensor when it is given a
    stream (5 us without), which alone is several times the cost of a whole
    kfuse call. Only plain tensors (torch.Tensor and Parameter, not
    subclasses that may hold no local memory) that do not require grad (the
    rule torch's own DLPack export enforces) take this path; the DLTensor is
    built from data_ptr, shape and stride, and the tensors stay referenced
    until the call returns (or, for an in-place output, as long as it)."""

    def __init__(self, torch):
        self.types = (torch.Tensor, torch.nn.Parameter)
        self.raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self.codes = {torch.float64: (dl.kDLFloat, 64), torch.float32: (dl.kDLFloat, 32),
                      torch.float16: (dl.kDLFloat, 16), torch.bfloat16: (dl.kDLBfloat, 16),
                      torch.int64: (dl.kDLInt, 64), torch.int32: (dl.kDLInt, 32), torch.bool: (dl.kDLBool, 8),
                      torch.int8: (dl.kDLInt, 8), torch.uint8: (dl.kDLUInt, 8)}
        for name, code in (("float8_e4m3fn", dl.kDLFloat8_e4m3fn), ("float8_e5m2", dl.kDLFloat8_e5m2)):
            if hasattr(torch, name):
                self.codes[getattr(torch, name)] = (code, 8)

    def takes(self, t):
        # CUDA or CPU memory only: a tensor elsewhere (meta, another device
        # kind) takes the DLPack path, which reports it.
        return (type(t) in self.types and not t.requires_grad and t.dtype in self.codes
                and (t.is_cuda or t.is_cpu))

    def tensor(self, t, ptr):
        """A DLTensor (ctypes) over t's memory (at ptr), and the arrays it points to."""
        nd = t.dim()
        array = _I64_ARRAYS[nd]
        shape = array(*t.shape)
        strides = array(*t.stride())
        device = dl.DLDevice(dl.kDLCUDA, t.get_device()) if t.is_cuda else _CPU_DEVICE
        code, bits = self.codes[t.dtype]
        d = dl.DLTensor(ptr, device, nd, dl.DLDataType(code, bits, 1), shape, strides, 0)
        return d, shape, strides


_TORCH = None
_I64_ARRAYS = [ctypes.c_int64 * max(n, 1) for n in range(17)]  # by rank
_CPU_DEVICE = dl.DLDevice(dl.kDLCPU, 0)
_EXEC_OPTIONS_SIZE = ctypes.sizeof(ExecOptions)


def _torch_bridge():
    """The bridge once torch is imported (never imports torch itself)."""
    global _TORCH
    if _TORCH is None:
        torch = sys.modules.get("torch")
        if torch is not None and hasattr(torch, "Tensor"):
            _TORCH = _TorchBridge(torch)
    return _TORCH


class _Held:
    """Keeps an input alive for an output that aliases it (release() drops it)."""

    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def release(self):
        self.obj = None


def _stream_handle(stream):
    """An int CUstream from None, an int, or a torch/CuPy stream object."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr", "handle"):
        h = getattr(stream, attr, None)
        if h is not None:
            return int(h)
    return int(stream)


class _Owner:
    """Owns one DLManagedTensorVersioned kfuse made; frees it when the last
    reference (the Tensor, or a capsule a consumer still holds) goes."""

    __slots__ = ("addr", "keep", "__weakref__")

    def __init__(self, addr, keep):
        self.addr, self.keep = addr, keep

    def __del__(self):
        addr, self.addr = self.addr, None
        try:
            if addr:
                dl.call_deleter(dl.DLManagedTensorVersioned.from_address(addr).deleter, addr)
        finally:
            keep, self.keep = self.keep, None
            for b in keep or ():
                b.release()


_CUDA = None


def _cuda_order(src_stream, dst_stream):
    """dst_stream waits for the work queued so far on src_stream (an event;
    no host synchronization). Driver API through ctypes."""
    global _CUDA
    if _CUDA is None:
        _CUDA = ctypes.CDLL("libcuda.so.1")
    ev = ctypes.c_void_p()
    for call, args in (("cuEventCreate", (ctypes.byref(ev), 2)),  # CU_EVENT_DISABLE_TIMING
                       ("cuEventRecord", (ev, ctypes.c_void_p(src_stream))),
                       ("cuStreamWaitEvent", (ctypes.c_void_p(dst_stream), ev, 0)),
                       ("cuEventDestroy_v2", (ev,))):
        st = getattr(_CUDA, call)(*args)
        if st != 0:
            raise BufferError(f"{call} failed with CUresult {st}")


class Tensor:
    """An output of a fusion call: kfuse's memory, handed to any DLPack
    consumer without a copy (``numpy.from_dlpack(t)``, ``torch.from_dlpack(t)``).
    ``close()`` (or the end of a ``with`` block, or the garbage collector)
    gives up this object's hold on the memory; consumers that imported it
    keep it alive until they are done."""

    __slots__ = ("_owner", "_t", "_stream", "__weakref__")

    def __init__(self, owner, stream):
        # kfuse._fastcall sets these three slots itself (no __init__ call)
        self._owner = owner
        self._t = None  # the DLTensor (ctypes), read on first use
        self._stream = stream

    def _tensor(self):
        owner = self._owner
        if owner is None:
            raise ValueError("this kfuse Tensor is closed")
        t = self._t
        if t is None:
            t = self._t = dl.DLManagedTensorVersioned.from_address(owner.addr).dl_tensor
        return t

    @property
    def shape(self):
        t = self._tensor()
        return tuple(t.shape[i] for i in range(t.ndim))

    @property
    def strides(self):
        """Strides in elements (always set by kfuse)."""
        t = self._tensor()
        return tuple(t.strides[i] for i in range(t.ndim))

    @property
    def ndim(self):
        return self._tensor().ndim

    @property
    def dtype(self):
        t = self._tensor()
        return _dtype_of_dl(t.dtype.code, t.dtype.bits)

    @property
    def data_ptr(self):
        t = self._tensor()
        return (t.data or 0) + t.byte_offset

    @property
    def device(self):
        t = self._tensor()
        return (t.device.device_type, t.device.device_id)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        t = self._tensor()
        if dl_device is not None and tuple(dl_device) != self.device:
            raise BufferError(f"kfuse tensors are exported on their own device {self.device}, "
                              f"not {tuple(dl_device)}")
        if copy:
            raise BufferError("kfuse exports without copying (copy=True is not supported)")
        if dl._is_cuda(t.device.device_type) and stream is not None and stream != -1:
            own = self._stream or 0
            if not (stream == 1 and own == 0) and stream != own:
                _cuda_order(own, stream)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        return dl.export_capsule(self._owner, t, versioned)

    def _export_as(self, code, bits):
        tensor = self

        class _View:
            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
                versioned = max_version is not None and tuple(max_version)[0] >= 1
                return dl.export_capsule(tensor._owner, tensor._tensor(), versioned, dtype=(code, bits))

            def __dlpack_device__(self):
                return tensor.device
        return _View()

    def numpy(self, raw=False):
        """A NumPy array sharing this tensor's memory (CPU tensors). Bool
        goes through uint8 where NumPy's DLPack lacks bool (NumPy 1.x);
        bfloat16 and float8 (no NumPy dtypes) need raw=True: their bits as
        uint16 / uint8."""
        import numpy as np
        d = self.dtype
        if d.numpy_name is None:  # bfloat16, float8: no NumPy dtype
            if not raw:
                raise TypeError(f"NumPy has no {d.name}: numpy(raw=True) gives the bits as uint{d.bits}")
            return np.from_dlpack(self._export_as(dl.kDLUInt, d.bits))
        if d is bool_ and int(np.__version__.split(".")[0]) < 2:
            # NumPy 1.x imports no DLPack bool (1.24 even fails without an
            # exception): the same bytes as uint8, viewed as bool.
            return np.from_dlpack(self._export_as(dl.kDLUInt, 8)).view(np.bool_)
        return np.from_dlpack(self)

    def close(self):
        self._owner = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        if self._owner is None:
            return "kfuse.Tensor(closed)"
        return f"kfuse.Tensor(shape={self.shape}, strides={self.strides}, dtype={self.dtype}, device={self.device})"


# ---------------------------------------------------------------------------
# fusion

class Segment:
    """One segment of a concretized fusion (``Fusion.segments``)."""

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return f"Segment({self.index}, {self.scheduler})"


class Fusion:
    """A finalized fusion (immutable; safe to call from several threads).
    ``Fusion.from_text(text)`` parses the text form; ``Definition`` builds
    one. ``fusion(*tensors, out=None, stream=None)`` runs it."""

    def __init__(self, handle):
        self._lib = lib()
        self._h = handle
        L = self._lib
        n = ctypes.c_size_t()
        L.check(L.kf_fusion_num_inputs(handle, ctypes.byref(n)), "kf_fusion_num_inputs")
        self.inputs = [self._info(L.kf_fusion_input, i) for i in range(n.value)]
        L.check(L.kf_fusion_num_outputs(handle, ctypes.byref(n)), "kf_fusion_num_outputs")
        self.outputs = [self._info(L.kf_fusion_output, i) for i in range(n.value)]
        self._scalar = [i["is_scalar"] for i in self.inputs]
        self._fast = _caller(handle, self.inputs, len(self.outputs))

    def _info(self, fn, i):
        info = ValueInfo()
        info.struct_size = ctypes.sizeof(ValueInfo)
        self._lib.check(fn(self._h, i, ctypes.byref(info)), fn.__name__)
        return {"id": info.id, "rank": info.rank, "dtype": DTYPES[info.dtype], "is_scalar": bool(info.is_scalar)}

    @classmethod
    def from_text(cls, text):
        """Parses the text form (docs/text-format.md) through the definition
        cache. KfuseError(PARSE) says line and column."""
        L = lib()
        data = text.encode() if isinstance(text, str) else bytes(text)
        h = ctypes.c_void_p()
        L.check(L.kf_fusion_from_text_n(data, len(data), ctypes.byref(h)), "kf_fusion_from_text")
        return cls(h)

    def _handle(self):
        if self._h is None:
            raise ValueError("this Fusion is closed")
        return self._h

    def close(self):
        """Releases the handle (idempotent); calling afterwards raises."""
        fast, self._fast = getattr(self, "_fast", None), None
        if fast is not None:
            fast.close()
        h, self._h = getattr(self, "_h", None), None
        if h is not None:
            self._lib.kf_fusion_release(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def text(self):
        """The text form."""
        p = ctypes.c_void_p()
        self._lib.check(self._lib.kf_fusion_to_text(self._handle(), ctypes.byref(p)), "kf_fusion_to_text")
        return self._lib.take_string(p)

    def __repr__(self):
        return "kfuse.Fusion(closed)" if self._h is None else f"kfuse.Fusion(<{len(self.inputs)} inputs, {len(self.outputs)} outputs>)"

    # -- inputs ------------------------------------------------------------
    def _borrow_inputs(self, tensors, stream):
        out = []
        try:
            for i, t in enumerate(tensors):
                what = f"input {i}"
                if i < len(self.inputs) and self.inputs[i]["is_scalar"] and _is_number(t):
                    out.append(_scalar_tensor(t, self.inputs[i]["dtype"]))
                else:
                    out.append(dl.borrow(t, stream, what))
        except BaseException:
            for b in out:
                b.release()
            raise
        return out

    @staticmethod
    def _arrays(borrowed):
        n = len(borrowed)
        ptrs = (ctypes.c_void_p * max(n, 1))(*[b.ptr for b in borrowed])
        flags = (ctypes.c_uint64 * max(n, 1))(*[b.flags for b in borrowed])
        return ptrs, flags, n

    # -- call --------------------------------------------------------------
    @property
    def mesh(self):
        """The device mesh's rank count (0: no mesh; docs/multidevice.md)."""
        n = ctypes.c_int64()
        self._lib.check(self._lib.kf_fusion_mesh(self._handle(), ctypes.byref(n)), "kf_fusion_mesh")
        return n.value

    def output_sharding(self, index):
        """The dim output ``index`` comes back sharded on, or -1 (whole on every rank)."""
        d = ctypes.c_int64()
        self._lib.check(self._lib.kf_output_sharding(self._handle(), index, ctypes.byref(d)),
                        "kf_output_sharding")
        return d.value

    def __call__(self, *tensors, out=None, stream=None, communicator=None):
        """Runs the fusion. ``tensors``: one per input, any object with
        ``__dlpack__`` (NumPy, torch, CuPy, JAX, kfuse Tensors), Python
        numbers for scalar inputs. Returns a Tensor (a tuple of them for
        several outputs), or, with ``out`` (a tensor or a sequence, one per
        output), writes into those and returns ``out``. ``stream``: a
        CUstream (int, or a torch/CuPy stream) for CUDA tensors; producers
        are asked to order their work before it, kfuse enqueues on it
        without synchronizing. ``communicator``: a kfuse.Communicator, for
        fusions with a mesh."""
        if out is None and stream is None and communicator is None:
            caller = self._fast
            if caller is not None:  # the C extension (None: it hands the call to the code below)
                result = caller.run(tensors)
                if result is not None:
                    return result
        L = self._lib
        h = self._handle()
        if out is None:
            fast = self._call_torch(tensors, stream, communicator)
            if fast is not None:
                return fast
        s = _stream_handle(stream)
        borrowed = self._borrow_inputs(tensors, s)
        kept = set()
        try:
            ins, flags, n = self._arrays(borrowed)
            opts = None
            comm = communicator._handle() if communicator is not None else None
            if s is not None or comm is not None:
                opts = ExecOptions(ctypes.sizeof(ExecOptions), s, None, comm)
            m = len(self.outputs)
            if out is None:
                outs = (ctypes.c_void_p * max(m, 1))()
                L.check(L.kf_execute_flagged(h, ins, flags, n, outs, m, opts), "kf_execute_flagged")
                results = []
                for i in range(m):
                    addr = outs[i]
                    data = dl.DLManagedTensorVersioned.from_address(addr).dl_tensor
                    ptr = (data.data or 0) + data.byte_offset
                    # An in-place output is a view of an input: keep that input.
                    keep = [b for b in borrowed if b.data == ptr and ptr and not self._scalar_at(borrowed, b)]
                    kept.update(id(b) for b in keep)
                    results.append(Tensor(_Owner(addr, keep), s))
                return results[0] if m == 1 else tuple(results)
            targets = list(out) if isinstance(out, (list, tuple)) else [out]
            ob = [dl.borrow(o, s, f"output {i}") for i, o in enumerate(targets)]
            try:
                optr, oflags, on = self._arrays(ob)
                L.check(L.kf_execute_into_flagged(h, ins, flags, n, optr, oflags, on, opts),
                        "kf_execute_into_flagged")
            finally:
                for b in ob:
                    b.release()
            return out
        finally:
            for b in borrowed:
                if id(b) not in kept:
                    b.release()

    def is_ready(self, *tensors, out=None):
        """Whether a call with these tensors (and ``out``, as in ``__call__``)
        would start at once: its plan is cached and its kernels are loaded
        (kf_fusion_is_ready). Builds, compiles and runs nothing."""
        return self._readiness("kf_fusion_is_ready", tensors, out)

    def prepare(self, *tensors, out=None):
        """Builds the plan and compiles and loads the kernels a call with
        these tensors (and ``out``) would take, without running it
        (kf_fusion_prepare): the call then starts at once."""
        self._readiness("kf_fusion_prepare", tensors, out)

    def _readiness(self, fn, tensors, out):
        L = self._lib
        borrowed = self._borrow_inputs(tensors, None)
        ob = []
        try:
            ins, _, n = self._arrays(borrowed)
            optr, on = None, 0
            if out is not None:
                targets = list(out) if isinstance(out, (list, tuple)) else [out]
                ob = [dl.borrow(o, None, f"output {i}") for i, o in enumerate(targets)]
                optr, _, on = self._arrays(ob)
            if fn == "kf_fusion_is_ready":
                ready = ctypes.c_int()
                L.check(L.kf_fusion_is_ready(self._handle(), ins, n, optr, on, ctypes.byref(ready)), fn)
                return bool(ready.value)
            L.check(L.kf_fusion_prepare(self._handle(), ins, n, optr, on), fn)
            return None
        finally:
            for b in borrowed + ob:
                b.release()

    def _call_torch(self, tensors, stream, communicator):
        """The call when every tensor argument is a torch tensor the bridge
        takes (None otherwise: the DLPack path runs). With no stream given,
        kfuse enqueues on torch's current stream of the tensors' device, so
        torch's pending work is ordered before kfuse's and nothing waits;
        with a stream given, the DLPack path hands it to torch."""
        bridge = _torch_bridge()
        if bridge is None or stream is not None or len(tensors) != len(self._scalar):
            return None
        L = self._lib
        n = len(tensors)
        ptrs = self._ptr_array()
        keep = []
        data = []  # (data pointer, tensor) of each tensor input
        device = -1
        for i, t in enumerate(tensors):
            if self._scalar[i] and _is_number(t):
                b = _scalar_tensor(t, self.inputs[i]["dtype"])
                keep.append(b)
                ptrs[i] = b.ptr
                continue
            if not bridge.takes(t):
                return None
            p = t.data_ptr()
            d = bridge.tensor(t, p)
            keep.append(d)
            data.append((p, t))
            ptrs[i] = ctypes.addressof(d[0])
            if d[0].device.device_type == dl.kDLCUDA:
                device = d[0].device.device_id
        s = None
        if device >= 0:
            if bridge.raw_stream is None:
                return None
            s = bridge.raw_stream(device)
        comm = communicator._handle() if communicator is not None else None
        opts = ExecOptions(_EXEC_OPTIONS_SIZE, s, None, comm) if (s or comm) else None
        m = len(self.outputs)
        outs = self._out_array()
        status = L.kf_execute_flagged(self._h, ptrs, self._no_flags, n, outs, m, opts)
        if status:
            L.check(status, "kf_execute_flagged")
        results = []
        for i in range(m):
            addr = outs[i]
            # An in-place output is a view of an input: keep that input alive.
            o = dl.DLTensor.from_address(addr + dl.DL_TENSOR_OFFSET_VERSIONED)
            out_ptr = (o.data or 0) + o.byte_offset
            held = [_Held(t) for p, t in data if out_ptr and p == out_ptr] if data else None
            results.append(Tensor(_Owner(addr, held), s))
        return results[0] if m == 1 else tuple(results)

    def _ptr_array(self):
        t = self.__dict__.get("_ptr_t")
        if t is None:
            t = self._ptr_t = ctypes.c_void_p * max(len(self._scalar), 1)
            self._no_flags = (ctypes.c_uint64 * max(len(self._scalar), 1))()  # read only: never written
        return t()

    def _out_array(self):
        t = self.__dict__.get("_out_t")
        if t is None:
            t = self._out_t = ctypes.c_void_p * max(len(self.outputs), 1)
        return t()

    def _scalar_at(self, borrowed, b):
        i = borrowed.index(b)
        return i < len(self._scalar) and self._scalar[i]

    # -- inspection --------------------------------------------------------
    def _explain_inputs(self, args, cuda):
        out = []
        for i, a in enumerate(args):
            info = self.inputs[i] if i < len(self.inputs) else None
            if info is not None and info["is_scalar"] and _is_number(a):
                out.append(_scalar_tensor(a, info["dtype"]))
            elif isinstance(a, (tuple, list)) and info is not None:
                shape, base, device = _shape_only(tuple(int(s) for s in a), cuda)
                d = info["dtype"]
                out.append(dl._Described(base, device, d.dl_code, d.bits, shape).borrowed())
            else:
                out.append(dl.borrow(a, None, f"input {i}"))
        return out

    def segments(self, *args, cuda=False, out=None):
        """The segments kfuse makes for these inputs (tensors, or shape
        tuples standing for tensors: concretization reads no data; Python
        numbers for scalars), in run order, each with its scheduler, ids,
        schedule line, text form and (cuda=True: concretized for kDLCUDA)
        generated CUDA C++. out: the outputs a call would write into
        (DLPack tensors, in output order; kf_concretize_into: the plan for
        outputs in their memory order; their data is not touched). No GPU
        is needed."""
        return self._inspect(args, cuda, out)[1]

    def explain(self, *args, cuda=False, out=None):
        """What ``kfuse explain`` prints, as a string: the definition, its
        concretization for these inputs (and outputs ``out``, as in
        ``segments``) and every segment (with its CUDA source when
        cuda=True)."""
        described, segs = self._inspect(args, cuda, out)
        lines = ["== definition ==", *("  " + l for l in self.text.splitlines()), "",
                 f"== concretization ({'kDLCUDA' if cuda else 'kDLCPU'} tensors) ==",
                 *("  " + l for l in described.splitlines()), "", f"== segments: {len(segs)} =="]
        ids = lambda xs: ", ".join(map(str, xs)) or "(none)"
        for s in segs:
            lines.append(f"segment {s.index}: run order {s.run_order}, scheduler {s.scheduler}")
            lines.append(f"  inputs:     {ids(s.inputs)}")
            lines.append(f"  outputs:    {ids(s.outputs)}")
            lines.append(f"  dead after: {ids(s.dead_after)}")
            for c, task in enumerate(s.children):
                lines.append(f"  nested task {c}: {task['pattern']}")
                lines.append(f"    inputs:   {ids(task['inputs'])}")
                lines.append(f"    outputs:  {ids(task['outputs'])}")
            if s.schedule is not None:
                lines.append(f"  schedule:   {s.schedule}")
            lines.extend(f"  declined:   {l.replace(': declined: ', ': ', 1)}"
                         for l in (s.schedulers or "").splitlines() if ": declined: " in l)
            lines.append("  text:")
            lines.extend("    " + l for l in s.text.splitlines())
            if cuda:
                lines.append("  cuda:")
                lines.extend("    " + l for l in (s.cuda or s.cuda_error).splitlines())
        return "\n".join(lines) + "\n"

    def _inspect(self, args, cuda, outs=None):
        L = self._lib
        h = self._handle()
        borrowed = self._explain_inputs(args, cuda)
        conc, seg = ctypes.c_void_p(), ctypes.c_void_p()
        try:
            ins, _, n = self._arrays(borrowed)
            if outs is None:
                L.check(L.kf_concretize(h, ins, n, ctypes.byref(conc)), "kf_concretize")
            else:
                outs = list(outs)
                for i, o in enumerate(outs):
                    borrowed.append(dl.borrow(o, None, f"output {i}"))
                optr, _, on = self._arrays(borrowed[len(borrowed) - len(outs):])
                L.check(L.kf_concretize_into(h, ins, n, optr, on, ctypes.byref(conc)), "kf_concretize_into")
            p = ctypes.c_void_p()
            L.check(L.kf_concrete_describe(conc, ctypes.byref(p)), "kf_concrete_describe")
            described = L.take_string(p)
            L.check(L.kf_segment(conc, ctypes.byref(seg)), "kf_segment")
            count = ctypes.c_size_t()
            L.check(L.kf_segmentation_count(seg, ctypes.byref(count)), "kf_segmentation_count")
            segs = [self._segment(seg, k, cuda) for k in range(count.value)]
            return described, segs
        finally:
            L.kf_segmentation_release(seg)
            L.kf_concrete_release(conc)
            for b in borrowed:
                b.release()

    def _segment(self, seg, k, cuda):
        L = self._lib
        info = SegmentInfo()
        info.struct_size = ctypes.sizeof(SegmentInfo)
        L.check(L.kf_segmentation_get(seg, k, ctypes.byref(info)), "kf_segmentation_get")
        ids = lambda p, n: [p[i] for i in range(n)]
        children = []
        for c in range(info.num_children):
            t = TaskInfo()
            t.struct_size = ctypes.sizeof(TaskInfo)
            L.check(L.kf_segment_child(seg, k, c, ctypes.byref(t)), "kf_segment_child")
            children.append({"pattern": t.pattern.decode(), "inputs": ids(t.inputs, t.num_inputs),
                             "outputs": ids(t.outputs, t.num_outputs)})

        def text_of(fn, call, optional):
            p = ctypes.c_void_p()
            st = fn(seg, k, ctypes.byref(p))
            if st != 0:
                if optional:
                    return None, f"{KfuseError(st, L.last_error())}"
                L.check(st, call)
            return L.take_string(p), None

        schedule, _ = text_of(L.kf_segment_schedule, "kf_segment_schedule", True)
        schedulers, _ = text_of(L.kf_segment_schedulers, "kf_segment_schedulers", True)
        text, _ = text_of(L.kf_segment_to_text, "kf_segment_to_text", False)
        source, err = text_of(L.kf_segment_cuda_source, "kf_segment_cuda_source", True) if cuda else (None, None)
        return Segment(index=k, run_order=info.run_order, scheduler=info.scheduler.decode(),
                       inputs=ids(info.inputs, info.num_inputs), outputs=ids(info.outputs, info.num_outputs),
                       dead_after=ids(info.dead_after, info.num_dead_after), children=children,
                       schedule=schedule, schedulers=schedulers, text=text, cuda=source, cuda_error=err)


class Communicator:
    """One rank of a group that runs fusions with a mesh (docs/multidevice.md).
    ``Communicator.nccl(uid, ranks, rank, device)`` for CUDA tensors (``uid``
    from ``nccl_unique_id()`` on one process, handed to every rank);
    ``Communicator.local(ranks)`` for CPU tensors: a list, one per thread.
    Released by ``close()``, a ``with`` block, or the garbage collector."""

    def __init__(self, handle):
        self._lib = lib()
        self._h = handle

    @staticmethod
    def nccl_unique_id():
        L = lib()
        uid = NcclId()
        L.check(L.kf_nccl_get_unique_id(ctypes.byref(uid)), "kf_nccl_get_unique_id")
        return bytes(uid.bytes)

    @classmethod
    def nccl(cls, unique_id, ranks, rank, device):
        L = lib()
        if len(unique_id) != 128:
            raise ValueError(f"unique_id: expected the 128 bytes of nccl_unique_id(), got {len(unique_id)}")
        uid = NcclId()
        ctypes.memmove(uid.bytes, bytes(unique_id), 128)
        h = ctypes.c_void_p()
        L.check(L.kf_communicator_create_nccl(ctypes.byref(uid), ranks, rank, device, ctypes.byref(h)),
                "kf_communicator_create_nccl")
        return cls(h.value)

    @classmethod
    def local(cls, ranks):
        L = lib()
        hs = (ctypes.c_void_p * max(ranks, 1))()
        L.check(L.kf_communicator_create_local(ranks, hs), "kf_communicator_create_local")
        return [cls(hs[i]) for i in range(ranks)]

    def _handle(self):
        if self._h is None:
            raise ValueError("the communicator is closed")
        return self._h

    @property
    def rank(self):
        r, n = ctypes.c_int(), ctypes.c_int()
        self._lib.check(self._lib.kf_communicator_rank(self._handle(), ctypes.byref(r), ctypes.byref(n)),
                        "kf_communicator_rank")
        return r.value

    @property
    def size(self):
        r, n = ctypes.c_int(), ctypes.c_int()
        self._lib.check(self._lib.kf_communicator_rank(self._handle(), ctypes.byref(r), ctypes.byref(n)),
                        "kf_communicator_rank")
        return n.value

    def close(self):
        if self._h is not None:
            self._lib.kf_communicator_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def nccl_unique_id():
    """An NCCL unique id (128 bytes) for Communicator.nccl."""
    return Communicator.nccl_unique_id()


def load_bundle(path, device=-1):
    """Installs the kernel bundle at ``path`` (written by ``kfuse compile``)
    for the process's life and returns its kernel count: calls whose
    kernels it holds never run NVRTC. ``device`` >= 0: the bundle's
    architecture must be that CUDA device's (docs/cuda-runtime.md)."""
    L = lib()
    n = ctypes.c_size_t()
    L.check(L.kf_bundle_load(os.fsencode(path), int(device), ctypes.byref(n)), "kf_bundle_load")
    return n.value
