#!/usr/bin/env python3
"""One line per profiled kernel from Nsight Compute's CSV (`ncu --csv --page
details`, the sections gpu_session.sh ncu asks for): duration, DRAM and SM
throughput, registers, occupancy, grid and block, the kernel's name cut to
60 characters. A kernel launched several times under one name is one line
(the median duration, the count). Lines that are not CSV rows (the
profiled program's own output, ncu's ==PROF== lines) are skipped.

    python3 bench/ncu_summary.py OUT/ncu_177.csv [more.csv ...]

Standard library only (the GPU machine's python has no pandas guarantee).
"""
import argparse
import csv
import statistics
import sys

# (label, ncu metric name): what the table shows, in order
COLUMNS = (("us", "Duration"), ("DRAM %", "DRAM Throughput"), ("SM %", "Compute (SM) Throughput"),
           ("regs", "Registers Per Thread"), ("occ %", "Achieved Occupancy"), ("theor. %", "Theoretical Occupancy"),
           ("grid", "Grid Size"), ("block", "Block Size"), ("cycles/issue", "Warp Cycles Per Issued Instruction"))


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def kernels(path):
    """{kernel name: [{metric: value text} per launch]} in first-seen order."""
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(line for line in f if line.startswith('"')))
    if not rows:
        return {}
    head = rows[0]
    try:
        ki, ii, mi, vi, ui = (head.index(h) for h in ("Kernel Name", "ID", "Metric Name", "Metric Value", "Metric Unit"))
    except ValueError:
        return {}
    launches = {}
    for r in rows[1:]:
        if len(r) <= max(ki, ii, mi, vi, ui):
            continue
        value = r[vi]
        if r[mi] == "Duration" and r[ui] in ("msecond", "ms"):  # (ncu picks the unit per launch)
            value = str(number(value) * 1e3) if number(value) is not None else value
        elif r[mi] == "Duration" and r[ui] in ("nsecond", "ns"):
            value = str(number(value) / 1e3) if number(value) is not None else value
        launches.setdefault((r[ki], r[ii]), {})[r[mi]] = value
    out = {}
    for (name, _), metrics in launches.items():
        out.setdefault(name, []).append(metrics)
    return out


def summary(path):
    lines = [f"== {path}", "  " + " | ".join(["kernel", "launches"] + [c[0] for c in COLUMNS])]
    for name, runs in kernels(path).items():
        cells = [name[:60], str(len(runs))]
        for _, metric in COLUMNS:
            values = [number(m[metric]) for m in runs if metric in m and number(m[metric]) is not None]
            cells.append("-" if not values else f"{statistics.median(values):g}")
        lines.append("  " + " | ".join(cells))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", nargs="+")
    args = p.parse_args()
    for path in args.csv:
        print(summary(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
