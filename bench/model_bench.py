#!/usr/bin/env python3
"""Whole models, eager vs torch.compile (inductor) vs torch.compile(backend="kfuse").

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python python3 bench/model_bench.py
    ... --smoke                       # tiny sizes, a few steps; runs on a CPU too
    ... --models llama_train,llama_decode_b1 --backends eager,inductor,kfuse --steps 50
    ... --seq-check                   # Llama training at sequence 2048 -> 4096 -> 3000: kfuse definitions made
    ... --partitions 8                # per model, the 8 costliest kfuse partitions replayed alone, with their text

For each workload of bench/models (GPT-2 training in bf16 autocast, a
Llama-style decoder's training step and its KV-cache decode at batch 1, 8
and 64, a ViT block stack, a GNN message-passing stack) and each backend,
built fresh from the same seed: time to the first step (compile included),
median step time over --steps steps after --warmup, peak CUDA memory,
kernels per step and the share of their GPU time in kfuse's kernels
(torch.profiler, one step), and the loss of every step next to eager's
(inference: the first step's output against eager's). Prints a markdown
table, and with --json the raw numbers.

Needs torch >= 2.0 (torch.compile). Memory: torch's allocator only; kfuse
allocates its outputs itself (cuMemAllocAsync), which
torch.cuda.max_memory_allocated does not see (the kfuse column is a lower
bound). Training steps compile the module (forward, loss, and through
AOTAutograd its backward); AdamW runs eagerly (fused on CUDA).
"""
import argparse
import json
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

if int(torch.__version__.split(".")[0]) < 2:
    sys.exit(f"model_bench.py needs torch >= 2.0 (torch.compile); this is torch {torch.__version__}")

from models import WORKLOADS  # noqa: E402

BACKENDS = ("eager", "inductor", "inductor-max-autotune", "kfuse")


def compiler_for(backend, dynamic=None):
    if backend == "eager":
        return None
    if backend == "inductor":
        return lambda m: torch.compile(m, dynamic=dynamic)
    if backend == "inductor-max-autotune":
        return lambda m: torch.compile(m, mode="max-autotune-no-cudagraphs", dynamic=dynamic)
    if backend == "kfuse":
        import kfuse.torch  # noqa: F401  (registers the "kfuse" Dynamo backend)
        return lambda m: torch.compile(m, backend="kfuse", dynamic=dynamic)
    raise ValueError(f"unknown backend {backend!r} (expected one of {', '.join(BACKENDS)})")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_dynamo():
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001
        pass


def kfuse_definitions():
    mod = sys.modules.get("kfuse.torch")
    return mod.stats()["definitions"] if mod is not None else None


def profile_step(w, device):
    """One step under torch.profiler: (kernels launched, share of their GPU
    time in kfuse kernels, their GPU ms, {kernel name: [calls, ms]})."""
    if device.type != "cuda":
        return None, None, None, {}
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        w.step()
        sync(device)
    kernels, total, kf, by_name = 0, 0.0, 0.0, {}
    for e in prof.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        name = e.name or ""
        if name.startswith(("Memcpy", "Memset", "[memory]")):
            continue
        t = getattr(e, "device_time", None)
        if t is None:
            t = getattr(e, "cuda_time", 0.0) or 0.0
        kernels += 1
        total += t
        if name.startswith("kf_"):
            kf += t
        # (kfuse's kernels are named per plan: each by name, and one
        # entry for all of them, so the table says where the rest goes)
        keys = (name[:100], "kf_* (all kfuse kernels)") if name.startswith("kf_") else (name[:100],)
        for key in keys:
            slot = by_name.setdefault(key, [0, 0.0])
            slot[0] += 1
            slot[1] += t / 1e3
    return kernels, (kf / total if total else 0.0), total / 1e3, by_name


def kernel_table(results, top):
    """Per model and backend, one profiled step's GPU time by kernel name,
    the costliest first: where a backend's step goes next to another's."""
    for r in results:
        if "error" in r or not r.get("by_kernel"):
            continue
        rows = sorted(r["by_kernel"].items(), key=lambda kv: -kv[1][1])
        print(f"\n### {r['model']} / {r['backend']}: {r['gpu_ms']:.3f} ms of kernel time in one step "
              f"({r['kernels']} kernels), step {r['step_ms']:.3f} ms")
        for name, (calls, ms) in rows[:top]:
            print(f"  {ms:8.3f} ms {calls:5d}x  {name}")


def run_one(name, backend, args, device):
    reset_dynamo()
    torch.manual_seed(0)
    w = WORKLOADS[name](args.size, device)
    fn = compiler_for(backend, True if args.dynamic else None)
    if fn is not None:
        w.compile(fn)
    before = kfuse_definitions()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    outs = []
    t0 = time.perf_counter()
    outs.append(w.step())
    sync(device)
    first = time.perf_counter() - t0
    for _ in range(args.warmup):
        outs.append(w.step())
    sync(device)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        outs.append(w.step())
        sync(device)
        times.append(time.perf_counter() - t0)
    kernels, kf_share, gpu_ms, by_kernel = profile_step(w, device)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    after = kfuse_definitions()
    if w.kind == "train":
        values = [float(o) for o in outs]
    else:
        values = outs[0].float().cpu()
    return {"model": name, "backend": backend, "first_s": first, "step_ms": statistics.median(times) * 1e3,
            "peak_mb": peak / 2**20 if peak is not None else None, "kernels": kernels, "kfuse_share": kf_share,
            "gpu_ms": gpu_ms, "by_kernel": by_kernel,
            "values": values, "kind": w.kind,
            "definitions": (after - (before or 0)) if after is not None else None}


def compare(r, ref):
    """Largest relative difference of the losses (training) or of the first
    output (inference) from eager's."""
    if ref is None or r is ref:
        return None
    if r["kind"] == "train":
        n = min(len(r["values"]), len(ref["values"]))
        return max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(r["values"][:n], ref["values"][:n]))
    a, b = r["values"], ref["values"]
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-6))


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def table(results):
    lines = ["| model | backend | step ms | vs eager | vs inductor | first step s | peak MB | kernels/step "
             "| kfuse share | max rel. diff vs eager | kfuse defs |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["model"], r["backend"]): r for r in results if "error" not in r}
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['backend']} | ERROR: {r['error']} |||||||||")
            continue
        eager, ind = by.get((r["model"], "eager")), by.get((r["model"], "inductor"))
        speed = lambda ref: "-" if ref is None else f"{ref['step_ms'] / r['step_ms']:.2f}x"
        lines.append(f"| {r['model']} | {r['backend']} | {r['step_ms']:.3f} | {speed(eager)} "
                     f"| {speed(ind)} | {r['first_s']:.2f} | {fmt(r['peak_mb'], '.0f')} "
                     f"| {fmt(r['kernels'], 'd')} | {fmt(r['kfuse_share'], '.0%')} "
                     f"| {fmt(compare(r, eager), '.2e')} | {fmt(r['definitions'], 'd')} |")
    return "\n".join(lines)


def seq_check(args, device):
    """Llama training at sequence lengths 2048 -> 4096 -> 3000 (smoke: 16 ->
    32 -> 24) through one compiled module: the kfuse definitions each adds.
    Without --dynamic, Dynamo compiles the first length statically and the
    second as a dynamic graph (its automatic dynamic shapes), whose kfuse
    texts differ from the static ones: the second length adds definitions
    once, the third none."""
    import kfuse.torch as kt
    from models import llama
    seqs = (16, 32, 24) if args.size == "smoke" else (2048, 4096, 3000)
    reset_dynamo()
    torch.manual_seed(0)
    w = llama.build(args.size, device, seq=max(seqs))
    w.compile(compiler_for("kfuse", True if args.dynamic else None))
    data = torch.randint(0, llama.SIZES[args.size]["vocab"], (1, max(seqs) + 1), device=device)
    rows = []
    for s in seqs:
        w.batches = lambda i, s=s: (data[:, :s], data[:, 1:s + 1])
        before = kt.stats()["definitions"]
        t0 = time.perf_counter()
        loss = float(w.step())
        sync(device)
        rows.append((s, kt.stats()["definitions"] - before, time.perf_counter() - t0, loss))
    print("\n| sequence | new kfuse definitions | step s (compile included) | loss |\n|---|---|---|---|")
    for s, d, t, loss in rows:
        print(f"| {s} | {d} | {t:.2f} | {loss:.4f} |")
    fb = kt.stats()["fallbacks"]
    if fb:
        print(f"\nkfuse fallbacks: {fb}")


def partition_table(args, device):
    """Per model, the kfuse partitions that cost the most: each one's
    arguments are captured in the first steps, then the partition is
    replayed alone (CUDA events around 20 calls: stream ms per call; host
    time per call without synchronizing), slowest first, with its
    segments' schedules and its kfuse text."""
    import kfuse.torch._backend as kb
    top = args.partitions
    for name in args.models.split(","):
        reset_dynamo()
        torch.manual_seed(0)
        w = WORKLOADS[name](args.size, device)
        w.compile(compiler_for("kfuse"))
        captured = {}
        forward = kb.KfusePartition.forward

        def capture(self, *a):
            if id(self) not in captured:
                captured[id(self)] = (self, [x.clone() if isinstance(x, torch.Tensor) else x for x in a])
            return forward(self, *a)

        kb.KfusePartition.forward = kb.KfusePartition.__call__ = capture
        try:
            for _ in range(2):
                w.step()
            sync(device)
        finally:
            kb.KfusePartition.forward = kb.KfusePartition.__call__ = forward
        rows = []
        for part, a in captured.values():
            for _ in range(2):
                forward(part, *a)
            sync(device)
            t0 = time.perf_counter()
            for _ in range(20):
                forward(part, *a)
            host = (time.perf_counter() - t0) / 20
            if device.type == "cuda":
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(20):
                    forward(part, *a)
                e1.record()
                sync(device)
                ms = e0.elapsed_time(e1) / 20
            else:
                sync(device)
                ms = host * 1e3
            rows.append((ms, host, part, a))
        rows.sort(key=lambda r: -r[0])
        # (a partition a step calls several times counts once here)
        print(f"\n### {name}: {len(rows)} kfuse partitions; one call of each, replayed alone: "
              f"{sum(r[0] for r in rows):.3f} ms of stream time, {sum(r[1] for r in rows) * 1e3:.3f} ms of host time")
        for ms, host, part, a in rows[:top]:
            shapes = ", ".join(f"{tuple(x.shape)} {str(x.dtype).replace('torch.', '')}"
                               + ("" if x.is_contiguous() else f" strides {tuple(x.stride())}")
                               if isinstance(x, torch.Tensor) else repr(x) for x in a)
            print(f"\n{part.name}: {ms * 1e3:.1f} us a call, host {host * 1e6:.1f} us "
                  f"({'C path' if part._run is not None else 'Python path'}); inputs {shapes}")
            try:
                for seg in part.plan.fusion.segments(*a):
                    print(f"    segment {seg.index}: {seg.scheduler}: {seg.schedule}")
            except Exception as e:  # noqa: BLE001  (the table stays useful without them)
                print(f"    (segments: {e})")
            print("    " + part.plan.text.strip().replace("\n", "\n    "))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, 3 steps (runs on a CPU)")
    p.add_argument("--models", default=",".join(WORKLOADS))
    p.add_argument("--backends", default="eager,inductor,inductor-max-autotune,kfuse")
    p.add_argument("--steps", type=int, default=50, help="timed steps (the losses of all of them are compared)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seq-check", action="store_true", help="also: Llama training at 3 sequence lengths")
    p.add_argument("--dynamic", action="store_true",
                   help="torch.compile(dynamic=True) for the compiled backends (and the --seq-check)")
    p.add_argument("--json", help="write the raw results here")
    p.add_argument("--partitions", type=int, default=0, metavar="K",
                   help="also: per model, the K kfuse partitions that cost the most, replayed alone, with their text")
    p.add_argument("--kernels", type=int, default=0, metavar="K",
                   help="also: per model and backend, one step's K costliest kernel names by GPU time")
    args = p.parse_args()
    args.size = "smoke" if args.smoke else "default"
    if args.smoke:
        args.steps, args.warmup = min(args.steps, 3), min(args.warmup, 1)
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, device {device}"
          + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
          + f", sizes {args.size}, {args.steps} timed steps after {args.warmup} warm-up")
    if "kfuse" in args.backends.split(",") or args.partitions > 0:
        import kfuse
        if not kfuse.extension_loaded():
            # (every partition call then takes the ctypes path: a decode
            # step was 15.8 ms instead of 4.4 on an H200, session 37)
            print(f"WARNING: kfuse's C extension is not loaded ({kfuse.extension_status()}): the kfuse rows "
                  "measure the ctypes call path. Build it (bindings/python, or the CMake build with Python's "
                  "headers) for figures a user would see.")
    results = []
    for name in args.models.split(","):
        for backend in args.backends.split(","):
            try:
                r = run_one(name, backend, args, device)
            except Exception as e:  # noqa: BLE001  (one failure must not hide the other rows)
                traceback.print_exc()
                r = {"model": name, "backend": backend, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            results.append(r)
            print(f"  {name} / {backend}: " + (r.get("error") or f"{r['step_ms']:.3f} ms, first {r['first_s']:.2f} s"),
                  flush=True)
    print()
    print(table(results))
    if "kfuse.torch" in sys.modules:
        st = sys.modules["kfuse.torch"].stats()
        print(f"\nkfuse.torch: {st['definitions']} definitions, {st['partitions']} partitions, "
              f"{st['graphs']} graphs, {len(st['fallbacks'])} fallbacks")
        for part, why in st["fallbacks"]:
            print(f"  fallback {part}: {why}")
    if args.kernels > 0:
        kernel_table(results, args.kernels)
    if args.seq_check:
        seq_check(args, device)
    if args.partitions > 0:
        partition_table(args, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in r.items()} for r in results],
                      f, indent=1)


if __name__ == "__main__":
    main()
