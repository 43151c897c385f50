#!/usr/bin/env python3
"""Per-case ratio of two `kfuse bench --out` tables of the same suite (base
then new, e.g. a KFUSE_TUNE_* knob at its old value against the build's
default): base ms / new ms per case, their geometric mean and the cases
outside 0.97-1.03. Used by `bench/gpu_session.sh suites`."""
import argparse
import math
import sys

from kfuse_cases import read_kfuse_table


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--name", required=True, help="the suite's name, printed on each line")
    p.add_argument("base")
    p.add_argument("new")
    a = p.parse_args()
    base, new = read_kfuse_table(a.base)[1], read_kfuse_table(a.new)[1]
    ratios, lines = [], []
    for key, b in base.items():
        n = new.get(key)
        try:
            r = float(b["ms"]) / float(n["ms"])
        except (TypeError, ValueError, KeyError):
            lines.append(f"suite {a.name} {' '.join(key)}: base {b.get('ms')} new {n.get('ms') if n else 'missing'}")
            continue
        ratios.append(r)
        if not 0.97 <= r <= 1.03:
            lines.append(f"suite {a.name} {' '.join(key)}: base {b['ms']} new {n['ms']} ratio {r:.2f} "
                         f"check {b.get('check')} / {n.get('check')}")
    if ratios:
        g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"suite {a.name}: {len(ratios)} cases, base/new geomean {g:.3f}, min {min(ratios):.2f}, max {max(ratios):.2f}")
    else:
        print(f"suite {a.name}: no case timed in both tables")
    print("\n".join(lines))
    return 0 if ratios else 1


if __name__ == "__main__":
    sys.exit(main())
