#!/usr/bin/env python3
"""kfuse against torch eager and torch.compile on the benchmark suite
(../shared/BENCHMARKS.md), side by side in one process on one GPU.

kfuse runs through its public C API (ctypes), on torch tensors handed over
with DLPack, on torch's current stream. Every case is checked against torch
eager before it is timed. Timing: CUDA events around each call, after a
warm-up, median of --iters runs. Bandwidth counts each input read once and
each output written once; "% SOL" is against a device-to-device copy
measured by this script on the same GPU.

    python3 bench/bench_torch.py --lib build/libkfuse.so            # headline cases
    python3 bench/bench_torch.py --lib build/libkfuse.so --sweep    # robustness sweep
    python3 bench/bench_torch.py --lib build/libkfuse.so --suite training

The case texts and input shapes come from bench/cases/ (bench/kfuse_cases.py),
the same files `kfuse bench` runs. A case without a hand-written torch
function below (torch_fn) is checked and timed with bench/kf_torch.py's
interpreter of its fusion text instead (eager, and torch.compile of it). With --kfuse-table FILE (a `kfuse bench
--out` table) it also writes one table of both: bench/run_all.sh does that.
"""
import argparse
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import kf_torch
from kfuse_ctypes import Kfuse
from kfuse_cases import case_text, input_dtypes, input_shapes, nonnegative_inputs, read_kfuse_table, suite

# ---------------------------------------------------------------------------
# The cases: kfuse text and input shapes from bench/cases/ (shared with
# `kfuse bench`), torch function, inputs.

def torch_fn(name, storage=torch.bfloat16):
    if name == "gelu_bias":
        return lambda x, b: F.gelu(x.float() + b.float(), approximate="tanh").to(x.dtype)
    if name == "add_relu_mul":
        return lambda a, b, c: (torch.relu(a.float() + b.float()) * c.float()).to(a.dtype)
    if name == "silu_mul":
        return lambda g, u: (F.silu(g.float()) * u.float()).to(g.dtype)
    if name == "softmax":
        return lambda x: torch.softmax(x.float(), dim=-1).to(x.dtype)
    if name == "layernorm":
        return lambda x, w, b: F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5).to(x.dtype)
    if name == "rmsnorm":
        return lambda x, w: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
                             * w.float()).to(x.dtype)
    # The as_written list: the same functions written as frameworks write
    # them (kfuse's simplify stage rewrites the pow, sqrt and division).
    if name == "rmsnorm_pow":
        return lambda x, w: (x.float() * torch.reciprocal(torch.sqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6))
                             * w.float()).to(x.dtype)
    if name == "layernorm_div_sqrt":
        def layernorm_div_sqrt(x, w, b):
            xf = x.float()
            xc = xf - xf.mean(-1, keepdim=True)
            return (xc / torch.sqrt(xc.pow(2).mean(-1, keepdim=True) + 1e-5) * w.float() + b.float()).to(x.dtype)
        return layernorm_div_sqrt
    if name == "inner_sum":
        return lambda x: x.float().sum(dim=-1)
    if name == "outer_sum":
        return lambda x: x.float().sum(dim=0)
    if name == "transpose_add":
        return lambda x, z: (x.float().t() + z.float()).to(x.dtype)
    # The training suite (training.txt). Several outputs: a tuple, in the
    # case's output order.
    if name == "layernorm_bwd":
        def layernorm_bwd(dy, x, mean, rstd, w):
            dyf, wf = dy.float(), w.float()
            xhat = (x.float() - mean) * rstd
            g = dyf * wf
            dx = (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) * rstd
            return dx.to(dy.dtype), (dyf * xhat).sum(0), dyf.sum(0)
        return layernorm_bwd
    if name == "rmsnorm_bwd":
        def rmsnorm_bwd(dy, x, mean, rstd, w):
            dyf = dy.float()
            xn = x.float() * rstd
            g = dyf * w.float()
            dx = (g - xn * (g * xn).mean(-1, keepdim=True)) * rstd
            return dx.to(dy.dtype), (dyf * xn).sum(0, keepdim=True)
        return rmsnorm_bwd
    if name == "silu_bwd_bias_grad":
        def silu_bwd_bias_grad(dy, x, b):
            h = x.float() + b.float()
            s = torch.sigmoid(h)
            dx = dy.float() * (s * (1 + h * (1 - s)))
            return dx.to(dy.dtype), dx.sum(0)
        return silu_bwd_bias_grad
    if name == "transpose3d_add":
        return lambda x, z: (x.float().transpose(1, 2) + z.float()).to(x.dtype)
    if name == "layernorm_fwd_stats":
        def layernorm_fwd_stats(x, w, b):
            xf = x.float()
            var, mean = torch.var_mean(xf, dim=-1, keepdim=True, correction=0)
            rstd = torch.rsqrt(var + 1e-5)
            return ((xf - mean) * rstd * w.float() + b.float()).to(x.dtype), mean, rstd
        return layernorm_fwd_stats
    if name == "rmsnorm_fwd_rms":
        def rmsnorm_fwd_rms(x, w):
            xf = x.float()
            rms = torch.sqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
            return (xf * torch.reciprocal(rms) * w.float()).to(x.dtype), rms
        return rmsnorm_fwd_rms
    if name == "groupnorm_fwd":
        def groupnorm_fwd(x, w, b):
            xg = x.float().reshape(4, 32, 10, -1)  # [B, groups, channels per group, HW]
            var, mean = torch.var_mean(xg, dim=(2, 3), keepdim=True, correction=0)
            rstd = torch.rsqrt(var + 1e-5)
            y = (xg - mean) * rstd * w.float().reshape(32, 10, 1) + b.float().reshape(32, 10, 1)
            return y.to(x.dtype).reshape(x.shape), mean.reshape(4, 32), rstd.reshape(4, 32)
        return groupnorm_fwd
    if name == "batchnorm_fwd_train":
        def batchnorm_fwd_train(x, w, b, running_mean, running_var):
            xf = x.float()  # [B, C, HW]
            var, mean = torch.var_mean(xf, dim=(0, 2), correction=0)
            var_unbiased = torch.var(xf, dim=(0, 2), correction=1)
            rstd = torch.rsqrt(var + 1e-5)
            y = (xf - mean[:, None]) * rstd[:, None] * w.float()[:, None] + b.float()[:, None]
            return (y.to(x.dtype), mean, rstd, mean * 0.1 + running_mean * 0.9,
                    var_unbiased * 0.1 + running_var * 0.9)
        return batchnorm_fwd_train
    if name == "instancenorm_fwd":
        def instancenorm_fwd(x, w, b):
            xf = x.float()  # [B, C, HW]
            var, mean = torch.var_mean(xf, dim=2, keepdim=True, correction=0)
            y = (xf - mean) * torch.rsqrt(var + 1e-5) * w.float()[:, None] + b.float()[:, None]
            return y.to(x.dtype)
        return instancenorm_fwd
    if name == "dropout_add_layernorm":
        def dropout_add_layernorm(x, keep, residual, w, b):
            h = x.float() * keep.float() * (1 / 0.9) + residual.float()
            var, mean = torch.var_mean(h, dim=-1, keepdim=True, correction=0)
            rstd = torch.rsqrt(var + 1e-5)
            y = (h - mean) * rstd * w.float() + b.float()
            return h.to(x.dtype), y.to(x.dtype), mean, rstd
        return dropout_add_layernorm
    if name == "softmax_bwd":
        def softmax_bwd(dy, y):
            dyf, yf = dy.float(), y.float()
            return (yf * (dyf - (dyf * yf).sum(-1, keepdim=True))).to(dy.dtype)
        return softmax_bwd
    if name == "softmax_dim0":
        return lambda x: torch.softmax(x.float(), dim=0).to(x.dtype)
    if name == "softmax_bwd_dim0":
        def softmax_bwd_dim0(dy, y):
            dyf, yf = dy.float(), y.float()
            return (yf * (dyf - (dyf * yf).sum(0, keepdim=True))).to(dy.dtype)
        return softmax_bwd_dim0
    if name == "log_softmax":
        return lambda x: torch.log_softmax(x.float(), dim=-1).to(x.dtype)
    if name == "log_softmax_bwd":
        def log_softmax_bwd(dy, y):
            dyf = dy.float()
            return (dyf - torch.exp(y.float()) * dyf.sum(-1, keepdim=True)).to(dy.dtype)
        return log_softmax_bwd
    if name in ("cross_entropy_fwd", "cross_entropy_gpt2_fwd"):
        def cross_entropy_fwd(logits, label):
            xf = logits.float()
            lse = torch.logsumexp(xf, dim=-1, keepdim=True)
            return lse - xf.gather(1, label), lse
        return cross_entropy_fwd
    if name in ("cross_entropy_bwd", "cross_entropy_gpt2_bwd"):
        def cross_entropy_bwd(logits, label, lse, dloss):
            one_hot = (torch.arange(logits.shape[-1], device=logits.device) == label).float()
            return ((torch.exp(logits.float() - lse) - one_hot) * dloss).to(logits.dtype)
        return cross_entropy_bwd
    if name == "gelu_tanh_bwd":
        return lambda dy, x: (dy.float() * gelu_tanh_grad(x.float())).to(dy.dtype)
    if name == "bias_gelu_tanh_bwd":
        def bias_gelu_tanh_bwd(dy, x, b):
            dx = dy.float() * gelu_tanh_grad(x.float() + b.float())
            return dx.to(dy.dtype), dx.sum(0)
        return bias_gelu_tanh_bwd
    if name == "rope":
        def rope(q, k, cos, sin):
            c, s = cos[:, None, :], sin[:, None, :]  # [M, 1, 128]: broadcast over the heads

            def rotate(x):
                xf = x.float()
                return (xf * c + torch.cat((-xf[..., 64:], xf[..., :64]), dim=-1) * s).to(x.dtype)
            return rotate(q), rotate(k)
        return rope
    if name == "permute4d_scale":
        return lambda k: (k.float().permute(0, 2, 3, 1) * 0.08838834764831845).contiguous().to(k.dtype)
    if name == "residual_add_cast":
        def residual_add_cast(x, residual):
            h = residual + x.float()
            return h, h.to(x.dtype)
        return residual_add_cast
    if name == "cumsum_rows":
        return lambda x: torch.cumsum(x.float(), 1)
    if name == "cumsum_dim0":
        return lambda x: torch.cumsum(x, 0)
    if name == "quantize_fp8":
        def quantize_fp8(x):
            xf = x.float()
            am = xf.abs().amax().clamp(min=1e-12)
            q = (xf * (448.0 / am)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
            return q, (am / 448.0).reshape(1, 1)
        return quantize_fp8
    if name == "dequantize_fp8":
        return lambda q, s: (q.float() * s).to(storage)
    if name == "embedding_bwd":
        return lambda gw, tok, dy: gw.index_add(0, tok, dy)
    if name == "scatter_max_nodes":
        return lambda x, dst, msg: x.scatter_reduce(0, dst[:, None].expand(-1, msg.shape[1]), msg, "amax",
                                                    include_self=False)
    if name == "adamw_step":
        def adamw_step(param, grad, exp_avg, exp_avg_sq):
            # The constants of adamw_step.kf: decay = 1 - lr * weight_decay,
            # step_size = lr / (1 - 0.9**100), bc2_sqrt = sqrt(1 - 0.999**100).
            decay, step_size, bc2_sqrt, eps = 0.99999, 0.0010000265621044142, 0.30855769782374753, 1e-8
            g = grad.float()
            m = exp_avg.lerp(g, 0.1)
            v = exp_avg_sq * 0.999 + g * g * 0.001
            p = param * decay - m / (v.sqrt() / bc2_sqrt + eps) * step_size
            return p, m, v, p.to(grad.dtype)
        return adamw_step
    raise ValueError(name)


def reference_fn(name, storage=torch.bfloat16):
    """The case's torch reference and where it comes from: the hand-written
    torch_fn when there is one ("torch_fn"), else kf_torch's interpreter of
    the case's text in that storage dtype ("kf_torch"), which computes the
    same outputs for any fusion text (a tuple, in the case's output order)."""
    try:
        return torch_fn(name, storage), "torch_fn"
    except ValueError:
        pass
    program = kf_torch.parse(case_text(name, STORAGE[storage]))

    def interpreted(*inputs):
        return program(*inputs)
    interpreted.__name__ = interpreted.__qualname__ = f"kf_torch_{name}"
    return interpreted, "kf_torch"


def gelu_tanh_grad(h):
    """d gelu(h, approximate='tanh') / dh as aten's gelu_backward computes it."""
    beta, kappa = math.sqrt(2 / math.pi), 0.044715
    t = torch.tanh(beta * (h + kappa * (h * h * h)))
    return 0.5 * (t + 1) + 0.5 * h * (1 - t * t) * (beta * (h * h * 0.134145 + 1))


TORCH_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
if hasattr(torch, "float8_e4m3fn"):  # torch >= 2.1 (this module also loads under older torch: tests)
    TORCH_DTYPES["float8_e4m3fn"] = torch.float8_e4m3fn


def make_inputs(name, m, n, dtype):
    # Each input in the dtype its case declares (the storage dtype, or
    # float32 for saved statistics such as mean and rstd).
    # Class labels (int64) lie in [0, the first input's last dim), dropout
    # keep masks (bool) keep with probability 0.9, and `#! nonnegative:`
    # inputs (second moments) are |randn|.
    g = torch.Generator(device="cuda").manual_seed(0)
    dtypes = input_dtypes(name, STORAGE[dtype])
    shapes = input_shapes(name, m, n)
    nonnegative = nonnegative_inputs(name)
    inputs = []
    for i, (shape, d) in enumerate(zip(shapes, dtypes)):
        if d == "int64":
            t = torch.randint(0, shapes[0][-1], shape, device="cuda", generator=g)
        elif d == "bool":
            t = torch.rand(*shape, device="cuda", generator=g) >= 0.1
        else:
            t = torch.randn(*shape, device="cuda", dtype=torch.float32, generator=g)
            t = (t.abs() if i in nonnegative else t).to(TORCH_DTYPES[d])
        inputs.append(t)
    return inputs


STORAGE = {torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float16: "float16"}


# ---------------------------------------------------------------------------
# Timing

def median_ms(fn, iters, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def copy_ceiling_gbs(iters):
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")  # 1 GiB, far above L2
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iters)
    return 2 * src.numel() / (ms * 1e-3) / 1e9


def tolerance(dtype):
    return {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 5e-3}[dtype]


def run_case(kf, name, m, n, dtype, iters, ceiling):
    inputs = make_inputs(name, m, n, dtype)
    fn, reference = reference_fn(name, dtype)
    expected = fn(*inputs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    outs = [torch.empty_like(e) for e in expected]
    fusion = kf.fusion(case_text(name, STORAGE[dtype]))
    run = kf.bind(fusion, inputs, outs, torch.cuda.current_stream().cuda_stream)
    run()
    torch.cuda.synchronize()
    # Sums over many rows or columns round differently in every order.
    sums = ("inner_sum", "outer_sum", "layernorm_bwd", "rmsnorm_bwd", "silu_bwd_bias_grad",
            "bias_gelu_tanh_bwd")
    tol = tolerance(dtype) * (10 if name in sums else 1)
    ok, err = True, 0.0
    for out, e in zip(outs, expected):
        e_err = (out.float() - e.float()).abs().max().item() if e.numel() else 0.0
        scale = max(1.0, e.float().abs().max().item() if e.numel() else 0.0)
        ok = ok and e_err <= tol * scale
        err = max(err, e_err)
    moved = sum(t.numel() * t.element_size() for t in inputs + outs)
    kf_ms = median_ms(run, iters)
    eager_ms = median_ms(lambda: fn(*inputs), iters)
    # A fresh compile per configuration: torch.compile keys its cache on the
    # function's code, and past the recompile limit it silently runs eager.
    torch._dynamo.reset()
    t0 = time.perf_counter()
    compiled = torch.compile(fn, dynamic=False)
    compiled(*inputs)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    compiled_ms = median_ms(lambda: compiled(*inputs), iters)
    gbs = lambda ms: moved / (ms * 1e-3) / 1e9
    return {
        "case": name, "shape": f"{m}x{n}", "dtype": STORAGE[dtype], "ok": ok, "err": err,
        "kf_ms": kf_ms, "kf_gbs": gbs(kf_ms), "sol": gbs(kf_ms) / ceiling * 100,
        "eager_gbs": gbs(eager_ms), "compile_gbs": gbs(compiled_ms), "compile_ms": compiled_ms,
        "speedup": compiled_ms / kf_ms, "compile_s": compile_s, "reference": reference,
    }


def table_text(rows, ceiling):
    lines = [f"copy ceiling: {ceiling:.0f} GB/s (device-to-device, read + write)", "",
             "| case | shape | dtype | check | kfuse ms | kfuse GB/s | % SOL | eager GB/s | compile GB/s | kfuse/compile |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['shape']} | {r['dtype']} | ERROR: {r['error']} | | | | | | |")
            continue
        lines.append(f"| {r['case']} | {r['shape']} | {r['dtype']} | {'ok' if r['ok'] else 'MISMATCH %.3g' % r['err']} "
                     f"| {r['kf_ms']:.3f} | {r['kf_gbs']:.0f} | {r['sol']:.1f} | {r['eager_gbs']:.0f} "
                     f"| {r['compile_gbs']:.0f} | {r['speedup']:.2f} |")
    speedups = [r["speedup"] for r in rows if "speedup" in r]
    if speedups:
        lines += ["", f"geometric mean kfuse/torch.compile speedup: {geomean(speedups):.3f} over {len(speedups)} cases"]
    interpreted = sorted({r["case"] for r in rows if r.get("reference") == "kf_torch"})
    if interpreted:
        lines += ["", "torch reference from bench/kf_torch.py (no hand-written torch_fn): " + ", ".join(interpreted)]
    return "\n".join(lines)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def write(text, out):
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")


# ---------------------------------------------------------------------------
# One table with `kfuse bench` (the C++ driver) and torch

def combined_text(torch_rows, torch_ceiling, kfuse_header, kfuse_rows):
    lines = ["kfuse columns: `kfuse bench`, the C++ driver:"] + [f"- {h}" for h in kfuse_header] + [
             f"torch columns and kfuse via ctypes: bench_torch.py, copy ceiling {torch_ceiling:.0f} GB/s",
             "kfuse/compile: torch.compile time / `kfuse bench` time", "",
             "| case | shape | dtype | scheduler | check (CPU / torch) | kfuse ms | kfuse GB/s | % SOL "
             "| kfuse via ctypes GB/s | eager GB/s | compile GB/s | kfuse/compile |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ratios = []
    seen = set()
    for r in torch_rows:
        key = (r["case"], r["shape"], r["dtype"])
        seen.add(key)
        k = kfuse_rows.get(key, {})
        t_check = ("ERROR: " + r["error"]) if "error" in r else ("ok" if r["ok"] else "MISMATCH %.3g" % r["err"])
        ratio = ""
        try:
            if "compile_ms" in r:
                x = r["compile_ms"] / float(k["ms"])
                ratios.append(x)
                ratio = f"{x:.2f}"
        except (KeyError, ValueError, ZeroDivisionError):
            pass
        fmt = lambda key_: f"{r[key_]:.0f}" if key_ in r else ""
        lines.append(f"| {r['case']} | {r['shape']} | {r['dtype']} | {k.get('scheduler', '')} "
                     f"| {k.get('check', 'not run')} / {t_check} | {k.get('ms', '')} | {k.get('GB/s', '')} "
                     f"| {k.get('% SOL', '')} | {fmt('kf_gbs')} | {fmt('eager_gbs')} | {fmt('compile_gbs')} | {ratio} |")
    for key, k in kfuse_rows.items():  # configurations torch did not run
        if key not in seen:
            lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {k.get('scheduler', '')} | {k.get('check', '')} / not run "
                         f"| {k.get('ms', '')} | {k.get('GB/s', '')} | {k.get('% SOL', '')} | | | | |")
    if ratios:
        lines += ["", f"geometric mean kfuse (C++ driver) / torch.compile speedup: {geomean(ratios):.3f} "
                      f"over {len(ratios)} cases"]
    return "\n".join(lines)


def int_list(text):
    return [int(x) for x in text.split(",")]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lib", default="build/libkfuse.so")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--sweep", action="store_true")
    p.add_argument("--suite", default="suite", help="case list in bench/cases: suite (headline), training or as_written")
    p.add_argument("--cases", default="", help="comma list (default: the whole --suite)")
    p.add_argument("--rows", default="32768", help="comma list")
    p.add_argument("--cols", default="8192", help="comma list")
    p.add_argument("--dtype", default="bfloat16", help="comma list of bfloat16, float32, float16")
    p.add_argument("--out", default="")
    p.add_argument("--kfuse-table", default="", help="a `kfuse bench --out` file to merge with")
    p.add_argument("--combined", default="", help="where to write the merged table (with --kfuse-table)")
    p.add_argument("--sweep-rows", default="16,512,2048,8192,32768")
    p.add_argument("--sweep-cols", default="768,1024,4096,8192,16384,16392")
    p.add_argument("--sweep-dtypes", default="bfloat16,float32")
    p.add_argument("--sweep-cases", default="softmax,layernorm,rmsnorm,gelu_bias,inner_sum")
    a = p.parse_args()
    if not a.cases:
        a.cases = ",".join(suite(name=a.suite))
    kf = Kfuse(a.lib)
    ceiling = copy_ceiling_gbs(a.iters)
    dtypes = {v: k for k, v in STORAGE.items()}
    configs = []
    if a.sweep:
        for name in a.sweep_cases.split(","):
            for m in int_list(a.sweep_rows):
                for n in int_list(a.sweep_cols):
                    for dt in (dtypes[x] for x in a.sweep_dtypes.split(",")):
                        if m * n * (4 if dt == torch.float32 else 2) <= 2 ** 31:
                            configs.append((name, m, n, dt))
    else:
        configs = [(c, m, n, dtypes[d]) for c in a.cases.split(",") for d in a.dtype.split(",")
                   for m in int_list(a.rows) for n in int_list(a.cols)]
    rows = []
    for name, m, n, dt in configs:
        try:
            rows.append(run_case(kf, name, m, n, dt, a.iters, ceiling))
        except Exception as e:  # report and go on: one failing case must not hide the others
            rows.append({"case": name, "shape": f"{m}x{n}", "dtype": STORAGE[dt], "error": str(e)[:200]})
        torch.cuda.empty_cache()
        print(rows[-1], file=sys.stderr, flush=True)
    write(table_text(rows, ceiling), a.out)
    if a.kfuse_table:
        header, kfuse_rows = read_kfuse_table(a.kfuse_table)
        print()
        write(combined_text(rows, ceiling, header, kfuse_rows), a.combined)


if __name__ == "__main__":
    main()
