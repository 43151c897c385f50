#!/usr/bin/env python3
"""Corpus fusions as a plain manifest for C++ tools (bench/prelude_parts_bench):
each fusion's text and its inputs' and outputs' DLPack metadata as
CudaMetadata makes it (dtype code and bits, shape, strides, a made-up
device address carrying the storage offset; an aliased output repeats its
input), so a tool plans them as plan.py does (kf_concretize_into, or with
--kfuse-outputs no outputs: kf_concretize).

    python3 bench/corpus/manifest.py --seed 730114261 --count 200 > corpus.txt

or fusion files at their `#! shapes:` (or `# RUN: ... --shapes "..."`) line,
each three times: contiguous, every tensor of rank 2 and more padded by 8
elements per row, and every tensor 3 elements past an aligned address
(`--layout transposed` in a RUN line: dims in reverse memory order):

    python3 bench/corpus/manifest.py --files tests/explain/*.kf bench/cases/*.kf > files.txt

Format, one fusion after another:
    fusion <name> <class>
    text <bytes>
    <the text, exactly that many bytes>
    in <code> <bits> <ndim> <shape...> <strides...> <address>   (each tensor input)
    scalar <code> <bits>                                       (each scalar input)
    out <same fields>                                          (each output, unless --kfuse-outputs)
    end
"""
import argparse
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import generate  # noqa: E402
from metadata import CudaMetadata  # noqa: E402


def tensor_line(kind, spec, region):
    code, bits = CudaMetadata.CODES[spec["dtype"]]
    strides, offset = generate.input_strides(spec)
    base = 0x7f0000000000 + (region % 64 << 36)  # as CudaMetadata
    shape = [int(s) for s in spec["shape"]]
    fields = [kind, code, bits, len(shape), *shape, *strides, base + offset * bits // 8]
    return " ".join(str(f) for f in fields)


def file_entries(files):
    """(name, text, [input lines]) of each fusion file in three layouts."""
    region = 0
    for f in files:
        text = pathlib.Path(f).read_text()
        m = re.search(r"^#! shapes:(.*)$", text, re.M) or re.search(r'--shapes "([^"]*)"', text)
        if not m:
            continue
        shapes = [[int(d) for d in s.strip().split("x")] if s.strip() else [] for s in m.group(1).split(",")]
        transposed = re.search(r"RUN:.*--layout transposed", text) is not None
        decls = re.findall(r"^input\s+\w+\s*:\s*(tensor|scalar)<\s*(\w+)", text, re.M)
        if sum(kind == "tensor" for kind, _ in decls) != len(shapes):
            continue
        for variant in ("contiguous", "padded", "offset"):
            lines, it = [], iter(shapes)
            for kind, dtype in decls:
                code, bits = CudaMetadata.CODES[dtype]
                if kind == "scalar":
                    lines.append(f"scalar {code} {bits}")
                    continue
                shape = next(it)
                layout = {"kind": "contiguous"}
                if transposed and len(shape) >= 2:
                    layout = {"kind": "permuted", "order": list(range(len(shape)))[::-1]}
                elif variant == "padded" and len(shape) >= 2:
                    layout = {"kind": "padded", "pad": 8}
                elif variant == "offset":
                    layout = {"kind": "offset", "offset": 3}
                region += 1
                lines.append(tensor_line("in", {"dtype": dtype, "shape": shape, "layout": layout}, region))
            yield f"{pathlib.Path(f).stem}.{variant}", text, lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int)
    p.add_argument("--files", nargs="+", help="fusion files instead of the corpus")
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--kfuse-outputs", action="store_true", help="no output lines (outputs in kfuse's layout)")
    args = p.parse_args()
    out = sys.stdout
    if args.files:
        for name, text, lines in file_entries(args.files):
            text = text.encode()
            out.write(f"fusion {name} file\ntext {len(text)}\n")
            out.flush()
            out.buffer.write(text)
            out.buffer.flush()
            out.write("\n" + "".join(l + "\n" for l in lines) + "end\n")
        return
    region = 0
    for e in generate.generate(args.seed, args.count):
        text = e["text"].encode()
        out.write(f"fusion {e['name']} {e['class']}\ntext {len(text)}\n")
        out.flush()
        out.buffer.write(text)
        out.buffer.flush()
        out.write("\n")
        lines = []
        for i in e["inputs"]:
            region += 1
            lines.append(tensor_line("in", i, region))
        out.write("".join(l + "\n" for l in lines))
        if not args.kfuse_outputs:
            for o in e["outputs"]:
                if o["alias"] is not None:
                    out.write("out" + lines[o["alias"]][2:] + "\n")
                else:
                    region += 1
                    out.write(tensor_line("out", o, region) + "\n")
        out.write("end\n")


if __name__ == "__main__":
    main()
