#!/usr/bin/env python3
"""Golden stage tests: a FileCheck subset, literal text, Python stdlib only.

A fusion file under tests/explain names the command to run and what its
output must hold:

    # RUN: kfuse explain %s --shapes "64x512, 512"
    # ENV: KFUSE_TUNE_ROW_CLUSTER_MAX=0
    # CHECK: schedule:   row block=1024
    # CHECK-SAME: cluster
    # CHECK-NEXT: launch
    # CHECK-NOT: tiled

Directives (LLVM FileCheck's meaning; the text after ": " is matched
literally, whitespace included, to the end of the line):
  CHECK       the text, anywhere after the previous match.
  CHECK-NEXT  the text's first occurrence after the previous match is on
              the line right after the previous match's line.
  CHECK-SAME  the text's first occurrence after the previous match is on
              the previous match's line.
  CHECK-NOT   the text is absent between the previous match and the next
              CHECK/CHECK-NEXT/CHECK-SAME's match (or the end of the output).
The RUN line is split as a shell would split it (no shell runs); its first
word must be `kfuse`, the CLI given on the command line, and `%s` stands for
the fusion file. ENV lines set variables for that run. Only the command's
standard output is matched.

Usage: filecheck.py KFUSE FILE.kf          run FILE's RUN line with KFUSE
       filecheck.py --input OUT FILE.kf    match OUT's text, run nothing
Exit status 0 when every check holds; 1 with a message naming the failed
check (its line in FILE) otherwise; 2 for a malformed FILE or a failed run.
"""
import os
import re
import shlex
import subprocess
import sys

KINDS = ("CHECK", "CHECK-NEXT", "CHECK-SAME", "CHECK-NOT")


class Malformed(Exception):
    pass


class Mismatch(Exception):
    pass


def parse(path):
    """The RUN line, the ENV assignments and the checks (kind, text, line no)."""
    run, env, checks = None, {}, []
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f.read().split("\n"), 1):
            where = f"{path}:{no}"
            if re.match(r"#\s*RUN\b", line):
                m = re.fullmatch(r"# RUN: (.+)", line)
                if not m or run is not None:
                    raise Malformed(f"{where}: expected one '# RUN: kfuse ...' line")
                run = m.group(1)
            elif re.match(r"#\s*ENV\b", line):
                m = re.fullmatch(r"# ENV: ([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
                if not m:
                    raise Malformed(f"{where}: expected '# ENV: NAME=VALUE'")
                env[m.group(1)] = m.group(2)
            elif re.match(r"#\s*CHECK", line):
                m = re.fullmatch(r"# (CHECK[A-Z-]*): (.+)", line)
                if not m or m.group(1) not in KINDS:
                    raise Malformed(f"{where}: expected '# KIND: text' with KIND one of "
                                    f"{', '.join(KINDS)}; got {line!r}")
                checks.append((m.group(1), m.group(2), no))
    if not checks:
        raise Malformed(f"{path}: no '# CHECK:' lines")
    if checks[0][0] in ("CHECK-NEXT", "CHECK-SAME"):
        raise Malformed(f"{path}:{checks[0][2]}: {checks[0][0]} needs a CHECK before it")
    return run, env, checks


def match(checks, out, path):
    """Raises Mismatch for the first check that does not hold."""
    pos = 0        # where the previous match ended: the next search starts here
    nots = []      # CHECK-NOTs waiting for the next positive match
    for kind, text, no in checks:
        where = f"{path}:{no}: {kind}: {text!r}"
        if kind == "CHECK-NOT":
            nots.append((text, where))
            continue
        at = out.find(text, pos)
        if at == -1:
            raise Mismatch(f"{where}: not found after output line {out.count(chr(10), 0, pos) + 1}")
        newlines = out.count("\n", pos, at)
        if kind == "CHECK-NEXT" and newlines != 1:
            raise Mismatch(f"{where}: first found on output line {out.count(chr(10), 0, at) + 1}, "
                           f"not on the line after the previous match "
                           f"(line {out.count(chr(10), 0, pos) + 1})")
        if kind == "CHECK-SAME" and newlines != 0:
            raise Mismatch(f"{where}: first found on output line {out.count(chr(10), 0, at) + 1}, "
                           f"not on the previous match's line {out.count(chr(10), 0, pos) + 1}")
        check_nots(nots, out, pos, at)
        nots = []
        pos = at + len(text)
    check_nots(nots, out, pos, len(out))


def check_nots(nots, out, begin, end):
    for text, where in nots:
        at = out.find(text, begin, end)
        if at != -1:
            raise Mismatch(f"{where}: found on output line {out.count(chr(10), 0, at) + 1}")


def run_line(kfuse, path, run, env):
    if run is None:
        raise Malformed(f"{path}: no '# RUN: kfuse ...' line")
    argv = shlex.split(run)
    if argv[0] != "kfuse":
        raise Malformed(f"{path}: the RUN line must start with kfuse")
    argv = [kfuse] + [a.replace("%s", path) for a in argv[1:]]
    done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True)
    if done.returncode != 0:
        raise Malformed(f"{path}: {shlex.join(argv)} exited with {done.returncode}\n"
                        f"{done.stdout}{done.stderr}")
    return done.stdout


def main(args):
    if len(args) == 3 and args[0] == "--input":
        input_file, path = args[1:]
    elif len(args) == 2 and not args[0].startswith("-"):
        input_file, (kfuse, path) = None, args
    else:
        print(__doc__, file=sys.stderr)
        return 2
    out = ""
    try:
        run, env, checks = parse(path)
        if input_file is not None:
            with open(input_file, encoding="utf-8") as f:
                out = f.read()
        else:
            out = run_line(kfuse, path, run, env)
        match(checks, out, path)
    except Malformed as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Mismatch as e:
        print(f"FAIL: {e}\n--- output ---\n{out}", file=sys.stderr)
        return 1
    print(f"{path}: {len(checks)} checks ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
