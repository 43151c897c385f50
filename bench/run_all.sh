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
set -u
HERE=$(dirname "$0")
BUILD=${BUILD:-build}
OUT=${OUT:-bench-results}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"

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
