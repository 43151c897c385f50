#!/usr/bin/env python3
"""Host time of kfuse.torch's partition calls (CPU, tiny sizes: kernel
time is negligible, so what is measured is the Python/C glue per call).

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/torch_host_bench.py [--layers 2] [--iters 2000] [--profile]

A decode-like graph (per layer: RMSNorm, q/k/v projections, RoPE on
[1, heads, 1, 64], attention over a fixed K/V with softmax, output
projection, residual add, RMSNorm, SwiGLU, residual add; bf16 weights,
float32 norms as in bench/models/llama.py) is traced with make_fx through
``kfuse.torch.fuse`` (works on torch 1.13, no Dynamo). For every kfuse
partition it reports the median µs per call of

  - ``wrapper``: the installed ``KfusePartition`` module (what the graph calls),
  - ``fusion``:  its ``kfuse.Fusion`` called directly (kfuse Tensors out, no
                 conversion to torch),
  - ``eager``:   the partition's own ops in torch eager (its torch submodule);

and for the whole graph: the fused GraphModule vs the function in eager.
By default the CPU backend runs dry (KFUSE_CPU_DRY_RUN=1: segments are
dispatched, not computed), so ``fusion`` is kfuse's host path (the C API,
binding, concretization lookup, executor: what a GPU call shares) plus
the per-call Python/C glue, and ``wrapper`` adds the backend's part; the
outputs are then garbage, so the fused graph is checked against eager
only with ``--compute`` (kernels computed on the CPU: slower, and the
kernel time is in the figures).
``--profile`` runs cProfile over the wrapper calls. CPU host time is a
proxy for the GPU run's (there the call also asks torch for the current
stream and enqueues the launch), not the same figure.
"""
import argparse
import cProfile
import os
import pstats
import statistics
import sys
import time

if "--compute" not in sys.argv[1:]:
    os.environ["KFUSE_CPU_DRY_RUN"] = "1"  # read once by libkfuse: set before it loads

import torch  # noqa: E402

import kfuse  # noqa: E402
import kfuse.torch as kt  # noqa: E402


def rms(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


def decode_like(layers, heads, hd, ffn, ctx):
    dim = heads * hd

    def fn(x, cos, sin, *params):
        for i in range(layers):
            n1, wq, wk, wv, wo, kc, vc, n2, w1, w3, w2 = params[11 * i: 11 * i + 11]
            h = rms(x, n1)
            q = (h @ wq).view(1, 1, heads, hd).transpose(1, 2)
            k = (h @ wk).view(1, 1, heads, hd).transpose(1, 2)
            v = (h @ wv).view(1, 1, heads, hd).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            keys = torch.cat([kc, k], dim=2)
            vals = torch.cat([vc, v], dim=2)
            s = (q @ keys.transpose(-1, -2)) * (hd ** -0.5)
            p = torch.softmax(s.float(), dim=-1).to(q.dtype)
            y = (p @ vals).transpose(1, 2).reshape(1, 1, dim)
            x = x + y @ wo
            h = rms(x, n2)
            x = x + (torch.nn.functional.silu(h @ w1) * (h @ w3)) @ w2
        return x

    g = torch.Generator().manual_seed(0)
    r = lambda *s: (torch.randn(*s, generator=g) * 0.1).to(torch.bfloat16)
    inputs = [r(1, 1, dim), r(1, 1, 1, hd), r(1, 1, 1, hd)]
    for _ in range(layers):
        inputs += [r(dim), r(dim, dim), r(dim, dim), r(dim, dim), r(dim, dim), r(1, heads, ctx, hd),
                   r(1, heads, ctx, hd), r(dim), r(dim, ffn), r(dim, ffn), r(ffn, dim)]
    return fn, inputs


def median_us(call, iters):
    for _ in range(min(50, iters)):
        call()
    samples = []
    batch = 20
    for _ in range(max(1, iters // batch)):
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            call()
        samples.append((time.perf_counter_ns() - t0) / batch / 1000.0)
    return statistics.median(samples)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--ffn", type=int, default=64)
    p.add_argument("--ctx", type=int, default=3)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--profile", action="store_true", help="cProfile the wrapper calls")
    p.add_argument("--compute", action="store_true",
                   help="compute the kernels (no KFUSE_CPU_DRY_RUN) and check the graph against eager")
    args = p.parse_args()

    fn, inputs = decode_like(args.layers, args.heads, args.head_dim, args.ffn, args.ctx)
    report = kt.Report()
    with torch.no_grad():
        gm = kt.fuse(fn, inputs, report=report)
        parts = [(name, m) for name, m in gm.named_children() if isinstance(m, kt._backend.KfusePartition)]
        captured = {}
        cls = kt._backend.KfusePartition
        call = cls.__call__  # forward itself (no hook dispatch): capture the arguments around it

        def capturing(mod, *a):
            captured.setdefault(mod.name, a)
            return call(mod, *a)
        cls.__call__ = capturing
        try:
            got = gm(*inputs)
        finally:
            cls.__call__ = call
        ref = fn(*inputs)
        why = kt.mismatch(got, ref, kt.Options(check=False, rtol=5e-2, atol=5e-2)) if args.compute else None
        if why:
            sys.exit(f"fused graph differs from eager: {why}")

        from kfuse import _ext
        print(f"torch {torch.__version__}; kfuse._fastcall: {_ext.extension_status()}; "
              + ("kernels computed (--compute), graph checked against eager" if args.compute
                 else "KFUSE_CPU_DRY_RUN=1 (kernels not computed)"))
        print(f"{len(parts)} kfuse partitions, {len(report.in_torch)} ops left to torch, "
              f"{kt.stats()['definitions']} definitions\n")
        print(f"| partition | ins | outs | wrapper µs | fusion µs | eager µs |")
        print(f"|---|---|---|---|---|---|")
        tot = [0.0, 0.0, 0.0]
        for name, m in parts:
            a = captured[name]
            plan = m.plan
            ins = [x for x in a]
            w = median_us(lambda: m(*a), args.iters)
            f = median_us(lambda: plan.fusion(*ins), args.iters)
            n_torch = len(a) - len(plan.extra)
            e = median_us(lambda: m.torch_graph(*a[:n_torch]), args.iters)
            tot[0] += w
            tot[1] += f
            tot[2] += e
            print(f"| {name} | {len(a)} | {len(plan.fusion.outputs)} | {w:.1f} | {f:.1f} | {e:.1f} |")
        n = len(parts)
        print(f"| mean of {n} | | | {tot[0] / n:.1f} | {tot[1] / n:.1f} | {tot[2] / n:.1f} |")
        g_us = median_us(lambda: gm(*inputs), max(args.iters // 10, 40))
        e_us = median_us(lambda: fn(*inputs), max(args.iters // 10, 40))
        print(f"\nwhole graph: fused GraphModule {g_us:.1f} µs, eager function {e_us:.1f} µs "
              f"({args.layers} layers, {n} kfuse partitions)")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(2000):
                for name, m in parts:
                    m(*captured[name])
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
