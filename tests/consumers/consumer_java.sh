#!/bin/sh
# A Java program outside the source tree, compiled and run with only the
# kfuse jar on its class path (no -Dkfuse.jni.library, no LD_LIBRARY_PATH):
# the jar's JNI library and libkfuse are extracted and loaded from it. Also
# checks the jar's contents (RUNPATH $ORIGIN, the pom) and the message when
# the JNI library cannot be loaded. Exits 77 (skipped) without a JDK or jar.
# Usage: consumer_java.sh JAR JAVAC JAVA WORK_DIR SOURCE_DIR
set -eu
jar_file=$1
javac=$2
java=$3
work=$4
src=$5

. "$(dirname "$0")/common.sh"
[ -x "$javac" ] && [ -x "$java" ] || skip "no JDK (javac and java; Debian: openjdk-17-jdk-headless)"
[ -f "$jar_file" ] || skip "$jar_file was not built (needs swig and a JDK at configure time; see docs/bindings.md)"

fresh_work "$work" "$src/Consumer.java"
mkdir classes tmp unpacked

step "javac -cp $(basename "$jar_file") Consumer.java"
"$javac" -encoding UTF-8 -cp "$jar_file" -d classes Consumer.java

run_consumer "$java" -Djava.io.tmpdir="$work/tmp" -cp "$jar_file:classes" Consumer
grep -q "^JNI library: $work/tmp/kfuse-jni[^/]*/libkfuse_jni.so\$" run.log ||
  fail "the JNI library was not loaded from the jar (extracted under $work/tmp)"
[ -z "$(ls -A tmp)" ] || fail "the extracted libraries were left behind: $(ls -A tmp)"

step "the jar's native folder"
(cd unpacked && "$(dirname "$javac")/jar" xf "$jar_file")
so=$(find unpacked/org/kfuse/native -name libkfuse_jni.so)
[ -n "$so" ] || fail "no libkfuse_jni.so in the jar"
runpath=$(readelf -d "$so" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
echo "RUNPATH: $runpath"
[ "$runpath" = '$ORIGIN' ] || fail "expected RUNPATH \$ORIGIN only"
needed=$(readelf -d "$so" | sed -n 's/.*(NEEDED).*\[\(libkfuse\.so\.[0-9]*\)\]/\1/p')
[ -n "$needed" ] && [ -f "$(dirname "$so")/$needed" ] || fail "the jar lacks the libkfuse the JNI library needs ($needed)"
pom=$(dirname "$jar_file")/pom.xml
version=$(basename "$jar_file" .jar | sed 's/^kfuse-//')
grep -q "<version>$version</version>" "$pom" && grep -q '<artifactId>kfuse</artifactId>' "$pom" ||
  fail "$pom does not describe org.kfuse:kfuse:$version"
cmp -s "$pom" unpacked/META-INF/maven/org.kfuse/kfuse/pom.xml || fail "the jar's META-INF pom differs from $pom"

step "a JNI library that cannot be loaded"
if "$java" -Dkfuse.jni.library="$work/missing/libkfuse_jni.so" -cp "$jar_file:classes" Consumer > bad.log 2>&1; then
  fail "ran with a missing JNI library"
fi
cat bad.log
grep -q "UnsatisfiedLinkError: kfuse: cannot load the JNI library libkfuse_jni.so (tried -Dkfuse.jni.library=$work/missing/libkfuse_jni.so)" bad.log ||
  fail "the error does not name the property and what was tried"
echo "consumer_java: OK"
