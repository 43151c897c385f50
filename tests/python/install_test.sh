#!/bin/sh
# CTest python_install: the Python package installed as a user installs it,
# offline, into a fresh venv (Debian 12 blocks pip in the system Python),
# then its tests run from outside the source tree:
#   1. pip install --no-build-isolation --no-index bindings/python, with
#      libkfuse found through KFUSE_LIBRARY;
#   2. a wheel with libkfuse.so.<major> packed next to the package (what
#      the docs call "a wheel built from the build tree"), found without
#      any environment variable.
# (The wheel is tagged py3-none-any although it holds a Linux x86-64
# library: it is for this machine, not for an index.)
# Usage: install_test.sh PYTHON SOURCE_DIR BUILD_DIR LIBKFUSE SOVERSION_MAJOR
# Exits 77 (skipped) when PYTHON lacks venv, pip, setuptools or NumPy.
set -eu
python=$1 src=$2 build=$3 lib=$4 major=$5
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
cp "$src/bindings/python/tests/test_kfuse.py" "$src/bindings/python/tests/fusions.py" "$work/"
cd "$work"
unset PYTHONPATH
echo "== 1: source install, KFUSE_LIBRARY=$lib"
KFUSE_LIBRARY=$lib "$py" -c "import kfuse, sys; print(kfuse.__file__); assert kfuse.__file__.startswith(sys.prefix), kfuse.__file__"
KFUSE_LIBRARY=$lib "$py" test_kfuse.py > source.log 2>&1 || { cat source.log; exit 1; }
tail -3 source.log
echo "== 2: wheel with libkfuse.so.$major inside"
cp -L "$lib" "$work/src/kfuse/libkfuse.so.$major"
rm -rf "$work/src/build" "$work/src"/*.egg-info
"$pip" wheel --no-build-isolation --no-index --no-deps -q -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/kfuse-*.whl)
echo "wheel: $wheel"
"$py" -m zipfile -l "$wheel" | grep "kfuse/libkfuse.so.$major"
"$pip" install --no-index --no-deps --force-reinstall -q "$wheel"
env -u KFUSE_LIBRARY "$py" -c "import kfuse, sys; p = kfuse.library_path(); print(p); assert p.startswith(sys.prefix), p"
env -u KFUSE_LIBRARY "$py" test_kfuse.py > wheel.log 2>&1 || { cat wheel.log; exit 1; }
tail -3 wheel.log
