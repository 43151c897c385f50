"""ATen (and the few prims that decompositions leave) -> kfuse builder calls.

One handler per ATen op packet (``aten.add``, ``aten.var_mean``, ...). A
handler gets the translation context, the FX node, and the node's arguments
with every FX node replaced by what it translated to: a ``TV`` (a kfuse
value with the torch dtype and trace-time shape of the node) or a Python
number. It returns a kfuse Value (or a tuple of them for ops with several
results); the context wraps it with the node's dtype and shape.

torch's semantics are made explicit rather than left to kfuse's rules:
operands are cast to torch's ``result_type`` before each op, so every
kfuse op computes in the dtype torch computes in. ``check(node)`` says
whether a node is translatable (the OperatorSupport of the partitioner)
and why not.
"""
import sys

import torch

import kfuse

aten = torch.ops.aten
prims = getattr(torch.ops, "prims", None)

# torch dtypes kfuse stores (float8 where this torch has it)
KF_DTYPES = {torch.float64: kfuse.float64, torch.float32: kfuse.float32, torch.float16: kfuse.float16,
             torch.bfloat16: kfuse.bfloat16, torch.int64: kfuse.int64, torch.int32: kfuse.int32,
             torch.int8: kfuse.int8, torch.uint8: kfuse.uint8, torch.bool: kfuse.bool_}
for _n in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _n):
        KF_DTYPES[getattr(torch, _n)] = getattr(kfuse, _n)

INT64_MAX = (1 << 63) - 1


class Unsupported(Exception):
    """A node the translator does not take (the message is the reason)."""


class TV:
    """A kfuse value with the torch dtype and trace-time shape of its node."""

    __slots__ = ("v", "dtype", "shape")

    def __init__(self, v, dtype, shape):
        self.v, self.dtype, self.shape = v, dtype, shape

    @property
    def rank(self):
        return len(self.shape)


class SV:
    """A scalar input of the fusion (a SymInt or number the partition takes),
    with its trace-time value."""

    __slots__ = ("v", "hint")

    def __init__(self, v, hint):
        self.v, self.hint = v, hint


def node_meta(node):
    """(dtype, shape) of a node's tensor value from its FX meta, or None."""
    val = node.meta.get("val", None) if hasattr(node, "meta") else None
    if isinstance(val, torch.Tensor):
        return val.dtype, tuple(_int(s) for s in val.shape)
    tm = node.meta.get("tensor_meta", None) if hasattr(node, "meta") else None
    if tm is not None and hasattr(tm, "dtype"):
        return tm.dtype, tuple(_int(s) for s in tm.shape)
    return None


def symbolic(node):
    """Whether a node's value is a SymInt or a tensor with a symbolic size."""
    val = node.meta.get("val", None) if hasattr(node, "meta") else None
    vals = val if isinstance(val, (tuple, list)) else [val]
    for v in vals:
        if isinstance(v, torch.Tensor) and any(not isinstance(s, int) for s in v.shape):
            return True
        if type(v).__name__ in ("SymInt", "SymFloat"):
            return True
    return False


def _int(s):
    """A size as an int: its hint for a SymInt (no guard is added)."""
    if isinstance(s, int):
        return s
    node = getattr(s, "node", None)
    hint = getattr(node, "hint", None) if node is not None else None
    if hint is not None:
        try:
            return int(hint)
        except Exception:
            pass
    try:
        from torch.fx.experimental.symbolic_shapes import hint_int
        return int(hint_int(s))
    except Exception:  # an unbacked symbolic size
        return -1


def _is_num(x):
    return isinstance(x, (bool, int, float)) and not isinstance(x, torch.Tensor)


# ---------------------------------------------------------------------------
# the translation context

class Context:
    """Builds one kfuse Definition from the nodes of one partition."""

    def __init__(self, fd, graph_inputs=(), dynamic=False):
        self.fd = fd
        # A graph with symbolic sizes (Dynamo's dynamic shapes) is reused at
        # other sizes: its shape arguments are taken as written (SymInts are
        # scalar inputs, ints are static), never matched by value.
        self.dynamic = dynamic
        self.inputs = []  # TVs of the tensor inputs (size lookups)
        # Tensor inputs of the whole graph: (name, dtype, shape). A size no
        # partition input has (the B and T of a [B*T, C] -> [B, T, C] view)
        # is read from one of these, which then joins the fusion's inputs
        # (its metadata only: kfuse's size op reads no data).
        self.graph_inputs = list(graph_inputs)
        self.extra = {}   # graph input name -> TV, in the order defined

    # dtype rules -----------------------------------------------------------
    @staticmethod
    def _probe(x):
        if isinstance(x, TV):
            return torch.empty((1,) * x.rank if x.rank else (), dtype=x.dtype, device="meta")
        if isinstance(x, SV):
            return x.hint
        return x

    def result_type(self, a, b):
        """torch.result_type of two operands (TVs or numbers)."""
        pa, pb = self._probe(a), self._probe(b)
        if not isinstance(pa, torch.Tensor) and not isinstance(pb, torch.Tensor):
            raise Unsupported("an op on numbers only")
        return torch.result_type(pa, pb)

    def to(self, x, dtype):
        """x (TV, SV or number) as an operand computing in dtype."""
        if isinstance(x, SV):
            return x.v  # a scalar input: promotes like a Python number
        if isinstance(x, TV):
            if x.dtype == dtype:
                return x.v
            return self.fd.cast(x.v, KF_DTYPES[dtype])
        if dtype == torch.bool:
            return self.fd.constant(bool(x), kfuse.bool_)
        if dtype.is_floating_point:
            return float(x)  # a Python float: acts as a scalar in kfuse's promotion
        return int(x)

    def const(self, value, dtype):
        return self.fd.constant(value, KF_DTYPES[dtype])

    def cast(self, x, dtype):
        return self.to(x, dtype)

    # shapes ----------------------------------------------------------------
    def size(self, tv, dim):
        return self.fd.op("size", [tv.v], [dim])

    def shape_values(self, sizes, source=None, allow_infer=True):
        """Shape list entries for trace-time sizes, each tied to a tensor's
        extent where one matches (so a new size of that dim reuses the
        definition): a dim of ``source``, a product of consecutive dims of
        ``source``, a dim of another input; at most one other entry -1
        (inferred, for reshape), the rest constants. Sizes 0 and 1 stay
        constants (they are part of the size class anyway)."""
        if self.dynamic:
            return [e.v if isinstance(e, SV) else self.fd.constant(int(e), kfuse.int64) for e in sizes]
        out, unresolved = [], []
        sizes = list(sizes)
        for i, n in enumerate(sizes):
            if isinstance(n, SV):
                out.append(n.v)
                sizes[i] = n.hint
                continue
            n = int(n)
            e = None
            if n == -1:
                e = -1
            elif n > 1:
                e = self._match(n, source)
            if e is None:
                unresolved.append(i)
                e = n
            out.append(e)
        if allow_infer and len(unresolved) == 1 and sizes[unresolved[0]] > 1 and -1 not in sizes:
            out[unresolved[0]] = -1
        return [self.fd.constant(e, kfuse.int64) if isinstance(e, int) else e for e in out]

    def reshape_values(self, x, entries, out_shape):
        """Shape list entries for reshaping x to out_shape (``entries``: the
        op's own list, ints or SVs). Dims are grouped as torch's view groups
        them (runs whose products agree); a group of one output dim is the
        product of its input dims' sizes; the dims a split makes are read
        from the graph's inputs (same position first), one of them -1."""
        if self.dynamic or any(isinstance(e, SV) for e in entries) or 0 in x.shape or 0 in out_shape:
            return self.shape_values(entries, x)
        vals = [None] * len(out_shape)
        i = j = 0
        ins, outs = list(x.shape), list(out_shape)
        while j < len(outs):
            if outs[j] == 1:
                vals[j] = 1
                j += 1
                continue
            while i < len(ins) and ins[i] == 1:
                i += 1
            gi, gj, pi, pj = [i], [j], ins[i] if i < len(ins) else 1, outs[j]
            while pi != pj:
                if pi < pj:
                    i += 1
                    gi.append(i)
                    pi *= ins[i]
                else:
                    j += 1
                    gj.append(j)
                    pj *= outs[j]
            i, j = i + 1, j + 1
            if len(gj) == 1:
                e = self.size(x, gi[0])
                for k in gi[1:]:
                    e = self.fd.op("mul", [e, self.size(x, k)])
                vals[gj[0]] = e
                continue
            free = None
            for k in gj:
                e = self._match(outs[k], None, position=k, strict=True)
                if e is None and free is None:
                    free = k
                    e = -1
                vals[k] = outs[k] if e is None else e
        return [self.fd.constant(v, kfuse.int64) if isinstance(v, int) else v for v in vals]

    def _match(self, n, source, position=None, strict=False):
        """A size value equal to n: a dim of ``source``, a product of its
        consecutive dims, else a dim of a partition input or of a graph
        input (the dim at ``position`` first; only that one when
        ``strict``). None when nothing matches."""
        if source is not None:
            for d, s in enumerate(source.shape):
                if s == n:
                    return self.size(source, d)
            for a in range(source.rank):
                p = 1
                for b in range(a, source.rank):
                    p *= source.shape[b]
                    if p == n and b > a:
                        e = self.size(source, a)
                        for k in range(a + 1, b + 1):
                            e = self.fd.op("mul", [e, self.size(source, k)])
                        return e
                    if p > n:
                        break
        cands = [(0, tv, None, d) for tv in self.inputs for d in range(tv.rank)]
        cands += [(1, None, g, d) for g in self.graph_inputs for d in range(len(g[2]))]
        if position is not None:
            cands.sort(key=lambda c: (c[3] != position, c[0]))
            if strict:
                cands = [c for c in cands if c[3] == position]
        for _, tv, g, d in cands:
            if tv is not None and tv.shape[d] == n:
                return self.size(tv, d)
            if g is not None and g[2][d] == n:
                name, dtype, shape = g
                tv = self.extra.get(name)
                if tv is None:
                    tv = self.extra[name] = TV(self.fd.tensor(len(shape), KF_DTYPES[dtype]), dtype, shape)
                return self.size(tv, d)
        return None


# ---------------------------------------------------------------------------
# handlers

HANDLERS = {}   # packet -> handler(ctx, node, args, kwargs)
CHECKS = {}     # packet -> check(node) raising Unsupported (optional)


def _packets(names, ns=aten):
    out = []
    for n in names:
        p = getattr(ns, n, None) if ns is not None else None
        if p is not None:
            out.append(p)
    return out


def handles(*names, ns=aten, check=None):
    def deco(fn):
        for p in _packets(names, ns):
            HANDLERS[p] = fn
            if check is not None:
                CHECKS[p] = check
        return fn
    return deco


def _unary(kop, float_only=False):
    def h(ctx, node, args, kwargs):
        x = args[0]
        out_dt = node_meta(node)[0]
        # ops torch computes in a float dtype (exp of an int) run on that dtype
        dt = out_dt if (out_dt.is_floating_point and kop not in ("isnan", "isinf", "isfinite")) else x.dtype
        return ctx.fd.op(kop, [ctx.to(x, dt)])
    return h


_UNARY = {"abs": "abs", "neg": "neg", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log", "log2": "log2",
          "log10": "log10", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "reciprocal",
          "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan",
          "sinh": "sinh", "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
          "sigmoid": "sigmoid", "relu": "relu", "erf": "erf", "erfc": "erfc", "floor": "floor", "ceil": "ceil",
          "trunc": "trunc", "sign": "sign", "isnan": "isnan", "isinf": "isinf",
          "isfinite": "isfinite", "logical_not": "logical_not", "bitwise_not": "bitwise_not", "silu": "silu"}
for _a, _k in _UNARY.items():
    for _name in (_a, _a + "_"):
        handles(_name)(_unary(_k))


def _check_round(node):
    if node.kwargs.get("decimals", 0) or (len(node.args) > 1 and node.args[1]):
        raise Unsupported("round with decimals")


handles("round", "round_", check=_check_round)(_unary("round"))


def _check_gelu(node):
    approx = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"gelu approximate={approx!r}")


@handles("gelu", "gelu_", check=_check_gelu)
def _gelu(ctx, node, args, kwargs):
    approx = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    x = args[0]
    return ctx.fd.op("gelu_tanh" if approx == "tanh" else "gelu", [x.v])


def _binary(kop, compare=False):
    def h(ctx, node, args, kwargs):
        a, b = args[0], args[1]
        dt = ctx.result_type(a, b)
        if not compare:
            out_dt = node_meta(node)[0]
            if out_dt.is_floating_point and not dt.is_floating_point:
                dt = out_dt  # atan2 / div of ints: computed in the float result dtype
        return ctx.fd.op(kop, [ctx.to(a, dt), ctx.to(b, dt)])
    return h


_BINARY = {"mul": "mul", "fmod": "fmod", "remainder": "remainder", "atan2": "atan2",
           "maximum": "maximum", "minimum": "minimum", "logical_and": "logical_and", "logical_or": "logical_or",
           "logical_xor": "logical_xor", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
           "bitwise_xor": "bitwise_xor", "__and__": "bitwise_and", "__or__": "bitwise_or",
           "__xor__": "bitwise_xor", "bitwise_left_shift": "shift_left", "bitwise_right_shift": "shift_right",
           "__lshift__": "shift_left", "__rshift__": "shift_right"}
_COMPARE = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}
for _a, _k in _BINARY.items():
    handles(_a, _a + "_")(_binary(_k))
for _a, _k in _COMPARE.items():
    handles(_a, _a + "_")(_binary(_k, compare=True))


def _alpha(kwargs, args, i=2):
    return kwargs.get("alpha", args[i] if len(args) > i else 1)


@handles("add", "add_", "sub", "sub_", "rsub")
def _add_sub(ctx, node, args, kwargs):
    a, b = args[0], args[1]
    name = node.target.overloadpacket.__name__.rstrip("_")
    if name == "rsub":
        a, b, name = b, a, "sub"
    alpha = _alpha(kwargs, args)
    dt = ctx.result_type(a, b)
    bv = ctx.to(b, dt)
    if alpha != 1:
        bv = ctx.fd.op("mul", [bv, ctx.to(alpha, dt)])
    return ctx.fd.op(name, [ctx.to(a, dt), bv])


def _check_div(node):
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    if mode not in (None, "trunc", "floor"):
        raise Unsupported(f"div rounding_mode={mode!r}")


@handles("div", "div_", "floor_divide", "floor_divide_", check=_check_div)
def _div(ctx, node, args, kwargs):
    a, b = args[0], args[1]
    mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    if node.target.overloadpacket.__name__.startswith("floor_divide"):
        mode = "floor"
    dt = ctx.result_type(a, b)
    if mode is None:
        out_dt = node_meta(node)[0]
        cdt = out_dt if not dt.is_floating_point else dt
        return ctx.fd.op("div", [ctx.to(a, cdt), ctx.to(b, cdt)])
    # Integer division through float64: exact while |a| < 2^53 (the
    # correctly rounded quotient of such operands never crosses an integer).
    cdt = dt if dt.is_floating_point else torch.float64
    q = ctx.fd.op("div", [ctx.to(a, cdt), ctx.to(b, cdt)])
    q = ctx.fd.op("trunc" if mode == "trunc" else "floor", [q])
    return q if cdt == dt else ctx.fd.cast(q, KF_DTYPES[dt])


@handles("pow", "pow_")
def _pow(ctx, node, args, kwargs):
    a, b = args[0], args[1]
    dt = node_meta(node)[0]
    return ctx.fd.op("pow", [ctx.to(a, dt), ctx.to(b, dt)])


def _where_like(ctx, node, cond, a, b):
    dt = node_meta(node)[0]
    c = cond.v if cond.dtype == torch.bool else ctx.fd.cast(cond.v, kfuse.bool_)
    return ctx.fd.op("where", [c, ctx.to(a, dt), ctx.to(b, dt)])


@handles("where")
def _where(ctx, node, args, kwargs):
    return _where_like(ctx, node, args[0], args[1], args[2])


@handles("masked_fill", "masked_fill_")
def _masked_fill(ctx, node, args, kwargs):
    x, mask, value = args[0], args[1], args[2]
    return _where_like(ctx, node, mask, value, x)


@handles("clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_")
def _clamp(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__.rstrip("_")
    x = args[0]
    if name == "clamp":
        lo = kwargs.get("min", args[1] if len(args) > 1 else None)
        hi = kwargs.get("max", args[2] if len(args) > 2 else None)
    elif name == "clamp_min":
        lo, hi = args[1], None
    else:
        lo, hi = None, args[1]
    dt = node_meta(node)[0]
    xv = ctx.to(x, dt)
    if lo is not None and hi is not None:
        return ctx.fd.op("clamp", [xv, ctx.to(lo, dt), ctx.to(hi, dt)])
    # NaN in x or the bound gives NaN, in torch and in kfuse's maximum/minimum
    if lo is not None:
        return ctx.fd.op("maximum", [xv, ctx.to(lo, dt)])
    if hi is not None:
        return ctx.fd.op("minimum", [xv, ctx.to(hi, dt)])
    raise Unsupported("clamp without bounds")


@handles("lerp", "lerp_")
def _lerp(ctx, node, args, kwargs):
    dt = node_meta(node)[0]
    return ctx.fd.op("lerp", [ctx.to(args[0], dt), ctx.to(args[1], dt), ctx.to(args[2], dt)])


@handles("addcmul", "addcmul_", "addcdiv", "addcdiv_")
def _addc(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__.rstrip("_")
    dt = node_meta(node)[0]
    x, t1, t2 = (ctx.to(a, dt) for a in args[:3])
    value = kwargs.get("value", args[3] if len(args) > 3 else 1)
    p = ctx.fd.op("mul" if name == "addcmul" else "div", [t1, t2])
    if value != 1:
        p = ctx.fd.op("mul", [ctx.to(value, dt), p])
    return ctx.fd.op("add", [x, p])


# casts and copies -----------------------------------------------------------

def _check_to_copy(node):
    for k in ("layout", "pin_memory"):
        if node.kwargs.get(k) not in (None, torch.strided, False):
            raise Unsupported(f"_to_copy {k}={node.kwargs.get(k)!r}")
    dev = node.kwargs.get("device")
    if dev is not None:
        src = node.args[0]
        sval = src.meta.get("val") if hasattr(src, "meta") else None
        if sval is not None and torch.device(dev) != sval.device:
            raise Unsupported("_to_copy to another device")


@handles("_to_copy", check=_check_to_copy)
def _to_copy(ctx, node, args, kwargs):
    return ctx.to(args[0], node_meta(node)[0]) if args[0].dtype != node_meta(node)[0] else _identity(args[0])


def _identity(x):
    return x.v


@handles("convert_element_type", ns=prims)
def _convert(ctx, node, args, kwargs):
    return ctx.to(args[0], args[1])


@handles("clone", "alias", "detach", "lift_fresh_copy", "contiguous")
def _clone(ctx, node, args, kwargs):
    return args[0].v


# copy_ and in-place ops are handled by the context (ctx.mutations)
@handles("copy_")
def _copy(ctx, node, args, kwargs):
    dst, src = args[0], args[1]
    v = ctx.to(src, dst.dtype)
    if isinstance(src, TV) and tuple(src.shape) == tuple(dst.shape):
        return v
    return ctx.fd.expand(v, [ctx.size(dst, d) for d in range(dst.rank)])


# reductions -----------------------------------------------------------------

def _dims(d, rank):
    if d is None or (isinstance(d, (list, tuple)) and len(d) == 0):
        return list(range(rank))
    if isinstance(d, int):
        d = [d]
    return sorted({x % rank if rank else 0 for x in d})


def _reduce_args(args, kwargs, dim_i=1, keep_i=2):
    dim = kwargs.get("dim", args[dim_i] if len(args) > dim_i else None)
    keepdim = kwargs.get("keepdim", args[keep_i] if len(args) > keep_i else False)
    return dim, bool(keepdim)


@handles("sum", "mean", "amax", "amin", "prod")
def _reduce(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__
    x = args[0]
    over = node.target._overloadname
    if over == "default" and name in ("sum", "mean", "prod"):
        dim, keepdim = None, False
    else:
        dim, keepdim = _reduce_args(args, kwargs)
    dtype = kwargs.get("dtype")
    out_dt = node_meta(node)[0]
    xv = x.v
    if dtype is not None:
        xv = ctx.to(x, dtype)
    elif name in ("mean",) and x.dtype != out_dt:
        xv = ctx.to(x, out_dt)
    kname = {"amax": "max", "amin": "min"}.get(name, name)
    r = getattr(ctx.fd, kname)(xv, _dims(dim, x.rank), keepdim)
    return r


def _correction(kwargs, args, over):
    if over in ("correction", "correction_names"):
        c = kwargs.get("correction", None)
        return 1 if c is None else c
    unbiased = kwargs.get("unbiased", args[2] if over == "dim" and len(args) > 2 else
                          (args[1] if over == "default" and len(args) > 1 else True))
    return 1 if unbiased else 0


def _check_var(node):
    c = node.kwargs.get("correction", None)
    if c is not None and float(c) != int(c):
        raise Unsupported(f"var with a fractional correction {c}")


def _var_like(ctx, node, args, kwargs):
    over = node.target._overloadname
    x = args[0]
    dim = None if over == "default" else kwargs.get("dim", args[1] if len(args) > 1 else None)
    keepdim = bool(kwargs.get("keepdim", args[3] if over == "dim" and len(args) > 3 else False))
    corr = int(_correction(kwargs, args, over))
    return x, _dims(dim, x.rank), corr, keepdim


@handles("var", check=_check_var)
def _var(ctx, node, args, kwargs):
    x, dims, corr, keepdim = _var_like(ctx, node, args, kwargs)
    return ctx.fd.var(x.v, dims, corr, keepdim)


@handles("std", check=_check_var)
def _std(ctx, node, args, kwargs):
    x, dims, corr, keepdim = _var_like(ctx, node, args, kwargs)
    return ctx.fd.sqrt(ctx.fd.var(x.v, dims, corr, keepdim))


@handles("var_mean", check=_check_var)
def _var_mean(ctx, node, args, kwargs):
    x, dims, corr, keepdim = _var_like(ctx, node, args, kwargs)
    return ctx.fd.var_mean(x.v, dims, corr, keepdim)


def _check_arg(node):
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else None)
    if dim is None:
        raise Unsupported("argmax/argmin over all dims")


@handles("argmax", "argmin", check=_check_arg)
def _argmax(ctx, node, args, kwargs):
    dim, keepdim = _reduce_args(args, kwargs)
    name = node.target.overloadpacket.__name__
    return getattr(ctx.fd, name)(args[0].v, dim % max(args[0].rank, 1), keepdim)


@handles("cumsum", "cumprod")
def _cumsum(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__
    x, dim = args[0], args[1]
    dtype = kwargs.get("dtype")
    xv = ctx.to(x, dtype) if dtype is not None else x.v
    return getattr(ctx.fd, name)(xv, dim % max(x.rank, 1))


# shape ops ------------------------------------------------------------------

@handles("view", "_unsafe_view", "reshape", "_reshape_alias")
def _view(ctx, node, args, kwargs):
    x = args[0]
    entries = list(args[1])
    out_shape = node_meta(node)[1]
    if not any(isinstance(e, SV) for e in entries) and tuple(out_shape) == tuple(x.shape):
        return x.v
    return ctx.fd.reshape(x.v, ctx.reshape_values(x, entries, out_shape))


@handles("permute")
def _permute(ctx, node, args, kwargs):
    x = args[0]
    perm = [d % x.rank for d in args[1]]
    return x.v if perm == list(range(x.rank)) else ctx.fd.permute(x.v, perm)


@handles("t")
def _t(ctx, node, args, kwargs):
    x = args[0]
    return x.v if x.rank < 2 else ctx.fd.permute(x.v, [1, 0])


@handles("transpose")
def _transpose(ctx, node, args, kwargs):
    x = args[0]
    if x.rank < 2:
        return x.v
    a, b = args[1] % x.rank, args[2] % x.rank
    if a == b:
        return x.v
    perm = list(range(x.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return ctx.fd.permute(x.v, perm)


@handles("expand")
def _expand(ctx, node, args, kwargs):
    x = args[0]
    entries = list(args[1])
    shape = node_meta(node)[1]
    off = len(shape) - x.rank
    if off == 0 and tuple(shape) == tuple(x.shape) and not any(isinstance(e, SV) for e in entries):
        return x.v
    vals = []
    for i, (e, n) in enumerate(zip(entries, shape)):
        j = i - off
        if isinstance(e, SV):
            vals.append(e.v)
        elif ctx.dynamic:
            vals.append(ctx.fd.constant(int(e), kfuse.int64))  # -1 keeps the size, others are static
        elif j >= 0 and (e == -1 or x.shape[j] == n):
            vals.append(ctx.fd.constant(-1, kfuse.int64))  # keeps the input's size
        else:
            vals.extend(ctx.shape_values([n], None, allow_infer=False))
    return ctx.fd.expand(x.v, vals)


@handles("unsqueeze")
def _unsqueeze(ctx, node, args, kwargs):
    x = args[0]
    return ctx.fd.unsqueeze(x.v, args[1] % (x.rank + 1))


@handles("squeeze")
def _squeeze(ctx, node, args, kwargs):
    x = args[0]
    over = node.target._overloadname
    if over == "default":
        dims = [d for d, s in enumerate(x.shape) if s == 1]
    else:
        d = args[1]
        dims = [d] if isinstance(d, int) else list(d)
        dims = sorted({k % max(x.rank, 1) for k in dims if x.rank and x.shape[k % x.rank] == 1})
    return ctx.fd.squeeze(x.v, dims) if dims else x.v


@handles("slice")
def _slice(ctx, node, args, kwargs):
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0) % x.rank
    start = kwargs.get("start", args[2] if len(args) > 2 else None)
    end = kwargs.get("end", args[3] if len(args) > 3 else None)
    step = kwargs.get("step", args[4] if len(args) > 4 else 1)
    if isinstance(start, SV) or isinstance(end, SV) or isinstance(step, SV):
        raise Unsupported("slice with a symbolic start, end or step (kfuse's slice bounds are attributes)")
    start = 0 if start is None else int(start)
    size = x.shape[dim]
    if end is None or int(end) >= INT64_MAX or (not ctx.dynamic and int(end) >= size >= 0):
        end = None
    if start == 0 and end is None and step == 1:
        return x.v
    return ctx.fd.slice(x.v, dim, start, end, int(step))


@handles("select")
def _select(ctx, node, args, kwargs):
    x, dim, index = args[0], args[1] % args[0].rank, int(args[2])
    stop = index + 1 if index != -1 else None
    return ctx.fd.squeeze(ctx.fd.slice(x.v, dim, index, stop, 1), [dim])


@handles("split", "split_with_sizes")
def _split(ctx, node, args, kwargs):
    x = args[0]
    dim = kwargs.get("dim", args[2] if len(args) > 2 else 0) % x.rank
    size = x.shape[dim]
    if node.target.overloadpacket.__name__ == "split":
        step = int(args[1])
        sizes = [min(step, size - s) for s in range(0, size, step)] or [0]
    else:
        sizes = [int(s) for s in args[1]]
    out, start = [], 0
    for i, s in enumerate(sizes):
        stop = None if i == len(sizes) - 1 else start + s
        out.append(ctx.fd.slice(x.v, dim, start, stop, 1))
        start += s
    return tuple(out)


@handles("cat")
def _cat(ctx, node, args, kwargs):
    tensors = [t for t in args[0] if not (t.rank == 1 and t.shape[0] == 0)]  # torch skips empty 1-d
    dim = kwargs.get("dim", args[1] if len(args) > 1 else 0)
    dt = node_meta(node)[0]
    rank = tensors[0].rank
    return ctx.fd.cat([ctx.to(t, dt) for t in tensors], dim % rank)


def _check_pad(node):
    if any(int(p) < 0 for p in node.args[1]):
        raise Unsupported("constant_pad_nd with negative pads (cropping)")


@handles("constant_pad_nd", check=_check_pad)
def _pad(ctx, node, args, kwargs):
    x, pad = args[0], [int(p) for p in args[1]]
    value = kwargs.get("value", args[2] if len(args) > 2 else 0)
    pads = [0] * (2 * x.rank)
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        pads[2 * d], pads[2 * d + 1] = pad[2 * i], pad[2 * i + 1]
    return ctx.fd.pad(x.v, pads, ctx.to(value, x.dtype))


def _check_slice_backward(node):
    step = node.args[5] if len(node.args) > 5 else 1
    if step != 1:
        raise Unsupported("slice_backward with a step")


@handles("slice_backward", check=_check_slice_backward)
def _slice_backward(ctx, node, args, kwargs):
    grad, sizes, dim, start, end = args[0], [int(s) for s in args[1]], args[2], args[3], args[4]
    dim %= len(sizes)
    start, end, _ = slice(start, end).indices(sizes[dim])
    pads = [0] * (2 * len(sizes))
    pads[2 * dim], pads[2 * dim + 1] = start, sizes[dim] - max(end, start)
    return ctx.fd.pad(grad.v, pads, ctx.to(0, grad.dtype))


@handles("select_backward")
def _select_backward(ctx, node, args, kwargs):
    grad, sizes, dim, index = args[0], [int(s) for s in args[1]], args[2], int(args[3])
    dim %= len(sizes)
    index %= sizes[dim]
    pads = [0] * (2 * len(sizes))
    pads[2 * dim], pads[2 * dim + 1] = index, sizes[dim] - index - 1
    return ctx.fd.pad(ctx.fd.unsqueeze(grad.v, dim), pads, ctx.to(0, grad.dtype))


# creation -------------------------------------------------------------------

def _full_value(ctx, shape_vals, fill, dt):
    if not shape_vals:  # full([]) is a kfuse scalar: a rank-0 tensor is [1] squeezed
        one = ctx.fd.full([ctx.fd.constant(1, kfuse.int64)], ctx.const(fill, dt), KF_DTYPES[dt])
        return ctx.fd.squeeze(one, [0])
    return ctx.fd.full(shape_vals, ctx.const(fill, dt), KF_DTYPES[dt])


@handles("full", "zeros", "ones", "new_zeros", "new_ones", "new_full", "scalar_tensor")
def _full(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__
    dt, shape = node_meta(node)
    fill = {"zeros": 0, "ones": 1, "new_zeros": 0, "new_ones": 1}.get(name)
    if fill is None:
        fill = args[0] if name == "scalar_tensor" else args[2] if name == "new_full" else args[1]
    if isinstance(fill, (TV, SV)):
        raise Unsupported(f"{name} with a tensor or symbolic fill value")
    entries = [] if name == "scalar_tensor" else list(args[1] if name.startswith("new_") else args[0])
    return _full_value(ctx, ctx.shape_values(entries, None, allow_infer=False), fill, dt)


@handles("full_like", "zeros_like", "ones_like")
def _full_like(ctx, node, args, kwargs):
    name = node.target.overloadpacket.__name__
    x = args[0]
    dt = node_meta(node)[0]
    fill = {"zeros_like": 0, "ones_like": 1}.get(name, args[1] if len(args) > 1 else kwargs.get("fill_value"))
    return _full_value(ctx, [ctx.size(x, d) for d in range(x.rank)], fill, dt)


@handles("fill", "fill_")
def _fill(ctx, node, args, kwargs):
    x, v = args[0], args[1]
    if isinstance(v, TV):
        return ctx.fd.expand(ctx.to(v, x.dtype), [ctx.size(x, d) for d in range(x.rank)])
    return _full_value(ctx, [ctx.size(x, d) for d in range(x.rank)], v, x.dtype)


# indexing -------------------------------------------------------------------

@handles("index_select")
def _index_select(ctx, node, args, kwargs):
    x, dim, index = args[0], args[1], args[2]
    return ctx.fd.index_select(x.v, dim % x.rank, index.v)


@handles("gather")
def _gather(ctx, node, args, kwargs):
    x, dim, index = args[0], args[1], args[2]
    return ctx.fd.gather(x.v, dim % x.rank, index.v)


def _check_embedding(node):
    pad = node.args[2] if len(node.args) > 2 else -1
    if len(node.args) > 3 and (node.args[3] or (len(node.args) > 4 and node.args[4])):
        raise Unsupported("embedding with scale_grad_by_freq or sparse")
    del pad  # padding_idx only changes the backward


@handles("embedding", check=_check_embedding)
def _embedding(ctx, node, args, kwargs):
    w, idx = args[0], args[1]
    flat = ctx.fd.reshape(idx.v, [ctx.fd.constant(-1, kfuse.int64)]) if idx.rank != 1 else idx.v
    rows = ctx.fd.index_select(w.v, 0, flat)
    if idx.rank == 1:
        return rows
    return ctx.fd.reshape(rows, [ctx.size(idx, d) for d in range(idx.rank)] + [ctx.size(w, 1)])


@handles("scatter_add", "scatter_add_")
def _scatter_add(ctx, node, args, kwargs):
    x, dim, index, src = args[0], args[1], args[2], args[3]
    return ctx.fd.scatter_add(x.v, dim % x.rank, index.v, ctx.to(src, x.dtype))


def _check_scatter(node):
    if node.target._overloadname not in ("src", "value"):
        raise Unsupported(f"scatter.{node.target._overloadname}")
    if node.kwargs.get("reduce") is not None:
        raise Unsupported("scatter with reduce= (deprecated form)")


def _same_extent(a, b):
    """Whether two trace-time extents are equal for every size the graph
    takes: equal ints, or the same symbolic expression (never a guess that
    would need a guard)."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    ea, eb = getattr(getattr(a, "node", None), "expr", None), getattr(getattr(b, "node", None), "expr", None)
    return ea is not None and eb is not None and ea == eb


def _one_index_per_row(x, dim, index):
    """index has extent 1 along dim and x's extents elsewhere: one position
    written per row (nll_loss's backward, a one-hot)."""
    return (index.rank == x.rank and isinstance(index.shape[dim], int) and index.shape[dim] == 1 and
            all(_same_extent(index.shape[k], x.shape[k]) for k in range(x.rank) if k != dim))


@handles("scatter", "scatter_", check=_check_scatter)
def _scatter(ctx, node, args, kwargs):
    x, dim, index, src = args[0], args[1], args[2], args[3]
    d = dim % x.rank
    if not isinstance(src, (TV, SV)) and _one_index_per_row(x, d, index):
        # A value scattered at one index per row is x where a position along
        # dim equals the row's index: elementwise, so it fuses with what
        # reads it instead of filling x's whole shape in memory first (GPT-2's
        # cross-entropy backward made a float32 [8192, 50257] one-hot, 1.65 GB
        # written and read again). An index out of range writes nothing
        # here (torch's scatter fails on it).
        length = ctx.size(x, d)
        pos = ctx.fd.iota(length, 0, 1, kfuse.int64)
        one = ctx.fd.constant(1, kfuse.int64)
        pos = ctx.fd.reshape(pos, [length if k == d else one for k in range(x.rank)])
        hit = ctx.fd.op("eq", [pos, ctx.to(index, torch.int64)])
        return ctx.fd.op("where", [hit, ctx.const(src, x.dtype), x.v])
    if not isinstance(src, TV):
        src = TV(_full_value(ctx, [ctx.size(index, k) for k in range(index.rank)], src, x.dtype), x.dtype,
                 index.shape)
    return ctx.fd.scatter(x.v, d, index.v, ctx.to(src, x.dtype))


_REDUCE = {"sum": "sum", "prod": "prod", "mean": "mean", "amax": "amax", "amin": "amin"}


@handles("scatter_reduce", "scatter_reduce_")
def _scatter_reduce(ctx, node, args, kwargs):
    x, dim, index, src, reduce = args[0], args[1], args[2], args[3], args[4]
    include_self = kwargs.get("include_self", args[5] if len(args) > 5 else True)
    return ctx.fd.scatter(x.v, dim % x.rank, index.v, ctx.to(src, x.dtype), _REDUCE[reduce], bool(include_self))


@handles("index_add", "index_add_")
def _index_add(ctx, node, args, kwargs):
    x, dim, index, src = args[0], args[1], args[2], args[3]
    alpha = kwargs.get("alpha", args[4] if len(args) > 4 else 1)
    s = ctx.to(src, x.dtype)
    if alpha != 1:
        s = ctx.fd.op("mul", [s, ctx.to(alpha, x.dtype)])
    return ctx.fd.index_add(x.v, dim % x.rank, index.v, s)


# ---------------------------------------------------------------------------
# support

MUTATING = {p for p in HANDLERS if p.__name__.endswith("_")}


def dtype_ok(dt):
    return dt in KF_DTYPES


def check(node):
    """None when ``node`` translates, else the reason it stays in torch."""
    if node.op != "call_function":
        return f"{node.op} node"
    target = node.target
    packet = getattr(target, "overloadpacket", None)
    if packet is None:
        return f"{getattr(target, '__name__', target)} is not an ATen op"
    if packet not in HANDLERS:
        return f"no kfuse translation for {target}"
    if str(getattr(target, "_overloadname", "")).endswith("out"):
        return f"{target}: out= variants are left to torch"
    meta = node_meta(node)
    if meta is None and not _multi_output(node):
        return f"{target}: no tensor meta on the node"
    if meta is not None:
        if not dtype_ok(meta[0]):
            return f"{target}: dtype {meta[0]} has no kfuse equivalent"
        if any(s < 0 for s in meta[1]):
            return f"{target}: an unbacked symbolic size"
    for a in node.all_input_nodes:
        m = node_meta(a)
        if m is not None and not dtype_ok(m[0]):
            return f"{target}: input {a.name} has dtype {m[0]}"
        if m is not None:
            val = a.meta.get("val")
            if isinstance(val, torch.Tensor) and val.device.type not in ("cpu", "cuda"):
                return f"{target}: a tensor on {val.device}"
    if packet.__name__.rstrip("_") not in _SYMBOLIC_OK:
        for a in _flat(list(node.args) + list(node.kwargs.values())):
            if isinstance(a, torch.fx.Node) and node_meta(a) is None and symbolic(a):
                return f"{target}: a symbolic scalar argument ({a.name}) where kfuse takes a constant"
    c = CHECKS.get(packet)
    if c is not None:
        try:
            c(node)
        except Unsupported as e:
            return str(e)
    return None


# ops whose scalar arguments may be symbolic (SymInt nodes): shape lists
# (as scalar inputs) and pointwise operands (scalars promote like numbers)
_SYMBOLIC_OK = ({"view", "_unsafe_view", "reshape", "_reshape_alias", "expand", "full", "zeros", "ones",
                 "new_zeros", "new_ones", "new_full", "add", "sub", "rsub", "mul", "div", "pow", "where",
                 "masked_fill", "clamp", "clamp_min", "clamp_max", "lerp", "maximum", "minimum"}
                | set(_COMPARE))


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _multi_output(node):
    val = node.meta.get("val") if hasattr(node, "meta") else None
    if isinstance(val, (tuple, list)):
        return True
    schema = getattr(node.target, "_schema", None)  # torch 1.13 records no meta for tuple results
    return schema is not None and (len(schema.returns) > 1 or str(schema.returns[0].type).startswith("List"))


def supported_ops():
    """The ATen (and prims) op packets the translator handles, by name."""
    return sorted(str(p) for p in HANDLERS)


if sys.version_info < (3, 8):  # pragma: no cover
    raise ImportError("kfuse.torch needs Python 3.8+")
