#!/usr/bin/env python3
"""The benchmark corpus (bench/corpus/generate.py) on kfuse's CPU backend.

For a few seeds, every fusion scaled down (scale="tiny": same classes,
texts, layouts and aliases, small sizes) must define, concretize and
execute with status OK through the Python package, on torch CPU tensors
in the entry's input layouts (permuted, padded rows, storage offsets,
stride-0 dims), twice: once with outputs kfuse allocates, once into
outputs allocated as the entry says (contiguous or permuted, in-place
outputs into their inputs) with `out=`; the two must agree bit for bit
(NaN-aware) and have the shapes and dtypes the generator declares. Each
fusion is also segmented for kDLCUDA with its CUDA source generated (no GPU
needed). The generator must be deterministic, its tiny corpus the same as
the full one up to sizes, and the full one within its memory limits.

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 tests/corpus/test_corpus_cpu.py [--seeds 1,2,3] [--count 40]

float8 tensors travel as uint8 storage relabelled through DLPack (random
codes of positive finite values; torch 1.13 has no float8 dtypes).
With --reference (bench/kf_torch.py importable) each result is also
compared with the torch interpretation of the text, at the tolerance of
bench_torch.py. The full-size fusions are also concretized, segmented and
given CUDA source for kDLCUDA inputs in their layouts (metadata only: no
GPU, no memory). Exits 77 (skipped) without torch.
"""
import argparse
import ctypes
import json
import pathlib
import re
import sys
import time
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "corpus"))
sys.path.insert(0, str(ROOT / "bench"))

import generate  # noqa: E402

try:
    import torch
except ImportError:
    print("test_corpus_cpu: skipped: no torch for this Python", sys.executable)
    sys.exit(77)
import kfuse  # noqa: E402
import tensors  # noqa: E402
from metadata import CudaMetadata  # noqa: E402

FP8_CODES = {"float8_e4m3fn": 10, "float8_e5m2": 12}
_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


class Relabelled:
    """A uint8 torch tensor handed to kfuse as a float8 one (DLPack dtype code
    changed in the exported capsule; byte 20 of DLTensor is dtype.code)."""

    def __init__(self, t, dtype):
        self.t, self.code, self.dtype = t, FP8_CODES[dtype], dtype

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        cap = torch.utils.dlpack.to_dlpack(self.t)
        ctypes.c_uint8.from_address(_get_pointer(cap, b"dltensor") + 20).value = self.code
        return cap


def make_inputs(entry, seed):
    """The entry's inputs on the CPU; float8 as Relabelled uint8 (whatever
    this torch's float8 and DLPack support), bool as uint8 where torch's
    DLPack export lacks bool (1.13; kfuse takes 8-bit ints for bool inputs)."""
    gen = torch.Generator()
    gen.manual_seed(seed)
    ins = []
    for spec in entry["inputs"]:
        if spec["dtype"] in FP8_CODES:
            raw = dict(spec, dtype="uint8", values={"index": 0x78 if spec["dtype"] == "float8_e5m2" else 0x7f})
            ins.append(Relabelled(tensors.make_input(raw, "cpu", gen), spec["dtype"]))
        else:
            ins.append(tensors.make_input(spec, "cpu", gen))
    if not bool_dlpack():
        ins = [t.view(torch.uint8) if isinstance(t, torch.Tensor) and t.dtype == torch.bool else t for t in ins]
    return ins


def bool_dlpack():
    try:
        torch.utils.dlpack.to_dlpack(torch.zeros(1, dtype=torch.bool))
        return True
    except RuntimeError:
        return False


def raw(t):
    return t.t if isinstance(t, Relabelled) else t


def as_torch(kt):
    """A kfuse output Tensor as a torch tensor (float8: its bytes as uint8)."""
    if dtype_name(kt) in FP8_CODES:
        return torch.from_numpy(kt.numpy(raw=True).copy())
    return torch.from_dlpack(kt)


def dtype_name(kt):
    return str(kt.dtype).split(".")[-1].replace("bool_", "bool")


def run_entry(entry, seed, reference):
    fusion = kfuse.Fusion.from_text(entry["text"])
    # 1. outputs allocated by kfuse
    ins_a = make_inputs(entry, seed)
    res = fusion(*ins_a)
    res = list(res) if isinstance(res, tuple) else [res]
    if len(res) != len(entry["outputs"]):
        raise RuntimeError(f"{len(res)} outputs, the entry declares {len(entry['outputs'])}")
    shapes = [tuple(r.shape) for r in res]
    names = [dtype_name(r) for r in res]
    for k, (o, s, n) in enumerate(zip(entry["outputs"], shapes, names)):
        if list(s) != o["shape"] or n != o["dtype"]:
            raise RuntimeError(f"output {k} ({o['name']}): kfuse gives {n} {list(s)}, "
                               f"the entry declares {o['dtype']} {o['shape']}")
    got_a = [as_torch(r).clone() for r in res]
    # 2. into caller-allocated outputs in the entry's layouts
    ins_b = make_inputs(entry, seed)
    outs_b = []
    for o, s, n in zip(entry["outputs"], shapes, names):
        if o["alias"] is not None:
            outs_b.append(ins_b[o["alias"]])
        elif n in FP8_CODES:
            outs_b.append(Relabelled(tensors.make_output(o, list(s), torch.uint8, "cpu"), n))
        else:
            outs_b.append(tensors.make_output(o, list(s), tensors.torch_dtype(n), "cpu"))
    fusion(*ins_b, out=outs_b)
    for k, (a, b) in enumerate(zip(got_a, outs_b)):
        b = raw(b)
        same = a.shape == b.shape and (torch.equal(a, b) or (a.is_floating_point() and torch.equal(
            torch.nan_to_num(a, 0.0, 1.0, -1.0), torch.nan_to_num(b, 0.0, 1.0, -1.0)) and
            torch.equal(torch.isnan(a), torch.isnan(b))))
        if not same:
            raise RuntimeError(f"output {k}: out= into {entry['outputs'][k]['layout']} differs from kfuse's own")
    if reference is not None:
        check_reference(entry, seed, reference, got_a)


def check_reference(entry, seed, parse, got):
    if any(i["dtype"] in FP8_CODES for i in entry["inputs"] + entry["outputs"]):
        return  # torch's float8 cannot be relied on here
    ins = make_inputs(entry, seed)
    program = parse(entry["text"])
    ref = program(*ins)
    for k, (o, r) in enumerate(zip(got, ref)):
        ok, err, tol = tensors.compare(o, r)
        if not ok:
            raise RuntimeError(f"output {k}: kfuse differs from kf_torch by {err:.3g} (tolerance {tol:.3g})")


def segment_full(entry):
    """The full-size fusion concretized and segmented for kDLCUDA inputs in
    their layouts, with each segment's CUDA source."""
    fusion = kfuse.Fusion.from_text(entry["text"])
    for seg in fusion.segments(*[CudaMetadata(i) for i in entry["inputs"]], cuda=True):
        if seg.cuda is None:
            raise RuntimeError(f"segment {seg.index} ({seg.scheduler}): {seg.cuda_error}")
    return fusion


def structure(text):
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)


def check_generator(seeds, count):
    problems = []
    for seed in seeds:
        a = generate.generate(seed, count)
        if json.dumps(a) != json.dumps(generate.generate(seed, count)):
            problems.append(f"seed {seed}: two generations differ")
        if json.dumps(generate.generate(seed, count // 2)) != json.dumps(a[:count // 2]):
            problems.append(f"seed {seed}: the first {count // 2} fusions depend on the count")
        tiny = generate.generate(seed, count, "tiny")
        for e, t in zip(a, tiny):
            kinds = lambda x: [(i["name"], i["dtype"], i["layout"]["kind"], len(i["shape"])) for i in x["inputs"]]
            outs = lambda x: [(o["name"], o["dtype"], o["layout"]["kind"], o["alias"]) for o in x["outputs"]]
            if (e["name"], e["class"], kinds(e), outs(e)) != (t["name"], t["class"], kinds(t), outs(t)):
                problems.append(f"seed {seed}: {e['name']}: tiny differs from full beyond sizes")
            elif structure(e["text"]) != structure(t["text"]):
                problems.append(f"seed {seed}: {e['name']}: tiny text differs from full beyond numbers")
            if e["memory"] > generate.MEMORY_CAP:
                problems.append(f"seed {seed}: {e['name']}: needs {e['memory'] / 2**30:.1f} GiB")
        inside = sum(1 for e in a if 2 * generate.MiB <= e["bytes"] <= 2 * generate.GiB)
        if inside < 0.9 * len(a):
            problems.append(f"seed {seed}: only {inside} of {len(a)} fusions move 2 MiB to 2 GiB")
        missing = set(generate.CLASSES) - {e["class"] for e in a}
        if count >= 100 and missing:
            problems.append(f"seed {seed}: no fusion of class {sorted(missing)}")
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--count", type=int, default=40)
    p.add_argument("--classes", default="")
    p.add_argument("--reference", action="store_true", help="also compare with bench/kf_torch.py")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    reference = None
    if a.reference:
        from kf_torch import parse as reference
    t0 = time.time()
    problems = check_generator(seeds, max(a.count, 120))
    for msg in problems:
        print("GENERATOR:", msg)
    failures, n, by_class = [], 0, {}
    n_full = 0
    for seed in seeds:  # full sizes, in their layouts: concretized and segmented for the GPU
        for entry in generate.generate(seed, a.count, "full", [c for c in a.classes.split(",") if c] or None):
            n_full += 1
            try:
                segment_full(entry)
            except Exception as e:  # noqa: BLE001
                failures.append((seed, entry, e))
                print(f"FAIL seed {seed} {entry['name']} (full size, kDLCUDA segmentation): {type(e).__name__}: {e}")
                print("  inputs:", json.dumps([(i["dtype"], i["shape"], i["layout"]) for i in entry["inputs"]]))
                print("  " + entry["text"].replace("\n", "\n  "))
    for seed in seeds:
        for entry in generate.generate(seed, a.count, "tiny", [c for c in a.classes.split(",") if c] or None):
            n += 1
            by_class[entry["class"]] = by_class.get(entry["class"], 0) + 1
            try:
                run_entry(entry, seed, reference)
                if a.verbose:
                    print(f"ok   seed {seed} {entry['name']}")
            except Exception as e:  # noqa: BLE001: report every fusion
                failures.append((seed, entry, e))
                print(f"FAIL seed {seed} {entry['name']} ({entry['class']}): {type(e).__name__}: {e}")
                print("  inputs:", json.dumps([(i["dtype"], i["shape"], i["layout"]) for i in entry["inputs"]]))
                print("  outputs:", json.dumps([(o["layout"], o["alias"]) for o in entry["outputs"]]))
                print("  " + entry["text"].replace("\n", "\n  "))
                if a.verbose:
                    traceback.print_exc()
    print(f"test_corpus_cpu: {n_full} full-size fusions segmented for the GPU, {n} tiny fusions run; "
          f"{len(failures)} failures (seeds {a.seeds}, by class "
          f"{dict(sorted(by_class.items()))}), generator checks: {len(problems)} problems, {time.time() - t0:.1f} s")
    sys.exit(1 if failures or problems else 0)


if __name__ == "__main__":
    main()
