#!/bin/sh
# A Rust crate outside the repository (a fresh folder under $TMPDIR, so that
# cargo, which reads .cargo/config.toml from the current folder upward, sees
# none of the repository's) that uses `kfuse` by path. kfuse-sys finds the
# installed libkfuse and kfuse.h through pkg-config (no KFUSE_* variables);
# the consumer's build.rs writes an rpath, and the program runs without
# LD_LIBRARY_PATH. Exits 77 (skipped) without cargo, Debian's vendored
# bindgen (offline) or pkg-config.
# Usage: consumer_rust.sh CARGO RUSTC|- RUST_BINDINGS PREFIX TARGET_DIR SOURCE_DIR DLPACK_INCLUDE
set -eu
cargo=$1
rustc=$2
bindings=$3
prefix=$4
target=$5
src=$6
dlpack_include=$7

. "$(dirname "$0")/common.sh"
need_cargo "$cargo"
use_install "$prefix"
if [ "$rustc" != - ]; then
  export RUSTC="$rustc" RUSTDOC="$(dirname "$rustc")/rustdoc"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kfuse-consumer-rust.XXXXXX")
trap 'rm -rf "$work"' EXIT
repo=$(cd "$bindings/../.." && pwd)
case $work/ in "$repo"/*) fail "$work is inside the repository $repo" ;; esac
fresh_work "$work" "$src/build.rs" "$src/src"
sed "s|@KFUSE_RUST@|$bindings|g" "$src/Cargo.toml.in" > Cargo.toml
mkdir .cargo
cp "$src/cargo-config.toml" .cargo/config.toml
unset KFUSE_LIB_DIR KFUSE_INCLUDE_DIR || true
export CARGO_TARGET_DIR="$target"
[ "$dlpack_include" = /usr/include ] || export DLPACK_INCLUDE_DIR="$dlpack_include"
echo "consumer crate: $work (PKG_CONFIG_PATH=$PKG_CONFIG_PATH)"
cat Cargo.toml

step "$("$cargo" --version): cargo build"
"$cargo" build -j2

# Not `cargo run`: it adds the link search paths to LD_LIBRARY_PATH.
exe=$target/debug/kfuse-consumer
check_rpath "$exe"
run_consumer "$exe"
echo "consumer_rust: OK"
