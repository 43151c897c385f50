"""A stand-in for bench/kf_torch.py in tests of bench/corpus_bench.py on
machines without it: parse(text) runs the text on kfuse's own CPU backend
(the Python package) on copies of the inputs. It checks nothing about
kfuse; it only lets the harness's logic run. Never a reference."""
import kfuse
import torch


class _Program:
    def __init__(self, text):
        self.fusion = kfuse.Fusion.from_text(text)

    def __call__(self, *inputs):
        ins = [t.clone() for t in inputs]  # in-place outputs must not write the caller's inputs
        ins = [t.view(torch.uint8) if t.dtype == torch.bool else t for t in ins]  # torch 1.13's DLPack lacks bool
        res = self.fusion(*ins)
        res = res if isinstance(res, tuple) else (res,)
        return tuple(torch.from_dlpack(r).clone() for r in res)


def parse(text):
    return _Program(text)
