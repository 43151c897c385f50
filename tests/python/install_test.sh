#!/bin/sh
# CTest python_install: the Python package installed as a user installs it,
# offline, into a fresh venv (Debian 12 blocks pip in the system Python),
# then its tests run from outside the source tree:
#   1. pip install --no-build-isolation --no-index bindings/python, with
#      libkfuse found through KFUSE_LIBRARY;
#   2. a wheel with libkfuse.so.<major> packed next to the package (what
#      the docs call "a wheel built from the build tree"), found without
#      any environment variable;
#   3. pip install with no C compiler (CC=false): the pure package, whose
#      calls go through ctypes.
# With EXTENSION=1 (CMake found Python's headers for PYTHON), 1 and 2 must
# have compiled the C extension kfuse._fastcall into the package, and its
# tests run there (KFUSE_PYTHON_EXTENSION=1).
# (The wheel is tagged for this CPython and platform, or py3-none-any
# without the extension, and holds a Linux x86-64 library: it is for this
# machine, not for an index.)
# Usage: install_test.sh PYTHON SOURCE_DIR BUILD_DIR LIBKFUSE SOVERSION_MAJOR EXTENSION
# Exits 77 (skipped) when PYTHON lacks venv, pip, setuptools or NumPy.
set -eu
python=$1 src=$2 build=$3 lib=$4 major=$5 extension=$6
work=$build/python-install
rm -rf "$work"
mkdir -p "$work"
for m in venv ensurepip setuptools numpy; do
  if ! "$python" -c "import $m" 2>/dev/null; then
    echo "SKIP: $python cannot import $m (Debian: apt-get install python3-venv python3-pip python3-setuptools python3-wheel python3-numpy)"
    exit 77
  fi
done
"$python" -m venv --system-site-packages "$work/venv"
pip="$work/venv/bin/pip"
py="$work/venv/bin/python"
# NumPy from a user site (~/.local) is not visible inside a venv.
if ! "$py" -c "import numpy" 2>/dev/null; then
  echo "SKIP: numpy is importable by $python but not inside a venv made from it (install it system-wide: apt-get install python3-numpy)"
  exit 77
fi
# pip builds in the source folder: build from a copy, so the checkout stays clean.
cp -r "$src/bindings/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
"$pip" install --no-build-isolation --no-index --no-deps -q "$work/src"
cp "$src/bindings/python/tests/test_kfuse.py" "$src/bindings/python/tests/test_fastcall.py" \
   "$src/bindings/python/tests/fusions.py" "$work/"
cd "$work"
unset PYTHONPATH KFUSE_PYTHON_EXTENSION
# The installed package's own extension (not the build's, which the
# package would also find next to KFUSE_LIBRARY's libkfuse).
check_extension() {
  if [ "$extension" = 1 ]; then
    "$py" -c "import kfuse, sys; p = kfuse.extension_path(); print('extension:', p); assert p and p.startswith(sys.prefix), kfuse.extension_status()"
    KFUSE_PYTHON_EXTENSION=1 "$py" test_fastcall.py > "fastcall-$1.log" 2>&1 || { cat "fastcall-$1.log"; exit 1; }
    tail -1 "fastcall-$1.log"
  else
    "$py" -c "import kfuse; print('extension:', kfuse.extension_status())"
  fi
}
echo "== 1: source install, KFUSE_LIBRARY=$lib"
KFUSE_LIBRARY=$lib "$py" -c "import kfuse, sys; print(kfuse.__file__); assert kfuse.__file__.startswith(sys.prefix), kfuse.__file__"
(KFUSE_LIBRARY=$lib; export KFUSE_LIBRARY; check_extension source)
KFUSE_LIBRARY=$lib "$py" test_kfuse.py > source.log 2>&1 || { cat source.log; exit 1; }
tail -3 source.log
echo "== 2: wheel with libkfuse.so.$major inside"
cp -L "$lib" "$work/src/kfuse/libkfuse.so.$major"
rm -rf "$work/src/build" "$work/src"/*.egg-info
"$pip" wheel --no-build-isolation --no-index --no-deps -q -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/kfuse-*.whl)
echo "wheel: $wheel"
"$py" -m zipfile -l "$wheel" | grep "kfuse/libkfuse.so.$major"
if [ "$extension" = 1 ]; then "$py" -m zipfile -l "$wheel" | grep "kfuse/_fastcall"; fi
"$pip" install --no-index --no-deps --force-reinstall -q "$wheel"
env -u KFUSE_LIBRARY "$py" -c "import kfuse, sys; p = kfuse.library_path(); print(p); assert p.startswith(sys.prefix), p"
(unset KFUSE_LIBRARY; check_extension wheel)
env -u KFUSE_LIBRARY "$py" test_kfuse.py > wheel.log 2>&1 || { cat wheel.log; exit 1; }
tail -3 wheel.log
echo "== 3: source install without a C compiler (CC=false): the pure package"
rm -f "$work/src/kfuse/libkfuse.so.$major"
rm -rf "$work/src/build" "$work/src"/*.egg-info
CC=false "$pip" install -v --no-build-isolation --no-index --no-deps --force-reinstall "$work/src" > nocc.log 2>&1 ||
  { cat nocc.log; exit 1; }
grep 'building extension "kfuse._fastcall" failed' nocc.log
"$py" -c "import kfuse, sys, os; d = os.path.dirname(kfuse.__file__); assert d.startswith(sys.prefix), d; assert not [f for f in os.listdir(d) if f.startswith('_fastcall')], os.listdir(d)"
KFUSE_LIBRARY=$lib KFUSE_PYTHON_EXTENSION=0 "$py" test_kfuse.py > nocc-test.log 2>&1 || { cat nocc-test.log; exit 1; }
tail -3 nocc-test.log
