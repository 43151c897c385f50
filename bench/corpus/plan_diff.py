#!/usr/bin/env python3
"""Which corpus fusions two builds of kfuse plan differently, on any machine:
runs plan.py (with --cuda: schedules and generated CUDA) under each
library and compares fusion by fusion. Prints, per seed, the fusions
whose plans differ with both builds' segment lines, then one line
`seed n,n,...` ready for corpus_bench.py's --only: the fusions to time on
the GPU before and after a change (docs/perf-log.md, sessions 32-33).

    PYTHONPATH=bindings/python python3 bench/corpus/plan_diff.py \\
        --lib-a ../main/build/libkfuse.so --lib-b build/libkfuse.so --seed 533314145 1177032527

--env-a / --env-b NAME=VALUE set variables for one side alone: the same
library under two values of a KFUSE_TUNE_* knob (core/schedule/tuning.h).
"""
import argparse
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
RULE = "=" * 100


def plans(lib, seed, count, cuda, pythonpath=None, extra_env=()):
    """plan.py's text for fusions 0..count-1 under `lib`, one string per fusion
    (with the kfuse package of `pythonpath` when given, and the NAME=VALUE
    variables of `extra_env`)."""
    env = dict(os.environ, KFUSE_LIBRARY=str(pathlib.Path(lib).resolve()))
    env.update(kv.split("=", 1) for kv in extra_env)
    if pythonpath:
        env["PYTHONPATH"] = str(pathlib.Path(pythonpath).resolve())
    cmd = [sys.executable, str(HERE / "plan.py"), "--seed", str(seed)] + [str(n) for n in range(count)]
    if cuda:
        cmd.append("--cuda")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"plan_diff.py: plan.py failed under {lib} (seed {seed}):\n{r.stderr[-2000:]}")
    parts = r.stdout.split(RULE)[1:]  # (the text before the first rule is empty)
    if len(parts) != count:
        sys.exit(f"plan_diff.py: expected {count} plans under {lib} (seed {seed}), got {len(parts)}")
    return parts


def segment_lines(plan):
    return [line for line in plan.splitlines() if line.startswith("  segment ")]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lib-a", required=True, help="the build before (libkfuse.so)")
    p.add_argument("--lib-b", required=True, help="the build after")
    p.add_argument("--pythonpath-a", help="the kfuse Python package matching --lib-a, where the C API "
                   "changed between the two (e.g. bindings/python of a git worktree at the old commit)")
    p.add_argument("--env-a", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for --lib-a's plans alone (repeatable)")
    p.add_argument("--env-b", action="append", default=[], metavar="NAME=VALUE",
                   help="the same for --lib-b's")
    p.add_argument("--seed", type=int, nargs="+", required=True)
    p.add_argument("--count", type=int, default=200, help="fusions per seed (corpus_bench.py's --count)")
    p.add_argument("--schedules-only", action="store_true",
                   help="compare schedules alone, not the generated CUDA")
    args = p.parse_args()
    if args.count < 1:
        p.error(f"--count: expected at least 1, got {args.count}")
    for kv in args.env_a + args.env_b:
        if "=" not in kv or kv.startswith("="):
            p.error(f"--env-a/--env-b: expected NAME=VALUE, got {kv!r}")
    summary = []
    for seed in args.seed:
        a = plans(args.lib_a, seed, args.count, not args.schedules_only, args.pythonpath_a, args.env_a)
        b = plans(args.lib_b, seed, args.count, not args.schedules_only, None, args.env_b)
        changed = [n for n in range(args.count) if a[n] != b[n]]
        print(f"seed {seed}: {len(changed)} of {args.count} plans differ")
        for n in changed:
            title = next((line for line in b[n].splitlines() if line.startswith("# c")), f"# c{n:04d}")
            print(" ", title[2:110])
            for line in segment_lines(a[n]):
                print("    -", line.strip()[:220])
            for line in segment_lines(b[n]):
                print("    +", line.strip()[:220])
        summary.append(f"{seed} {','.join(str(n) for n in changed)}")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
