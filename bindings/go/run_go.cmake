# Runs the Go binding's tests (MODE=test) or the example (MODE=example) in a
# staged copy of the repository's Go sources, with the capi package generated
# by SWIG from the current kfuse.h: nothing generated lands in the source tree.
file(REMOVE_RECURSE ${STAGE})
file(MAKE_DIRECTORY ${STAGE}/bindings ${STAGE}/examples)
file(COPY ${REPO}/bindings/go DESTINATION ${STAGE}/bindings PATTERN internal/capi EXCLUDE)
file(COPY ${REPO}/examples/go DESTINATION ${STAGE}/examples)
set(module ${STAGE}/bindings/go)
file(MAKE_DIRECTORY ${module}/internal/capi)
# -DSWIGWORDSIZE64: int64_t is `long` here, as in glibc (and Go's int64).
execute_process(COMMAND ${SWIG} -go -cgo -intgosize 64 -DSWIGWORDSIZE64 -I${KFUSE_INCLUDE}
                        -outdir ${module}/internal/capi -o ${module}/internal/capi/capi_wrap.c
                        ${module}/kfuse.i
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "swig -go failed")
endif()

# Offline, with caches under the build dir.
set(ENV{GOPROXY} off)
set(ENV{GOFLAGS} -mod=mod)
set(ENV{GOTOOLCHAIN} local)
set(ENV{GOCACHE} ${CACHE}/build)
set(ENV{GOPATH} ${CACHE}/gopath)
set(ENV{CGO_ENABLED} 1)
set(ENV{CGO_CFLAGS} "-g -O2 -I${KFUSE_INCLUDE} -I${DLPACK_INCLUDE}")
set(ENV{CGO_LDFLAGS} "-L${LIBDIR} -lkfuse -Wl,-rpath,${LIBDIR}")

if(MODE STREQUAL "test")
  # -count=1: the test cache would not notice a rebuilt libkfuse.so.
  execute_process(COMMAND ${GO} test -count=1 -v ./... WORKING_DIRECTORY ${module} RESULT_VARIABLE rc)
else()
  execute_process(COMMAND ${GO} run . WORKING_DIRECTORY ${STAGE}/examples/go RESULT_VARIABLE rc)
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "go ${MODE} failed")
endif()
