# Compiles the Java binding: generated + hand-written classes, the tests and
# the example. Run by CMake at build time (cmake -P), after SWIG, because the
# generated file names are only known then.
file(GLOB generated ${GENERATED}/*.java)
file(GLOB_RECURSE main ${SOURCE}/src/main/java/*.java)
file(GLOB_RECURSE tests ${SOURCE}/src/test/java/*.java)
file(GLOB examples ${EXAMPLES}/*.java)

function(javac out classpath)
  file(REMOVE_RECURSE ${out})
  execute_process(COMMAND ${JAVAC} -encoding UTF-8 -Xlint:all -Xlint:-serial -d ${out} -cp "${classpath}" ${ARGN}
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "javac failed for ${out}")
  endif()
endfunction()

javac(${OUT}/classes "" ${generated} ${main})
javac(${OUT}/test-classes "${OUT}/classes:${JUNIT}" ${tests})
javac(${OUT}/example-classes "${OUT}/classes" ${examples})
