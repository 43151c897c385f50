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

# need_cargo CARGO: skips without cargo or Debian's vendored bindgen (the
# crates build offline from /usr/share/cargo/registry).
need_cargo() {
  [ -x "$1" ] || skip "no cargo (Debian: cargo rustc)"
  ls -d /usr/share/cargo/registry/bindgen-0.60* > /dev/null 2>&1 ||
    skip "no offline bindgen crate (Debian: librust-bindgen-dev)"
}

# use_install PREFIX: pkg-config answers for the kfuse installed in PREFIX
# (exports PKG_CONFIG_PATH); skips without pkg-config.
use_install() {
  command -v pkg-config > /dev/null || skip "no pkg-config (Debian: pkgconf)"
  pc=$(find "$1" -name kfuse.pc | head -n 1)
  [ -n "$pc" ] || fail "no kfuse.pc under $1 (the consumers_install fixture installs it)"
  PKG_CONFIG_PATH=$(dirname "$pc")
  export PKG_CONFIG_PATH
}

# check_rpath EXE: EXE's libkfuse resolves, with no LD_LIBRARY_PATH, to the
# installed one (pkg-config's libdir): the rpath works.
check_rpath() {
  resolved=$(ldd "$1" | sed -n 's/.*libkfuse\.so[^ ]* => \([^ ]*\) .*/\1/p')
  echo "libkfuse: $resolved"
  libdir=$(cd "$(pkg-config --variable=libdir kfuse)" && pwd -P)
  case $(cd "$(dirname "$resolved")" 2> /dev/null && pwd -P) in
    "$libdir") ;;
    *) fail "libkfuse does not resolve to the installed one in $libdir (rpath)" ;;
  esac
}
