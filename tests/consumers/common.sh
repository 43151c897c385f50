# Shared by the consumer_*.sh tests (sourced): each builds a user's program
# outside the source tree and runs it; 77 = skipped (a toolchain is missing).
skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
step() { printf '\n== %s\n' "$*"; }

# fresh_work DIR FILE...: an empty DIR holding copies of the FILEs, made the
# current directory, with no LD_LIBRARY_PATH (the consumer must not need it).
fresh_work() {
  rm -rf "$1"
  mkdir -p "$1"
  dir=$1
  shift
  cp -R "$@" "$dir/"
  cd "$dir"
  unset LD_LIBRARY_PATH || true
}

# run_consumer COMMAND...: runs the consumer program, shows its output
# (kept in run.log) and checks that it ends well ("consumer: OK").
run_consumer() {
  step "$*"
  "$@" > run.log 2>&1 || { cat run.log; fail "the consumer failed"; }
  cat run.log
  grep -q '^consumer: OK$' run.log || fail "no 'consumer: OK'"
}
