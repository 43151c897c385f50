#!/usr/bin/env python3
"""Layers checked for headers too (issue 45 item 4): a file of stage S in
core/S/ may include `core/X/...` only where X is S or a stage S depends on,
directly or through others, by the KFUSE_STAGE_DEPS_* lines of the top
CMakeLists.txt (the same graph the kfuse_layer_<stage> link check enforces
for symbols). The CLI (tools/) and the examples use the public C API only:
no `core/` header. Inside the runtime stage, only the CPU backend
(core/runtime/cpu/) includes core/runtime/cpu/: the executor and the other
backends do not reach into it. ALLOWED lists the exceptions, each with its
reason. Exit 0 when every include is allowed, 1 listing those that are not.

    python3 tests/layers/check_includes.py [REPOSITORY_ROOT]
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
cmake = (root / "CMakeLists.txt").read_text()
stages = re.search(r"set\(KFUSE_STAGES ([^)]*)\)", cmake).group(1).split()
deps = {s: [] for s in stages}
for stage, listed in re.findall(r"set\(KFUSE_STAGE_DEPS_(\w+) ([^)]*)\)", cmake):
    deps[stage] = listed.replace('"', '').split()


def below(stage, seen=None):
    seen = set() if seen is None else seen
    for d in deps.get(stage, []):
        if d not in seen:
            seen.add(d)
            below(d, seen)
    return seen


include = re.compile(r'^\s*#\s*include\s+"core/(\w+)/', re.M)
cpu_backend = re.compile(r'^\s*#\s*include\s+"(core/runtime/cpu/[\w./]+)"', re.M)
# (file, included header) -> why it may
ALLOWED = {
    ("tools/host_tensor.cpp", "core/ir/fp8.h"):
        "float8 conversions are one macro (KF_FP8_CONVERSIONS) for the generated kernels, the CPU backend "
        "and the CLI's float64 reference; a copy could drift",
    ("core/runtime/comm/local_group.cpp", "core/runtime/cpu/tensor_view.h"):
        "the in-process communicator reduces host buffers, with the CPU backend's element access",
}


def allowed(path, header):
    return (str(path.relative_to(root)), header) in ALLOWED

bad = []
checked = 0
for stage in stages:
    allowed_stages = below(stage) | {stage}
    for path in sorted((root / "core" / stage).rglob("*")):
        if path.suffix not in (".h", ".cpp", ".cu", ".cuh"):
            continue
        checked += 1
        text = path.read_text()
        for x in include.findall(text):
            if x not in allowed_stages:
                bad.append(f"{path.relative_to(root)}: includes core/{x}/, but stage {stage} "
                           f"depends only on {sorted(allowed_stages - {stage}) or 'nothing'}")
        if stage == "runtime" and "cpu" not in path.relative_to(root / "core" / "runtime").parts[:-1]:
            for header in cpu_backend.findall(text):
                if not allowed(path, header):
                    bad.append(f"{path.relative_to(root)}: includes {header}: only the CPU backend does")
for folder in ("tools", "examples"):
    for path in sorted((root / folder).rglob("*")):
        if path.suffix in (".h", ".cpp", ".c"):
            checked += 1
            for header in re.findall(r'^\s*#\s*include\s+"(core/[\w./]+)"', path.read_text(), re.M):
                if not allowed(path, header):
                    bad.append(f"{path.relative_to(root)}: includes {header}; {folder}/ uses the public C API only")
if not stages or checked == 0:
    print("check_includes: found no stages or no files: the CMakeLists.txt format changed?")
    sys.exit(1)
print("\n".join(bad) if bad else f"check_includes: {checked} files, every core/ include follows the stage graph")
sys.exit(1 if bad else 0)
