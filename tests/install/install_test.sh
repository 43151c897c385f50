#!/bin/sh
# `cmake --install` into a scratch prefix, then a program outside the tree
# built against it both ways a user would: CMake's find_package(kfuse) and
# pkg-config with cc. Each program runs against the installed library.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR MAJOR_VERSION CMAKE GENERATOR
set -eu
build=$1
src=$2
major=$3
cmake=$4
generator=$5
work=$build/install-test
prefix=$work/prefix
rm -rf "$work"
mkdir -p "$work"

step() { printf '\n== %s\n' "$*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix"

step "the library's SONAME carries the major version ($major)"
lib=$(find "$prefix" -name "libkfuse.so.$major" | head -n 1)
[ -n "$lib" ] || { echo "FAIL: no libkfuse.so.$major under $prefix"; exit 1; }
libdir=$(dirname "$lib")
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
echo "SONAME: $soname"
[ "$soname" = "libkfuse.so.$major" ] || { echo "FAIL: expected SONAME libkfuse.so.$major"; exit 1; }
for f in "$libdir/libkfuse.so" "$prefix/include/kfuse/kfuse.h" "$libdir/pkgconfig/kfuse.pc" \
         "$libdir/cmake/kfuse/kfuseConfig.cmake"; do
  [ -e "$f" ] || { echo "FAIL: $f is not installed"; exit 1; }
done

step "the kfuse CLI, in bin, runs against the installed library"
"$prefix/bin/kfuse" --version
loaded=$(ldd "$prefix/bin/kfuse" | sed -n "s/.*libkfuse\.so\.$major => \(.*\) (.*/\1/p")
echo "loads: $loaded"
[ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$lib")" ] ||
  { echo "FAIL: $prefix/bin/kfuse does not load $lib"; exit 1; }
"$prefix/bin/kfuse" run "$src/examples/fusions/layernorm.kf" --device cpu

step "find_package(kfuse CONFIG) -> kfuse::kfuse"
"$cmake" -S "$src/tests/install/consumer" -B "$work/consumer" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" \
  -DKFUSE_EXAMPLES="$src/examples/c" -DCMAKE_BUILD_TYPE=Release
"$cmake" --build "$work/consumer"
"$work/consumer/segments"
"$work/consumer/quickstart" "$lib"

step "pkg-config --cflags --libs kfuse, then cc"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs kfuse)
echo "flags: $flags"
# shellcheck disable=SC2086 # the flags are words
cc -o "$work/segments_pc" "$src/examples/c/segments.c" $flags -lm
LD_LIBRARY_PATH="$libdir" "$work/segments_pc"
echo "install test: OK"
