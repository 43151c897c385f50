"""Host time per call from Python, for a small cached fusion where the host
is the bottleneck: a float32 layernorm on [16, 768] CUDA tensors, called
through the kfuse package (ctypes, DLPack 1.x), torch eager
(torch.nn.functional.layer_norm) and torch.compile of the same function,
measured in the same process.

  PYTHONPATH=bindings/python KFUSE_LIBRARY=build/libkfuse.so python3 bench/python_call_latency.py

Per variant: the median over 7 rounds of (wall time of 2000 calls, then one
synchronize) / 2000, after a warm-up. With 16x768 the kernels take a few
microseconds, so this is the time the host needs to enqueue one call.
"""
import statistics
import time

import torch

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


def per_call_us(fn, calls=2000, rounds=7):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def main():
    x = torch.randn(16, 768, device="cuda")
    w = torch.randn(768, device="cuda")
    b = torch.randn(768, device="cuda")
    f = kfuse.Fusion.from_text(LAYERNORM)
    want = torch.nn.functional.layer_norm(x, (768,), w, b, 1e-5)
    got = torch.from_dlpack(f(x, w, b))
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (got - want).abs().max()
    stream = torch.cuda.current_stream().cuda_stream
    compiled = torch.compile(lambda x, w, b: torch.nn.functional.layer_norm(x, (768,), w, b, 1e-5))
    compiled(x, w, b)
    rows = [
        ("kfuse (torch tensors read directly, torch's current stream)", lambda: f(x, w, b)),
        ("kfuse with stream= (the DLPack protocol: torch's __dlpack__)", lambda: f(x, w, b, stream=stream)),
        ("kfuse + torch.from_dlpack of the result", lambda: torch.from_dlpack(f(x, w, b))),
        ("torch eager F.layer_norm", lambda: torch.nn.functional.layer_norm(x, (768,), w, b, 1e-5)),
        ("torch.compile(F.layer_norm)", lambda: compiled(x, w, b)),
    ]
    print(f"| variant ({torch.cuda.get_device_name()}, torch {torch.__version__}) | host us per call |")
    print("| --- | --- |")
    for name, fn in rows:
        print(f"| {name} | {per_call_us(fn):.1f} |")


if __name__ == "__main__":
    main()
