#!/usr/bin/env python3
"""bench/corpus/plan_diff.py on any machine (plans for kDLCUDA tensors,
metadata only): one library against itself plans every fusion alike (an
empty list), and against itself under a KFUSE_TUNE_* knob's other value
(--env-a) lists exactly the fusions whose schedules that value changes,
each shown with its two segment lines; a malformed --env-a exits 2. The
knob: KFUSE_TUNE_ROW_THREAD_BYTES=0, the row kernels' width past aligned
float32 weights as before session 46 (4 lanes beside bfloat16 rows); and
--env-b KFUSE_RESHAPE_EXTENTS=1, reshape targets as extents
(core/concretize/extent_sets.h).

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        python3 tests/corpus/test_plan_diff_cpu.py
"""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "bench" / "corpus" / "plan_diff.py"
SEED, COUNT = "1176892685", "200"


def plan_diff(*extra):
    lib = os.environ["KFUSE_LIBRARY"]
    return subprocess.run([sys.executable, str(TOOL), "--lib-a", lib, "--lib-b", lib, "--seed", SEED,
                           "--count", COUNT, "--schedules-only", *extra], capture_output=True, text=True)


def main():
    same = plan_diff()
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[-1] == f"{SEED} ", same.stdout[-400:]

    # (both sides set explicitly: the test's own environment may hold either)
    knob = plan_diff("--env-a", "KFUSE_TUNE_ROW_THREAD_BYTES=0", "--env-b", "KFUSE_TUNE_ROW_THREAD_BYTES=64")
    assert knob.returncode == 0, knob.stderr
    lines = knob.stdout.splitlines()
    changed = lines[-1].split(" ", 1)[1].split(",")
    assert changed != [""], knob.stdout[-400:]
    # each changed fusion: its title, then its segments before (-) and after (+), which differ
    for n in changed:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"  c{int(n):04d}_"))
        before = [line[6:] for line in lines[at + 1:] if line.startswith("    - ")]
        after = [line[6:] for line in lines[at + 1:] if line.startswith("    + ")]
        assert before and after and before != after, lines[at:at + 5]
    # the rule the knob switches: rows of 16 bits beside a float32 weight widen from 4 lanes to 8
    assert any("vector=4 " in line for line in lines if line.startswith("    - ")), knob.stdout[-800:]
    assert any("vector=8 " in line for line in lines if line.startswith("    + ")), knob.stdout[-800:]

    # KFUSE_RESHAPE_EXTENTS=1 (the default since session 47): c0056, an
    # interleaved rope whose k result the caller lays out [0, 3, 2, 1],
    # gets one tiled kernel where it had two pointwise loops (q and k
    # reshaped back by constants of equal values: outputs of equal sizes)
    merged = plan_diff("--env-a", "KFUSE_RESHAPE_EXTENTS=0", "--env-b", "KFUSE_RESHAPE_EXTENTS=1")
    assert merged.returncode == 0, merged.stderr
    mlines = merged.stdout.splitlines()
    assert "56" in mlines[-1].split(" ", 1)[1].split(","), mlines[-1]
    at = next(i for i, line in enumerate(mlines) if line.startswith("  c0056_"))
    assert "loops=2" in mlines[at + 1] and "tiled" in mlines[at + 2], mlines[at:at + 3]

    bad = plan_diff("--env-a", "=0")
    assert bad.returncode == 2 and "NAME=VALUE" in bad.stderr, (bad.returncode, bad.stderr)
    print(f"plan_diff: seed {SEED}, {COUNT} fusions: none differ against itself; "
          f"under KFUSE_TUNE_ROW_THREAD_BYTES=0: {','.join(changed)}")


if __name__ == "__main__":
    main()
