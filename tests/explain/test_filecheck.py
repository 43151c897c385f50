#!/usr/bin/env python3
"""Tests of filecheck.py, the golden checker: each case is a fusion file's
directives, the output they are matched against, the exit status the
checker must give and a part of its message. The first cases are the
defects of the CMake checker it replaced (a `;` split a check in two).
Usage: test_filecheck.py [path/to/filecheck.py]"""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "filecheck.py")

OUT = """\
segment 0: row
  x = a;
  y = b;
  launch grid=64 block=256
"""

# (name, directives, exit status, part of the message)
CASES = [
    # A `;` is text: both halves present apart, the whole absent.
    ("semicolon_absent", "# CHECK: x = a; y = b;", 1, "CHECK: 'x = a; y = b;': not found"),
    ("semicolon_present", "# CHECK: x = a;\n# CHECK: y = b;", 0, "2 checks ok"),
    # A CHECK-NOT's `;` neither splits it nor turns its tail into a CHECK.
    ("not_semicolon_present", "# CHECK: segment\n# CHECK-NOT: x = a;\n# CHECK: launch", 1,
     "CHECK-NOT: 'x = a;': found on output line 2"),
    ("not_semicolon_tail_absent", "# CHECK: segment\n# CHECK-NOT: x = a; z\n# CHECK: launch", 0,
     "3 checks ok"),
    ("not_semicolon_tail_present", "# CHECK-NOT: q; y = b", 0, "1 checks ok"),
    # CHECK-NEXT: the very next line.
    ("next_adjacent", "# CHECK: x = a;\n# CHECK-NEXT: y = b;", 0, "2 checks ok"),
    ("next_not_adjacent", "# CHECK: segment\n# CHECK-NEXT: y = b;", 1,
     "CHECK-NEXT: 'y = b;': first found on output line 3, not on the line after"),
    ("next_same_line", "# CHECK: launch\n# CHECK-NEXT: block=256", 1,
     "CHECK-NEXT: 'block=256': first found on output line 4"),
    ("next_first", "# CHECK-NEXT: segment", 2, "CHECK-NEXT needs a CHECK before it"),
    # CHECK-SAME: the previous match's line, after that match.
    ("same_line", "# CHECK: launch\n# CHECK-SAME: block=256", 0, "2 checks ok"),
    ("same_other_line", "# CHECK: segment\n# CHECK-SAME: x = a;", 1,
     "CHECK-SAME: 'x = a;': first found on output line 2, not on the previous match's line 1"),
    ("same_before_match", "# CHECK: block=256\n# CHECK-SAME: grid=64", 1, "not found"),
    ("same_with_not", "# CHECK: launch\n# CHECK-NOT: block\n# CHECK-SAME: grid", 0, "3 checks ok"),
    ("same_with_not_found", "# CHECK: launch\n# CHECK-NOT: grid\n# CHECK-SAME: block", 1,
     "CHECK-NOT: 'grid': found on output line 4"),
    # CHECK: in order; CHECK-NOT: only between its neighbours' matches.
    ("order", "# CHECK: y = b;\n# CHECK: x = a;", 1, "CHECK: 'x = a;': not found after output line 3"),
    ("not_after_range", "# CHECK: segment\n# CHECK-NOT: launch\n# CHECK: y = b;", 0, "3 checks ok"),
    ("not_at_end", "# CHECK: y = b;\n# CHECK-NOT: grid", 1, "CHECK-NOT: 'grid': found on output line 4"),
    ("not_before_range", "# CHECK: y = b;\n# CHECK-NOT: x = a;", 0, "2 checks ok"),
    # Literal text, whitespace included (a trailing space too).
    ("spaces_literal", "# CHECK: x  = a;", 1, "not found"),
    ("trailing_space", "# CHECK: launch ", 0, "1 checks ok"),
    ("trailing_space_absent", "# CHECK: block=256 ", 1, "not found"),
    # A directive the checker does not know is an error, not ignored.
    ("unknown_directive", "# CHECK-DAG: segment", 2, "KIND one of"),
    ("no_checks", "# just a comment", 2, "no '# CHECK:' lines"),
]

FAKE_KFUSE = """\
import os, sys
print("argv " + " ".join(sys.argv[1:]))
print("tune " + os.environ.get("KFUSE_TUNE_X", "unset"))
sys.exit(3 if "--fail" in sys.argv else 0)
"""

# The RUN line: (name, directives, exit status, part of the message).
RUN_CASES = [
    ("run_args", '# RUN: kfuse explain %s --shapes "64x512, 512"\n'
                 "# CHECK: argv explain {kf} --shapes 64x512, 512\n# CHECK-NEXT: tune unset", 0, "2 checks ok"),
    ("run_env", "# RUN: kfuse explain %s\n# ENV: KFUSE_TUNE_X=7\n# CHECK: tune 7", 0, "1 checks ok"),
    ("run_fails", "# RUN: kfuse explain %s --fail\n# CHECK: argv", 2, "exited with 3"),
    ("run_not_kfuse", "# RUN: sh -c true\n# CHECK: argv", 2, "the RUN line must start with kfuse"),
    ("run_missing", "# CHECK: argv", 2, "no '# RUN: kfuse ...' line"),
]


def checker(*args):
    done = subprocess.run([sys.executable, CHECKER, *args], capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main():
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.txt")
        with open(out, "w") as f:
            f.write(OUT)
        kfuse = os.path.join(tmp, "kfuse")
        with open(kfuse, "w") as f:
            f.write(f"#!{sys.executable}\n{FAKE_KFUSE}")
        os.chmod(kfuse, 0o755)
        for cases, run in ((CASES, False), (RUN_CASES, True)):
            for name, directives, want_rc, want_msg in cases:
                kf = os.path.join(tmp, name + ".kf")
                with open(kf, "w") as f:
                    f.write(directives.replace("{kf}", kf) + "\ndefine f(x) { return x }\n")
                rc, msg = checker(kfuse, kf) if run else checker("--input", out, kf)
                ok = rc == want_rc and want_msg in msg
                print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}")
                if not ok:
                    failed += 1
                    print(f"  want exit {want_rc} and {want_msg!r}; got:\n{msg}")
    total = len(CASES) + len(RUN_CASES)
    print(f"{total - failed}/{total} cases ok")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
