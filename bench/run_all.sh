#!/bin/sh
# One command for the GPU machine: `kfuse bench` (the C++ driver, timing
# through the C API) and bench_torch.py (torch eager and torch.compile, and
# kfuse again through ctypes) on the same cases, shapes and dtypes, then one
# markdown table of both.
#
#   bench/run_all.sh [--cases a,b] [--rows M] [--cols N] [--dtype D] [--iters K]
#
# Those options go to both programs. Environment: BUILD (the build folder,
# default build), OUT (default bench-results), PYTHON (default python3).
# Writes $OUT/kfuse_bench.md, $OUT/torch.md and $OUT/combined.md.
#
#   bench/run_all.sh --suite corpus [--seed S] [--count N] [--iters K] [--warmup W] [--classes a,b] [--time-budget SECONDS] [--grammar G]
#
# runs the generated corpus instead (bench/corpus/generate.py, a new seed
# each measurement; without --seed one is drawn from the clock and printed):
# corpus_bench.py checks each fusion against torch and times kfuse against
# torch.compile and the copy ceiling, and writes $OUT/corpus.md (table,
# distribution, the 10 worst) and $OUT/corpus.json (raw results).
set -u
HERE=$(dirname "$0")
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"

suite=
prev=
for arg in "$@"; do
  [ "$prev" = "--suite" ] && suite=$arg
  case $arg in --suite=*) suite=${arg#--suite=} ;; esac
  prev=$arg
done
if [ "$suite" = "corpus" ]; then
  # Only the options corpus_bench.py knows; --suite corpus itself is dropped.
  set -- "$@" --end-of-options
  while [ "$1" != "--end-of-options" ]; do
    case $1 in
      --suite) shift 2; continue ;;
      --suite=*) shift; continue ;;
      --seed|--count|--start|--iters|--warmup|--classes|--time-budget|--grammar)
        [ $# -ge 3 ] || { echo "run_all.sh: $1 needs a value" >&2; exit 2; }
        set -- "$@" "$1" "$2"; shift 2; continue ;;
      --seed=*|--count=*|--start=*|--iters=*|--warmup=*|--classes=*|--time-budget=*|--grammar=*) set -- "$@" "$1"; shift; continue ;;
      *) echo "run_all.sh: --suite corpus takes --seed, --count, --start, --iters, --warmup, --classes, --time-budget, --grammar; not '$1'" >&2
         exit 2 ;;
    esac
  done
  shift
  "$PYTHON" "$HERE/corpus_bench.py" --lib "$BUILD/libkfuse.so" "$@" --out "$OUT/corpus.md" --json "$OUT/corpus.json"
  status=$?
  echo
  echo "run_all.sh: wrote $OUT/corpus.md and $OUT/corpus.json (corpus_bench.py status $status)"
  exit "$status"
fi

"$BUILD/tools/kfuse" bench "$@" --out "$OUT/kfuse_bench.md"
kfuse_status=$?
# 2: usage or case-file error, 3: no GPU. 1 (a mismatch or a failed case)
# still gives a table worth comparing.
if [ "$kfuse_status" -ge 2 ]; then
  echo "run_all.sh: kfuse bench exited with status $kfuse_status" >&2
  exit "$kfuse_status"
fi
echo
"$PYTHON" "$HERE/bench_torch.py" --lib "$BUILD/libkfuse.so" "$@" --out "$OUT/torch.md" \
  --kfuse-table "$OUT/kfuse_bench.md" --combined "$OUT/combined.md"
torch_status=$?
echo
echo "run_all.sh: wrote $OUT/combined.md (kfuse bench status $kfuse_status, bench_torch.py status $torch_status)"
[ "$kfuse_status" -eq 0 ] && [ "$torch_status" -eq 0 ]
