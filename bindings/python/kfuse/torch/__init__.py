"""kfuse as a torch backend: ATen FX graphs -> kfuse fusions.

    import kfuse.torch
    model = torch.compile(model, backend="kfuse")           # torch >= 2.0
    model = kfuse.torch.compile(model, check=True)         # the same, with options
    print(kfuse.torch.explain(fn, inputs))                 # partitions, and what stayed in torch and why

Graphs come through AOTAutograd with ``decompositions()`` (forward and
backward as ATen graphs); torch's CapabilityBasedPartitioner splits each
into the ops kfuse translates (``supported_ops()``) and the rest; each
partition becomes one kfuse fusion, defined by rank and dtype only, so new
sizes reuse it (``stats()['definitions']`` counts definitions). Matmuls,
convolutions, attention, RNG ops and anything untranslatable stay in torch.
``KFUSE_TORCH_CHECK=1`` (or ``check=True``) runs every partition in eager
too and raises ``KfuseTorchMismatch`` with the partition's kfuse text at
the first difference. See docs/python.md, "kfuse as a torch backend".

On torch 1.13 (no Dynamo) the graph pass works on graphs from
``torch.fx.experimental.proxy_tensor.make_fx``: ``fuse(fn, inputs)``.
"""
import importlib

import torch

from . import _aten
from ._backend import (KfusePartition, KfuseTorchMismatch, Options, Report, compile_graph, mismatch, reset_stats,
                       stats)

__all__ = ["compile", "backend", "partition_fn", "dynamo_backend", "register", "explain", "fuse", "compile_graph", "decompositions",
           "supported_ops", "stats", "reset_stats", "Options", "KfuseTorchMismatch", "KfusePartition", "Report",
           "mismatch", "dynamo_available"]

aten = torch.ops.aten

# Composite ops decomposed before partitioning, into ops kfuse translates.
# gelu and silu are not decomposed (kfuse has them as ops); matmuls,
# convolutions, attention and RNG stay whole (they stay in torch).
_DECOMPOSE = ("native_layer_norm", "native_layer_norm_backward", "_softmax", "_log_softmax",
              "_softmax_backward_data", "_log_softmax_backward_data", "gelu_backward", "silu_backward",
              "tanh_backward", "sigmoid_backward", "threshold_backward", "native_group_norm",
              "native_group_norm_backward", "hardtanh", "hardtanh_backward", "leaky_relu", "leaky_relu_backward",
              "softplus", "softplus_backward", "logsumexp", "mish", "elu", "elu_backward", "hardswish",
              "hardsigmoid", "logit", "mse_loss", "mse_loss_backward", "nll_loss_forward", "nll_loss_backward",
              "rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward", "rsub", "std", "hardswish_backward",
              "hardsigmoid_backward", "smooth_l1_loss", "binary_cross_entropy_with_logits")


def decompositions():
    """The decomposition table kfuse's graphs are traced with (AOTAutograd
    or make_fx): composite ATen ops -> ops kfuse translates."""
    from torch._decomp import get_decompositions
    packets = [getattr(aten, n) for n in _DECOMPOSE if hasattr(aten, n)]
    table = get_decompositions(packets)
    for op in list(table):  # the out= forms would only add overloads nobody calls
        if str(op).endswith("out"):
            del table[op]
    return table


def supported_ops():
    """The ATen (and prims) op packets the translator handles."""
    return _aten.supported_ops()


def fuse(fn, inputs, check=None, exclude=(), min_ops=2, report=None, tracing_mode="real", functional=True,
         pad_matmuls=None):
    """Traces ``fn`` on ``inputs`` with make_fx (ATen ops, ``decompositions()``)
    and returns the GraphModule with its kfuse partitions installed. Works
    on torch 1.13; the graph is specialized to the inputs' ranks and dtypes
    (and, as make_fx records them, to the sizes of views and creation ops
    that no input size explains). ``tracing_mode="fake"`` traces without
    running the ops (for dtypes torch's CPU kernels lack, such as float16).
    ``functional``: trace through functorch's functionalize (in-place ops
    become functional, input mutations one copy_ each); False for a fn
    that runs autograd inside (functionalize refuses requires_grad_).
    ``pad_matmuls``: see Options (True pads on the CPU too)."""
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(_functionalize(fn) if functional else fn, decomposition_table=decompositions(), tracing_mode=tracing_mode)(*inputs)
    if tracing_mode == "real" and any(n.op != "output" and _aten.node_meta(n) is None and "val" not in n.meta
                                      for n in gm.graph.nodes):
        # torch 1.13's make_fx leaves getitem and get_attr nodes without
        # metadata: ShapeProp records it (running the graph once)
        from torch.fx.passes.shape_prop import ShapeProp
        ShapeProp(gm).propagate(*inputs)
    return compile_graph(gm, inputs, Options(check=check, exclude=exclude, min_ops=min_ops, pad_matmuls=pad_matmuls),
                         report)


def _functionalize(fn):
    """fn with its in-place ops made functional (input mutations become one
    copy_ at the end, as AOTAutograd makes them); fn itself without functorch."""
    try:
        from torch.func import functionalize
    except ImportError:
        try:
            from functorch import functionalize
        except ImportError:
            return fn
    return functionalize(fn)


def explain(gm_or_fn, inputs, **options):
    """A Report (``str()`` prints it): every partition with its kfuse text
    (or why kfuse did not take it) and every op left to torch with the
    reason. ``gm_or_fn``: an ATen GraphModule (left unchanged) or a
    function traced with make_fx on ``inputs``."""
    import copy
    report = Report()
    if isinstance(gm_or_fn, torch.fx.GraphModule):
        gm = torch.fx.GraphModule(gm_or_fn, copy.deepcopy(gm_or_fn.graph))
        compile_graph(gm, inputs, Options(**options), report)
    else:
        fuse(gm_or_fn, inputs, report=report, **options)
    return report


# ---------------------------------------------------------------------------
# Dynamo (torch >= 2.0)

def dynamo_available():
    """None when torch.compile(backend="kfuse") can work here, else why not."""
    try:
        importlib.import_module("torch._dynamo")
        importlib.import_module("torch._dynamo.backends.common").aot_autograd  # noqa: B018
    except Exception as e:  # torch 1.13 has no Dynamo
        return f"torch {torch.__version__} has no usable torch._dynamo ({type(e).__name__}: {e}); " \
               f"kfuse.torch's Dynamo backend needs torch >= 2.0 (use kfuse.torch.fuse on make_fx graphs)"
    return None


def _boxed(fn):
    try:
        from torch._functorch.aot_autograd import make_boxed_func
    except ImportError:
        from functorch.compile import make_boxed_func
    return make_boxed_func(fn)


PARTITIONS = ("min_cut", "default")


def partition_fn(partition=None):
    """AOTAutograd's forward/backward split for ``partition``: "min_cut"
    (the default, as inductor's: the backward recomputes cheap pointwise
    values from fewer saved tensors, e.g. a cross-entropy's log-softmax
    from the logits and their log-sum-exp, instead of the forward writing
    them out and the backward reading them back) or "default" (AOTAutograd's
    own: every value the backward needs is saved). None reads
    KFUSE_TORCH_PARTITION (default "min_cut"). The min-cut split needs
    networkx; without it this is the default split, with a warning. Returns
    the function, or None for AOTAutograd's default."""
    import os
    import warnings
    name = partition or os.environ.get("KFUSE_TORCH_PARTITION", "").strip() or "min_cut"
    if name not in PARTITIONS:
        raise ValueError(f"partition {name!r}: expected one of {', '.join(PARTITIONS)}")
    if name == "default":
        return None
    try:
        import networkx  # noqa: F401  (min_cut_rematerialization_partition needs it)
        try:
            from torch._functorch.partitioners import min_cut_rematerialization_partition
        except ImportError:  # torch 1.13
            from functorch.compile import min_cut_rematerialization_partition
    except ImportError as e:
        warnings.warn(f"kfuse.torch: AOTAutograd's default forward/backward split ({e}; the min-cut split "
                      "needs networkx)")
        return None
    return min_cut_rematerialization_partition


def backend(check=None, exclude=(), min_ops=2, partition=None, pad_matmuls=None):
    """A Dynamo backend (for ``torch.compile(m, backend=...)``) with these
    options: AOTAutograd with ``decompositions()`` and ``partition_fn(
    partition)``, forward and backward graphs through compile_graph."""
    why = dynamo_available()
    if why:
        raise RuntimeError(why)
    from torch._dynamo.backends.common import aot_autograd
    options = Options(check=check, exclude=exclude, min_ops=min_ops, pad_matmuls=pad_matmuls)

    def compiler(gm, example_inputs):
        return _boxed(compile_graph(gm, example_inputs, options))

    split = partition_fn(partition)
    extra = {} if split is None else {"partition_fn": split}
    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler, decompositions=decompositions(), **extra)


def dynamo_backend(gm, example_inputs, **kwargs):
    """The backend registered as "kfuse" (default options; KFUSE_TORCH_CHECK
    read when the graph is compiled)."""
    return backend()(gm, example_inputs, **kwargs)


def compile(model, check=None, exclude=(), min_ops=2, partition=None, pad_matmuls=None, **compile_kwargs):
    """``torch.compile(model, backend=kfuse.torch.backend(...), **compile_kwargs)``."""
    return torch.compile(model, backend=backend(check, exclude, min_ops, partition, pad_matmuls), **compile_kwargs)


_registered = False


def register():
    """Registers the Dynamo backend "kfuse" (done on import where torch has
    Dynamo); raises RuntimeError saying why where it cannot."""
    global _registered
    why = dynamo_available()
    if why:
        raise RuntimeError(why)
    if _registered:
        return
    from torch._dynamo import list_backends, register_backend
    try:
        known = list_backends(exclude_tags=())
    except TypeError:
        known = list_backends()
    if "kfuse" not in known:
        register_backend(name="kfuse")(dynamo_backend)
    _registered = True


if dynamo_available() is None:
    try:
        register()
    except Exception:  # pragma: no cover - a torch whose registry differs: register() says why
        pass
