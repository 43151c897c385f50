package kfuse

// The capi package is generated from the current kfuse.h; CMake does this in
// its staged copy. By hand (with CGO_CFLAGS/CGO_LDFLAGS pointing at the
// header and libkfuse.so):
//go:generate sh -c "mkdir -p internal/capi && swig -go -cgo -intgosize 64 -DSWIGWORDSIZE64 -I../../c_api/include -outdir internal/capi -o internal/capi/capi_wrap.c kfuse.i"
