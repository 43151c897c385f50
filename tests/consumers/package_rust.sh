#!/bin/sh
# `cargo package` of kfuse-sys and kfuse, offline, each verified (the packed
# crate builds on its own). kfuse-sys is not on crates.io (nor in Debian's
# vendored registry), so kfuse's verify builds against the kfuse-sys just
# packed, through a [patch] given with --config. Runs in bindings/rust, whose
# workspace reads the repository's .cargo/config.toml (offline registry).
# Exits 77 (skipped) without cargo or Debian's vendored bindgen.
# Usage: package_rust.sh CARGO RUST_BINDINGS TARGET_DIR
set -eu
cargo=$1
bindings=$2
target=$3

. "$(dirname "$0")/common.sh"
need_cargo "$cargo"
cd "$bindings"
export CARGO_TARGET_DIR="$target"
mkdir -p "$target"
rm -rf "$target/package"

# package CRATE ARGS...: cargo package, --allow-dirty (a working tree being
# edited). Newer cargo wants `--registry crates-io` to package for crates.io
# when crates-io is replaced by a directory source; older cargo does not know it.
package() {
  crate=$1
  shift
  step "cargo package -p $crate $*"
  if ! "$cargo" package -j2 --allow-dirty -p "$crate" "$@" > "$target/package.log" 2>&1; then
    if grep -q 'include `--registry crates-io`' "$target/package.log"; then
      "$cargo" package -j2 --allow-dirty -p "$crate" --registry crates-io "$@" > "$target/package.log" 2>&1 ||
        { cat "$target/package.log"; fail "cargo package -p $crate"; }
    else
      cat "$target/package.log"
      fail "cargo package -p $crate"
    fi
  fi
  grep -v '^warning: manifest has no\|^  |\|= note' "$target/package.log" || true
}

package kfuse-sys
package kfuse --config "patch.crates-io.kfuse-sys.path=\"$target/package/kfuse-sys-0.1.0\""

step "the packed crates"
for crate in kfuse-sys kfuse; do
  file=$target/package/$crate-0.1.0.crate
  [ -f "$file" ] || fail "no $file"
  tar tzf "$file" | sed 's/^/  /'
done
tar tzf "$target/package/kfuse-sys-0.1.0.crate" | grep -qx 'kfuse-sys-0.1.0/build.rs' || fail "kfuse-sys lacks build.rs"
# The packed kfuse requires kfuse-sys by version, no longer by path.
dep=$(tar xzf "$target/package/kfuse-0.1.0.crate" -O kfuse-0.1.0/Cargo.toml |
      sed -n '/^\[dependencies.kfuse-sys\]/,/^\[/p')
printf 'packed kfuse:\n%s\n' "$dep"
printf '%s\n' "$dep" | grep -q '^version = "0.1.0"' || fail "the packed kfuse does not require kfuse-sys 0.1.0"
printf '%s\n' "$dep" | grep -q '^path' && fail "the packed kfuse still names kfuse-sys's path"
echo "package_rust: OK"
