"""Partitioning an ATen FX graph into kfuse fusions, and running them.

``compile_graph(gm)`` splits ``gm`` with torch's CapabilityBasedPartitioner
(kfuse's OperatorSupport: the nodes ``_aten.check`` accepts), translates
each partition into one kfuse Definition and replaces the partition's
submodule by a ``KfusePartition`` module that calls the fusion. A partition
that kfuse does not define keeps its torch submodule, with the reason
recorded (``stats()['fallbacks']``).
"""
import operator
import os
import threading

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

import kfuse
from kfuse import _dlpack as _dl
from . import _aten
from ._aten import SV, TV, Unsupported, node_meta
from ._pad_mm import pad_matmuls

aten = torch.ops.aten


class KfuseTorchMismatch(AssertionError):
    """Check mode: a partition's kfuse result differs from torch eager's."""


# ---------------------------------------------------------------------------
# statistics and the definition cache

_lock = threading.Lock()
_definitions = {}   # kfuse text -> Fusion: one entry per distinct definition
_stats = {"definitions": 0, "partitions": 0, "fallbacks": [], "graphs": 0}


def stats():
    """Counters: ``definitions`` (distinct kfuse definitions made: the
    recompile count; a new size of a dim never adds one), ``partitions``
    (kfuse partitions installed), ``graphs`` (graphs compiled),
    ``fallbacks`` (one ``(partition, reason)`` per partition left to torch)."""
    with _lock:
        return {"definitions": _stats["definitions"], "partitions": _stats["partitions"],
                "graphs": _stats["graphs"], "fallbacks": list(_stats["fallbacks"])}


def reset_stats():
    """Zeroes the counters and forgets the definition cache."""
    with _lock:
        _definitions.clear()
        _stats.update(definitions=0, partitions=0, graphs=0, fallbacks=[])


def _fallback(name, reason):
    with _lock:
        _stats["fallbacks"].append((name, reason))


# ---------------------------------------------------------------------------
# options

class Options:
    """What ``compile_graph`` fuses. ``check``: run each partition in eager
    too and raise KfuseTorchMismatch at the first difference (default: the
    environment's KFUSE_TORCH_CHECK=1). ``exclude``: ATen packet names
    (``"exp"``, ``"var_mean"``) left to torch. ``min_ops``: the fewest
    compute ops a partition needs (2: a lone op stays in torch).
    ``pad_matmuls``: pad matmuls whose leading dims are not 16-byte
    multiples (``_pad_mm``): None (default) on CUDA unless the environment
    says KFUSE_TORCH_PAD_MM=0, True on any device, False never."""

    def __init__(self, check=None, exclude=(), min_ops=2, rtol=None, atol=None, pad_matmuls=None):
        self.check = (os.environ.get("KFUSE_TORCH_CHECK", "0") not in ("", "0")) if check is None else bool(check)
        self.exclude = frozenset(exclude)
        self.min_ops = int(min_ops)
        self.rtol, self.atol = rtol, atol
        if pad_matmuls is None and os.environ.get("KFUSE_TORCH_PAD_MM", "1").strip() in ("", "0"):
            pad_matmuls = False
        self.pad_matmuls = pad_matmuls


# ---------------------------------------------------------------------------
# operator support

def _is_getitem(node):
    return node.op == "call_function" and node.target is operator.getitem


class KfuseSupport(OperatorSupportBase):
    """kfuse's side of the partitioner: the nodes it translates, and why
    the others stay in torch (``reasons``)."""

    def __init__(self, options):
        self.options = options
        self.reasons = {}

    def reason(self, node):
        if _is_getitem(node):
            src = node.args[0]
            return None if isinstance(src, torch.fx.Node) and self.reason(src) is None else \
                "getitem of a node left to torch"
        if node.op == "call_function":
            packet = getattr(node.target, "overloadpacket", None)
            if packet is not None and packet.__name__ in self.options.exclude:
                return f"{node.target}: excluded by the options"
        r = _aten.check(node)
        if r is None and _mutated_placeholder(node) is False:
            r = f"{node.target}: mutates a value that is not a graph input"
        return r

    def is_node_supported(self, submodules, node):
        r = self.reason(node)
        if r is not None:
            self.reasons[node.name] = r  # by name: fusing may rebuild the graph (legalize_graph)
        return r is None


def _is_mutation(node):
    packet = getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None
    return packet is not None and (packet in _aten.MUTATING or packet is aten.copy_)


def _mutated_placeholder(node):
    """None for a node that mutates nothing; the placeholder it mutates; or
    False when it mutates something else (an intermediate: not taken)."""
    if not _is_mutation(node):
        return None
    dst = node.args[0]
    return dst if isinstance(dst, torch.fx.Node) and dst.op == "placeholder" else False


# ---------------------------------------------------------------------------
# translation of one partition

class Plan:
    """A partition translated: the fusion, what each fusion input is, and
    where each partition output comes from."""

    def __init__(self, fusion, inputs, outputs, text, multi, extra):
        self.fusion = fusion
        self.inputs = inputs     # per placeholder: "tensor" or "int" / "float" (scalar input)
        self.extra = extra       # graph placeholders passed after them (sizes only)
        self.outputs = outputs   # per partition output: ("out", k) fusion output k, or ("arg", i) input i
        self.text = text
        self.multi = multi


def _placeholder_value(fd, node):
    meta = node_meta(node)
    if meta is not None:
        if not _aten.dtype_ok(meta[0]):
            raise Unsupported(f"input {node.name} has dtype {meta[0]}")
        return "tensor", TV(fd.tensor(len(meta[1]), _aten.KF_DTYPES[meta[0]]), meta[0], meta[1])
    val = node.meta.get("val")
    if isinstance(val, (bool, float)) or type(val).__name__ in ("SymFloat",):
        return "float", SV(fd.scalar(kfuse.float64), float(_aten._int(val)) if not isinstance(val, float) else val)
    if isinstance(val, int) or type(val).__name__ == "SymInt":
        return "int", SV(fd.scalar(kfuse.int64), _aten._int(val))
    raise Unsupported(f"input {node.name}: neither a tensor nor a number")


def translate(sub, graph_inputs=(), dynamic=False):
    """A Plan for a partition's GraphModule, or raises Unsupported /
    kfuse.KfuseError. ``graph_inputs``: (name, dtype, shape) of the whole
    graph's tensor inputs, where sizes may be read from."""
    fd = kfuse.Definition()
    try:
        ctx = _aten.Context(fd, [g for g in graph_inputs if g[0] not in
                                 {n.name for n in sub.graph.nodes if n.op == "placeholder"}], dynamic)
        env, kinds, placeholders = {}, [], []
        mutated = {}  # placeholder index -> final value
        out_node = None

        def arg(a):
            if isinstance(a, torch.fx.Node):
                return env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(arg(x) for x in a)
            return a

        for node in sub.graph.nodes:  # all inputs first (fusing interleaves placeholders with ops)
            if node.op == "placeholder":
                kind, v = _placeholder_value(fd, node)
                env[node] = v
                kinds.append(kind)
                placeholders.append(node)
                if kind == "tensor":
                    ctx.inputs.append(v)
        for node in sub.graph.nodes:
            if node.op == "placeholder":
                continue
            elif node.op == "output":
                out_node = node
            elif _is_getitem(node):
                src = env[node.args[0]]
                env[node] = src[node.args[1]]
            elif node.op == "call_function":
                args = [arg(a) for a in node.args]
                kwargs = {k: arg(v) for k, v in node.kwargs.items()}
                r = _aten.HANDLERS[node.target.overloadpacket](ctx, node, args, kwargs)
                env[node] = _wrap(node, r)
                if _is_mutation(node):
                    dst = node.args[0]
                    env[dst] = env[node]
                    if dst.op == "placeholder":
                        mutated[placeholders.index(dst)] = (dst, env[node])
            else:
                raise Unsupported(f"{node.op} node {node.name}")

        results = out_node.args[0]
        multi = isinstance(results, (tuple, list))
        results = list(results) if multi else [results]
        outputs, expected, k = [], [], 0
        made = {}  # node -> its fusion output: a value returned twice is one tensor, written once
        for r in results:
            m = _mutated_placeholder(r) if r.op == "call_function" else None
            if m:
                outputs.append(("arg", placeholders.index(m)))
                continue
            if r.op == "placeholder":  # an input returned as it is: the same tensor, no copy
                outputs.append(("arg", placeholders.index(r)))
                continue
            if r in made:
                outputs.append(("out", made[r]))
                continue
            tv = env[r]
            fd.output(tv.v)
            expected.append((r.name, tv.dtype, tv.rank))
            made[r] = k
            outputs.append(("out", k))
            k += 1
        for i, (dst, tv) in sorted(mutated.items()):
            fd.output(tv.v, alias=i)
            expected.append((dst.name, env[dst].dtype, env[dst].rank))
        if not expected:
            raise Unsupported("the partition computes nothing kfuse can return")
        fusion = fd.finalize()
    finally:
        fd.close()
    for info, (name, dt, rank) in zip(fusion.outputs, expected):
        if info["dtype"] is not _aten.KF_DTYPES[dt] or info["rank"] != rank:
            raise Unsupported(f"translation error: output {name} is {info['dtype'].name} rank {info['rank']} "
                              f"in kfuse, {dt} rank {rank} in torch")
    text = fusion.text
    with _lock:
        if text not in _definitions:
            _definitions[text] = fusion
            _stats["definitions"] += 1
        fusion = _definitions[text]
    return Plan(fusion, kinds + ["tensor"] * len(ctx.extra), outputs, text, multi, list(ctx.extra))


def _wrap(node, r):
    if isinstance(r, tuple):
        val = node.meta.get("val")
        metas = [(v.dtype, tuple(_aten._int(s) for s in v.shape)) for v in val] if isinstance(val, (tuple, list)) \
            else None
        if metas is None:  # 1.13 records no meta for tuple results: the users' getitems have it
            metas = [None] * len(r)
            for u in node.users:
                if _is_getitem(u):
                    metas[u.args[1]] = node_meta(u)
        return tuple(TV(v, m[0], m[1]) for v, m in zip(r, metas))
    if isinstance(r, TV):
        return r
    dt, shape = node_meta(node)
    return TV(r, dt, shape)


# ---------------------------------------------------------------------------
# the runtime module

def _tolerance(dt, options):
    if options.rtol is not None:
        return options.rtol, options.atol if options.atol is not None else options.rtol
    return {torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5), torch.float16: (1e-2, 1e-3),
            torch.bfloat16: (5e-2, 1e-2)}.get(dt, (0, 0))


class KfusePartition(torch.nn.Module):
    """Calls one kfuse fusion in place of a partition's torch submodule.

    The per-call path is precomputed here: with the C extension
    (``Caller.run_torch``) a partition whose inputs are all tensors hands
    the argument tuple to C as it is (requires_grad is not checked: the
    compiled graph tracks no gradient through the call) and gets torch
    tensors back (``torch._C._from_dlpack`` on a capsule made in C, no
    stream handshake: the call ran on torch's current stream).
    ``__call__`` is ``forward`` (no nn.Module hook dispatch)."""

    def __init__(self, name, sub, plan, options):
        super().__init__()
        self.name = name
        self.torch_graph = sub   # the partition in torch: check mode, and the fallback
        self.plan = plan
        self.options = options
        self.failed = None       # the reason, once a call failed in kfuse
        self.calls = 0           # calls through the Python path: the first (then the C path), or every one
        caller = getattr(plan.fusion, "_fast", None)
        bools = [i for i, o in enumerate(plan.fusion.outputs) if o["dtype"] is kfuse.bool_]
        outs = plan.outputs
        # the C path: every input a tensor, no check mode, a C extension that has run_torch
        self._run = caller.run_torch if (caller is not None and hasattr(caller, "run_torch")
                                         and _from_dlpack is not None
                                         and not options.check
                                         and all(k == "tensor" for k in plan.inputs)) else None
        self._bools = bools      # outputs that need kDLBool from torch's DLPack import
        # outputs as the fusion returns them (first len(outs)), or a mapping
        self._identity = [o for o in outs] == [("out", k) for k in range(len(outs))]
        self._n_out = len(outs)

    def forward(self, *args):
        run = self._run
        if run is not None and (not self._bools or _BOOL_DLPACK[0]) and self.calls:
            res = run(args, _from_dlpack)
            if res is not None:
                if self._identity:
                    return res[:self._n_out] if self.plan.multi else res[0]
                outs = [res[k] if kind == "out" else args[k] for kind, k in self.plan.outputs]
                return tuple(outs) if self.plan.multi else outs[0]
        return self._forward(args)

    __call__ = forward

    def _forward(self, args):
        plan = self.plan
        if self.failed is not None:
            return self.torch_graph(*args[:len(args) - len(plan.extra)])
        check = self.options.check
        if check:
            ref_args = [a.clone() if plan_mutates(plan, i) else a for i, a in enumerate(args)]
        ins = []
        for a, kind in zip(args, plan.inputs):
            if kind == "tensor":
                ins.append(a.detach() if a.requires_grad else a)
            else:
                ins.append(int(a) if kind == "int" else float(a))
        try:
            res = plan.fusion(*ins)
        except kfuse.KfuseError as e:
            if self.calls:
                raise
            object.__setattr__(self, "failed", f"kfuse call failed: {e}")
            _fallback(self.name, self.failed)
            return self._forward(args)
        object.__setattr__(self, "calls", self.calls + 1)  # not nn.Module's __setattr__ (slow)
        res = res if isinstance(res, tuple) else (res,)
        # (each once: an output returned twice is one tensor)
        tensors = {k: _to_torch(res[k]) for kind, k in plan.outputs if kind == "out"}
        outs = [tensors[k] if kind == "out" else args[k] for kind, k in plan.outputs]
        if check:
            self._check(ref_args, outs)
        return tuple(outs) if plan.multi else outs[0]

    def _check(self, ref_args, outs):
        ref = self.torch_graph(*ref_args[:len(ref_args) - len(self.plan.extra)])
        ref = list(ref) if self.plan.multi else [ref]
        for i, (a, b) in enumerate(zip(outs, ref)):
            why = mismatch(a, b, self.options)
            if why:
                raise KfuseTorchMismatch(f"kfuse partition {self.name}, output {i}: {why}\n"
                                         f"kfuse text:\n{self.plan.text}")


_BOOL_DLPACK = [None]  # True once this torch imported a kDLBool tensor, False once it refused (torch 1.13)
_from_dlpack = getattr(torch._C, "_from_dlpack", None)  # capsule -> tensor (torch.from_dlpack's last step)


def _to_torch(t):
    """A kfuse output as a torch tensor over the same memory (no copy)."""
    if t.dtype is not kfuse.bool_:
        return torch.from_dlpack(t)
    if _BOOL_DLPACK[0] is False:
        return torch.from_dlpack(t._export_as(_dl.kDLUInt, 8)).view(torch.bool)
    try:
        r = torch.from_dlpack(t)
    except RuntimeError:
        if _BOOL_DLPACK[0]:
            raise
        _BOOL_DLPACK[0] = False
        return _to_torch(t)
    _BOOL_DLPACK[0] = True
    return r


def plan_mutates(plan, i):
    return any(kind == "arg" and k == i for kind, k in plan.outputs)


def mismatch(a, b, options=None):
    """None when kfuse's a agrees with torch's b, else what differs."""
    options = options or Options(check=False)
    if a.dtype != b.dtype:
        return f"dtype {a.dtype} (kfuse) vs {b.dtype} (torch)"
    if tuple(a.shape) != tuple(b.shape):
        return f"shape {tuple(a.shape)} (kfuse) vs {tuple(b.shape)} (torch)"
    if a.dtype.is_floating_point:
        rtol, atol = _tolerance(a.dtype, options)
        x, y = a.double(), b.double()
        same_nan = torch.equal(torch.isnan(x), torch.isnan(y))
        ok = same_nan and torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        if not ok:
            d = (x - y).abs().nan_to_num(nan=float("inf"))
            j = int(d.argmax())
            return (f"max |diff| {float(d.max()):.3g} at flat index {j}: kfuse {float(x.reshape(-1)[j])!r}, "
                    f"torch {float(y.reshape(-1)[j])!r} (rtol {rtol}, atol {atol})")
        return None
    if not torch.equal(a, b):
        j = int((a != b).reshape(-1).nonzero()[0])
        return f"differs at flat index {j}: kfuse {a.reshape(-1)[j].item()!r}, torch {b.reshape(-1)[j].item()!r}"
    return None


# ---------------------------------------------------------------------------
# the graph pass

class Report:
    """What compile_graph did to a graph: ``partitions`` (name, node names,
    kfuse text or None, fallback reason or None) and ``in_torch`` (node
    name, target, reason) for every call node left to torch."""

    def __init__(self):
        self.partitions = []
        self.in_torch = []
        self.padded_matmuls = 0

    def __str__(self):
        lines = [f"{sum(1 for p in self.partitions if p[2] is not None)} kfuse partition(s), "
                 f"{len(self.in_torch)} op(s) left to torch"
                 + (f", {self.padded_matmuls} matmul(s) padded" if self.padded_matmuls else "")]
        for name, nodes, text, why in self.partitions:
            lines.append(f"\n== {name}: {len(nodes)} nodes"
                         + (f" -- left to torch: {why}" if why else " -> kfuse"))
            lines.append("   nodes: " + ", ".join(nodes))
            if text:
                lines.extend("   " + l for l in text.splitlines())
        if self.in_torch:
            lines.append("\n== left to torch")
            for name, target, why in self.in_torch:
                lines.append(f"   {name} ({target}): {why}")
        return "\n".join(lines) + "\n"


def _unsafe_mutations(gm, partitions):
    """(reason or None, names of mutations to move to the end). Fusing
    re-sorts the graph by data dependencies only, which know nothing of
    mutation order. A mutating node is safe inside a partition that also
    holds every other user of what it mutates; outside one, when nothing
    uses its result and nothing after it reads what it mutates (the
    copy_ of an input that AOTAutograd appends): it is then moved back to
    the end of the graph after fusing. Any other mutation leaves the whole
    graph to torch."""
    where = {n: i for i, p in enumerate(partitions) for n in p.nodes}
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    to_end = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or not _is_mutation(node) and not _schema_mutates(node):
            continue
        dst = node.args[0]
        part = where.get(node)
        if not isinstance(dst, torch.fx.Node):
            return f"{node.name} ({node.target}) mutates a non-node", []
        if part is not None and all(where.get(u) == part for u in dst.users):
            continue
        if not node.users and all(index[u] <= index[node] for u in dst.users):
            if part is not None:  # a sink: taking it out keeps the partition whole
                partitions[part].remove_node(node)
            to_end.append(node.name)
            continue
        return f"{node.name} ({node.target}) mutates {dst.name} outside a single kfuse partition", []
    return None, to_end


def _schema_mutates(node):
    schema = getattr(node.target, "_schema", None)
    return bool(schema is not None and any(a.alias_info is not None and a.alias_info.is_write
                                           for a in schema.arguments))


def compile_graph(gm, example_inputs=None, options=None, report=None):
    """Replaces the kfuse-translatable partitions of ``gm`` (an ATen FX
    GraphModule) by kfuse fusions, in place; returns ``gm``."""
    options = options or Options()
    report = report if report is not None else Report()
    if options.pad_matmuls is not False:
        report.padded_matmuls += pad_matmuls(gm, force=options.pad_matmuls is True)
    with _lock:
        _stats["graphs"] += 1
    support = KfuseSupport(options)
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    _peel_input_views(gm, partitions, support.reasons)
    small = [p for p in partitions if _compute_ops(p.nodes) < options.min_ops]
    partitions = [p for p in partitions if _compute_ops(p.nodes) >= options.min_ops]
    unsafe, to_end = _unsafe_mutations(gm, partitions)
    for name in to_end:
        support.reasons[name] = "an input mutation whose readers are not all in one kfuse partition: " \
                                "left to torch, last in the graph"
    for p in small:
        for n in p.nodes:
            if n.op == "call_function" and not _is_getitem(n):
                support.reasons[n.name] = f"translatable, but alone (a kfuse partition needs {options.min_ops} ops)"
    if unsafe:
        for n in gm.graph.nodes:
            if n.op == "call_function":
                report.in_torch.append((n.name, str(n.target), f"graph left to torch: {unsafe}"))
        _fallback("graph", unsafe)
        return gm
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    ordered = sorted(partitions, key=lambda p: min(index[n] for n in p.nodes))
    gm = partitioner.fuse_partitions(ordered)
    output = next(n for n in gm.graph.nodes if n.op == "output")
    for n in list(gm.graph.nodes):
        if n.name in to_end:
            output.prepend(n)  # after every read of what it mutates, as in the original graph
    _restore_meta(gm)
    placeholders = {n.name: n for n in gm.graph.nodes if n.op == "placeholder"}
    dynamic = any(_aten.symbolic(n) for n in gm.graph.nodes)
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = getattr(gm, node.target)
        names = sorted(n.name for n in sub.graph.nodes if n.op == "call_function")
        try:
            plan = translate(sub, [(n.name, *node_meta(n)) for n in placeholders.values()
                                   if node_meta(n) is not None and _aten.dtype_ok(node_meta(n)[0])], dynamic)
        except (Unsupported, kfuse.KfuseError, KeyError, IndexError, TypeError, ValueError) as e:
            why = f"{type(e).__name__}: {e}"
            _fallback(node.target, why)
            report.partitions.append((node.target, names, None, why))
            continue
        setattr(gm, node.target, KfusePartition(node.target, sub, plan, options))
        if plan.extra:
            node.args = tuple(node.args) + tuple(placeholders[name] for name in plan.extra)
        report.partitions.append((node.target, names, plan.text, None))
        with _lock:
            _stats["partitions"] += 1
    for n in gm.graph.nodes:
        if n.op == "call_function" and not _is_getitem(n):
            report.in_torch.append((n.name, str(n.target), support.reasons.get(n.name) or _why_in_torch(n)))
    gm.recompile()
    return gm


def _restore_meta(gm):
    """Fusing makes call_module nodes and getitems of them without meta,
    and a later partition's placeholders copy that (nothing): give them the
    meta of the submodule's output nodes."""
    fused = [n for n in gm.graph.nodes if n.op == "call_module" and str(n.target).startswith("fused_")]
    for node in fused:
        results = next(n for n in getattr(gm, node.target).graph.nodes if n.op == "output").args[0]
        if isinstance(results, (tuple, list)):
            for u in node.users:
                if _is_getitem(u) and not u.meta:
                    u.meta = dict(results[u.args[1]].meta)
        elif not node.meta:
            node.meta = dict(results.meta)
    for node in fused:
        sub = getattr(gm, node.target)
        for ph, a in zip([n for n in sub.graph.nodes if n.op == "placeholder"], node.args):
            if isinstance(a, torch.fx.Node) and node_meta(ph) is None and "val" not in ph.meta:
                ph.meta = dict(a.meta)


def _why_in_torch(node):
    return _aten.check(node) or "translatable, but kept apart by the partitioner"


def _compute_ops(nodes):
    """Nodes that compute: a view of a partition input moves no data in
    torch, so it does not count."""
    inside = set(nodes)
    return sum(1 for n in nodes if n.op == "call_function" and not _is_getitem(n)
               and not _input_view(n, inside))


_VIEW_PACKETS = ("_unsafe_view", "view", "reshape")


def _is_view(node):
    """Whether node's result is a view of its first argument in torch (no
    data moved): an op whose schema returns an alias it does not write
    (permute, slice, squeeze, expand, t, split...), a view / reshape, or a
    getitem of such a node."""
    if node.op != "call_function":
        return False
    if _is_getitem(node):
        src = node.args[0]
        return isinstance(src, torch.fx.Node) and _is_view(src)
    packet = getattr(node.target, "overloadpacket", None)
    if packet is None:
        return False
    if packet.__name__ in _VIEW_PACKETS:
        return True
    schema = getattr(node.target, "_schema", None)
    if schema is None or not schema.returns or _schema_mutates(node):
        return False
    alias = schema.returns[0].alias_info
    return alias is not None and not alias.is_write


def _input_view(node, inside):
    """Whether node (in the partition ``inside``) is a chain of views of a
    value computed outside it: in torch, a view of a partition input."""
    while _is_view(node):
        src = node.args[0]
        if not isinstance(src, torch.fx.Node):
            return False
        if src not in inside:
            return True
        node = src
    return False


def _peel_input_views(gm, partitions, reasons):
    """Takes out of each partition the views of its inputs that something
    outside it reads (with the views they are taken from). In torch they
    are free; as partition outputs kfuse would materialize them: a
    decode step's permuted weights and KV-cache layers were copied on
    every call (session 37: a [32000, 2048] head weight, 75 us a step).
    Their readers inside the partition then read the torch view, a
    strided input. Views of a placeholder the graph mutates stay: the
    mutation's readers must stay in one partition (_unsafe_mutations)."""
    mutated = set()
    for n in gm.graph.nodes:
        if n.op == "call_function" and (_is_mutation(n) or _schema_mutates(n)) and isinstance(n.args[0], torch.fx.Node):
            mutated.add(n.args[0])

    def root(n):
        while _is_view(n) and isinstance(n.args[0], torch.fx.Node):
            n = n.args[0]
        return n

    for p in partitions:
        changed = True
        while changed:
            changed = False
            inside = set(p.nodes)
            for n in list(p.nodes):
                # (a getitem of a node taken out goes with it: a partition
                # cannot take a tuple as an input)
                if (_input_view(n, inside) and root(n) not in mutated
                        and (any(u not in inside for u in n.users)
                             or _is_getitem(n) and n.args[0] not in inside)):
                    p.remove_node(n)
                    inside.discard(n)
                    reasons[n.name] = "a view of a partition's input read outside the partition: free in torch, " \
                                      "a copy as a kfuse output"
                    changed = True
