#!/usr/bin/env python3
"""The training workloads of bench/models/ (GPT-2, Llama-style, ViT, GNN at
their "smoke" sizes, float32) traced forward + backward with make_fx
(torch.autograd.grad inside the traced function) and run through
kfuse.torch in check mode on the CPU backend: every kfuse partition is
compared with torch eager as it runs (KfuseTorchMismatch at the first
difference), no partition may fall back, the loss and every gradient
must match eager's, and only the ops listed in ALLOWED_IN_TORCH may stay
in torch (matmuls, the causal-mask creation, embedding backward, and
views of partition inputs read outside the partitions).

Exits 77 (skipped) without torch.

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 tests/python/test_kfuse_torch_models.py
"""
import pathlib
import sys

try:
    import torch
    from torch.nn.utils.stateless import functional_call
except ImportError as e:
    print(f"test_kfuse_torch_models: SKIP: cannot import torch ({e})")
    sys.exit(77)

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
import kfuse.torch as kt  # noqa: E402
from models import WORKLOADS  # noqa: E402

ALLOWED_IN_TORCH = {"aten.mm.default", "aten.bmm.default", "aten.addmm.default", "aten.tril.default",
                    "aten.ones.default", "aten.arange.default", "aten.embedding_dense_backward.default",
                    "aten.t.default", "aten.sum.dim_IntList", "aten._reshape_alias.default"}
TOL = kt.Options(check=False, rtol=1e-3, atol=1e-4)
failures = []
MODELS = ("gpt2_train", "llama_train", "vit_train", "gnn_train")


def workload(name):
    """(float32 module, parameter names, parameters, first batch) of a smoke workload."""
    w = WORKLOADS[name]("smoke", "cpu")
    m = w.module.float()
    return (m, [k for k, _ in m.named_parameters()], [p.detach() for _, p in m.named_parameters()],
            tuple(i.float() if i.is_floating_point() else i for i in w.batches(0)))


for name in MODELS:
    m, names, params, inputs = workload(name)

    def step(*args, m=m, names=names):
        ps = [p.requires_grad_() for p in args[:len(names)]]
        loss = functional_call(m, dict(zip(names, ps)), args[len(names):])
        return (loss.detach(),) + tuple(torch.autograd.grad(loss, ps))

    args = tuple(params) + inputs
    report = kt.Report()
    try:
        gm = kt.fuse(step, args, check=True, report=report, functional=False)
        got = gm(*args)
        ref = step(*args)
        fused = [p for p in report.partitions if p[2] is not None]
        fell = [(p[0], p[3]) for p in report.partitions if p[3] is not None]
        assert len(fused) >= 5, f"only {len(fused)} kfuse partitions"
        assert not fell, f"partitions left to torch: {fell}"
        # (views of partition inputs read outside the partitions stay in
        # torch by design: free there, copies as kfuse outputs)
        extra = sorted({t for _, t, why in report.in_torch if "a view of a partition's input" not in why}
                       - ALLOWED_IN_TORCH)
        assert not extra, f"ops left to torch: {extra}\n{report}"
        for i, (a, r) in enumerate(zip(got, ref)):
            why = kt.mismatch(a, r, TOL)
            assert why is None, f"output {i} ({'loss' if i == 0 else names[i - 1]}): {why}"
        print(f"ok   {name}: {len(fused)} kfuse partitions, {len(report.in_torch)} ops in torch, "
              f"loss {float(got[0]):.6f}")
    except Exception as e:  # noqa: BLE001
        failures.append(name)
        print(f"FAIL {name}: {type(e).__name__}: {e}")

# The same steps through AOTAutograd with kfuse.torch.partition_fn()'s
# min-cut split (the backend's default): the backward recomputes values
# the forward no longer saves, so its partitions differ; each is checked
# against eager as it runs, and the gradients against eager's.
runs = len(MODELS)
split = kt.partition_fn("min_cut")
try:
    from functorch.compile import aot_function
except ImportError:
    aot_function = None
if split is None or aot_function is None:
    print("test_kfuse_torch_models: the min-cut split is not available here (networkx, functorch): not run")
else:
    from torch.fx.passes.shape_prop import ShapeProp
    from kfuse.torch import _aten

    def kfuse_compiler(gm, example_inputs):
        if any(n.op != "output" and _aten.node_meta(n) is None and "val" not in n.meta for n in gm.graph.nodes):
            ShapeProp(gm).propagate(*example_inputs)  # (torch 1.13 leaves some nodes without metadata)
        return kt.compile_graph(gm, example_inputs, kt.Options(check=True))

    for name in MODELS:
        runs += 1
        m, names, params, inputs = workload(name)

        def loss_of(*args, m=m, names=names):
            return functional_call(m, dict(zip(names, args[:len(names)])), args[len(names):])
        try:
            f = aot_function(loss_of, kfuse_compiler, kfuse_compiler, partition_fn=split,
                             decompositions=kt.decompositions())
            got = [p.clone().requires_grad_() for p in params]
            ref = [p.clone().requires_grad_() for p in params]
            loss = f(*got, *inputs)
            loss.backward()
            ref_loss = loss_of(*ref, *inputs)
            ref_loss.backward()
            why = kt.mismatch(loss.detach(), ref_loss.detach(), TOL)
            assert why is None, f"loss: {why}"
            for k, (a, r) in enumerate(zip(got, ref)):
                why = kt.mismatch(a.grad, r.grad, TOL)
                assert why is None, f"gradient of {names[k]}: {why}"
            print(f"ok   {name} through the min-cut split: loss {float(loss):.6f}")
        except Exception as e:  # noqa: BLE001
            failures.append(name + " (min-cut)")
            print(f"FAIL {name} through the min-cut split: {type(e).__name__}: {e}")

print(f"test_kfuse_torch_models: {runs - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
