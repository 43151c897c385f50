"""Whole-model workloads in plain torch (random weights, fixed seeds, no
downloads) for bench/model_bench.py: ``WORKLOADS[name](size, device)``
returns a fresh common.Workload; ``size`` is "default" (the issue's sizes)
or "smoke" (tiny, runs on a CPU)."""
from . import gnn, gpt2, llama, vit

WORKLOADS = {
    "gpt2_train": gpt2.build,
    "llama_train": llama.build,
    "llama_decode_b1": lambda size="smoke", device="cpu", seed=0, **o: llama.build_decode(size, device, seed, 1, **o),
    "llama_decode_b8": lambda size="smoke", device="cpu", seed=0, **o: llama.build_decode(size, device, seed, 8, **o),
    "llama_decode_b64": lambda size="smoke", device="cpu", seed=0, **o: llama.build_decode(size, device, seed, 64, **o),
    "vit_train": vit.build,
    "gnn_train": gnn.build,
}
