#!/usr/bin/env python3
"""bench/ab_summary.py (gpu_session.sh ab's rounds): medians over the rounds,
the range of the round ratios, ok only when every round checked ok, and a
plan without a time on one side said so (stdlib only)."""
import json
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SUMMARY = HERE.parent.parent / "bench" / "ab_summary.py"


def main():
    with tempfile.TemporaryDirectory() as d:
        times = {"base": [(0.020, 1.0), (0.030, 1.0), (0.020, 1.1)], "new": [(0.030, 0.5), (0.020, 0.5), (0.020, 0.55)]}
        for side, rounds in times.items():
            for r, (small, big) in enumerate(rounds, 1):
                rows = [{"name": "c0001_small", "kfuse_ms": small, "ok": True},
                        {"name": "c0002_big", "kfuse_ms": big, "ok": not (side == "new" and r == 2)}]
                if side == "base":
                    rows.append({"name": "c0003_only_new", "kfuse_ms": None, "ok": False})
                else:
                    rows.append({"name": "c0003_only_new", "kfuse_ms": 0.1, "ok": True})
                (pathlib.Path(d) / f"ab_{side}_{r}.json").write_text(json.dumps({"rows": rows}))
        out = subprocess.run([sys.executable, str(SUMMARY), "--seed", "7", "--base", f"{d}/ab_base", "--new", f"{d}/ab_new",
                              "--rounds", "3"], capture_output=True, text=True, check=True).stdout.splitlines()
        small, big, only = out
        assert "base 0.0200 new 0.0200 ratio 1.00 rounds 3 range 0.67-1.50 ok True" in small, small
        assert "base 1.0000 new 0.5000 ratio 2.00 rounds 3 range 2.00-2.00 ok False" in big, big
        assert "no time (base 0 rounds, new 3)" in only, only
        one = subprocess.run([sys.executable, str(SUMMARY), "--seed", "7", "--base", f"{d}/ab_base", "--new", f"{d}/ab_new"],
                             capture_output=True, text=True, check=True).stdout
        assert "ratio 0.67 ok True" in one and "range" not in one, one
    print("test_ab_summary: ok")


if __name__ == "__main__":
    main()
