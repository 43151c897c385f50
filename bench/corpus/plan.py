#!/usr/bin/env python3
"""The plan kfuse makes for corpus fusions on the GPU, on any machine: each
fusion's text, its inputs' layouts, and its segments' schedulers and
schedules, for kDLCUDA tensors in the entry's input and output layouts
(kf_concretize_into, as corpus_bench.py runs them; --kfuse-outputs: outputs
in kfuse's own layout; --cuda: the generated CUDA too). What the session 27 analysis of the corpus used
(docs/perf-log.md):

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \
        python3 bench/corpus/plan.py --seed 333280337 126 33 155
"""
import argparse
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import generate  # noqa: E402
import kfuse  # noqa: E402
from metadata import CudaMetadata  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("index", type=int, nargs="+", help="fusion numbers in the sample (c0126: 126)")
    p.add_argument("--kfuse-outputs", action="store_true", help="outputs in kfuse's layout (kf_concretize)")
    p.add_argument("--cuda", action="store_true", help="print each segment's CUDA C++")
    p.add_argument("--grammar", type=int, default=generate.GRAMMAR,
                   help="the generator's grammar (default: the latest); an earlier one draws a seed as an earlier session did")
    args = p.parse_args()
    corpus = generate.generate(args.seed, max(args.index) + 1, grammar=args.grammar)
    for n in args.index:
        e = corpus[n]
        print("=" * 100)
        print(e["text"])
        print("inputs:", [(i["name"], i["shape"], i["layout"]) for i in e["inputs"]])
        print("outputs:", [o["layout"] for o in e["outputs"]], "bytes", e["bytes"])
        fusion = kfuse.Fusion.from_text(e["text"])
        ins = [CudaMetadata(i) for i in e["inputs"]]
        outs = None if args.kfuse_outputs else [
            ins[o["alias"]] if o["alias"] is not None else CudaMetadata(o) for o in e["outputs"]]
        for line in fusion.explain(*ins, out=outs).splitlines():
            if "copied" in line:  # inputs copied into kfuse's layout, outputs into the caller's
                print(" ", line.strip())
        for seg in fusion.segments(*ins, cuda=args.cuda, out=outs):
            print(f"  segment {seg.index}: {seg.scheduler}: {getattr(seg, 'schedule', '')}")
            if args.cuda:
                print(seg.cuda or seg.cuda_error)


if __name__ == "__main__":
    main()
