#!/usr/bin/env python3
"""bench/suite_ab.py (gpu_session.sh suites): base/new per case from two
`kfuse bench --out` tables, their geomean, the cases outside 0.97-1.03, and
a case without a time on one side said so (stdlib only)."""
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SUITE_AB = HERE.parent.parent / "bench" / "suite_ab.py"

HEAD = ["GPU: made up", "", "| case | shape | dtype | scheduler | check | ms | GB/s | % SOL | MB moved |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]


def table(rows):
    return "\n".join(HEAD + [f"| {c} | 32768x8192 | bfloat16 | pointwise | ok | {ms} | 1 | 1 | 1 |" for c, ms in rows]) + "\n"


def main():
    with tempfile.TemporaryDirectory() as d:
        base, new = pathlib.Path(d) / "base.md", pathlib.Path(d) / "new.md"
        base.write_text(table([("same", "0.100"), ("faster", "0.200"), ("slower", "0.100"), ("lost", "0.050")]))
        new.write_text(table([("same", "0.101"), ("faster", "0.100"), ("slower", "0.125"), ("lost", "-")]))
        out = subprocess.run([sys.executable, str(SUITE_AB), "--name", "training", str(base), str(new)],
                             capture_output=True, text=True, check=True).stdout
        lines = out.splitlines()
        # geomean of 0.990, 2.0, 0.8 = 1.166
        assert lines[0] == "suite training: 3 cases, base/new geomean 1.166, min 0.80, max 2.00", lines[0]
        assert any("faster 32768x8192 bfloat16: base 0.200 new 0.100 ratio 2.00" in l for l in lines), out
        assert any("slower 32768x8192 bfloat16: base 0.100 new 0.125 ratio 0.80" in l for l in lines), out
        assert any("lost 32768x8192 bfloat16: base 0.050 new -" in l for l in lines), out
        assert not any(l.startswith("suite training same") for l in lines), out
        empty = pathlib.Path(d) / "empty.md"
        empty.write_text(table([]))
        none = subprocess.run([sys.executable, str(SUITE_AB), "--name", "suite", str(empty), str(new)],
                              capture_output=True, text=True)
        assert none.returncode == 1 and "no case timed in both" in none.stdout, none.stdout
    print("test_suite_ab: ok")


if __name__ == "__main__":
    main()
