#!/usr/bin/env python3
"""Plans for the GPU over every mix of memory orders a tiled kernel meets,
on any machine (metadata only: no GPU, no memory).

Fusions of several inputs and outputs, some updated in place (an AdamW
step, a gated activation's backward, two results of one sum), each input
contiguous, transposed, at an odd storage offset or with padded rows, each
output the caller allocates row-major or transposed, at shapes with odd,
one-element and empty dims: every combination must concretize, segment and
generate CUDA for kDLCUDA tensors (bench/corpus/metadata.py), each segment
scheduled; a tiled segment must write each of its outputs once (phase 1,
phase 2 or a staged tile) and hold at most 40 KB of tiles. What changed
under it: the tiled scheduler choosing dim b among the outputs' fast dims
by the bytes each plan moves across memory (docs/perf-log.md session 40).

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        python3 tests/corpus/test_tiled_layouts_cpu.py
"""
import itertools
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "corpus"))

import kfuse  # noqa: E402
from metadata import CudaMetadata  # noqa: E402

FUSIONS = {
    # inputs (name, dtype), outputs (dtype, the input it updates or None), text
    "adamw": ([("param", "float32"), ("grad", "bfloat16"), ("m", "float32"), ("v", "float32")],
              [("float32", 0), ("float32", 2), ("float32", 3), ("bfloat16", None)],
              "input param: tensor<float32, 2>\ninput grad: tensor<bfloat16, 2>\n"
              "input m: tensor<float32, 2>\ninput v: tensor<float32, 2>\n"
              "const b1: float32 = 0.1\nconst b2: float32 = 0.95\nconst c2: float32 = 0.05\n"
              "const eps: float32 = 1e-8\nconst lr: float32 = 0.001\n"
              "g = cast(grad) {dtype=float32}\nm1 = lerp(m, g, b1)\nv0 = mul(v, b2)\ngg = mul(g, g)\n"
              "v1 = mul(gg, c2)\nv2 = add(v0, v1)\nsv = sqrt(v2)\nden = add(sv, eps)\nu = div(m1, den)\n"
              "su = mul(u, lr)\np1 = sub(param, su)\np16 = cast(p1) {dtype=bfloat16}\n"
              "output p1 {alias=0}\noutput m1 {alias=2}\noutput v2 {alias=3}\noutput p16\n"),
    "geglu_bwd": ([("gate", "float16"), ("up", "float16"), ("dy", "float16")],
                  [("float16", None), ("float16", None), ("float16", None)],
                  "input gate: tensor<float16, 2>\ninput up: tensor<float16, 2>\ninput dy: tensor<float16, 2>\n"
                  "gf = cast(gate) {dtype=float32}\nuf = cast(up) {dtype=float32}\ndf = cast(dy) {dtype=float32}\n"
                  "a = gelu(gf)\ndu = mul(df, a)\ndh = mul(df, uf)\nsg = sigmoid(gf)\ndg = mul(dh, sg)\n"
                  "y = mul(a, uf)\ndgo = cast(dg) {dtype=float16}\nduo = cast(du) {dtype=float16}\n"
                  "yo = cast(y) {dtype=float16}\noutput dgo\noutput duo\noutput yo\n"),
    "two_results": ([("x", "float32"), ("r", "float32")], [("float32", None), ("float32", 1)],
                    "input x: tensor<float32, 2>\ninput r: tensor<float32, 2>\nconst h: float32 = 0.5\n"
                    "s = add(x, r)\nt = mul(s, h)\noutput s\noutput t {alias=1}\n"),
}
INPUT_LAYOUTS = [{"kind": "contiguous"}, {"kind": "permuted", "order": [1, 0]}, {"kind": "offset", "offset": 1},
                 {"kind": "padded", "pad": 3}]
OUTPUT_LAYOUTS = [{"kind": "contiguous"}, {"kind": "permuted", "order": [1, 0]}]
SHAPES = [[64, 48], [333, 1001], [1, 77], [77, 1], [0, 16], [2, 4095]]
TILE_BYTES = 40 * 1024


def tile_bytes(value, input_dtypes):
    """A tile's shared memory: a task input of 1 or 2 bytes (values 0.. are
    the inputs, in order) is held as stored, its rows padded to an odd
    number of words; anything else as 4-byte registers (no 8-byte dtype here)."""
    size = {"float16": 2, "bfloat16": 2, "int8": 1, "bool": 1}.get(
        input_dtypes[value] if value < len(input_dtypes) else "float32", 4)
    return 64 * (64 + (4 // size if size < 4 else 1)) * size


def check_tiled(schedule, what, input_dtypes):
    """Each output in exactly one of phase 1 (outputs_a), phase 3 (outputs_staged) or phase 2;
    the tiles within the shared memory budget."""
    lists = {k: [int(x) for x in v.split(",") if x]
             for k, v in re.findall(r"\b(outputs|outputs_a|outputs_staged|tiled_inputs)=\[([0-9,]*)\]", schedule)}
    outs = lists.get("outputs", [])
    a, staged = lists.get("outputs_a", []), lists.get("outputs_staged", [])
    if len(set(outs)) != len(outs) or not set(a) <= set(outs) or not set(staged) <= set(outs) or set(a) & set(staged):
        raise AssertionError(f"{what}: outputs split wrongly: {schedule}")
    total = sum(tile_bytes(v, input_dtypes) for v in lists.get("tiled_inputs", [])) + len(staged) * 64 * 65 * 4
    if total > TILE_BYTES:
        raise AssertionError(f"{what}: tiles of {total} bytes: {schedule}")


def main():
    plans = tiled = 0
    for name, (ins, outs, text) in FUSIONS.items():
        fusion = kfuse.Fusion.from_text(text)
        free = [k for k, (_, alias) in enumerate(outs) if alias is None]
        for shape in SHAPES:
            for in_lays in itertools.product(INPUT_LAYOUTS, repeat=len(ins)):
                for out_lays in itertools.product(OUTPUT_LAYOUTS, repeat=len(free)):
                    specs = [{"name": n, "dtype": dt, "shape": list(shape), "layout": lay}
                             for (n, dt), lay in zip(ins, in_lays)]
                    metas = [CudaMetadata(s) for s in specs]
                    lay_of = dict(zip(free, out_lays))
                    out = [metas[alias] if alias is not None else
                           CudaMetadata({"dtype": dt, "shape": list(shape), "layout": lay_of[k]})
                           for k, (dt, alias) in enumerate(outs)]
                    what = f"{name} {shape} inputs {[l['kind'] for l in in_lays]} outputs {[l['kind'] for l in out_lays]}"
                    try:
                        segs = list(fusion.segments(*metas, cuda=True, out=out))
                    except kfuse.KfuseError as e:
                        raise AssertionError(f"{what}: {e}") from e
                    plans += 1
                    for seg in segs:
                        schedule = getattr(seg, "schedule", "")
                        if not seg.scheduler or seg.cuda is None:
                            raise AssertionError(f"{what}: segment {seg.index} ({seg.scheduler}): "
                                                 f"{getattr(seg, 'cuda_error', '')}")
                        if schedule.startswith("tiled"):
                            tiled += 1
                            check_tiled(schedule, what, [dt for _, dt in ins])
    print(f"test_tiled_layouts_cpu: {plans} plans, {tiled} tiled segments: ok")
    if tiled == 0:
        raise AssertionError("no tiled segment: the sweep no longer reaches the tiled scheduler")


if __name__ == "__main__":
    main()
