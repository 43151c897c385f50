#!/bin/sh
# Input errors of the `kfuse` CLI: each case writes its fixture into a
# scratch folder, runs the CLI and checks the exit status and one line of
# its message. Usage: cli_cases.sh KFUSE CASE (tests/CMakeLists.txt lists
# the cases, one CTest each).
set -u
kfuse=$1
case_name=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir" || exit 1

# expect STATUS TEXT COMMAND...: COMMAND exits with STATUS and prints TEXT
# (a fixed string) on stdout or stderr. (Long outputs are shown by their
# last lines.)
expect() {
  want_status=$1
  want_text=$2
  shift 2
  out=$("$@" 2>&1)
  status=$?
  printf '%s\n(exit status %s)\n' "$(printf '%s\n' "$out" | tail -n 5 | cut -c1-400)" "$status"
  if [ "$status" -ne "$want_status" ]; then
    echo "FAIL: expected exit status $want_status"
    exit 1
  fi
  if ! printf '%s\n' "$out" | grep -qF -- "$want_text"; then
    echo "FAIL: expected the output to contain: $want_text"
    exit 1
  fi
}

case $case_name in
  directory)
    mkdir fusions
    expect 2 "cannot read fusions: it is a directory, expected a fusion file (.kf)" \
      "$kfuse" run fusions --device cpu
    expect 2 "it is a directory" "$kfuse" explain fusions
    ;;
  nul)
    # A NUL on line 2 used to end the text there (no outputs).
    printf 'input x: tensor<float32, 1>\ny = relu(x)\000\noutput y\n' > nul.kf
    expect 2 "line 2, column 12: NUL byte (0x00) in the text" "$kfuse" run nul.kf --shapes 4 --device cpu
    ;;
  broadcast)
    # Shapes that do not broadcast are an input error (2), not a FAIL (1).
    printf 'input x: tensor<float32, 2>\ninput b: tensor<float32, 1>\ny = add(x, b)\noutput y\n' > add.kf
    expect 2 "the input shapes do not fit the fusion: KF_ERR_SHAPE_MISMATCH: add (value 2): cannot broadcast dim 1" \
      "$kfuse" run add.kf --shapes "2x3, 4" --device cpu
    expect 2 "cannot broadcast dim 1" "$kfuse" explain add.kf --shapes "2x3, 4"
    expect 0 "PASS" "$kfuse" run add.kf --shapes "2x3, 3" --device cpu
    ;;
  out_of_memory)
    # Shapes too large for the host: the library's out-of-memory words and
    # exit status 2 (an input error), not a bare std::bad_alloc and FAIL (1);
    # 2^62 float32 elements (2^64 bytes) used to wrap to an empty buffer and
    # crash.
    printf 'input x: tensor<float32, 2>\ny = relu(x)\noutput y\n' > relu.kf
    expect 2 "relu.kf: KF_ERR_OUT_OF_MEMORY: out of host memory (the shapes are too large)" \
      "$kfuse" run relu.kf --shapes 1099511627776x64 --device cpu
    expect 2 "KF_ERR_OUT_OF_MEMORY: out of host memory" "$kfuse" run relu.kf --shapes 4611686018427387904x1 --device cpu
    expect 2 "KF_ERR_OUT_OF_MEMORY: out of host memory" \
      "$kfuse" run relu.kf --shapes 4611686018427387904x4 --layout strided --device cpu
    expect 0 "PASS" "$kfuse" run relu.kf --shapes 0x4611686018427387904 --device cpu
    # The library's own KF_ERR_OUT_OF_MEMORY (an output of 2^48 bytes): the same.
    printf 'input n: scalar<int64>\nconst one: float32 = 1\nr = full([n], one) {dtype=float32}\noutput r\n' > full.kf
    expect 2 "kf_execute failed: KF_ERR_OUT_OF_MEMORY: output 0 (value 2): out of host memory: 281474976710656 bytes would bring" \
      "$kfuse" run full.kf --scalars 70368744177664 --device cpu
    ;;
  out_layout)
    # Outputs the caller allocates (kf_execute_into) in another memory order
    # than kfuse's: checked against the reference like kfuse's own; in-place
    # outputs stay their inputs; an unknown order is a usage error.
    printf '#! shapes: 64x48, 48x64\ninput x: tensor<float32, 2>\ninput z: tensor<float32, 2>\nxt = permute(x) {perm=[1, 0]}\ny = add(xt, z)\noutput y\n' > tadd.kf
    expect 0 "outputs row-major" "$kfuse" run tadd.kf --out-layout row-major --device cpu
    expect 0 "PASS" "$kfuse" run tadd.kf --out-layout transposed --device cpu
    printf '#! shapes: 8x16, 8x16\ninput x: tensor<float32, 2>\ninput r: tensor<float32, 2>\ns = add(x, r)\ny = relu(s)\noutput y\noutput s {alias=1}\n' > inplace.kf
    expect 0 "PASS" "$kfuse" run inplace.kf --out-layout transposed --device cpu
    expect 0 "outputs row-major" "$kfuse" explain tadd.kf --out-layout row-major
    expect 2 "unknown output layout 'columns' (kfuse, row-major, transposed)" "$kfuse" run tadd.kf --out-layout columns
    ;;
  in_layouts)
    # --layout with one layout per tensor input: a softmax backward with y
    # transposed copies y into kfuse's layout first (explain says so) and
    # matches the reference; a list of another length is an input error,
    # an unknown or empty name a usage error.
    printf '#! shapes: 16x40, 16x40\ninput dy: tensor<float32, 2>\ninput y: tensor<float32, 2>\np = mul(dy, y)\ns = sum(p) {axes=[1], keepdim=true}\nd = sub(dy, s)\ndx = mul(y, d)\noutput dx\n' > sbwd.kf
    expect 0 "PASS" "$kfuse" run sbwd.kf --layout "contiguous, transposed" --device cpu
    expect 0 "layout contiguous, transposed" "$kfuse" run sbwd.kf --layout "contiguous,transposed" --device cpu
    expect 0 "copied from the caller's layout into order [0, 1]" "$kfuse" explain sbwd.kf --layout "contiguous, transposed"
    expect 2 "--layout lists 3 layouts for 2 tensor inputs" "$kfuse" run sbwd.kf --layout "transposed, contiguous, strided" --device cpu
    expect 2 "unknown layout ''" "$kfuse" run sbwd.kf --layout "transposed," --device cpu
    expect 2 "unknown layout 'rows'" "$kfuse" run sbwd.kf --layout "contiguous, rows" --device cpu
    ;;
  help)
    # --help names every command, --version included, and the input values.
    expect 0 "kfuse version, kfuse --version" "$kfuse" --help
    expect 0 "integers 0 to 3" "$kfuse" --help
    expect 0 "library API version" "$kfuse" --version
    ;;
  deep)
    # Chains of ops as long as a file cares to make them: beyond
    # KF_MAX_GRAPH_DEPTH (10000) an input error naming the limit, within it
    # a result; never a signal. Run on a 1 MB stack (a JVM thread's) where
    # the shell can set one: the stack no stage may depend on.
    chain() {  # chain N FILE: x, then N alternating neg/abs ops
      awk -v n="$1" 'BEGIN { print "#! shapes: 4x8"; print "input v0: tensor<float32, 2>";
        for (i = 1; i <= n; i++) printf "v%d = %s(v%d)\n", i, (i % 2 ? "neg" : "abs"), i - 1;
        printf "output v%d\n", n }' > "$2"
    }
    chain 100000 deep.kf
    chain 3000 chain.kf
    ulimit -s 1024 2>/dev/null || true
    expect 2 "a chain of 10001 ops exceeds the limit of 10000" "$kfuse" run deep.kf --device cpu
    expect 2 "line 10003, column 10: neg: a chain of 10001 ops exceeds the limit of 10000" "$kfuse" explain deep.kf
    expect 0 "PASS" "$kfuse" run chain.kf --device cpu
    expect 0 "__global__" "$kfuse" explain chain.kf --cuda
    ;;
  *)
    echo "unknown case '$case_name'"
    exit 1
    ;;
esac
