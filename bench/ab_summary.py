#!/usr/bin/env python3
"""One line per corpus fusion from gpu_session.sh ab's rounds: corpus_bench.py
JSON files PREFIX_1.json .. PREFIX_R.json for the base library and for this
build, each round timing base then new. Prints the median time of each side
over the rounds, their ratio, the range of the per-round ratios (one round
of a plan under ~60 us says little: it lands in one of two times per
process, docs/perf-log.md session 43) and whether every round checked ok.

    python3 bench/ab_summary.py --seed S --base /tmp/kfuse-ab/ab_S_base.so \\
        --new /tmp/kfuse-ab/ab_S_libkfuse.so --rounds 3
"""
import argparse
import json
import statistics


def rounds(prefix, count):
    """Per fusion name: its rows of the rounds that have a result file."""
    out = {}
    for r in range(1, count + 1):
        try:
            with open(f"{prefix}_{r}.json") as f:
                rows = json.load(f)["rows"]
        except (OSError, ValueError, KeyError):
            continue
        for row in rows:
            out.setdefault(row["name"], []).append(row)
    return out


def lines(seed, base, new):
    """The summary lines: base and new map a fusion name to its rows, one per round."""
    text = []
    for name, new_rows in new.items():
        base_rows = base.get(name, [])
        b = [r["kfuse_ms"] for r in base_rows if r.get("kfuse_ms")]
        n = [r["kfuse_ms"] for r in new_rows if r.get("kfuse_ms")]
        if not b or not n:
            text.append(f"ab {seed} {name[:40]:40} no time (base {len(b)} rounds, new {len(n)})")
            continue
        mb, mn = statistics.median(b), statistics.median(n)
        ratios = [x / y for x, y in zip(b, n)]
        ok = all(r.get("ok") for r in new_rows)
        spread = f" rounds {len(ratios)} range {min(ratios):.2f}-{max(ratios):.2f}" if len(ratios) > 1 else ""
        text.append(f"ab {seed} {name[:40]:40} base {mb:.4f} new {mn:.4f} ratio {mb / mn:.2f}{spread} ok {ok}")
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", required=True)
    ap.add_argument("--base", required=True, help="the base library's JSON prefix (without _R.json)")
    ap.add_argument("--new", required=True, help="this build's JSON prefix")
    ap.add_argument("--rounds", type=int, default=1)
    a = ap.parse_args()
    out = lines(a.seed, rounds(a.base, a.rounds), rounds(a.new, a.rounds))
    print("\n".join(out) if out else f"ab {a.seed}: no result")


if __name__ == "__main__":
    main()
