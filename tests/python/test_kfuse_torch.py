#!/usr/bin/env python3
"""kfuse.torch (ATen FX graphs -> kfuse fusions) on the CPU backend,
against torch eager.

Each supported ATen op is traced with make_fx (kfuse.torch.fuse, the
decompositions kfuse uses), over float32/float64/float16/bfloat16 and
integer dtypes where meaningful, with broadcasting and non-contiguous
(transposed, strided, expanded) inputs; every case asserts that the op
under test ran in a kfuse partition (not left to torch) and that the
outputs equal eager's (dtype, shape, values within the dtype's
tolerance; ints and bools exactly). Then: partitioning around an mm, the
definition cache across sizes (the recompile counter), fallback reasons,
in-place inputs, and check mode catching a planted mismatch.

Exits 77 (skipped) without torch.

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 tests/python/test_kfuse_torch.py [-v] [name-substring ...]
"""
import os
import sys
import traceback

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    print(f"test_kfuse_torch: SKIP: cannot import torch ({e})")
    sys.exit(77)

import kfuse  # noqa: E402
import kfuse.torch as kt  # noqa: E402
from kfuse.torch import _aten  # noqa: E402

VERBOSE = "-v" in sys.argv[1:]
FILTERS = [a for a in sys.argv[1:] if not a.startswith("-")]
aten = torch.ops.aten
failures, passed = [], []

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I64, I32, BOOL = torch.int64, torch.int32, torch.bool
FLOATS = (F32, F64, F16, BF16)


def gen(shape, dtype, lo=-2.0, hi=2.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == BOOL:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(int(lo), int(hi) + 1, shape, generator=g).to(dtype)
    return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)


def eager(fn, inputs):
    """torch's result; for float16/bfloat16 inputs that torch 1.13's CPU
    kernels lack, the op in float32 rounded to the output dtype (what kfuse
    does: compute wide, round once)."""
    try:
        return fn(*inputs)
    except RuntimeError as e:
        if "not implemented for" not in str(e):
            raise
    wide = [x.float() if isinstance(x, torch.Tensor) and x.dtype in (F16, BF16) else x for x in inputs]
    out = fn(*wide)
    low = next(x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in (F16, BF16))
    fix = lambda o: o.to(low) if o.dtype == F32 else o
    return tuple(fix(o) for o in out) if isinstance(out, tuple) else fix(out)


def packets_in_torch(report):
    return [t for _, t, _ in report.in_torch]


def run_case(name, fn, inputs, ops=(), min_ops=1, rtol=None):
    """Traces fn, asserts every node of the packets in ``ops`` ran in kfuse,
    compares with eager."""
    report = kt.Report()
    try:
        gm = kt.fuse(fn, inputs, min_ops=min_ops, report=report)
    except RuntimeError as e:
        if "not implemented for" not in str(e):
            raise
        gm = kt.fuse(fn, inputs, min_ops=min_ops, report=report, tracing_mode="fake")
    for op in ops:
        left = [f"{n} ({t}): {why}" for n, t, why in report.in_torch if t.split(".")[1] == op]
        assert not left, f"{op} left to torch: {left}\n{report}"
        assert any(p[2] is not None for p in report.partitions), f"no kfuse partition\n{report}"
    for p in report.partitions:
        assert p[3] is None, f"partition {p[0]} fell back: {p[3]}\n{report}"
    ref = eager(fn, inputs)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    opts = kt.Options(check=False, rtol=rtol, atol=rtol)
    for call in ("first call", "second call"):  # the second goes through the C path (Caller.run_torch)
        got = gm(*inputs)
        got = got if isinstance(got, (tuple, list)) else (got,)
        assert len(got) == len(ref)
        for i, (a, b) in enumerate(zip(got, ref)):
            why = kt.mismatch(a, b, opts)
            assert why is None, f"{call}, output {i}: {why}\n{report}"


def test(name):
    def deco(fn):
        if FILTERS and not any(f in name for f in FILTERS):
            return fn
        try:
            fn()
            passed.append(name)
            if VERBOSE:
                print(f"ok   {name}")
        except Exception:
            failures.append(name)
            print(f"FAIL {name}\n{traceback.format_exc()}")
        return fn
    return deco


def case(name, fn, inputs, ops=(), **kw):
    test(name)(lambda: run_case(name, fn, inputs, ops, **kw))


# ---------------------------------------------------------------------------
# pointwise

UNARY = {  # op: (fn, low, high, dtypes)
    "abs": (torch.abs, -2, 2, FLOATS + (I64, I32)), "neg": (torch.neg, -2, 2, FLOATS + (I32,)),
    "exp": (torch.exp, -2, 2, FLOATS), "expm1": (torch.expm1, -2, 2, (F32, F64)),
    "log": (torch.log, 0.1, 3, FLOATS), "log1p": (torch.log1p, 0, 3, (F32, F64)),
    "log2": (torch.log2, 0.1, 3, (F32,)), "log10": (torch.log10, 0.1, 3, (F32,)),
    "sqrt": (torch.sqrt, 0, 3, FLOATS), "rsqrt": (torch.rsqrt, 0.1, 3, FLOATS),
    "reciprocal": (torch.reciprocal, 0.5, 3, (F32, F64)), "sin": (torch.sin, -3, 3, (F32, F16)),
    "cos": (torch.cos, -3, 3, (F32,)), "tan": (torch.tan, -1, 1, (F32,)), "asin": (torch.asin, -0.9, 0.9, (F32,)),
    "acos": (torch.acos, -0.9, 0.9, (F32,)), "atan": (torch.atan, -3, 3, (F32,)),
    "sinh": (torch.sinh, -2, 2, (F32,)), "cosh": (torch.cosh, -2, 2, (F32,)),
    "tanh": (torch.tanh, -3, 3, FLOATS), "asinh": (torch.asinh, -2, 2, (F32,)),
    "acosh": (torch.acosh, 1.1, 3, (F32,)), "atanh": (torch.atanh, -0.9, 0.9, (F32,)),
    "sigmoid": (torch.sigmoid, -4, 4, FLOATS), "relu": (torch.relu, -2, 2, FLOATS + (I32,)),
    "erf": (torch.erf, -2, 2, (F32, F64)), "erfc": (torch.erfc, -2, 2, (F32,)),
    "floor": (torch.floor, -3, 3, (F32, F16)), "ceil": (torch.ceil, -3, 3, (F32,)),
    "round": (torch.round, -3, 3, (F32, F64)), "trunc": (torch.trunc, -3, 3, (F32,)),
    "sign": (torch.sign, -2, 2, (F32, I32)), "isnan": (torch.isnan, -2, 2, (F32,)),
    "isinf": (torch.isinf, -2, 2, (F32,)), "isfinite": (torch.isfinite, -2, 2, (F32,)),
    "logical_not": (torch.logical_not, -1, 1, (F32, BOOL, I32)), "bitwise_not": (torch.bitwise_not, -5, 5, (I32, I64, BOOL)),
    "silu": (F.silu, -3, 3, FLOATS), "gelu": (F.gelu, -3, 3, FLOATS),
}
for op, (fn, lo, hi, dts) in UNARY.items():
    for dt in dts:
        x = gen((3, 5), dt, lo, hi)
        if dt.is_floating_point and op in ("isnan", "isinf", "isfinite", "abs", "sign", "relu"):
            x = x.clone()
            x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), -float("inf")
        # through a transposed (non-contiguous) input
        case(f"unary {op} {dt}", (lambda fn: lambda x: fn(x.t()))(fn), (x,), (op,))
case("unary gelu tanh", lambda x: F.gelu(x, approximate="tanh"), (gen((4, 6), F32),), ("gelu",))
case("unary exp of int (promotes to float32)", lambda x: torch.exp(x), (gen((4,), I32, -3, 3),), ("exp",))

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
    "minimum": torch.minimum, "atan2": torch.atan2, "fmod": torch.fmod, "remainder": torch.remainder,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
}
for op, fn in BINARY.items():
    for dt in (F32, F64, F16, BF16):
        a, b = gen((4, 1, 6), dt, seed=1), gen((3, 6), dt, seed=2)  # broadcasting both ways
        if op in ("fmod", "remainder", "div"):
            b = b.abs() + 0.25
        case(f"binary {op} {dt} broadcast", fn, (a, b), (op,))
    case(f"binary {op} f16 with f32 (promotion)", fn, (gen((4, 6), F16, 0.25, 2), gen((6,), F32, 0.25, 2)), (op,))
for op in ("add", "sub", "mul", "maximum", "minimum", "eq", "lt", "ge", "remainder", "fmod"):
    fn = BINARY[op]
    case(f"binary {op} int32 with int64", fn, (gen((4, 6), I32, -9, 9), gen((6,), I64, 1, 7)), (op,))
case("binary add alpha", lambda a, b: torch.add(a, b, alpha=3), (gen((3, 4), F32), gen((4,), F32)), ("add",))
case("binary sub alpha int", lambda a, b: torch.sub(a, b, alpha=2), (gen((3, 4), I64, -9, 9), gen((4,), I64)),
     ("sub",))
case("binary rsub scalar", lambda a: 2.5 - a, (gen((3, 4), F32),), ("sub",))
case("binary int tensor * float scalar", lambda a: a * 1.5, (gen((3, 4), I32, -9, 9),), ("mul",))
case("binary float16 * float scalar stays f16", lambda a: a * 0.1, (gen((3, 4), F16),), ("mul",))
case("binary bool + int", lambda a, b: a + b, (gen((3, 4), BOOL), gen((4,), I64)), ("add",))
case("binary div of ints is float", lambda a, b: a / b, (gen((3, 4), I64, -9, 9), gen((4,), I64, 1, 5)), ("div",))
for mode in ("trunc", "floor"):
    case(f"binary div {mode} int", (lambda m: lambda a, b: torch.div(a, b, rounding_mode=m))(mode),
         (gen((5, 4), I64, -50, 50), torch.tensor([3, -3, 7, -2])), ("div",))
    case(f"binary div {mode} float", (lambda m: lambda a, b: torch.div(a, b, rounding_mode=m))(mode),
         (gen((5, 4), F32, -9, 9), gen((4,), F32, 0.5, 2)), ("div",))
case("binary floor_divide int32", lambda a: a // 3, (gen((6,), I32, -20, 20),), ("div",))
case("binary remainder int negative", lambda a: torch.remainder(a, -3), (gen((6,), I64, -20, 20),), ("remainder",))
case("binary pow scalar exponent", lambda a: a ** 3, (gen((3, 4), F32),), ("pow",))
case("binary pow scalar base", lambda a: torch.pow(2.0, a), (gen((3, 4), F32),), ("pow",))
case("binary pow int", lambda a: a ** 2, (gen((3, 4), I64, -5, 5),), ("pow",))
for op in ("logical_and", "logical_or", "logical_xor"):
    case(f"logical {op}", getattr(torch, op), (gen((3, 4), BOOL), gen((3, 4), F32)), (op,))
for op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    case(f"bitwise {op} int", getattr(torch, op), (gen((3, 4), I32, 0, 50), gen((4,), I32, 0, 50)), (op,))
    case(f"bitwise {op} bool", getattr(torch, op), (gen((3, 4), BOOL), gen((3, 4), BOOL, seed=3)), (op,))
case("compare f16 tensor with 0.1", lambda a: a == 0.1, (torch.tensor([0.1, 0.2], dtype=F16),), ("eq",))

case("where tensors", lambda c, a, b: torch.where(c, a, b), (gen((3, 4), BOOL), gen((3, 4), F32), gen((4,), F64)),
     ("where",))
case("where scalar", lambda a: torch.where(a > 0, a, 0.5), (gen((3, 4), F16),), ("where", "gt"))
case("where scalar int", lambda a: torch.where(a > 0, a, -1), (gen((3, 4), I32, -5, 5),), ("where",))
case("masked_fill", lambda a, m: a.masked_fill(m, -1e4), (gen((2, 3, 4), F32), gen((3, 4), BOOL)), ("where",))
case("clamp", lambda a: a.clamp(-0.5, 0.7), (gen((3, 4), F32),), ("clamp",))
case("clamp_min", lambda a: a.clamp(min=0.1), (gen((3, 4), BF16),), ("clamp",))
case("clamp_max int", lambda a: a.clamp(max=2), (gen((3, 4), I64, -5, 5),), ("clamp",))
case("clamp tensor bounds", lambda a, lo, hi: torch.clamp(a, lo, hi),
     (gen((3, 4), F32), gen((4,), F32, -1, 0), gen((4,), F32, 0, 1)), ("clamp",))
case("lerp", lambda a, b: torch.lerp(a, b, 0.3), (gen((3, 4), F32), gen((3, 4), F32, seed=4)), ("lerp",))
case("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5),
     (gen((3, 4), F32), gen((4,), F32), gen((3, 1), F32)), ("addcmul",))
case("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=-2),
     (gen((3, 4), F32), gen((4,), F32), gen((3, 1), F32, 0.5, 2)), ("addcdiv",))
case("hardtanh/leaky_relu/softplus/elu (decomposed)",
     lambda a: F.hardtanh(a) + F.leaky_relu(a) + F.softplus(a) + F.elu(a) + F.hardswish(a),
     (gen((3, 4), F32),), ("where", "clamp"), min_ops=2)

# casts
for src, dst in ((F32, F16), (F32, BF16), (F16, F32), (F32, I32), (I64, F32), (F32, BOOL), (BOOL, F32), (I32, I64)):
    case(f"cast {src} -> {dst}", (lambda d: lambda a: (a * 2).to(d))(dst), (gen((3, 4), src, -3, 3),), ("_to_copy",),
         min_ops=2)

# ---------------------------------------------------------------------------
# reductions

for dt in (F32, F64, F16, BF16):
    x = gen((4, 5, 6), dt)
    case(f"sum dims {dt}", lambda a: a.sum((0, 2)), (x,), ("sum",))
    case(f"sum keepdim {dt}", lambda a: a.sum(-1, keepdim=True), (x,), ("sum",))
    case(f"mean {dt}", lambda a: a.mean(1), (x,), ("mean",))
    case(f"amax {dt}", lambda a: a.amax(-1), (x,), ("amax",))
    case(f"amin keepdim {dt}", lambda a: a.amin((0, 1), keepdim=True), (x,), ("amin",))
for dt in (F32, F64):
    x = gen((4, 5, 6), dt)
    for c in (0, 1, 2):
        case(f"var correction {c} {dt}", (lambda c: lambda a: torch.var(a, (1, 2), correction=c))(c), (x,), ("var",))
    case(f"var_mean {dt}", lambda a: torch.var_mean(a, -1, keepdim=True, unbiased=False), (x,), ("var_mean",))
    case(f"std {dt}", lambda a: torch.std(a, 1), (x,), ("var", "sqrt"))
case("sum all", lambda a: a.sum(), (gen((4, 5), F32),), ("sum",))
case("sum int -> int64", lambda a: a.sum(1), (gen((4, 5), I32, -9, 9),), ("sum",))
case("sum bool -> int64", lambda a: a.sum(0), (gen((4, 5), BOOL),), ("sum",))
case("sum dtype=float64", lambda a: a.sum(1, dtype=torch.float64), (gen((4, 5), F32),), ("sum",))
case("prod", lambda a: a.prod(1), (gen((4, 5), F32, 0.5, 1.5),), ("prod",))
case("argmax", lambda a: a.argmax(1), (gen((4, 5), F32),), ("argmax",))
case("argmin keepdim", lambda a: a.argmin(0, keepdim=True), (gen((4, 5), F32),), ("argmin",))
case("cumsum", lambda a: a.cumsum(1), (gen((4, 5), F32),), ("cumsum",))
case("cumsum int", lambda a: a.cumsum(0), (gen((4, 5), I32, -5, 5),), ("cumsum",))
case("softmax (decomposed)", lambda a: torch.softmax(a, -1), (gen((4, 7), F32),), ("amax", "exp", "sum", "div"))
case("log_softmax (decomposed)", lambda a: torch.log_softmax(a, 1), (gen((4, 7), F64),), ("amax", "exp", "log"))
case("layer_norm (decomposed)", lambda x, w, b: F.layer_norm(x, (8,), w, b),
     (gen((2, 3, 8), F32), gen((8,), F32), gen((8,), F32)), ("var_mean", "rsqrt"))
case("layer_norm bf16", lambda x, w, b: F.layer_norm(x, (8,), w, b),
     (gen((2, 3, 8), BF16), gen((8,), BF16), gen((8,), BF16)), ("var_mean",), rtol=5e-2)
case("rms norm by hand", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
     (gen((2, 3, 8), F32), gen((8,), F32)), ("mean", "rsqrt", "pow"))
case("cross_entropy (decomposed)", lambda x, t: F.cross_entropy(x, t),
     (gen((4, 7), F32), torch.tensor([1, 0, 6, 3])), ("gather", "amax", "exp"))

# ---------------------------------------------------------------------------
# views and shape ops

x346 = gen((3, 4, 6), F32)
case("view", lambda a: (a + 1).view(12, 6), (x346,), ("view",))
case("reshape split dim", lambda a: (a + 1).reshape(3, 4, 2, 3), (x346,), ("view",))
case("reshape of a transposed input", lambda a: (a.transpose(0, 1) * 2).reshape(-1, 6), (x346,), ("view",))
case("permute", lambda a: (a * 2).permute(2, 0, 1), (x346,), ("permute",))
case("transpose", lambda a: (a * 2).transpose(0, 2), (x346,), ("transpose",))
case("t", lambda a: (a * 2).t(), (gen((3, 4), F32),), ("t",))
case("expand", lambda a, b: a.expand(3, 4, 6) + b, (gen((4, 1), F32), gen((6,), F32)), ("expand",))
case("unsqueeze/squeeze", lambda a: (a * 2).unsqueeze(1).squeeze(1).unsqueeze(-1), (gen((3, 4), F32),),
     ("unsqueeze", "squeeze"))
case("squeeze all", lambda a: (a * 2).squeeze(), (gen((3, 1, 4, 1), F32),), ("squeeze",))
case("slice", lambda a: (a * 2)[:, 1:3, ::2], (x346,), ("slice",))
case("slice negative", lambda a: (a * 2)[..., -3:], (x346,), ("slice",))
case("select", lambda a: (a * 2)[:, 2] + (a * 3)[:, -1], (x346,), ("select",))
case("split", lambda a: [t * 2 for t in torch.split(a + 1, 4, dim=2)], (gen((3, 4, 10), F32),), ("split",))
case("split_with_sizes", lambda a: [t.sum(-1) for t in torch.split(a, [2, 3, 1], dim=2)], (x346,),
     ("split_with_sizes",))
case("cat", lambda a, b: torch.cat([a * 2, b + 1], dim=1), (gen((3, 4), F32), gen((3, 2), F64)), ("cat",))
case("constant_pad_nd", lambda a: F.pad(a * 2, (1, 2, 0, 1), value=0.5), (gen((3, 4), F32),), ("constant_pad_nd",))
case("clone", lambda a: (a * 2).clone() + 1, (gen((3, 4), F32),), ("clone",))
case("rope (slices, cat, neg)",
     lambda x, c, s: x * c + torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * s,
     (gen((2, 3, 5, 8), F32), gen((5, 8), F32), gen((5, 8), F32)), ("cat", "slice", "neg"))

case("slice_backward", lambda g: aten.slice_backward(g * 2, [3, 9, 6], 1, 2, 6, 1), (gen((3, 4, 6), F32),),
     ("slice_backward",))
case("select_backward", lambda g: aten.select_backward(g * 2, [3, 4, 6], 1, -1), (gen((3, 6), F32),),
     ("select_backward",))

# creation
case("full_like / zeros_like / ones_like", lambda a: torch.full_like(a, 3.0) + torch.zeros_like(a) - torch.ones_like(a) * a,
     (gen((3, 4), F32),), ("full_like", "zeros_like", "ones_like"))
case("full", lambda a: a + torch.full((3, 4), 2.0), (gen((3, 4), F32),), ("full",))
case("new_zeros", lambda a: a.new_zeros((4,)) + a, (gen((3, 4), F32),), ("new_zeros",))

# indexing
idx = torch.tensor([2, 0, 2, 1])
case("index_select", lambda a, i: (a * 2).index_select(0, i), (gen((3, 5), F32), idx), ("index_select",))
case("gather", lambda a, i: (a + 1).gather(1, i), (gen((3, 5), F32), torch.tensor([[0, 4], [1, 1], [3, 2]])),
     ("gather",))
case("embedding", lambda w, i: F.embedding(i, w) * 2, (gen((6, 4), F32), torch.tensor([[1, 5], [0, 1]])),
     ("embedding",))
case("scatter_add", lambda a, i, s: (a * 1).scatter_add(0, i, s * 2),
     (gen((3, 4), F32), torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]), gen((2, 4), F32)), ("scatter_add",))
case("scatter src", lambda a, i, s: (a * 1).scatter(1, i, s * 2),
     (gen((3, 4), F32), torch.tensor([[0, 1], [3, 2], [1, 0]]), gen((3, 2), F32)), ("scatter",))
case("index_add (gnn messages)", lambda x, src, dst, w: torch.zeros_like(x).index_add(0, dst, x[src] * w),
     (gen((5, 4), F32), torch.tensor([0, 1, 2, 3, 4, 0]), torch.tensor([1, 2, 3, 4, 0, 2]), gen((6, 1), F32)),
     ("index_add",), min_ops=2)
case("scatter_reduce amax", lambda a, i, s: (a * 1).scatter_reduce(0, i, s * 2, "amax", include_self=False),
     (gen((3, 4), F32), torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]), gen((2, 4), F32)), ("scatter_reduce",))

# layouts
base = gen((6, 8), F32)
case("strided input", lambda a, b: a * b + 1, (base[::2, 1::3], gen((3, 3), F32)), ("mul", "add"))
case("expanded (stride 0) input", lambda a, b: (a * b).sum(0), (gen((8,), F32).expand(5, 8), gen((5, 8), F32)),
     ("mul", "sum"))
case("transposed inputs both", lambda a, b: torch.softmax(a + b, 0), (gen((5, 4), F32).t(), gen((5, 4), F32).t()),
     ("amax", "exp"))


# ---------------------------------------------------------------------------
# graphs

def mlp(x, w):
    h = torch.relu(x * 2.0 + 1.0)
    y = h @ w
    return torch.tanh(y) * 0.5 + y.sum(-1, keepdim=True)


@test("scatter of a value at one index per row is a compare with an iota; other scatters stay scatters")
def _():
    x, t = gen((5, 9), F32), torch.tensor([[3], [0], [8], [3], [5]])
    cases = [
        # nll_loss's backward writes -1 at the label of each row (a one-hot)
        (lambda x, t: torch.zeros_like(x).scatter(1, t, -1.0) * x, (x, t), False),
        (lambda x, t: (x * 2).scatter(1, t, 7.0), (x, t), False),
        # along dim 0, the index a row of indices per column
        (lambda x, t: (x * 2).scatter(0, t.reshape(1, 5) % 5, 0.5) + 1, (gen((5, 5), F32), t), False),
        # an index shorter than x on another dim writes only its rows: stays a scatter
        (lambda x, t: (x * 2).scatter(1, t[:3], -1.0) + 1, (x, t), True),
        # two positions per row: stays a scatter
        (lambda x, t: (x * 2).scatter(1, torch.cat([t, t], 1), -1.0) + 1, (x, t), True),
    ]
    for k, (fn, inputs, scatter_kept) in enumerate(cases):
        report = kt.Report()
        gm = kt.fuse(fn, inputs, report=report)
        texts = [p[2] for p in report.partitions if p[2] is not None]
        assert texts, report
        has_scatter = any("scatter(" in text for text in texts)
        assert has_scatter == scatter_kept, f"case {k}: scatter kept {has_scatter}\n{report}"
        assert kt.mismatch(gm(*inputs), fn(*inputs)) is None, f"case {k}\n{report}"


@test("cross-entropy backward: no scatter, one fused row kernel's worth of ops")
def _():
    x, t = gen((6, 11), F32), torch.tensor([1, 0, 10, 3, 3, 7])

    def step(x, t):
        x = x.detach().requires_grad_()
        loss = F.cross_entropy(x, t)
        (g,) = torch.autograd.grad(loss, [x])
        return loss.detach(), g

    report = kt.Report()
    gm = kt.fuse(step, (x, t), report=report, functional=False)
    texts = [p[2] for p in report.partitions if p[2] is not None]
    assert texts and not any("scatter(" in text for text in texts), report
    for a, r in zip(gm(x, t), step(x, t)):
        assert kt.mismatch(a, r) is None, f"{kt.mismatch(a, r)}\n{report}"


@test("partitioning: an mm in the middle gives two kfuse partitions and torch's mm")
def _():
    x, w = gen((4, 8), F32), gen((8, 3), F32)
    report = kt.Report()
    gm = kt.fuse(mlp, (x, w), report=report)
    fused = [p for p in report.partitions if p[2] is not None]
    assert len(fused) == 2, report
    in_torch = packets_in_torch(report)
    assert in_torch == ["aten.mm.default"], in_torch
    mods = [m for m in gm.modules() if isinstance(m, kt.KfusePartition)]
    assert len(mods) == 2
    assert kt.mismatch(gm(x, w), mlp(x, w)) is None
    assert all(m.calls == 1 for m in mods)


@test("matmuls with unaligned leading dims are padded: an LM head and its two backward matmuls, one pad per operand")
def _():
    from kfuse.torch import _pad_mm

    def step(h, w, t):
        h, w = h.detach().requires_grad_(), w.detach().requires_grad_()
        loss = F.cross_entropy(h @ w.t(), t)
        gh, gw = torch.autograd.grad(loss, [h, w])
        return loss.detach(), gh, gw

    def run(rows, hidden, vocab, force=True):
        # (rows x hidden x vocab >= MIN_MACS: smaller matmuls are left as they are)
        h, w = gen((rows, hidden), F32, -0.5, 0.5), gen((vocab, hidden), F32, -0.5, 0.5, seed=3)
        t = torch.randint(0, vocab, (rows,), generator=torch.Generator().manual_seed(1))
        report = kt.Report()
        gm = kt.fuse(step, (h, w, t), report=report, functional=False, pad_matmuls=force)
        pads = [n for n in gm.graph.nodes if n.op == "call_function" and "constant_pad_nd" in str(n.target)]
        for sub in gm.modules():
            if isinstance(sub, torch.fx.GraphModule) and sub is not gm:
                pads += [n for n in sub.graph.nodes if n.op == "call_function" and "constant_pad_nd" in str(n.target)]
        for a, r in zip(gm(h, w, t), step(h, w, t)):
            why = kt.mismatch(a, r, kt.Options(check=False, rtol=1e-4, atol=1e-5))
            assert why is None, f"{why}\n{report}"
        return report, pads

    assert _pad_mm.MIN_MACS <= 520 * 516 * 1029
    report, pads = run(520, 516, 1029)
    # the forward's head (N = 1029), the input gradient (K = 1029: the
    # gradient and the weight padded), the weight gradient (M = 1029, the
    # transposed gradient: the same pad of the gradient)
    assert report.padded_matmuls == 3, report
    assert len(pads) == 2, (pads, report)
    assert any("pad(" in p[2] for p in report.partitions if p[2]), report
    # addmm (linear with a bias: the bias padded along N) and bmm (K
    # unaligned, B a transposed view: padded as its source, the view gone)
    def linear(x, w, b):
        return torch.relu(F.linear(x * 2.0, w, b)) + 1.0

    def batched(a, c):
        return (torch.bmm(a * 0.5, c.transpose(1, 2)) + 1.0).tanh()

    def scaled(x, w, b):  # (addmm's beta and alpha kept)
        return torch.relu(torch.addmm(b, x * 2.0, w.t(), beta=0.5, alpha=3.0)) + 1.0

    lin_inputs = (gen((520, 516), F32), gen((1029, 516), F32, seed=2), gen((1029,), F32, seed=3))
    for fn, inputs in ((linear, lin_inputs), (scaled, lin_inputs),
                       (batched, (gen((4, 260, 517), F32), gen((4, 263, 517), F32, seed=4)))):
        report = kt.Report()
        gm = kt.fuse(fn, inputs, report=report, pad_matmuls=True)
        assert report.padded_matmuls == 1, report
        why = kt.mismatch(gm(*inputs), fn(*inputs), kt.Options(check=False, rtol=1e-4, atol=1e-4))
        assert why is None, f"{fn.__name__}: {why}\n{report}"
        assert not any(n.op == "call_function" and not n.users for n in gm.graph.nodes), gm.code
    # K unaligned, but A's rows already 16-byte aligned (a view of a wider
    # buffer) and B column-major with aligned columns: nothing to pad
    wide, wt = gen((520, 1032), F32), gen((516, 1032), F32, seed=5)
    report = kt.Report()
    view_mm = lambda a, c: torch.tanh(a[:, :1029] @ c[:, :1029].t() * 2.0)
    gm = kt.fuse(view_mm, (wide, wt), report=report, pad_matmuls=True)
    assert report.padded_matmuls == 0, report
    assert kt.mismatch(gm(wide, wt), view_mm(wide, wt), kt.Options(check=False, rtol=1e-4, atol=1e-4)) is None
    assert run(520, 516, 1032)[0].padded_matmuls == 0          # aligned (4 float32 = 16 bytes)
    assert run(64, 516, 1029)[0].padded_matmuls == 0           # under MIN_MACS
    assert run(520, 516, 1029, force=None)[0].padded_matmuls == 0  # not on CUDA: left alone


def attention_block(x, w1, w2, g):
    h = F.layer_norm(x, (x.shape[-1],), g, None)
    q = (h @ w1).view(x.shape[0], x.shape[1], 2, -1).transpose(1, 2)
    s = torch.softmax(q @ q.transpose(-1, -2) * 0.25, dim=-1)
    o = (s @ q).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)
    return x + F.gelu(o @ w2)


@test("cache: a new sequence length defines no new fusion (the counter stays)")
def _():
    w1, w2, g = gen((16, 16), F32), gen((16, 16), F32, seed=5), gen((16,), F32, seed=6)
    kt.reset_stats()
    x = gen((2, 8, 16), F32)
    gm = kt.fuse(attention_block, (x, w1, w2, g))
    first = kt.stats()
    assert first["definitions"] >= 2 and first["partitions"] >= 2, first
    assert kt.mismatch(gm(x, w1, w2, g), attention_block(x, w1, w2, g), kt.Options(rtol=1e-3, atol=1e-4)) is None
    for seq in (12, 5, 31):
        xs = gen((2, seq, 16), F32, seed=seq)
        gm = kt.fuse(attention_block, (xs, w1, w2, g))
        why = kt.mismatch(gm(xs, w1, w2, g), attention_block(xs, w1, w2, g), kt.Options(rtol=1e-3, atol=1e-4))
        assert why is None, (seq, why)
    now = kt.stats()
    assert now["definitions"] == first["definitions"], (first, now)
    assert now["partitions"] == 4 * first["partitions"], (first, now)
    # another dtype is another definition
    gm = kt.fuse(attention_block, (x.double(), w1.double(), w2.double(), g.double()))
    assert kt.stats()["definitions"] > first["definitions"]


@test("cache: a graph called again at other sizes runs without redefining")
def _():
    f = lambda a, b: torch.softmax(a * b, -1).sum(0)
    gm = kt.fuse(f, (gen((3, 4), F32), gen((4,), F32)))
    n = kt.stats()["definitions"]
    for shape in ((7, 9), (1, 5), (30, 2)):
        a, b = gen(shape, F32), gen(shape[-1:], F32)
        assert kt.mismatch(gm(a, b), f(a, b)) is None
    assert kt.stats()["definitions"] == n


@test("fallback: reasons for ops left to torch and excluded ops")
def _():
    x, w = gen((4, 8), F32), gen((8, 3), F32)
    report = kt.explain(mlp, (x, w), exclude=("tanh",))
    text = str(report)
    reasons = {t: why for _, t, why in report.in_torch}
    assert "no kfuse translation for aten.mm.default" in reasons["aten.mm.default"], reasons
    assert "excluded" in reasons["aten.tanh.default"], reasons
    assert "input t0: tensor<float32, 2>" in text and "== left to torch" in text, text
    # explain leaves a GraphModule unchanged
    from torch.fx.experimental.proxy_tensor import make_fx
    gm = make_fx(mlp, decomposition_table=kt.decompositions())(x, w)
    before = gm.code
    kt.explain(gm, (x, w))
    assert gm.code == before


@test("fallback: a partition kfuse refuses to define runs in torch with the reason")
def _():
    saved = _aten.HANDLERS[aten.tanh]
    _aten.HANDLERS[aten.tanh] = lambda ctx, node, args, kwargs: ctx.fd.op("cat", [])  # kfuse rejects it
    try:
        kt.reset_stats()
        x, w = gen((4, 8), F32), gen((8, 3), F32)
        report = kt.Report()
        gm = kt.fuse(mlp, (x, w), report=report)
        bad = [p for p in report.partitions if p[3] is not None]
        assert len(bad) == 1 and "KfuseError" in bad[0][3], report
        assert kt.stats()["fallbacks"] and kt.stats()["fallbacks"][0][0] == bad[0][0]
        assert kt.mismatch(gm(x, w), mlp(x, w)) is None  # the torch partition ran
    finally:
        _aten.HANDLERS[aten.tanh] = saved


@test("fallback: a translation giving the wrong dtype is caught and left to torch")
def _():
    saved = _aten.HANDLERS[aten.tanh]
    _aten.HANDLERS[aten.tanh] = lambda ctx, node, args, kwargs: ctx.fd.cast(ctx.fd.tanh(args[0].v), kfuse.float64)
    try:
        report = kt.Report()
        x, w = gen((4, 8), F32), gen((8, 3), F32)
        gm = kt.fuse(mlp, (x, w), report=report)
        bad = [p for p in report.partitions if p[3] is not None]
        assert len(bad) == 1 and "translation error" in bad[0][3], report
        assert kt.mismatch(gm(x, w), mlp(x, w)) is None
    finally:
        _aten.HANDLERS[aten.tanh] = saved


@test("check mode catches a planted mismatch and prints the kfuse text")
def _():
    saved = _aten.HANDLERS[aten.tanh]
    _aten.HANDLERS[aten.tanh] = lambda ctx, node, args, kwargs: ctx.fd.sigmoid(args[0].v)  # wrong on purpose
    try:
        x, w = gen((4, 8), F32), gen((8, 3), F32)
        gm = kt.fuse(mlp, (x, w), check=True)
        try:
            gm(x, w)
        except kt.KfuseTorchMismatch as e:
            msg = str(e)
            assert "sigmoid(" in msg and "kfuse text" in msg and "max |diff|" in msg, msg
        else:
            raise AssertionError("check mode did not catch the planted mismatch")
        gm = kt.fuse(mlp, (x, w), check=False)
        assert kt.mismatch(gm(x, w), mlp(x, w)) is not None  # without check: silently wrong
    finally:
        _aten.HANDLERS[aten.tanh] = saved
    gm = kt.fuse(mlp, (x, w), check=True)  # the real translation passes the check
    gm(x, w)


@test("check mode from the environment (KFUSE_TORCH_CHECK=1)")
def _():
    os.environ["KFUSE_TORCH_CHECK"] = "1"
    try:
        assert kt.Options().check
    finally:
        del os.environ["KFUSE_TORCH_CHECK"]
    assert not kt.Options().check


@test("in place: x.add_(y) on a graph input writes into the caller's tensor")
def _():
    def f(x, y):
        x.mul_(2.0)
        x.add_(y)
        return x.sum(-1)
    x, y = gen((3, 4), F32), gen((4,), F32)
    report = kt.Report()
    gm = kt.fuse(f, (x.clone(), y), report=report)
    assert any(p[2] is not None and "alias=0" in p[2] for p in report.partitions), report
    xa, xb = x.clone(), x.clone()
    ra, rb = gm(xa, y), f(xb, y)
    assert kt.mismatch(ra, rb) is None and kt.mismatch(xa, xb) is None, (xa, xb)


@test("host path: later calls go through Caller.run_torch (outputs reordered, grad inputs, in place, bool)")
def _():
    from kfuse import _ext

    def f(x, y, w, acc):
        acc.add_(x * 2.0)                   # in place on a graph input: an alias= output
        h = torch.relu(x * w + 1.0)
        m = h > 0.5                         # a bool output
        return h.sum(-1), m, h * y, torch.where(m, h, y) @ w.t()   # outputs out of the fusion's order
    x, y = gen((3, 4), F32), gen((3, 4), F32, seed=1)
    w = gen((4,), F32, seed=2).requires_grad_()   # a Parameter-like input: not detached on the C path
    acc = gen((3, 4), F32, seed=3)
    with torch.no_grad():
        report = kt.Report()
        gm = kt.fuse(f, (x, y, w, acc.clone()), report=report)
        mods = [m for m in gm.modules() if isinstance(m, kt.KfusePartition)]
        assert mods, report
        if _ext.extension_loaded() and hasattr(_ext.module().Caller, "run_torch"):
            assert all(m._run is not None for m in mods), report
        a_kf, a_ref = acc.clone(), acc.clone()
        for call in range(4):  # call 0: the Python path; then the C path (bool: once torch took kDLBool)
            got, ref = gm(x, y, w, a_kf), f(x, y, w, a_ref)
            for i, (a, b) in enumerate(zip(got, ref)):
                assert kt.mismatch(a, b) is None, (call, i, kt.mismatch(a, b))
                assert not a.requires_grad
            assert torch.equal(a_kf, a_ref), call
        assert all(m.calls >= 1 and m.failed is None for m in mods)
        if _ext.extension_loaded() and hasattr(_ext.module().Caller, "run_torch"):
            # calls counts Python-path calls: one, unless a bool output waits for torch's kDLBool (torch 1.13)
            fast = [m for m in mods if not m._bools or kt._backend._BOOL_DLPACK[0]]
            assert fast and all(m.calls == 1 for m in fast), [(m.name, m.calls, m._bools) for m in mods]
            assert any(m.plan.outputs != [("out", k) for k in range(len(m.plan.outputs))] or
                       len(m.plan.fusion.outputs) > len(m.plan.outputs) for m in fast), report
        del got
        import gc
        gc.collect()


@test("in place: an input mutation next to torch ops stays last; an unsafe one leaves the graph to torch")
def _():
    def f(x, w):
        s = (x @ w).sum()        # reads x before the mutation, in torch
        x.mul_(3.0)
        return x + s
    x, w = gen((3, 3), F32), gen((3, 3), F32)
    # functionalized: mul, then copy_(x, mul) appended last, moved back to the end after fusing
    report = kt.Report()
    gm = kt.fuse(f, (x.clone(), w), report=report)
    assert any(p[2] is not None for p in report.partitions), report
    assert [n.target for n in gm.graph.nodes][-2] == aten.copy_.default, gm.code
    xa, xb = x.clone(), x.clone()
    assert kt.mismatch(gm(xa, w), f(xb, w)) is None and torch.equal(xa, xb)
    # as written (no functionalize): x is read after mul_ through the mutated x itself
    report = kt.Report()
    gm = kt.fuse(f, (x.clone(), w), report=report, functional=False)
    assert not report.partitions and "graph left to torch" in str(report), report
    xa, xb = x.clone(), x.clone()
    assert kt.mismatch(gm(xa, w), f(xb, w)) is None and torch.equal(xa, xb)


@test("backward graphs: a make_fx'd joint forward+backward")
def _():
    def step(x, w, b):
        x = x.detach().requires_grad_()
        y = F.layer_norm(x, (8,), w, b)
        loss = (F.gelu(y) * torch.sigmoid(y)).sum()
        (gx,) = torch.autograd.grad(loss, [x])
        return loss.detach(), gx
    x, w, b = gen((4, 8), F32), gen((8,), F32), gen((8,), F32)
    report = kt.Report()
    gm = kt.fuse(step, (x, w, b), report=report, functional=False)
    assert sum(1 for p in report.partitions if p[2]) >= 1, report
    for a, r in zip(gm(x, w, b), step(x, w, b)):
        assert kt.mismatch(a, r) is None, kt.mismatch(a, r)


@test("views of inputs read outside a partition stay in torch (free views, not kfuse copies)")
def _():
    # A decode step returned its permuted weights and a KV-cache layer from
    # kfuse partitions, copying them on every call (session 37).
    def f(w, x, c):
        wt = w.t()
        y = (x * 2 + wt).relu()
        return wt, y, c[1].squeeze(0), c[0] * 3 + 1, [t + 1 for t in torch.split(c, 1, dim=1)][0] * 2
    w, x, c = gen((8, 6), F32), gen((6, 8), F32), gen((2, 3, 4, 5), F32)
    report = kt.Report()
    gm = kt.fuse(f, (w, x, c), report=report)
    views = {t for _, t, why in report.in_torch if "a view of a partition's input" in why}
    assert {"aten.t.default", "aten.select.int"} <= views, report
    for name, nodes, text, why in report.partitions:
        assert why is None, report
        outs = [l for l in text.splitlines() if l.startswith("output ")]
        produced = {l.split(" = ")[0]: l.split(" = ")[1].split("(")[0] for l in text.splitlines() if " = " in l}
        for o in outs:
            assert produced.get(o.split()[1]) not in ("permute", "slice", "squeeze", "reshape"), (o, text)
    for i, (a, b) in enumerate(zip(gm(w, x, c), f(w, x, c))):
        assert kt.mismatch(a, b) is None, (i, kt.mismatch(a, b))
    # Read only inside, a view of an input stays in kfuse (a strided read).
    rep2 = kt.Report()
    kt.fuse(lambda a: a.t() * 2 + 1, (w,), report=rep2)
    assert not any(t == "aten.t.default" for _, t, _ in rep2.in_torch), rep2


@test("a value a partition returns twice is written once; an input it returns is that input")
def _():
    # GPT-2's cross-entropy partition returned its [8192, 50257] log-softmax
    # twice: two outputs, written twice (session 37).
    from torch.fx.experimental.proxy_tensor import make_fx
    from kfuse.torch import _backend as kb

    def f(a):
        y = a * 2 + 1
        return (y, y, a)
    a = gen((3, 4), F32)
    gm = make_fx(f)(a)
    plan = kb.translate(gm)
    assert plan.outputs == [("out", 0), ("out", 0), ("arg", 0)], plan.outputs
    assert plan.text.count("\noutput ") + plan.text.startswith("output ") == 1, plan.text
    part = kb.KfusePartition("p", gm, plan, kb.Options(check=False))
    for call in ("first call", "second call"):  # the Python path, then the C path
        got = part(a)
        assert got[0] is got[1] and got[2] is a, call
        assert kt.mismatch(got[0], a * 2 + 1) is None, call


@test("partition_fn: min_cut (default) or AOTAutograd's default split; a wrong name is refused")
def _():
    assert kt.partition_fn("default") is None
    try:
        kt.partition_fn("fastest")
    except ValueError as e:
        assert "min_cut" in str(e) and "fastest" in str(e), e
    else:
        raise AssertionError("partition_fn took an unknown name")
    try:
        import networkx  # noqa: F401
    except ImportError:
        return
    split = kt.partition_fn(None)
    assert split is not None and split.__name__ == "min_cut_rematerialization_partition", split


@test("supported_ops lists the translator's packets; Dynamo says why it is unavailable on torch 1.x")
def _():
    ops = kt.supported_ops()
    for name in ("aten.add", "aten.var_mean", "aten.view", "aten.index_add", "aten.where"):
        assert name in ops, name
    assert "aten.mm" not in ops
    why = kt.dynamo_available()
    if torch.__version__.startswith("1."):
        assert why and "torch >= 2.0" in why, why
        try:
            kt.backend()
        except RuntimeError as e:
            assert "torch >= 2.0" in str(e)
        else:
            raise AssertionError("backend() worked without Dynamo")


print(f"test_kfuse_torch: {len(passed)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
