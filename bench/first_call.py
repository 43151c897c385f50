"""First call of each benchmark case on the GPU: from the fusion's text to
its first result, with an empty kernel cache, as a framework sees it (the
CUDA context and the inputs already exist; issue 13's target is <= 300 ms).

  KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \
    python3 bench/first_call.py [--suite training] [--cases a,b] [--rows M] [--cols N]

Each case runs in a process of its own with KFUSE_CACHE_DIR and
CUDA_CACHE_PATH empty folders, so nothing is cached on disk or in memory:
NVRTC 12.9 and later keep their own cache of compiled programs in the
CUDA driver's compute cache (~/.nv/ComputeCache), and a program compiled
once before on the machine then compiles about ten times faster, which
would flatter every run after the first. Per case:
- cold: `Fusion.from_text` to `torch.cuda.synchronize()` after the first
  call, as the process's first fusion (this includes loading NVRTC and its
  first compile's set-up, which a process pays once);
- warm: the same for the case after another fusion (a one-op fusion) has
  been compiled and run in the process: the case's own cost;
- cached: the second call of the case (host and kernel time).
"""
import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARMUP_TEXT = "input x: tensor<float32, 1>\ny = neg(x)\noutput y\n"


def thread_cpu():
    """CPU seconds of each of this process's threads (Linux /proc), by thread id."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        out[tid] = (comm, (int(fields[11]) + int(fields[12])) / tick)
    return out


def busy_threads(before, after):
    """Threads other than the caller's that used CPU between two snapshots, busiest first."""
    me = str(threading.get_native_id())
    busy = []
    for tid, (comm, cpu) in after.items():
        used = cpu - before.get(tid, (comm, 0.0))[1]
        if tid != me and used > 0:
            busy.append(f"{comm}:{used * 1e3:.0f}ms")
    return sorted(busy, key=lambda b: -float(b.split(":")[-1][:-2]))


def calibration_ms():
    """A fixed piece of CPU work (hashing 64 MB), timed: a row whose figure is far
    above the others' ran on a throttled CPU (a virtual machine's host quota after
    a build, for one), and its first-call time says more about the machine."""
    data = b"k" * (64 << 20)
    t0 = time.perf_counter()
    hashlib.sha256(data).digest()
    return (time.perf_counter() - t0) * 1e3


def one_case(name, suite_name, m, n, warm, pause):
    import torch

    import kfuse
    from bench_torch import make_inputs
    from kfuse_cases import case_text

    inputs = make_inputs(name, m, n, torch.bfloat16)
    if warm:
        w = kfuse.Fusion.from_text(WARMUP_TEXT)
        w(torch.ones(8, device="cuda"))
    torch.cuda.synchronize()
    time.sleep(pause)
    calibration = calibration_ms()
    threads_before = thread_cpu()
    t0 = time.perf_counter()
    f = kfuse.Fusion.from_text(case_text(name, "bfloat16"))
    f(*inputs)
    torch.cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    others = busy_threads(threads_before, thread_cpu())
    t0 = time.perf_counter()
    f(*inputs)
    torch.cuda.synchronize()
    second = (time.perf_counter() - t0) * 1e3
    return {"first_ms": first, "second_ms": second, "calibration_ms": calibration, "other_threads_cpu": others}


def run_child(name, suite_name, m, n, warm):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, KFUSE_CACHE_DIR=cache, CUDA_CACHE_PATH=os.path.join(cache, "nv"))
        cmd = [sys.executable, __file__, "--child", name, "--suite", suite_name, "--rows", str(m), "--cols", str(n)]
        if warm:
            cmd.append("--warm")
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            return {"error": (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]}
        return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", default="training")
    p.add_argument("--cases", default="")
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--cols", type=int, default=4096)
    p.add_argument("--child", default="")
    p.add_argument("--warm", action="store_true")
    p.add_argument("--pause", type=float, default=0.0,
                   help="with --child: seconds to wait before the timed call (tells process set-up apart)")
    a = p.parse_args()
    sys.path.insert(0, str(HERE))
    if a.child:
        print(json.dumps(one_case(a.child, a.suite, a.rows, a.cols, a.warm, a.pause)))
        return
    from kfuse_cases import suite

    names = a.cases.split(",") if a.cases else suite(name=a.suite)
    print(f"| case ({a.rows}x{a.cols}, bfloat16, empty cache) | cold ms | warm ms | cached call ms | CPU calibration ms (cold / warm) |")
    print("| --- | --- | --- | --- | --- |")
    colds, warms = [], []  # (ms, case)
    for name in names:
        cold = run_child(name, a.suite, a.rows, a.cols, False)
        warm = run_child(name, a.suite, a.rows, a.cols, True)
        if "error" in cold or "error" in warm:
            print(f"| {name} | {cold.get('error', '')} | {warm.get('error', '')} | | |")
            continue
        colds.append((cold["first_ms"], name))
        warms.append((warm["first_ms"], name))
        print(f"| {name} | {cold['first_ms']:.0f} | {warm['first_ms']:.0f} | {warm['second_ms']:.2f} "
              f"| {cold['calibration_ms']:.0f} / {warm['calibration_ms']:.0f} |")
    if warms:
        worst = max(warms)
        over = [name for ms, name in colds if ms > 300]
        print(f"\n{len(over)} of {len(colds)} cases over issue 13's 300 ms as a process's first fusion: {', '.join(over) or 'none'}")
        print(f"\nmedian cold {statistics.median(c for c, _ in colds):.0f} ms, "
              f"warm {statistics.median(w for w, _ in warms):.0f} ms; slowest warm {worst[0]:.0f} ms ({worst[1]}), "
              f"slowest cold {max(colds)[0]:.0f} ms ({max(colds)[1]})")


if __name__ == "__main__":
    main()
