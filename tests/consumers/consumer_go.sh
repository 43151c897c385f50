#!/bin/sh
# A Go module outside the source tree that requires
# github.com/kfuse/kfuse/bindings/go, with a `replace` pointing at the module
# the build staged (target kfuse_go_module: no `go generate` in the
# checkout), built offline against the installed libkfuse with the cgo flags
# from pkg-config, and run without LD_LIBRARY_PATH (the rpath comes from
# CGO_LDFLAGS). Exits 77 (skipped) without go, pkg-config or the module.
# Usage: consumer_go.sh GO MODULE PREFIX WORK_DIR SOURCE_DIR DLPACK_INCLUDE GOCACHE
set -eu
go=$1
module=$2
prefix=$3
work=$4
src=$5
dlpack_include=$6
gocache=$7

. "$(dirname "$0")/common.sh"
[ -x "$go" ] || skip "no Go toolchain (Debian: golang-go)"
[ -f "$module/go.mod" ] && [ -f "$module/internal/capi/capi.go" ] ||
  skip "$module was not staged (needs swig and go at configure time; see docs/bindings.md)"
use_install "$prefix"

fresh_work "$work" "$src/go.mod" "$src/main.go"
# Offline: no module proxy, no toolchain download; -mod=mod lets go write go.sum.
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOCACHE="$gocache" GOPATH="$work/gopath" CGO_ENABLED=1

step "go mod edit -replace=github.com/kfuse/kfuse/bindings/go=$module"
"$go" mod edit -replace="github.com/kfuse/kfuse/bindings/go=$module"
grep replace go.mod

step "CGO_CFLAGS/CGO_LDFLAGS from pkg-config kfuse, go build"
CGO_CFLAGS=$(pkg-config --cflags kfuse)
# dlpack.h has no .pc file; Debian's is in /usr/include already.
[ "$dlpack_include" = /usr/include ] || CGO_CFLAGS="$CGO_CFLAGS -I$dlpack_include"
CGO_LDFLAGS="$(pkg-config --libs kfuse) -Wl,-rpath,$(pkg-config --variable=libdir kfuse)"
export CGO_CFLAGS CGO_LDFLAGS
echo "CGO_CFLAGS=$CGO_CFLAGS"
echo "CGO_LDFLAGS=$CGO_LDFLAGS"
"$go" build -o kfuse-consumer .
check_rpath ./kfuse-consumer

run_consumer ./kfuse-consumer
grep -q 'KF_ERR_SHAPE_MISMATCH\|cannot broadcast' run.log || fail "the shape error lost kfuse's message"
echo "consumer_go: OK"
