#!/usr/bin/env bash
# Instructions per cached execute on the shared host path, counted by
# callgrind inside cached_execute's measured loop (cached_calls), against
# the committed budget, which holds for Release builds with g++. Exit 77
# (skipped) when valgrind is not installed or the build is another kind.
#   instruction_budget.sh CACHED_EXECUTE BUDGET_FILE BUILD_TYPE COMPILER_ID
set -euo pipefail
driver=$1
budget_file=$2
if [[ "$3" != Release || "$4" != GNU ]]; then
  echo "the budget is for Release builds with g++ (this is $3, $4): skipped"
  exit 77
fi
if ! command -v valgrind > /dev/null; then
  echo "valgrind is not installed: skipped"
  exit 77
fi
calls=2000
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
       --toggle-collect=cached_calls "$driver" --calls "$calls" > "$work/log" 2>&1; then
  cat "$work/log"
  exit 1
fi
total=$(awk '$1 == "summary:" { print $2 }' "$work/callgrind.out")
budget=$(awk '$1 == "budget" { print $2 }' "$budget_file")
if [[ -z "$total" || -z "$budget" ]]; then
  echo "could not read the instruction count or the budget"
  exit 1
fi
per_call=$((total / calls))
echo "cached execute: $per_call instructions per call, budget $budget ($budget_file)"
if ((per_call > budget)); then
  echo "over budget: find what the host path does more (callgrind_annotate on a run of"
  echo "$driver under valgrind --tool=callgrind --toggle-collect=cached_calls)"
  exit 1
fi
