#!/usr/bin/env python3
"""Where each profiled kernel's warps wait: from Nsight Compute's raw CSV
(`ncu --section WarpStateStats --section SpeedOfLight --page raw --csv`, the
`stalls` step of gpu_session.sh), one line per launch with its duration, DRAM
throughput, and the largest stall reasons in warp cycles per issued
instruction (smsp__average_warps_issue_stalled_<reason>_per_issue_active).

    python3 bench/ncu_stalls.py OUT/stalls_177.csv [--top 6]

Standard library only.
"""
import argparse
import csv

PREFIX = "smsp__average_warps_issue_stalled_"
SUFFIX = "_per_issue_active.ratio"


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--top", type=int, default=6)
    a = ap.parse_args()
    for path in a.csv:
        with open(path, newline="", errors="replace") as f:
            rows = list(csv.reader(line for line in f if line.startswith('"')))
        if len(rows) < 2:
            print(f"== {path}: no kernels")
            continue
        head = rows[0]
        col = {h: i for i, h in enumerate(head)}
        print(f"== {path}")
        for r in rows[1:]:
            if len(r) != len(head) or not r[col.get("Kernel Name", 0)] or number(r[col.get("ID", 0)]) is None:
                continue  # (the units row)
            name = r[col["Kernel Name"]][:60]
            dur = r[col["gpu__time_duration.sum"]] if "gpu__time_duration.sum" in col else "?"
            dram = r[col["dram__throughput.avg.pct_of_peak_sustained_elapsed"]] if "dram__throughput.avg.pct_of_peak_sustained_elapsed" in col else "?"
            stalls = []
            for h, i in col.items():
                if h.startswith(PREFIX) and h.endswith(SUFFIX) and "_not_issued" not in h:
                    v = number(r[i])
                    if v is not None and v > 0:
                        stalls.append((v, h[len(PREFIX):-len(SUFFIX)]))
            stalls.sort(reverse=True)
            total = sum(v for v, _ in stalls)
            top = ", ".join(f"{n} {v:.1f}" for v, n in stalls[: a.top])
            print(f"  {name}: {dur} ns, DRAM {dram}%, stalls {total:.1f} cycles/issue: {top}")


if __name__ == "__main__":
    main()
