#!/bin/sh
# An nvrtc test on a machine without NVRTC exits 77 (skipped) after one line
# saying why. Simulated: in a private mount namespace (unshare, no root
# needed where user namespaces are allowed) an empty tmpfs covers every
# folder NVRTC could load from, and CUDA_HOME names an empty folder. Exits
# 77 itself where namespaces are not allowed.
# Usage: skip_without_nvrtc.sh TEST_BINARY
set -u
test_binary=$1
if ! unshare -rm true 2>/dev/null; then
  echo "skipped: unshare -rm is not allowed here"
  exit 77
fi
# Folders holding libnvrtc: the toolkit roots' library folders and the
# loader's cache, each resolved through symlinks.
dirs=$(
  for root in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
    [ -n "$root" ] || continue
    for d in "$root/lib64" "$root/targets/x86_64-linux/lib"; do
      [ -d "$d" ] && ls "$d"/libnvrtc* >/dev/null 2>&1 && readlink -f "$d"
    done
  done
  ldconfig -p 2>/dev/null | sed -n 's|.*libnvrtc.* => \(.*\)/[^/]*$|\1|p' | xargs -r -n1 readlink -f
)
# Only folders that exist: the loader's cache can list a toolkit that is
# gone (or hidden, as in .ci/cpu-only), and mount needs a mount point.
dirs=$(for d in $dirs; do [ -d "$d" ] && echo "$d"; done | sort -u)
empty=$(mktemp -d)
trap 'rmdir "$empty"' EXIT
out=$(CUDA_HOME=$empty CUDA_PATH= unshare -rm sh -c '
  for d in $1; do mount -t tmpfs none "$d" || exit 99; done
  exec "$2"' sh "$dirs" "$test_binary" 2>&1)
status=$?
printf '%s\n(exit status %s; hidden: %s)\n' "$out" "$status" "$(echo $dirs)"
[ "$status" -eq 77 ] || { echo "FAIL: expected exit status 77"; exit 1; }
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || { echo "FAIL: expected one line"; exit 1; }
printf '%s\n' "$out" | grep -q '^skipped: NVRTC could not be loaded' || { echo "FAIL: expected the reason"; exit 1; }
