"""Sharded fusions on several GPUs of one host: kfuse (a fusion with a mesh,
NCCL through kf_communicator) against the same work written with manual
torch.distributed calls (NCCL), measured in the same processes.

  PYTHONPATH=bindings/python KFUSE_LIBRARY=build/libkfuse.so \\
    python3 bench/multidevice_bench.py --ranks 2 [--out results.md]

One process per GPU (torch.multiprocessing). Cases, at real sizes, bf16
storage and fp32 math:
  layernorm   y = layernorm(x) * w + b over a hidden dim sharded over the
              ranks (tensor parallel), [rows, hidden]
  xent        cross-entropy over a vocabulary sharded over the ranks
              (vocab-parallel loss, as Megatron computes it), [rows, vocab]
Per case: the median per-call time over 15 batches of 20 calls (CUDA
events, ranks aligned by a barrier before each batch), per rank (the slowest
rank is reported), the results compared with each other,
and the share of the time the collectives take (the same collectives of
the same sizes timed alone through torch.distributed).
"""
import argparse
import os
import statistics
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

LAYERNORM = """
input x: tensor<bfloat16, 2>
input w: tensor<bfloat16, 1>
input b: tensor<bfloat16, 1>
xf = cast(x) {dtype=float32}
var, mean = var_mean(xf) {axes=[1], keepdim=true, correction=0}
c = sub(xf, mean)
const eps: float32 = 1e-5
s = add(var, eps)
r = rsqrt(s)
n = mul(c, r)
wf = cast(w) {dtype=float32}
bf = cast(b) {dtype=float32}
g = mul(n, wf)
yf = add(g, bf)
y = cast(yf) {dtype=bfloat16}
output y
shard x {dim=1}
shard w {dim=0}
shard b {dim=0}
"""

XENT = """
input x: tensor<bfloat16, 2>
input label: tensor<int64, 1>
xf = cast(x) {dtype=float32}
m = max(xf) {axes=[1], keepdim=true}
d = sub(xf, m)
e = exp(d)
s = sum(e) {axes=[1], keepdim=true}
l = log(s)
lse = add(l, m)
v = size(x) {dim=1}
const zero: int64 = 0
const one: int64 = 1
ids = iota(v, zero, one) {dtype=int64}
lab = unsqueeze(label) {dim=1}
hot = eq(ids, lab)
const fz: float32 = 0
pick = where(hot, xf, fz)
picked = sum(pick) {axes=[1], keepdim=true}
loss = sub(lse, picked)
output loss
shard x {dim=1}
"""


def torch_layernorm(x, w, b):
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    c = xf - mean
    var = (c * c).mean(-1, keepdim=True)
    dist.all_reduce(var, op=dist.ReduceOp.AVG)
    return (c * torch.rsqrt(var + 1e-5) * w.float() + b.float()).to(torch.bfloat16)


def torch_xent(x, label, rank, local_vocab):
    xf = x.float()
    m = xf.amax(-1, keepdim=True)
    dist.all_reduce(m, op=dist.ReduceOp.MAX)
    s = torch.exp(xf - m).sum(-1, keepdim=True)
    dist.all_reduce(s, op=dist.ReduceOp.SUM)
    lo = rank * local_vocab
    inside = (label >= lo) & (label < lo + local_vocab)
    idx = (label - lo).clamp(0, local_vocab - 1).unsqueeze(1)
    picked = torch.where(inside.unsqueeze(1), xf.gather(1, idx), torch.zeros_like(m))
    dist.all_reduce(picked, op=dist.ReduceOp.SUM)
    return torch.log(s) + m - picked


def timed(fn, reps=15, batch=20, warmup=10):
    """Per-call time: the median over `reps` batches of `batch` calls
    enqueued back to back. Ranks meet at a barrier before each batch, and
    no host synchronization splits a batch, so the time is that of the
    steady state of a training step (one rank's host lag between calls
    would otherwise show up as the other rank's collective waiting)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    return statistics.median(times)


def profile(name, fn, rank):
    """Per-kernel GPU times of a few calls (torch.profiler: CUPTI sees
    kfuse's kernels and NCCL's too), printed by rank 0."""
    from torch.profiler import ProfilerActivity, profile as prof
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with prof(activities=[ProfilerActivity.CUDA]) as p:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
    if rank == 0:
        print(f"== profile: {name} (5 calls)")
        print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))


def worst(ms):
    """The slowest rank's time (every rank waits for it)."""
    t = torch.tensor([ms], device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def worker(rank, ranks, port, out_path, show_profile):
    import kfuse
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks,
                            device_id=torch.device("cuda", rank))
    box = [kfuse.nccl_unique_id() if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    comm = kfuse.Communicator.nccl(box[0], ranks, rank, rank)
    stream = torch.cuda.current_stream()
    rows_ln, hidden = 16384, 8192
    rows_xe, vocab = 8192, 50304
    lines = []
    torch.manual_seed(1234 + rank)

    def call(f, *args):
        return torch.from_dlpack(f(*args, stream=stream.cuda_stream, communicator=comm))

    # layernorm, hidden sharded
    f = kfuse.Fusion.from_text(f"mesh {ranks}\n" + LAYERNORM)
    h = hidden // ranks
    x = torch.randn(rows_ln, h, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(h, device="cuda", dtype=torch.bfloat16)
    err = (call(f, x, w, b).float() - torch_layernorm(x, w, b).float()).abs().max().item()
    if show_profile:
        profile("kfuse layernorm", lambda: call(f, x, w, b), rank)
        profile("torch layernorm", lambda: torch_layernorm(x, w, b), rank)
    t_k = worst(timed(lambda: call(f, x, w, b)))
    t_t = worst(timed(lambda: torch_layernorm(x, w, b)))
    stat = torch.zeros(rows_ln, 1, device="cuda")
    t_c = worst(timed(lambda: (dist.all_reduce(stat, op=dist.ReduceOp.AVG),
                               dist.all_reduce(stat, op=dist.ReduceOp.AVG))))
    gb = (2 * rows_ln * h * 2 + 2 * h * 2) / 1e9  # this rank's x read + y written, w, b
    lines.append(f"| layernorm [{rows_ln}, {hidden}] bf16, hidden sharded | {ranks} | {t_k:.3f} | {t_t:.3f} | "
                 f"{t_t / t_k:.2f}x | {gb / (t_k / 1e3):.0f} | {100 * t_c / t_k:.0f}% | {err:.3g} |")
    del x, w, b

    # cross-entropy, vocab sharded
    f = kfuse.Fusion.from_text(f"mesh {ranks}\n" + XENT)
    v = vocab // ranks
    x = torch.randn(rows_xe, v, device="cuda", dtype=torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(99)  # the same labels on every rank
    label = torch.randint(0, vocab, (rows_xe,), device="cuda", generator=g)
    err = (call(f, x, label).float() - torch_xent(x, label, rank, v).float()).abs().max().item()
    if show_profile:
        profile("kfuse cross-entropy", lambda: call(f, x, label), rank)
    t_k = worst(timed(lambda: call(f, x, label)))
    t_t = worst(timed(lambda: torch_xent(x, label, rank, v)))
    stat = torch.zeros(rows_xe, 1, device="cuda")
    t_c = worst(timed(lambda: (dist.all_reduce(stat, op=dist.ReduceOp.MAX),
                               dist.all_reduce(stat, op=dist.ReduceOp.SUM),
                               dist.all_reduce(stat, op=dist.ReduceOp.SUM))))
    gb = (rows_xe * v * 2 + rows_xe * 8 + rows_xe * 4) / 1e9
    lines.append(f"| cross-entropy [{rows_xe}, {vocab}] bf16, vocab sharded | {ranks} | {t_k:.3f} | {t_t:.3f} | "
                 f"{t_t / t_k:.2f}x | {gb / (t_k / 1e3):.0f} | {100 * t_c / t_k:.0f}% | {err:.3g} |")

    comm.close()
    if rank == 0:
        head = ("| case | ranks | kfuse ms | torch ms | torch/kfuse | kfuse GB/s per rank | "
                "collectives' share (timed alone) | max abs diff |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
        text = head + "\n" + "\n".join(lines) + "\n"
        print(text)
        if out_path:
            with open(out_path, "w") as fh:
                fh.write(text)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=torch.cuda.device_count())
    ap.add_argument("--out", default="")
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--profile", action="store_true", help="print per-kernel times (torch.profiler)")
    a = ap.parse_args()
    if a.ranks < 1 or a.ranks > torch.cuda.device_count():
        sys.exit(f"--ranks {a.ranks}: this machine has {torch.cuda.device_count()} GPUs")
    mp.spawn(worker, args=(a.ranks, a.port, a.out, a.profile), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
