"""libkfuse through ctypes for the benchmark harnesses (bench_torch.py,
corpus_bench.py): a fusion from text, and a callable that runs it on torch
tensors with kf_execute_into on a given stream (DLPack capsules, kept
alive). float8 and bool tensors are exported as uint8 with their DLPack
dtype code set, whatever this torch's DLPack knows."""
import ctypes

import torch

FP8_CODES = {torch.float8_e4m3fn: 10, torch.float8_e5m2: 12} if hasattr(torch, "float8_e4m3fn") else {}


class ExecOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("stream", ctypes.c_void_p), ("allocator", ctypes.c_void_p)]


# Our own function object: ctypes.pythonapi's attributes are shared with other code.
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


class Kfuse:
    def __init__(self, path):
        self.lib = L = ctypes.CDLL(path)
        L.kf_last_error.restype = ctypes.c_char_p
        L.kf_fusion_from_text.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.kf_execute_into.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ExecOptions)]
        L.kf_fusion_release.argtypes = [ctypes.c_void_p]

    def fusion(self, text):
        f = ctypes.c_void_p()
        if self.lib.kf_fusion_from_text(text.encode(), ctypes.byref(f)) != 0:
            raise RuntimeError(f"kf_fusion_from_text: {self.lib.kf_last_error().decode()}")
        return f

    def bind(self, fusion, inputs, outputs, stream):
        """A callable that runs `fusion` on these tensors on `stream` (a
        CUDA stream handle, or None: the default stream / the CPU)."""
        caps = []
        for t in inputs + outputs:
            code = FP8_CODES.get(t.dtype, 6 if t.dtype == torch.bool else None)  # 6: kDLBool
            cap = torch.utils.dlpack.to_dlpack(t.view(torch.uint8) if code else t)
            if code:
                ctypes.c_uint8.from_address(_get_pointer(cap, b"dltensor") + 20).value = code  # DLTensor.dtype.code
            caps.append(cap)
        ptrs = [_get_pointer(c, b"dltensor") for c in caps]  # DLTensor is the first member
        ins = (ctypes.c_void_p * max(len(inputs), 1))(*ptrs[:len(inputs)])
        outs = (ctypes.c_void_p * len(outputs))(*ptrs[len(inputs):])
        opts = ExecOptions(ctypes.sizeof(ExecOptions), stream, None)
        lib, n_in, n_out = self.lib, len(inputs), len(outputs)

        def run():
            status = lib.kf_execute_into(fusion, ins, n_in, outs, n_out, ctypes.byref(opts))
            if status != 0:
                raise RuntimeError(f"kf_execute_into: {lib.kf_last_error().decode()}")
        run.keep_alive = (caps, ins, outs, opts)
        return run
