# Packs the Java binding's jar (cmake -P, at build time, after javac): the
# classes, the native folder (libkfuse_jni.so, whose RUNPATH is $ORIGIN, the
# libkfuse it links and libraries.txt, the order NativeLibrary extracts
# them in) and the pom under META-INF/maven, as Maven's own jars carry it.
# Inputs: JAR (the jar tool), CLASSES, NATIVE_ROOT (holds org/kfuse/native/...),
# POM, VERSION, OUT (the jar to write).
get_filename_component(out_dir ${OUT} DIRECTORY)
set(meta ${out_dir}/jar-meta)
file(REMOVE_RECURSE ${meta})
file(MAKE_DIRECTORY ${meta}/META-INF/maven/org.kfuse/kfuse)
file(COPY ${POM} DESTINATION ${meta}/META-INF/maven/org.kfuse/kfuse)
file(WRITE ${meta}/META-INF/maven/org.kfuse/kfuse/pom.properties
     "groupId=org.kfuse\nartifactId=kfuse\nversion=${VERSION}\n")
file(REMOVE ${OUT})
execute_process(COMMAND ${JAR} --create --file ${OUT} -C ${CLASSES} . -C ${NATIVE_ROOT} . -C ${meta} .
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "jar failed for ${OUT}")
endif()
