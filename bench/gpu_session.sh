#!/bin/bash
# A session's routine on the GPU machine (the device tool: a bare host with
# the CUDA toolkit and torch 2.11, without cmocka or DLPack headers), so that
# each device call is one short command and writes its logs under $OUT:
#
#   bench/gpu_session.sh build                  configure and build (bindings off) and the Python C
#                                               extension (kfuse._fastcall), which that build skips
#   bench/gpu_session.sh tests [SECONDS]        the gpu-labelled test programs, then the differential
#                                               suite group by group, each under SECONDS (default 180:
#                                               test_norm_backward takes 114-134 s on an H200)
#   bench/gpu_session.sh corpus SEED [COUNT]    corpus_bench.py against torch.compile ($BUDGET seconds)
#   bench/gpu_session.sh models [LIST]          model_bench.py, kfuse and inductor, with --partitions 6
#   bench/gpu_session.sh ab BASE_LIB SEED:N,N [SEED:N,N ...]
#                                               the listed corpus fusions under BASE_LIB and this build
#                                               (plan_diff.py's last lines, SEED N,N, give the lists);
#                                               BASE_LIB env:NAME=VALUE: this build under that variable
#                                               (a KFUSE_TUNE_* knob's old value; plan_diff.py --env-a)
#   bench/gpu_session.sh stalls SEED N,N        ncu's warp stall reasons (WarpStateStats, raw page) of each listed
#                                               fusion's kfuse and triton kernels, by bench/ncu_stalls.py
#   bench/gpu_session.sh suites BASE            the headline and training suites (`kfuse bench --suite
#                                               suite|training`, the C++ driver) under BASE, then this
#                                               build; BASE env:NAME=VALUE[,NAME=VALUE...]: this build
#                                               under those variables (knobs at their old values);
#                                               bench/suite_ab.py prints each suite's base/new geomean
#                                               and the cases outside 0.97-1.03
#   bench/gpu_session.sh ncu SEED N,N           Nsight Compute on each listed fusion's kfuse kernels and
#                                               torch.compile's triton kernels (one process each; the
#                                               sections of docs/perf-log.md's tables), summarized by
#                                               bench/ncu_summary.py; the CSVs in $NCU_DIR
#
# Several at once: bench/gpu_session.sh build tests models. Environment:
# DEBS (default debs: the .deb files of libcmocka0, libcmocka-dev and
# libdlpack-dev, `apt-get download`ed on the CPU machine and named in the
# device call's carry), OUT (default gpu-session), BUDGET (corpus seconds,
# default 450), GROUPS_ONLY (the differential groups to run, comma-separated;
# default all 47: about 15 minutes), AB_DIR (where ab keeps its JSON, default
# /tmp/kfuse-ab: outside $OUT, since the device tool brings back at most 8
# files), AB_REPEAT (ab's rounds of base then new, default 1; each plan's
# median over them), NCU_DIR (ncu's CSVs, default /tmp/kfuse-ncu). Summaries
# go to $OUT/summary.txt: read that one first.
set -u
DEBS=${DEBS:-debs}
OUT=${OUT:-gpu-session}
BUDGET=${BUDGET:-450}
AB_DIR=${AB_DIR:-/tmp/kfuse-ab}
AB_REPEAT=${AB_REPEAT:-1}
NCU_DIR=${NCU_DIR:-/tmp/kfuse-ncu}
mkdir -p "$OUT" /tmp/kfuse-deps "$AB_DIR"
for f in "$DEBS"/*.deb; do [ -e "$f" ] && dpkg -x "$f" /tmp/kfuse-deps; done
export LD_LIBRARY_PATH=/tmp/kfuse-deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KFUSE_LIBRARY=$PWD/build/libkfuse.so PYTHONPATH=$PWD/bindings/python
say() { echo "$*" | tee -a "$OUT/summary.txt"; }

build() {
  local t0=$SECONDS
  { CMAKE_PREFIX_PATH=/tmp/kfuse-deps/usr cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKFUSE_BINDINGS=OFF &&
    ninja -C build; } > "$OUT/build.log" 2>&1
  local rc=$?
  local inc suffix
  inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  mkdir -p build/python/kfuse
  gcc -O2 -shared -fPIC -std=c11 -DKFUSE_FASTCALL_CHECK_ABI -I"$inc" -Ic_api/include -I/tmp/kfuse-deps/usr/include \
    bindings/python/kfuse/_fastcall.c -o "build/python/kfuse/_fastcall$suffix" >> "$OUT/build.log" 2>&1
  say "build rc=$rc, extension rc=$?, $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || tail -20 "$OUT/build.log" >> "$OUT/summary.txt"
}

tests() {
  local limit=${1:-180} t rc
  for t in build/tests/gpu_test_gpu_*; do
    case $t in *differential*) continue ;; esac
    timeout "$limit" "$t" > "$OUT/t.log" 2>&1
    rc=$?
    say "$(basename "$t") rc=$rc $(grep -E 'PASSED|FAILED' "$OUT/t.log" | tail -2 | tr '\n' ' ')"
    [ $rc -eq 0 ] || grep -E "FAILED|ERROR|mismatch" "$OUT/t.log" | head -5 >> "$OUT/summary.txt"
  done
  local groups=${GROUPS_ONLY:-}
  groups=${groups//,/ }
  [ -n "$groups" ] || groups=$(grep -o 'cmocka_unit_test(test_[a-z0-9_]*)' tests/gpu/test_gpu_differential.c | sed 's/cmocka_unit_test(//; s/)//')
  for g in $groups; do
    local t0=$SECONDS
    KF_TEST_FILTER=$g timeout "$limit" build/tests/gpu_test_gpu_differential > "$OUT/t.log" 2>&1
    rc=$?
    say "differential $g rc=$rc $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || grep -E "FAILED|ERROR|mismatch" "$OUT/t.log" | head -5 >> "$OUT/summary.txt"
  done
  rm -f "$OUT/t.log"
}

corpus() {
  python3 bench/corpus_bench.py --lib build/libkfuse.so --seed "$1" --count "${2:-200}" --iters 20 --warmup 5 \
    --no-cpu-check --time-budget "$BUDGET" --out "$OUT/corpus.md" --json "$OUT/corpus.json" > "$OUT/corpus.log" 2>&1
  say "corpus seed $1 rc=$?"
  sed -n '/^| speedup/p; /^| % SOL/p; /^below/p' "$OUT/corpus.md" >> "$OUT/summary.txt"
}

models() {
  python3 bench/model_bench.py --models "${1:-gpt2_train,llama_train,vit_train,gnn_train,llama_decode_b64,llama_decode_b1}" \
    --backends kfuse,inductor --steps 10 --warmup 2 --partitions 6 --kernels 12 > "$OUT/models.log" 2>&1
  say "models rc=$?"
  grep -E "^\| " "$OUT/models.log" | head -20 >> "$OUT/summary.txt"
  # (--kernels: one step's GPU time by kernel name, per model and backend)
  sed -n '/ms of kernel time in one step/,/^$/p' "$OUT/models.log" | cut -c1-140 >> "$OUT/summary.txt"
  # (--partitions: each model's partitions, the slowest first, a line each)
  grep -E "^### |^fused_[0-9]+:" "$OUT/models.log" | cut -c1-160 | head -40 >> "$OUT/summary.txt"
}

ncu_step() {  # SEED N,N
  local seed=$1 n tool
  tool=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$NCU_DIR"
  for n in ${2//,/ }; do
    # (-c 8: kfuse's launches of the check and the timed call, then
    # torch.compile's; --iters 1 --warmup 0 keeps the profiled calls few)
    timeout 150 "$tool" --target-processes all -k regex:"kf_|triton" -c 8 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --csv --page details \
      python3 bench/corpus_bench.py --lib build/libkfuse.so --seed "$seed" --count 200 --only "$n" --iters 1 --warmup 0 \
      --no-cpu-check > "$NCU_DIR/ncu_${seed}_$n.csv" 2> "$NCU_DIR/ncu_${seed}_$n.err"
    say "ncu $seed c$n rc=$?"
    python3 bench/ncu_summary.py "$NCU_DIR/ncu_${seed}_$n.csv" >> "$OUT/summary.txt"
  done
}

stalls_step() {  # SEED N,N: ncu's warp stall reasons per kfuse and triton kernel (bench/ncu_stalls.py)
  local seed=$1 n tool
  tool=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  mkdir -p "$NCU_DIR"
  for n in ${2//,/ }; do
    timeout 150 "$tool" --target-processes all -k regex:"kf_|triton" -c 8 --section WarpStateStats --section SpeedOfLight \
      --page raw --csv python3 bench/corpus_bench.py --lib build/libkfuse.so --seed "$seed" --count 200 --only "$n" --iters 1 \
      --warmup 0 --no-cpu-check > "$NCU_DIR/stalls_${seed}_$n.csv" 2> "$NCU_DIR/stalls_${seed}_$n.err"
    say "stalls $seed c$n rc=$?"
    python3 bench/ncu_stalls.py "$NCU_DIR/stalls_${seed}_$n.csv" >> "$OUT/summary.txt"
  done
}

suites() {  # env:NAME=VALUE[,NAME=VALUE...]
  local base=$1 s
  if [[ $base != env:* ]]; then say "suites: BASE must be env:NAME=VALUE[,...], not '$base'"; return; fi
  local vars=()
  IFS=, read -r -a vars <<< "${base#env:}"
  for s in suite training; do
    env "${vars[@]}" build/tools/kfuse bench --suite "$s" --out "$AB_DIR/suite_${s}_base.md" > "$OUT/suite_${s}_base.log" 2>&1
    build/tools/kfuse bench --suite "$s" --out "$AB_DIR/suite_${s}_new.md" > "$OUT/suite_${s}_new.log" 2>&1
    python3 bench/suite_ab.py --name "$s" "$AB_DIR/suite_${s}_base.md" "$AB_DIR/suite_${s}_new.md" >> "$OUT/summary.txt"
  done
}

ab() {  # BASE_LIB SEED:N,N [SEED:N,N ...] (or BASE_LIB SEED N,N)
  local base=$1 lib pair seed only r
  shift
  local pairs=("$@")
  [ $# -eq 2 ] && [[ $2 != *:* ]] && pairs=("$1:$2")
  for pair in "${pairs[@]}"; do
    seed=${pair%%:*} only=${pair#*:}
    # AB_REPEAT rounds, base then this build in each: a plan under ~60 us
    # takes one of two times per process (perf-log.md session 43), so one
    # round of a small plan says little; the summary gives each plan's
    # median over the rounds and the range of the round ratios.
    for ((r = 1; r <= AB_REPEAT; r++)); do
      for lib in "$base" build/libkfuse.so; do
        local run=(env) tag
        tag=$(basename "$lib")
        if [[ $lib == env:* ]]; then
          run=(env "${lib#env:}") tag=env lib=build/libkfuse.so
        fi
        timeout 150 "${run[@]}" python3 bench/corpus_bench.py --lib "$lib" --seed "$seed" --count 200 --only "$only" --iters 20 --warmup 5 \
          --no-cpu-check --no-compile --json "$AB_DIR/ab_${seed}_${tag}_$r.json" > /dev/null 2>&1
      done
    done
    local base_tag=env
    [[ $base == env:* ]] || base_tag=$(basename "$base")
    python3 bench/ab_summary.py --seed "$seed" --base "$AB_DIR/ab_${seed}_${base_tag}" \
      --new "$AB_DIR/ab_${seed}_libkfuse.so" --rounds "$AB_REPEAT" >> "$OUT/summary.txt"
  done
}

while [ $# -gt 0 ]; do
  case $1 in
    build) build; shift ;;
    tests) if [[ ${2:-} =~ ^[0-9]+$ ]]; then tests "$2"; shift 2; else tests; shift; fi ;;
    corpus) if [[ ${3:-} =~ ^[0-9]+$ ]]; then corpus "$2" "$3"; shift 3; else corpus "$2" 200; shift 2; fi ;;
    models) if [[ ${2:-} == *_* ]]; then models "$2"; shift 2; else models; shift; fi ;;
    ncu) ncu_step "$2" "$3"; shift 3 ;;
    stalls) stalls_step "$2" "$3"; shift 3 ;;
    suites) suites "$2"; shift 2 ;;
    ab)  # its arguments: BASE_LIB, then SEED:N,N pairs (or one SEED N,N) up to the next step's name
      base_lib=$2; shift 2; args=()
      while [ $# -gt 0 ] && [[ $1 != build && $1 != tests && $1 != corpus && $1 != models && $1 != ab && $1 != ncu && $1 != stalls && $1 != suites ]]; do args+=("$1"); shift; done
      ab "$base_lib" "${args[@]}" ;;
    *) echo "gpu_session.sh: unknown step '$1' (build, tests, corpus, models, ab, ncu, stalls, suites)" >&2; exit 2 ;;
  esac
done
