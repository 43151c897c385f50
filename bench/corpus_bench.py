#!/usr/bin/env python3
"""kfuse against torch.compile on a generated corpus (bench/corpus/generate.py).

    python3 bench/corpus_bench.py --lib build/libkfuse.so --seed S --count N

For each fusion of the corpus drawn from --seed: its inputs are made on the
GPU in their layouts (bench/corpus/tensors.py), its torch reference is the
interpretation of its text (`kf_torch.parse(text)`, bench/kf_torch.py);
outputs are allocated as a caller would (contiguous, or in the entry's
permuted memory order; an in-place output is its input). kfuse runs through
`kf_execute_into` (ctypes, bench/kfuse_ctypes.py as bench_torch.py: the least host time per call)
on torch's current stream and is checked against the reference (before
kfuse writes anything, so in-place outputs compare the input after the
call with the reference of the original values) at bench_torch.py's
tolerance: float32 1e-4, float16 5e-3, bfloat16 2e-2 (float8 0.13, ints 1)
times max(1, max |reference|), ten times that for outputs smaller than the
largest input (reductions sum in another order). Then kfuse and
torch.compile of the reference function are timed: CUDA events around
each call, --warmup calls first, the median of --iters.

GB/s counts each input read once (stride-0 dims once) and each output
written once (an in-place output once, its input read once); % SOL is
against a device-to-device copy measured in the same run. The distribution
(geometric mean, P10, median, P90 of compile ms / kfuse ms, and of % SOL
over memory-bound fusions: those that move >= 64 MiB and whose bytes are
not dominated by a buffer they touch sparsely) ends the report, with the
10 fusions kfuse is slowest on relative to torch.compile, their texts and
schedulers. A fusion that fails (an exception, a mismatch) is a row with
its error; the run goes on.

Exit status: 0 when every fusion checked ok and was timed, 1 otherwise,
2 on usage errors. --device cpu (no GPU: kfuse's CPU backend, host
timers, eager torch instead of torch.compile when torch has none) only
exercises this script.
"""
import argparse
import json
import math
import os
import pathlib
import statistics
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))

import generate  # noqa: E402
import torch  # noqa: E402
import tensors  # noqa: E402

from kfuse_ctypes import FP8_CODES, Kfuse  # noqa: E402

MiB = 1 << 20


def scheduler_names(lib_path):
    """A function giving the schedulers of a fusion on these tensors, joined
    in run order (the Python package's segments(), as `kfuse explain`), or
    None when the package does not load."""
    try:
        os.environ.setdefault("KFUSE_LIBRARY", str(pathlib.Path(lib_path).resolve()))
        sys.path.insert(1, str(HERE.parent / "bindings" / "python"))
        import kfuse
    except Exception:  # noqa: BLE001: the column is optional
        return None

    def names(text, inputs):
        try:
            f = kfuse.Fusion.from_text(text)
            if any(t.dtype in FP8_CODES for t in inputs):  # shapes only: contiguous layouts
                segs = f.segments(*[tuple(t.shape) for t in inputs], cuda=inputs[0].is_cuda)
            else:
                segs = f.segments(*inputs)
            return "+".join(s.scheduler for s in sorted(segs, key=lambda s: s.run_order))
        except Exception as e:  # noqa: BLE001
            return f"? ({type(e).__name__})"
    return names


# ---------------------------------------------------------------------------
# Timing

class Timer:
    def __init__(self, device, iters, warmup):
        self.cuda, self.iters, self.warmup = device == "cuda", iters, warmup

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def median_ms(self, fn):
        for _ in range(self.warmup):
            fn()
        self.sync()
        if not self.cuda:
            times = []
            for _ in range(self.iters):
                t0 = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(times)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        for i in range(self.iters):
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))

    def copy_ceiling_gbs(self, device):
        n = (1 << 30) if self.cuda else (64 << 20)  # 1 GiB on the GPU, far above L2
        src = torch.empty(n, dtype=torch.uint8, device=device)
        dst = torch.empty_like(src)
        ms = self.median_ms(lambda: dst.copy_(src))
        del src, dst
        return 2 * n / (ms * 1e-3) / 1e9


# ---------------------------------------------------------------------------
# One fusion

def check_outputs(entry, got, expected):
    """(ok, worst error / tolerance, message) of kfuse's outputs against the reference's."""
    biggest = max((math.prod(i["shape"]) for i in entry["inputs"]), default=0)
    ok, worst, msgs = True, 0.0, []
    for k, (o, e) in enumerate(zip(got, expected)):
        if tuple(o.shape) != tuple(e.shape):
            return False, math.inf, f"output {k}: shape {list(o.shape)}, reference {list(e.shape)}"
        if o.dtype != e.dtype:
            msgs.append(f"output {k}: dtype {o.dtype}, reference {e.dtype}")
            ok = False
        factor = 10.0 if e.numel() < biggest else 1.0
        k_ok, err, tol = tensors.compare(o, e.to(o.dtype) if o.dtype != e.dtype else e, factor)
        worst = max(worst, err / tol if tol else (0.0 if k_ok else math.inf))
        if not k_ok:
            ok = False
            msgs.append(f"output {k}: max error {err:.3g} > {tol:.3g}")
    return ok, worst, "; ".join(msgs)


def cpu_check(tiny, args, kf):
    """The fusion's tiny twin (same text but for sizes, same layouts) on the
    device and on kfuse's CPU backend, same values: (ok, message)."""
    try:
        shapes = [o["shape"] for o in tiny["outputs"]]
        dtypes = [tensors.torch_dtype(o["dtype"]) for o in tiny["outputs"]]
        fusion = kf.fusion(tiny["text"])
        got = {}
        for device in ("cpu", args.device):
            ins = tensors.make_inputs(tiny, device, args.seed, value_device="cpu")
            outs = tensors.make_outputs(tiny, ins, shapes, dtypes, device)
            stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
            kf.bind(fusion, ins, outs, stream)()
            if device == "cuda":
                torch.cuda.synchronize()
            got[device] = [o.cpu() for o in outs]
        ok, _, msg = check_outputs(tiny, got[args.device], got["cpu"])
        return ok, msg
    except Exception as e:  # noqa: BLE001
        return False, f"ERROR: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]


def run_entry(entry, args, kf, timer, parse, schedulers, ceiling, tiny=None):
    row = {"name": entry["name"], "class": entry["class"], "text": entry["text"], "bytes": entry["bytes"],
           "memory_bound": entry["sol"] and entry["bytes"] >= 64 * MiB, "inputs": entry["inputs"],
           "outputs": entry["outputs"]}
    if tiny is not None:
        row["cpu_ok"], msg = cpu_check(tiny, args, kf)
        if msg:
            row["cpu_msg"] = msg
    stage = "inputs"
    try:
        device = args.device
        inputs = tensors.make_inputs(entry, device, args.seed)
        stage = "reference"
        program = parse(entry["text"])
        expected = program(*inputs)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(expected) != len(entry["outputs"]):
            raise RuntimeError(f"the reference gives {len(expected)} outputs, the entry has {len(entry['outputs'])}")
        timer.sync()
        stage = "kfuse"
        outputs = tensors.make_outputs(entry, inputs, [e.shape for e in expected], [e.dtype for e in expected],
                                       device)
        for o, spec in zip(outputs, entry["outputs"]):
            if spec["alias"] is None and o.is_floating_point():
                try:
                    o.fill_(math.nan)  # an element kfuse never writes fails the check
                except RuntimeError:  # a dtype without fill (float8 in some torch versions)
                    pass
        fusion = kf.fusion(entry["text"])
        stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else None
        run = kf.bind(fusion, inputs, outputs, stream)
        run()
        timer.sync()
        row["ok"], row["err"], msg = check_outputs(entry, outputs, expected)
        if msg:
            row["check_msg"] = msg
        if schedulers:
            row["scheduler"] = schedulers(entry["text"], inputs)
        row["kfuse_ms"] = timer.median_ms(run)
        del expected
        stage = "torch.compile"
        fn = lambda *xs: program(*xs)  # noqa: E731
        if hasattr(torch, "compile") and not args.no_compile:
            torch._dynamo.reset()  # a fresh compile: past the recompile limit dynamo silently runs eager
            t0 = time.perf_counter()
            compiled = torch.compile(fn, dynamic=False)
            compiled(*inputs)
            timer.sync()
            row["compile_s"] = time.perf_counter() - t0
            row["compile_what"] = "torch.compile"
        else:
            compiled = fn
            row["compile_what"] = "eager"
        row["compile_ms"] = timer.median_ms(lambda: compiled(*inputs))
        row["speedup"] = row["compile_ms"] / row["kfuse_ms"]
    except Exception as e:  # noqa: BLE001: a failing fusion is a row, never the end of the run
        row["error"] = f"{stage}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        if args.verbose:
            traceback.print_exc()
    if "kfuse_ms" in row:
        row["gbs"] = entry["bytes"] / (row["kfuse_ms"] * 1e-3) / 1e9
        row["sol"] = row["gbs"] / ceiling * 100
    return row


# ---------------------------------------------------------------------------
# Report

def layout_code(lay):
    k = lay["kind"]
    if k == "contiguous":
        return "c"
    if k == "permuted":
        return "p" + "".join(map(str, lay["order"]))
    if k == "padded":
        return f"pad{lay['pad']}"
    if k == "offset":
        return f"off{lay['offset']}"
    return "b" + "".join(map(str, lay["dims"]))


def describe(row):
    shapes = ", ".join("x".join(map(str, i["shape"])) or "()" for i in row["inputs"])
    dtypes = sorted({i["dtype"] for i in row["inputs"] if not isinstance(i["values"], dict) and i["values"] != "bool"})
    lays = " ".join(layout_code(i["layout"]) for i in row["inputs"]) + " -> " + " ".join(
        f"a{o['alias']}" if o["alias"] is not None else layout_code(o["layout"]) for o in row["outputs"])
    return shapes, "/".join(dtypes), lays


def check_text(row):
    """The check against the CPU backend (tiny twin), then against torch."""
    if "cpu_ok" not in row:
        cpu = "-"
    elif row["cpu_ok"]:
        cpu = "ok"
    else:
        msg = row.get("cpu_msg", "")
        cpu = msg if msg.startswith("ERROR") else "MISMATCH: " + msg
    if "error" in row:
        t = "ERROR: " + row["error"]
    elif row.get("ok"):
        t = "ok"
    else:
        t = "MISMATCH: " + row.get("check_msg", "")
    return f"{cpu} / {t}".replace("|", "/")


def passed(row):
    return bool(row.get("ok")) and "speedup" in row and row.get("cpu_ok", True)


def percentile(xs, p):
    xs = sorted(xs)
    if not xs:
        return math.nan
    k = (len(xs) - 1) * p / 100
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def report(rows, args, ceiling, device_name):
    what = rows[0].get("compile_what", "torch.compile") if rows else "torch.compile"
    lines = [f"# kfuse corpus: seed {args.seed} (grammar {args.grammar}), {len(rows)} fusions"
             + (f" of classes {args.classes}" if args.classes else ""), "",
             f"device: {device_name}; torch {torch.__version__}; copy ceiling {ceiling:.0f} GB/s "
             f"(device-to-device, read + write); {args.iters} iters after {args.warmup} warm-up, median",
             f"speedup = {what} ms / kfuse ms; layouts: c contiguous, pNNN permuted (memory order), padN padded "
             "rows, offN storage offset, bNN stride-0 dims, aK in place into input K; * = not memory-bound "
             "(moves < 64 MiB, or its bytes count a buffer it touches sparsely): left out of the % SOL figures",
             "check: the tiny twin (same text up to sizes, same layouts) against kfuse's CPU backend / the fusion "
             "against torch (kf_torch)",
             "", f"| fusion | class | shapes | dtype | layouts | scheduler | kfuse ms | {what} ms | speedup | GB/s "
                 "| % SOL | check |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        shapes, dtype, lays = describe(r)
        f = lambda key, fmt: (fmt % r[key]) if key in r else ""  # noqa: E731
        star = "" if r["memory_bound"] else "*"
        lines.append(f"| {r['name']}{star} | {r['class']} | {shapes} | {dtype} | {lays} | {r.get('scheduler', '')} "
                     f"| {f('kfuse_ms', '%.3f')} | {f('compile_ms', '%.3f')} | {f('speedup', '%.2f')} "
                     f"| {f('gbs', '%.0f')} | {f('sol', '%.1f')} | {check_text(r)} |")
    ok = [r for r in rows if r.get("ok") and "speedup" in r]
    sp = [r["speedup"] for r in ok]
    sol = [r["sol"] for r in ok if r["memory_bound"]]
    n_err = sum(1 for r in rows if "error" in r)
    n_bad = sum(1 for r in rows if "error" not in r and not r.get("ok"))
    n_cpu = sum(1 for r in rows if not r.get("cpu_ok", True))
    lines += ["", "## Distribution", "",
              f"{len(rows)} fusions: {len(rows) - n_err - n_bad} checked ok against torch, {n_bad} mismatches, "
              f"{n_err} errors; {n_cpu} failed the CPU-backend check (tiny twins); "
              f"{len(sp)} timed against {what} (ok only), {len(sol)} of them memory-bound", "",
              "| | geomean | P10 | median | P90 | n |", "| --- | --- | --- | --- | --- | --- |",
              f"| speedup ({what} / kfuse) | {geomean(sp):.3f} | {percentile(sp, 10):.3f} | {percentile(sp, 50):.3f} "
              f"| {percentile(sp, 90):.3f} | {len(sp)} |",
              f"| % SOL (memory-bound) | {geomean(sol):.1f} | {percentile(sol, 10):.1f} | {percentile(sol, 50):.1f} "
              f"| {percentile(sol, 90):.1f} | {len(sol)} |", "",
              f"below 0.9x: {sum(1 for x in sp if x < 0.9)}; below 0.7x: {sum(1 for x in sp if x < 0.7)}", "",
              "| class | n | geomean speedup | min | median % SOL |", "| --- | --- | --- | --- | --- |"]
    for cls in sorted({r["class"] for r in ok}):
        cs = [r for r in ok if r["class"] == cls]
        csol = [r["sol"] for r in cs if r["memory_bound"]]
        lines.append(f"| {cls} | {len(cs)} | {geomean([r['speedup'] for r in cs]):.3f} "
                     f"| {min(r['speedup'] for r in cs):.2f} | {percentile(csol, 50):.1f} |")
    worst = sorted((r for r in rows if "speedup" in r), key=lambda r: r["speedup"])[:10]
    lines += ["", "## The 10 worst by speedup", ""]
    for r in worst:
        shapes, dtype, lays = describe(r)
        lines += [f"### {r['name']} ({r['class']}): {r['speedup']:.2f}x, {r.get('sol', 0):.1f} % SOL, "
                  f"kfuse {r['kfuse_ms']:.3f} ms, {what} {r['compile_ms']:.3f} ms, {check_text(r)}", "",
                  f"shapes {shapes}; layouts {lays}; scheduler {r.get('scheduler', '?')}", "", "```",
                  r["text"].rstrip(), "```", ""]
    return "\n".join(lines)


def parse_input_layout(arg):
    """NAME=LAYOUT (--input-layout) as the name and the generator's layout dict."""
    name, sep, lay = arg.partition("=")
    kind, _, param = lay.partition(":")
    if not sep or not name:
        raise ValueError(f"expected NAME=LAYOUT, got {arg!r}")
    try:
        if kind == "contiguous" and not param:
            return name, {"kind": "contiguous"}
        if kind in ("offset", "padded"):
            return name, {"kind": kind, ("offset" if kind == "offset" else "pad"): int(param)}
        if kind == "permuted":
            return name, {"kind": "permuted", "order": [int(d) for d in param.split(",")]}
    except ValueError:
        pass
    raise ValueError(f"{arg!r}: expected contiguous, offset:K, padded:K or permuted:D,D,..")


def main():
    p = argparse.ArgumentParser(description="kfuse against torch.compile on a generated corpus")
    p.add_argument("--lib", default="build/libkfuse.so")
    p.add_argument("--seed", type=int, default=None, help="corpus seed (default: from the clock, printed)")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--start", type=int, default=0,
                   help="skip the corpus's first fusions (a sample is the same whatever the count: resume a run)")
    p.add_argument("--only", default="",
                   help="comma list of fusion numbers to run (c0126: 126; the sample of --count is drawn as usual)")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--classes", default="", help="comma list of classes (default: all)")
    p.add_argument("--grammar", type=int, default=generate.GRAMMAR,
                   help="the generator's grammar (default: the latest); an earlier one draws a seed as an earlier session did")
    p.add_argument("--out", default="", help="markdown report")
    p.add_argument("--json", default="", help="raw results")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--scale", default="full", choices=["full", "tiny"], help="tiny: for testing this script")
    p.add_argument("--reference", default="kf_torch", help="module with parse(text) (default: bench/kf_torch.py)")
    p.add_argument("--no-compile", action="store_true", help="time torch eager instead of torch.compile")
    p.add_argument("--no-cpu-check", action="store_true", help="skip the tiny twins on kfuse's CPU backend")
    p.add_argument("--time-budget", type=float, default=0,
                   help="seconds: start no new fusion after this (the report covers those run; 0: no limit)")
    p.add_argument("--input-layout", action="append", default=[], metavar="NAME=LAYOUT",
                   help="time the fusions with input NAME in another layout, to isolate what a layout costs: "
                        "contiguous, offset:K, padded:K or permuted:2,0,1 (repeatable; inputs of other names as drawn)")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    try:
        relayouts = dict(parse_input_layout(a) for a in args.input_layout)
    except ValueError as e:
        p.error(f"--input-layout: {e}")
    if args.seed is None:
        args.seed = int(time.time()) % 100000
    classes = [c for c in args.classes.split(",") if c]
    unknown = set(classes) - set(generate.CLASSES)
    if unknown:
        p.error(f"unknown classes {sorted(unknown)}; known: {', '.join(generate.CLASSES)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("corpus_bench.py: no GPU (torch.cuda.is_available() is False); --device cpu runs the CPU backend",
              file=sys.stderr)
        sys.exit(3)
    parse = __import__(args.reference).parse
    kf = Kfuse(args.lib)
    timer = Timer(args.device, args.iters, args.warmup)
    ceiling = timer.copy_ceiling_gbs(args.device)
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    schedulers = scheduler_names(args.lib)
    corpus = generate.generate(args.seed, args.count, args.scale, classes or None, args.grammar)[args.start:]
    twins = [None] * len(corpus) if args.no_cpu_check else generate.generate(args.seed, args.count, "tiny",
                                                                                classes or None, args.grammar)[args.start:]
    if args.only:
        try:
            keep = {int(n) for n in args.only.split(",")}
        except ValueError:
            p.error(f"--only: expected comma-separated fusion numbers, got {args.only!r}")
        if max(keep) >= args.count:
            p.error(f"--only: fusion {max(keep)} is outside the sample of --count {args.count}")
        number = lambda e: int(e["name"][1:5])  # noqa: E731: "c0126_..." is fusion 126
        twins = [t for e, t in zip(corpus, twins) if number(e) in keep]
        corpus = [e for e in corpus if number(e) in keep]
    for entry in corpus:
        for spec in entry["inputs"]:
            if spec["name"] in relayouts:
                spec["layout"] = relayouts[spec["name"]]
    print(f"corpus_bench.py: seed {args.seed}, {len(corpus)} fusions, copy ceiling {ceiling:.0f} GB/s",
          file=sys.stderr, flush=True)
    rows = []
    started = time.perf_counter()
    for entry, tiny in zip(corpus, twins):
        if args.time_budget and time.perf_counter() - started > args.time_budget:
            print(f"corpus_bench.py: time budget of {args.time_budget:.0f} s spent: {len(rows)} of {len(corpus)} "
                  "fusions run", file=sys.stderr, flush=True)
            break
        rows.append(run_entry(entry, args, kf, timer, parse, schedulers, ceiling, tiny))
        r = rows[-1]
        print(f"  {r['name']}: {check_text(r)}" + (f", kfuse {r['kfuse_ms']:.3f} ms" if "kfuse_ms" in r else "")
              + (f", speedup {r['speedup']:.2f}" if "speedup" in r else "")
              + (f", compile {r['compile_s']:.1f} s" if "compile_s" in r else ""), file=sys.stderr, flush=True)
        if args.device == "cuda":
            torch.cuda.empty_cache()
    text = report(rows, args, ceiling, device_name)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(text + "\n")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({
            "seed": args.seed, "grammar": args.grammar, "count": args.count, "classes": classes, "scale": args.scale,
            "device": device_name,
            "torch": torch.__version__, "ceiling_gbs": ceiling, "iters": args.iters, "warmup": args.warmup,
            "rows": rows}, indent=1) + "\n")
    sys.exit(0 if all(passed(r) for r in rows) else 1)


if __name__ == "__main__":
    main()
