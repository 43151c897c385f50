#!/usr/bin/env python3
"""Keeps the bindings in step with kfuse.h (ctest cpu_bindings_manifest).

    check_bindings.py <repo root> [<struct_layout executable>]

1. bindings/manifest.txt has one line per KF_API function of
   c_api/include/kfuse/kfuse.h (none missing, none extra, none twice), and
   for each binding (rust, java, go, python) either a wrapper or "- reason".
2. A named wrapper occurs in that binding's sources (each identifier of
   Type::method / Class.method as a word), and so does the C function it
   calls (or the one after "via"): Rust in kfuse/src, Java in
   src/main/java or kfuse.i, Go in *.go (SWIG's Kf_ name) or kfuse.i,
   Python in kfuse/ (outside a %ignore line).
3. A function left out ("-") is not called by that binding's own layer: a
   binding that starts calling it needs its manifest line updated.
4. The Python package's ctypes.Structure mirrors have the C layout that
   tests/bindings/struct_layout.c prints (size, each field's offset and
   size), and the field names, in order, of the struct in kfuse.h.
Reads sources only: no binding needs to be built. Standard library only.
"""
import ctypes
import importlib.util
import json
import os
import re
import subprocess
import sys

BINDINGS = ("rust", "java", "go", "python")
# Python mirror -> C struct (every ctypes.Structure subclass of the package
# must be listed: a new mirror must be checked too).
MIRRORS = {
    "_lib.OpInfo": "kf_op_info",
    "_lib.ValueInfo": "kf_value_info",
    "_lib.SegmentInfo": "kf_segment_info",
    "_lib.TaskInfo": "kf_task_info",
    "_lib.ExecOptions": "kf_exec_options",
    "_lib.NcclId": "kf_nccl_id",
    "_lib.CacheStats": "kf_cache_stats",
    "_dlpack.DLDevice": "DLDevice",
    "_dlpack.DLDataType": "DLDataType",
    "_dlpack.DLTensor": "DLTensor",
    "_dlpack.DLManagedTensor": "DLManagedTensor",
    "_dlpack.DLPackVersion": "DLPackVersion",
    "_dlpack.DLManagedTensorVersioned": "DLManagedTensorVersioned",
}

errors = []


def fail(message):
    errors.append(message)


def strip_c_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def read_files(root, folder, exts, skip=()):
    """{path: text} of the files under root/folder ending in exts."""
    out = {}
    base = os.path.join(root, folder)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", "build", "__pycache__"))
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if name.endswith(exts) and not any(s in path for s in skip):
                with open(path, encoding="utf-8") as f:
                    out[path] = f.read()
    return out


def binding_sources(root):
    b = "bindings/"
    rust = read_files(root, b + "rust/kfuse/src", (".rs",))
    java = read_files(root, b + "java/src/main", (".java",))
    java_i = read_files(root, b + "java", (".i",))
    go = read_files(root, b + "go", (".go",), skip=("_test.go", "/internal/"))
    go_i = read_files(root, b + "go", (".i",))
    python = read_files(root, b + "python/kfuse", (".py", ".c"))

    def unignored(files):  # SWIG interfaces without their %ignore lines
        return "\n".join(re.sub(r"^\s*%ignore[^\n]*", "", t, flags=re.M) for t in files.values())

    def text(*parts):
        return "\n".join(p if isinstance(p, str) else "\n".join(p.values()) for p in parts)

    return {
        # all text the wrapper names are looked for in
        "text": {"rust": text(rust), "java": text(java, java_i), "go": text(go, go_i),
                 "python": text(python)},
        # where the C function a wrapper calls must occur
        "refs": {"rust": text(rust), "java": text(java, unignored(java_i)),
                 "go": text(go, unignored(go_i)), "python": text(python)},
        # the binding's own layer calling a function (for "-" cells)
        "calls": {"rust": (text(rust), r"\b{f}\s*\("),
                  "java": (text(java), r"\bKfuseNative\.{f}\s*\("),
                  "go": (text(go), r"\bcapi\.{F}\s*\("),
                  "python": (text(python), r"\.{f}\b(?!\")")},
    }


def header_functions(header_text):
    text = strip_c_comments(header_text)
    return re.findall(r"^\s*KF_API\s+[^;(]*?\b(kf_\w+)\s*\(", text, re.M)


def header_struct_fields(header_text):
    """{struct name: [field names in order]} of the structs kfuse.h defines."""
    text = strip_c_comments(header_text)
    out = {}
    for m in re.finditer(r"typedef\s+struct\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        body, name = m.group(1), m.group(2)
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            fp = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # function pointer
            if fp:
                fields.append(fp.group(1))
                continue
            decl = re.sub(r"\[[^\]]*\]", "", decl)
            fields.append(re.findall(r"\w+", decl)[-1])
        out[name] = fields
    return out


def go_name(f):
    return "K" + f[1:]  # SWIG's Go name: kf_unary -> Kf_unary


def check_manifest(root):
    with open(os.path.join(root, "c_api/include/kfuse/kfuse.h"), encoding="utf-8") as f:
        header = f.read()
    functions = header_functions(header)
    if len(functions) < 50:
        fail(f"kfuse.h: found only {len(functions)} KF_API functions: is the parser broken?")
    known = set(functions)
    src = binding_sources(root)
    rows = {}
    counts = {b: [0, 0] for b in BINDINGS}
    path = os.path.join(root, "bindings/manifest.txt")
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"bindings/manifest.txt:{n}"
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 1 + len(BINDINGS):
            fail(f"{where}: {len(cells)} cells, expected {1 + len(BINDINGS)} (function | rust | java | go | python)")
            continue
        fn = cells[0]
        if fn in rows:
            fail(f"{where}: {fn} listed twice")
            continue
        rows[fn] = cells[1:]
        if fn not in known:
            fail(f"{where}: {fn} is not a KF_API function of kfuse.h (removed or renamed?)")
            continue
        for binding, cell in zip(BINDINGS, cells[1:]):
            if cell.startswith("-"):
                counts[binding][1] += 1
                if not cell[1:].strip():
                    fail(f"{where}: {binding}: '-' without a reason")
                text, pattern = src["calls"][binding]
                if re.search(pattern.format(f=re.escape(fn), F=re.escape(go_name(fn))), text):
                    fail(f"{where}: {binding} calls {fn} but the manifest says '{cell}': name its wrapper")
                continue
            counts[binding][0] += 1
            m = re.fullmatch(r"([A-Za-z_][\w]*(?:(?:::|\.)[A-Za-z_]\w*)*)(?:\s+via\s+(kf_\w+))?", cell)
            if not m:
                fail(f"{where}: {binding}: '{cell}' is neither a wrapper name, 'Wrapper via kf_x' nor '- reason'")
                continue
            wrapper, via = m.group(1), m.group(2)
            for ident in re.split(r"::|\.", wrapper):
                if not re.search(r"\b" + re.escape(ident) + r"\b", src["text"][binding]):
                    fail(f"{where}: {binding}: wrapper {wrapper}: '{ident}' does not occur in its sources")
            called = via or fn
            if via and via not in known:
                fail(f"{where}: {binding}: {via} is not a KF_API function of kfuse.h")
            names = [called] + ([go_name(called)] if binding == "go" else [])
            if not any(re.search(r"\b" + re.escape(c) + r"\b", src["refs"][binding]) for c in names):
                fail(f"{where}: {binding}: {called} does not occur in its sources: is it still wrapped?")
    for fn in functions:
        if fn not in rows:
            fail(f"bindings/manifest.txt: {fn} (kfuse.h) is missing: add a line for it")
    order = [f for f in rows if f in known]
    if not errors and order != functions:
        fail("bindings/manifest.txt: lines are not in kfuse.h's order")
    return header, functions, counts


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # _lib.py and _dlpack.py import ctypes & co only
    return module


def check_layouts(root, header, layout_exe):
    with subprocess.Popen([layout_exe], stdout=subprocess.PIPE, text=True) as p:
        out, _ = p.communicate()
    if p.returncode != 0:
        fail(f"{layout_exe} exited {p.returncode}")
        return 0
    layout = json.loads(out)
    header_fields = header_struct_fields(header)
    pkg = os.path.join(root, "bindings/python/kfuse")
    modules = {m: load_module(os.path.join(pkg, m + ".py"), "kfuse_check" + m) for m in ("_lib", "_dlpack")}
    for m, module in modules.items():
        for name, obj in vars(module).items():
            if (isinstance(obj, type) and issubclass(obj, ctypes.Structure) and obj.__module__ == module.__name__
                    and f"{m}.{name}" not in MIRRORS):
                fail(f"bindings/python/kfuse/{m}.py: {name} mirrors a C struct but is not checked: add it to MIRRORS")
    checked = 0
    for mirror, cname in MIRRORS.items():
        m, name = mirror.split(".")
        py = getattr(modules[m], name, None)
        if py is None:
            fail(f"{mirror}: no such class (update MIRRORS)")
            continue
        c = layout.get(cname)
        if c is None:
            fail(f"{cname}: not printed by struct_layout.c")
            continue
        checked += 1
        names = [f[0] for f in py._fields_]
        if cname in header_fields and names != header_fields[cname]:
            fail(f"{mirror}: fields {names} but kfuse.h's {cname} has {header_fields[cname]}")
        for f in header_fields.get(cname, []):
            if f not in c["fields"]:
                fail(f"{cname}.{f}: in kfuse.h but not printed by tests/bindings/struct_layout.c")
        if ctypes.sizeof(py) != c["size"]:
            fail(f"{mirror}: ctypes.sizeof {ctypes.sizeof(py)} != sizeof({cname}) {c['size']}")
        for f in names:
            if f not in c["fields"]:
                fail(f"{mirror}.{f}: no such field in C's {cname} (per struct_layout.c)")
                continue
            descr = getattr(py, f)
            offset, size = c["fields"][f]
            if (descr.offset, descr.size) != (offset, size):
                fail(f"{mirror}.{f}: offset/size {descr.offset}/{descr.size} != C's {offset}/{size}")
        for f in c["fields"]:
            if f not in names:
                fail(f"{mirror}: lacks C's field {cname}.{f}")
    return checked


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    root = sys.argv[1]
    header, functions, counts = check_manifest(root)
    checked = check_layouts(root, header, sys.argv[2]) if len(sys.argv) == 3 else 0
    for e in errors:
        print("FAIL:", e)
    if errors:
        print(f"{len(errors)} problem(s)")
        return 1
    print(f"{len(functions)} KF_API functions; wrapped / left out: " +
          ", ".join(f"{b} {w}/{l}" for b, (w, l) in counts.items()) +
          f"; {checked} Python struct mirrors match the C layout")
    return 0


if __name__ == "__main__":
    sys.exit(main())
