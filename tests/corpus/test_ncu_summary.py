#!/usr/bin/env python3
"""bench/ncu_summary.py on a made-up Nsight Compute CSV: program output and
==PROF== lines skipped, launches of one kernel folded into one line (the
median), durations in any unit shown in microseconds (stdlib only)."""
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SUMMARY = HERE.parent.parent / "bench" / "ncu_summary.py"

HEAD = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",' \
       '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'


def row(launch, kernel, metric, unit, value):
    return f'"{launch}","1","python3","127.0.0.1","{kernel}","1","7","(256, 1, 1)","(99, 1, 1)","0","9.0",' \
           f'"Section","{metric}","{unit}","{value}"'


def main():
    lines = ["==PROF== Connected to process 1", "# a table the benchmark printed", HEAD]
    for launch, (dur, unit, dram) in enumerate([("600,000", "ns", "40.5"), ("0.5", "ms", "42.5"), ("700", "us", "41")]):
        lines += [row(launch, "kf_abc", "Duration", unit, dur), row(launch, "kf_abc", "DRAM Throughput", "%", dram),
                  row(launch, "kf_abc", "Registers Per Thread", "register/thread", "112"),
                  row(launch, "kf_abc", "Grid Size", "", "25,576")]
    lines += [row(3, "triton_poi_fused_x", "Duration", "us", "276.5"), "==PROF== Disconnected"]
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "ncu.csv"
        path.write_text("\n".join(lines) + "\n")
        out = subprocess.run([sys.executable, str(SUMMARY), str(path)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    assert out[0].startswith("== ") and "kernel | launches | us | DRAM %" in out[1], out
    assert out[2].strip() == "kf_abc | 3 | 600 | 41 | - | 112 | - | - | 25576 | - | -", out[2]
    assert out[3].strip().startswith("triton_poi_fused_x | 1 | 276.5 | -"), out[3]
    assert len(out) == 4, out
    print("test_ncu_summary: ok")


if __name__ == "__main__":
    main()
