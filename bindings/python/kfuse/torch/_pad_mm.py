"""Matmuls whose leading dimensions cuBLAS cannot read in 16-byte vectors,
padded before partitioning.

A matmul stays in torch, but its operands' layouts come from the graph: an
LM head over a vocabulary of 50257 writes logits whose rows are 50257
elements apart, and the backward reads them back as an operand. cuBLAS
then picks its `align1` kernels (sm75 tensor-op code, one element a load):
on an H200 gpt2's three head matmuls took 15.4 ms of a 36 ms step against
about 2 ms in inductor, which pads these dims (its pad_mm pass; session
44 run 2, docs/perf-log.md). This pass does the same in the ATen graph:

- a dim whose operand's leading dim (its row stride) is not a multiple of
  16 bytes (K of a row-major A or a column-major B, M of a column-major
  A), and N where it is not (the result is a new row-major tensor), is
  padded with zeros to one (zeros along K add nothing; along M and N the
  result is sliced back, a view whose rows keep the padded stride); an
  operand whose rows are already 16-byte aligned (a view of a wider
  buffer) is left as it is;
- an operand is padded in its memory order (a column-major operand as its
  row-major transpose, padded, transposed back), so that padding the
  producer of that transpose is one `constant_pad_nd` the producing kfuse
  partition writes directly: the cross-entropy backward's gradient is
  written padded once and read by both backward matmuls;
- the same operand padded the same way is one node.

Only matmuls on a CUDA device with at least ``MIN_MACS`` multiply-adds
are padded (a small matmul gains less than its padding copies cost), and
only with static sizes. ``Options.pad_matmuls`` (KFUSE_TORCH_PAD_MM=0
turns it off) decides; tests force it on the CPU.
"""
import torch

aten = torch.ops.aten

MIN_MACS = 1 << 27
_MATMULS = ("mm", "addmm", "bmm")


def _packet(node):
    p = getattr(node.target, "overloadpacket", None) if node.op == "call_function" else None
    return p.__name__ if p is not None else None


def _value(node):
    """A tensor standing for node's value: its FakeTensor (or real tensor)
    'val', or a meta-device tensor made from its 'tensor_meta'; None."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return val
    tm = node.meta.get("tensor_meta")
    if tm is not None and hasattr(tm, "stride"):
        return torch.empty_strided(tuple(tm.shape), tuple(tm.stride), dtype=tm.dtype, device="meta")
    return None


def _static(t):
    return t is not None and all(isinstance(s, int) for s in (*t.shape, *t.stride()))


def _set_meta(node, op, args):
    """node's meta from running op on its arguments' values (under their
    fake mode where they are FakeTensors)."""
    vals = [_value(a) if isinstance(a, torch.fx.Node) else a for a in args]
    mode = next((getattr(v, "fake_mode", None) for v in vals if getattr(v, "fake_mode", None) is not None), None)
    if mode is not None:
        with mode:
            out = op(*vals)
    else:
        out = op(*vals)
    if out.device.type == "meta":
        from torch.fx.passes.shape_prop import _extract_tensor_metadata
        node.meta["tensor_meta"] = _extract_tensor_metadata(out)
    else:
        node.meta["val"] = out


class _Graph:
    def __init__(self, gm):
        self.graph = gm.graph
        self.pads = {}  # (node, pad list) -> its constant_pad_nd node

    def call(self, before, op, args, kwargs=None):
        with self.graph.inserting_before(before):
            node = self.graph.call_function(op, tuple(args), dict(kwargs or {}))
        _set_meta(node, (lambda *xs: op(*xs, **kwargs)) if kwargs else op, args)
        return node

    def transposed(self, before, x, rank):
        """x with its last two dims swapped: x's source where x is itself
        such a transpose, else a new transpose."""
        src = _transpose_source(x, rank)
        if src is not None:
            return _plain(src, rank)
        op = aten.t.default if rank == 2 else aten.transpose.int
        return self.call(before, op, [x] if rank == 2 else [x, -2, -1])

    def padded(self, before, x, rows, cols, row_major):
        """x ([..., R, C]) with ``rows`` zero rows and ``cols`` zero columns
        added, laid out as x is (row-major or column-major)."""
        if rows == 0 and cols == 0:
            return x
        rank = _value(x).dim()
        if row_major:
            return self.pad(before, _plain(x, rank), [0, cols, 0, rows])
        base = self.transposed(before, x, rank)
        return self.transposed(before, self.pad(before, base, [0, rows, 0, cols]), rank)

    def pad(self, before, x, pads):
        """x with constant_pad_nd's `pads` of zeros: one node per (x, pads)."""
        while len(pads) > 2 and pads[-2:] == [0, 0]:
            pads = pads[:-2]
        key = (x, tuple(pads))
        if key not in self.pads:
            # (after x, so that every matmul reading this operand can use it)
            anchor = x.next if x.op != "placeholder" else before
            while anchor.op == "placeholder":
                anchor = anchor.next
            self.pads[key] = self.call(anchor, aten.constant_pad_nd.default, [x, list(pads), 0.0])
        return self.pads[key]


def _transpose_source(x, rank):
    """The node x swaps the last two dims of (t, transpose, a permute that
    swaps only those), or None."""
    p = _packet(x)
    if p == "t" or (p == "transpose" and {int(d) % rank for d in x.args[1:3]} == {rank - 2, rank - 1}) or \
            (p == "permute" and [int(d) % rank for d in x.args[1]] == [*range(rank - 2), rank - 1, rank - 2]):
        return x.args[0]
    return None


def _plain(x, rank):
    """x without pairs of transposes over it (t(t(w)) is w): so that every
    matmul that reads w pads w, and the pads are one node."""
    while True:
        once = _transpose_source(x, rank)
        twice = _transpose_source(once, rank) if isinstance(once, torch.fx.Node) else None
        if twice is None:
            return x
        x = twice


def _orientation(t):
    """'row' (unit stride along the last dim), 'col' (along the one before)
    or None for the last two dims of t."""
    s1, s0 = t.stride(-1), t.stride(-2)
    if s1 == 1 and (s0 >= t.shape[-1] or t.shape[-2] == 1):
        return "row"
    if s0 == 1 and s1 >= t.shape[-2]:
        return "col"
    return None


def pad_matmuls(gm, force=False):
    """Pads gm's matmuls as the module docstring says, in place; returns
    the number padded. ``force``: on any device (tests)."""
    g = _Graph(gm)
    count = 0
    for node in list(gm.graph.nodes):
        p = _packet(node)
        if p not in _MATMULS or getattr(node.target, "_overloadname", None) != "default":  # (not the out= forms)
            continue
        bias, a, b = (node.args[0], node.args[1], node.args[2]) if p == "addmm" else (None, node.args[0], node.args[1])
        if not all(isinstance(x, torch.fx.Node) for x in (a, b)):
            continue
        va, vb, vout = _value(a), _value(b), _value(node)
        if not (_static(va) and _static(vb) and _static(vout)) or va.dtype not in (torch.bfloat16, torch.float16,
                                                                                 torch.float32):
            continue
        if not force and vout.device.type != "cuda":
            continue
        oa, ob = _orientation(va), _orientation(vb)
        if oa is None or ob is None:
            continue
        align = 16 // va.element_size()
        m, k, n = va.shape[-2], va.shape[-1], vb.shape[-1]
        batch = va.shape[0] if va.dim() == 3 else 1
        if batch * m * n * k < MIN_MACS:
            continue
        # (cuBLAS reads the leading dims, the strides: a dim is padded where
        # it sets an unaligned one; the result is a new row-major tensor,
        # its leading dim N)
        pk = -k % align if ((oa == "row" and va.stride(-2) % align) or (ob == "col" and vb.stride(-1) % align)) else 0
        pm = -m % align if (oa == "col" and va.stride(-1) % align) else 0
        pn = -n % align
        if pk == pm == pn == 0:
            continue
        bias_pads = None  # (addmm: the bias's pads where M or N grow, decided before any node is added)
        if p == "addmm" and (pm or pn):
            vbias = _value(bias) if isinstance(bias, torch.fx.Node) else None
            if vbias is None or not _static(vbias) or vbias.dim() > 2:
                continue
            bias_pads = [0, pn if vbias.shape[-1] == n and n > 1 else 0]
            if vbias.dim() == 2:
                bias_pads += [0, pm if vbias.shape[0] == m and m > 1 else 0]
        args = [g.padded(node, a, pm, pk, oa == "row"), g.padded(node, b, pk, pn, ob == "row")]
        if p == "addmm":
            args = [g.pad(node, bias, bias_pads) if bias_pads and any(bias_pads) else bias, *args]
        out = g.call(node, node.target, args, node.kwargs)  # (addmm's beta and alpha in kwargs)
        rank = vout.dim()
        if pm:
            out = g.call(node, aten.slice.Tensor, [out, rank - 2, 0, m])
        if pn:
            out = g.call(node, aten.slice.Tensor, [out, rank - 1, 0, n])
        node.replace_all_uses_with(out)
        gm.graph.erase_node(node)
        for x in {a, b}:  # a transpose only the old matmul read (a view: nothing else to keep)
            if not x.users and _packet(x) in ("t", "transpose", "permute"):
                gm.graph.erase_node(x)
        count += 1
    if count:
        gm.graph.lint()
        gm.recompile()
    return count
