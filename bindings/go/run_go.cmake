# Runs the Go binding's tests (MODE=test) in the module staged by the build
# (target kfuse_go_module), or the example (MODE=example) in a copy of
# examples/go whose `replace` points at that module.
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
  execute_process(COMMAND ${GO} test -count=1 -v ./... WORKING_DIRECTORY ${MODULE} RESULT_VARIABLE rc)
else()
  file(REMOVE_RECURSE ${STAGE})
  file(COPY ${REPO}/examples/go/ DESTINATION ${STAGE})
  execute_process(COMMAND ${GO} mod edit -replace=github.com/kfuse/kfuse/bindings/go=${MODULE}
                  WORKING_DIRECTORY ${STAGE} RESULT_VARIABLE rc)
  if(rc EQUAL 0)
    execute_process(COMMAND ${GO} run . WORKING_DIRECTORY ${STAGE} RESULT_VARIABLE rc)
  endif()
endif()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "go ${MODE} failed")
endif()
