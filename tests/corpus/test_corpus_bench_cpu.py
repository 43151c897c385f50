#!/usr/bin/env python3
"""bench/corpus_bench.py's logic on the CPU: a tiny corpus through the
harness with --device cpu against the real reference, bench/kf_torch.py
(torch eager of the same text, timed as the harness times torch.compile:
this torch 1.13 has none). Every fusion must be
checked ok and timed, except those that this torch cannot make (float8 in
torch 1.13); the report must carry the table, the distribution and the
worst fusions; the raw results must be complete. --input-layout runs a
fusion with its weight in another layout, and refuses a malformed one.
Exits 77 without torch.

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 tests/corpus/test_corpus_bench_cpu.py
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]

try:
    import torch  # noqa: F401
except ImportError:
    print("test_corpus_bench_cpu: skipped: no torch for this Python", sys.executable)
    sys.exit(77)


def input_layout_problems(lib, env, d):
    """--input-layout: the first fusion of the sample with a `weight` input,
    run with that weight at an offset of 3 elements, records the layout and
    checks ok; a malformed layout is a usage error (status 2)."""
    sys.path.insert(0, str(ROOT / "bench" / "corpus"))
    import generate  # noqa: E402
    corpus = generate.generate(7, 60, "tiny")
    n = next(int(e["name"][1:5]) for e in corpus if any(i["name"] == "weight" for i in e["inputs"]))
    js = pathlib.Path(d) / "layout.json"
    base = [sys.executable, str(ROOT / "bench" / "corpus_bench.py"), "--lib", lib, "--device", "cpu", "--scale", "tiny",
            "--seed", "7", "--count", "60", "--iters", "1", "--warmup", "0", "--only", str(n)]
    p = subprocess.run(base + ["--input-layout", "weight=offset:3", "--json", str(js)], env=env, capture_output=True,
                       text=True, timeout=300)
    if p.returncode != 0:
        return [f"--input-layout weight=offset:3 on c{n:04d}: exit status {p.returncode}:\n{p.stderr[-2000:]}"]
    row = json.loads(js.read_text())["rows"][0]
    weight = next(i for i in row["inputs"] if i["name"] == "weight")
    problems = []
    if weight["layout"] != {"kind": "offset", "offset": 3}:
        problems.append(f"--input-layout: c{n:04d}'s weight ran as {weight['layout']}")
    if not row.get("ok"):
        problems.append(f"--input-layout: c{n:04d} with its weight at offset 3: {row.get('check_msg') or row.get('error')}")
    bad = subprocess.run(base + ["--input-layout", "weight=diagonal"], env=env, capture_output=True, text=True,
                         timeout=300)
    if bad.returncode != 2 or "--input-layout" not in bad.stderr:
        problems.append(f"--input-layout weight=diagonal: exit status {bad.returncode}, expected 2 with a message")
    return problems


def main():
    lib = os.environ.get("KFUSE_LIBRARY", str(ROOT / "build" / "libkfuse.so"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "bindings" / "python"),
                                                       os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as d:
        md, js = pathlib.Path(d) / "corpus.md", pathlib.Path(d) / "corpus.json"
        cmd = [sys.executable, str(ROOT / "bench" / "corpus_bench.py"), "--lib", lib, "--device", "cpu",
               "--scale", "tiny", "--seed", "7", "--count", "60", "--iters", "3", "--warmup", "1",
               "--out", str(md), "--json", str(js)]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        problems = []
        if p.returncode not in (0, 1):
            problems.append(f"exit status {p.returncode}:\n{p.stderr[-3000:]}")
        else:
            res = json.loads(js.read_text())
            rows = res["rows"]
            if len(rows) != 60:
                problems.append(f"{len(rows)} rows, expected 60")
            for r in rows:
                fp8 = any(x["dtype"].startswith("float8") for x in r["inputs"] + r["outputs"])
                no_fp8 = fp8 and not hasattr(torch, "float8_e4m3fn")
                if not (r.get("ok") and "speedup" in r and "kfuse_ms" in r and "sol" in r) and not (
                        no_fp8 and "error" in r):
                    problems.append(f"{r['name']}: {r.get('error') or r.get('check_msg') or 'not timed'}")
                if not r.get("cpu_ok") and not no_fp8:
                    problems.append(f"{r['name']}: CPU-backend check: {r.get('cpu_msg')}")
            text = md.read_text()
            for part in ("| fusion | class | shapes |", "## Distribution", "| speedup (", "| % SOL (memory-bound) |",
                         "below 0.9x:", "## The 10 worst by speedup", "```"):
                if part not in text:
                    problems.append(f"report lacks {part!r}")
            if p.returncode != (0 if all(r.get("ok") and r.get("cpu_ok") for r in rows) else 1):
                problems.append(f"exit status {p.returncode} does not match the rows")
        problems += input_layout_problems(lib, env, d)
    for msg in problems:
        print("FAIL:", msg)
    print(f"test_corpus_bench_cpu: {'ok' if not problems else f'{len(problems)} problems'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
