"""Host time per call from Python, for a small cached fusion where the host
is the bottleneck: a float32 layernorm on [16, 768] tensors, called through
the kfuse package (its C extension, and the pure ctypes path that
KFUSE_PYTHON_EXTENSION=0 gives) and, on the GPU, torch eager
(torch.nn.functional.layer_norm) and torch.compile of the same function,
measured in the same process.

  # GPU: torch CUDA tensors
  PYTHONPATH=bindings/python KFUSE_LIBRARY=build/libkfuse.so python3 bench/python_call_latency.py
  # CPU backend: NumPy arrays (no torch, no GPU); --dry-run: the backend
  # dispatches without computing (KFUSE_CPU_DRY_RUN=1), leaving the host path
  PYTHONPATH=bindings/python KFUSE_LIBRARY=build/libkfuse.so python3 bench/python_call_latency.py --cpu --dry-run

The extension is found inside the package or next to the library
(build/python/kfuse/, which CMake builds); kfuse.extension_path() says
which. Per variant: the median over 7 rounds of (wall time of 2000 calls,
then one synchronize on the GPU) / 2000, after a warm-up. With 16x768 the
GPU kernels take a few microseconds, so this is the time the host needs to
enqueue one call; on the CPU backend the call also computes the result
(about 1.2 ms for 16x768 on a 2-core machine) unless --dry-run.
"""
import argparse
import os
import statistics
import time

import kfuse

LAYERNORM = """
input x: tensor<float32, 2>
input w: tensor<float32, 1>
input b: tensor<float32, 1>
var, mean = var_mean(x) {axes=[1], keepdim=true, correction=0}
c = sub(x, mean)
const eps: float32 = 1e-5
s = add(var, eps)
r = rsqrt(s)
n = mul(c, r)
g = mul(n, w)
y = add(g, b)
output y
"""


def per_call_us(fn, sync, calls, rounds=7):
    for _ in range(200):
        fn()
    sync()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def fusions():
    """The layernorm twice: through the extension (when loaded) and through
    the ctypes path alone (the same fusion handle, from the definition cache)."""
    ext = kfuse.Fusion.from_text(LAYERNORM)
    pure = kfuse.Fusion.from_text(LAYERNORM)
    pure._fast = None  # what KFUSE_PYTHON_EXTENSION=0 gives every fusion
    return ext, pure


def extension_note():
    loaded = getattr(kfuse, "extension_loaded", lambda: False)()
    return f"C extension {kfuse.extension_path()}" if loaded else "no C extension: both kfuse rows are ctypes"


def gpu_rows(shape):
    import torch
    x = torch.randn(*shape, device="cuda")
    w = torch.randn(shape[1], device="cuda")
    b = torch.randn(shape[1], device="cuda")
    f, pure = fusions()
    want = torch.nn.functional.layer_norm(x, (shape[1],), w, b, 1e-5)
    for g in (f, pure):
        got = torch.from_dlpack(g(x, w, b))
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    stream = torch.cuda.current_stream().cuda_stream
    compiled = torch.compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (shape[1],), w, b, 1e-5))
    compiled(x, w, b)
    title = f"{torch.cuda.get_device_name()}, torch {torch.__version__}"
    rows = [
        ("kfuse, C extension (torch tensors read directly, torch's current stream)", lambda: f(x, w, b)),
        ("kfuse, ctypes path (the same, KFUSE_PYTHON_EXTENSION=0)", lambda: pure(x, w, b)),
        ("kfuse with stream= (the DLPack protocol: torch's __dlpack__; Python path)",
         lambda: f(x, w, b, stream=stream)),
        ("kfuse, C extension, + torch.from_dlpack of the result", lambda: torch.from_dlpack(f(x, w, b))),
        ("torch eager F.layer_norm", lambda: torch.nn.functional.layer_norm(x, (shape[1],), w, b, 1e-5)),
        ("torch.compile(F.layer_norm)", lambda: compiled(x, w, b)),
    ]
    return title, rows, torch.cuda.synchronize


def cpu_rows(shape, dry_run):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape[1]).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    f, pure = fusions()

    def numpy_layernorm():
        mean = x.mean(1, keepdims=True)
        return (x - mean) / np.sqrt(x.var(1, keepdims=True) + 1e-5) * w + b
    for g in (f, pure):
        y = np.from_dlpack(g(x, w, b))
        if not dry_run:  # a dry run computes nothing
            np.testing.assert_allclose(y, numpy_layernorm(), rtol=1e-4, atol=1e-4)
    title = f"CPU backend{' dry run' if dry_run else ''}, NumPy {np.__version__}"
    rows = [
        ("kfuse, C extension (NumPy arrays, DLPack capsules consumed in C)", lambda: f(x, w, b)),
        ("kfuse, ctypes path (the same, KFUSE_PYTHON_EXTENSION=0)", lambda: pure(x, w, b)),
        ("kfuse, C extension, + np.from_dlpack of the result", lambda: np.from_dlpack(f(x, w, b))),
        ("NumPy layernorm (mean, var, arithmetic)", numpy_layernorm),
    ]
    return title, rows, lambda: None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cpu", action="store_true", help="NumPy arrays on kfuse's CPU backend (no torch, no GPU)")
    p.add_argument("--dry-run", action="store_true",
                   help="with --cpu: KFUSE_CPU_DRY_RUN=1, the backend dispatches without computing")
    p.add_argument("--shape", default="16x768", help="rows x columns of x (default 16x768)")
    p.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    args = p.parse_args()
    shape = tuple(int(s) for s in args.shape.split("x"))
    if args.dry_run:
        if not args.cpu:
            p.error("--dry-run is for the CPU backend (--cpu)")
        os.environ["KFUSE_CPU_DRY_RUN"] = "1"  # read once, at the first call
    title, rows, sync = cpu_rows(shape, args.dry_run) if args.cpu else gpu_rows(shape)
    print(f"{extension_note()}")
    print(f"| variant ({title}, [{shape[0]}, {shape[1]}]) | host us per call |")
    print("| --- | --- |")
    for name, fn in rows:
        print(f"| {name} | {per_call_us(fn, sync, args.calls):.1f} |")


if __name__ == "__main__":
    main()
