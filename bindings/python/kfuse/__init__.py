"""kfuse for Python: define a fusion once, call it on any DLPack tensor.

    import numpy as np, kfuse
    with kfuse.Definition() as fd:
        x = fd.tensor(rank=2, dtype=kfuse.float32)
        b = fd.tensor(rank=1, dtype=kfuse.float32)
        fd.output(fd.relu(x + b))
    y = fd.fusion(np.ones((2, 3), np.float32), np.zeros(3, np.float32))
    np.from_dlpack(y)          # no copy

Python over libkfuse's C ABI (ctypes), with the per-call path in an
optional C extension (kfuse._fastcall); see docs/python.md.
"""
from ._lib import KfuseError, Status, library_path, version
from ._ext import extension_loaded, extension_path, extension_status
from ._core import (Communicator, DType, Definition, Fusion, Segment, Tensor, Value, bfloat16, bool_, dtype,
                    float8_e4m3fn, float8_e5m2, float16, float32, float64, int8, int32, int64, load_bundle,
                    nccl_unique_id, ops, uint8)

__version__ = "0.1.0"

globals()["bool"] = bool_  # kfuse.bool, like torch.bool (kfuse.bool_ too)

__all__ = ["Communicator", "nccl_unique_id", "Definition", "Fusion", "Tensor", "Value", "Segment", "DType", "KfuseError", "Status",
           "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32", "int8", "uint8",
           "bool_", "dtype", "ops", "load_bundle",
           "library_path", "version", "extension_loaded", "extension_path", "extension_status"]
