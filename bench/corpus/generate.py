#!/usr/bin/env python3
"""A seeded generator of realistic kfuse fusions: the benchmark corpus.

    python3 bench/corpus/generate.py --seed S --count N [--out DIR] [--scale tiny]

`generate(seed, count)` returns `count` fusions, the same ones for the same
seed (all randomness comes from `random.Random(seed)`), each a dict:

    {"name": "c0007_rmsnorm_fwd", "class": "norm_fwd", "text": "<kfuse text>",
     "inputs": [{"name", "dtype", "shape", "layout", "values"}],
     "outputs": [{"name", "dtype", "shape", "layout", "alias"}],
     "model": "llama3-8b", "bytes": <bytes moved>, "memory": <device bytes needed>,
     "sol": <False where the bytes count a buffer the fusion touches sparsely>}

"bytes" counts each input read once (stride-0 dims once) and each output
written once (an in-place output too; its input counts as read), the rule
of the benchmark's GB/s.

Input layouts ("layout"): {"kind": "contiguous"}; {"kind": "permuted",
"order": [...]} (memory order, outermost logical dim first); {"kind":
"padded", "pad": P} (the row stride of the last dim is shape[-1] + P: a
slice of a wider row); {"kind": "offset", "offset": K} (storage offset in
elements, contiguous otherwise); {"kind": "broadcast", "dims": [...]}
(those logical dims have stride 0). Output layouts: contiguous or permuted
(the caller allocates the output in that memory order); "alias": k means
the output is written in place into tensor input k (`output y {alias=k}`).
Input values ("values"): "normal" (randn; integer dtypes: round(32 randn)
clamped to the dtype), "nonnegative" (|randn|), {"index": HIGH} (int64 in
[0, HIGH); with "unique": true, distinct values: a slice of a random
permutation), "bool" (True with probability 0.9).

The grammar lives in three tables below: MODELS and the shape lists (real
model sizes), CLASSES (one builder function per fusion class, with its
weight) and the layout weights. A builder draws its parameters, writes the
text as frameworks write it (bf16/fp16 storage cast to float32 for the
math, eps constants, keepdim reductions) and declares its inputs and
outputs; sizes are chosen so that a fusion moves 64 MiB to 2 GiB (one in
eight: 2 to 64 MiB). With scale="tiny" every size maps to a small number
(2 to 8, 1 stays 1) while everything drawn stays the same: the same
classes, texts (up to size constants), layouts and aliases, for tests on
the CPU backend. stdlib only.
"""
import argparse
import json
import math
import pathlib
import random

MiB = 1 << 20
GiB = 1 << 30

# ---------------------------------------------------------------------------
# Real model sizes

# name: (hidden, heads, kv_heads, head_dim, intermediate, vocab)
MODELS = {
    "gpt2": (768, 12, 12, 64, 3072, 50257),
    "gpt2-xl": (1600, 25, 25, 64, 6400, 50257),
    "llama2-7b": (4096, 32, 32, 128, 11008, 32000),
    "llama2-13b": (5120, 40, 40, 128, 13824, 32000),
    "llama3-8b": (4096, 32, 8, 128, 14336, 128256),
    "llama3-70b": (8192, 64, 8, 128, 28672, 128256),
    "mistral-7b": (4096, 32, 8, 128, 14336, 32000),
    "qwen2-1.5b": (1536, 12, 2, 128, 8960, 151936),
    "qwen2-7b": (3584, 28, 4, 128, 18944, 151936),
    "phi-2": (2560, 32, 32, 80, 10240, 51200),
    "gpt3-175b": (12288, 96, 96, 128, 49152, 50257),
    "odd-4095": (4095, 45, 9, 91, 11007, 50257),  # odd sizes everywhere
}

# (batch, sequence) of the token dims: prefill and training shapes, odd
# lengths included; DECODE: one token per sequence (small fusions).
TOKENS = [(1, 2048), (1, 4096), (1, 8192), (1, 16384), (1, 32768), (2, 2049), (2, 4095), (4, 2048),
          (4, 4096), (8, 1024), (8, 2047), (8, 4096), (16, 1023), (16, 2048), (32, 511), (32, 1024),
          (64, 257), (128, 129)]
DECODE = [(1, 1), (8, 1), (64, 1), (256, 1), (512, 1)]

# (N, C, H, W) activations of vision models (UNet, ResNet, ConvNeXt, video).
IMAGES = [(8, 320, 64, 64), (4, 640, 32, 32), (16, 1280, 16, 16), (16, 256, 56, 56), (32, 64, 112, 112),
          (8, 512, 28, 28), (64, 128, 28, 28), (2, 320, 128, 128), (4, 96, 135, 240), (16, 128, 63, 63),
          (32, 384, 14, 14), (2, 512, 96, 96)]

# (batch, sequence) of [B, heads, S, S] attention scores.
ATTN = [(b, s) for b in (1, 2, 4, 8, 16) for s in (256, 512, 1024, 2047, 2048, 4096)]

STORAGE = {"bfloat16": 6, "float16": 2, "float32": 2}

BYTES = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
         "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1}

# Input layouts of tensors of rank >= 2 (index, bool and rank-0/1 inputs:
# see Fusion._input_layout), and output layouts.
INPUT_LAYOUTS = {"contiguous": 48, "permuted": 13, "padded": 15, "offset": 12, "broadcast": 12}
OUTPUT_LAYOUTS = {"contiguous": 85, "permuted": 15}
PADS = [1, 3, 8, 64, 128, 384]
OFFSETS = [1, 3, 8, 17, 64, 4097]

MAIN_WINDOW = (64 * MiB, 2 * GiB)
SMALL_WINDOW = (2 * MiB, 64 * MiB)
SMALL_SHARE = 0.125
MEMORY_CAP = 6 * GiB


def _fmt_float(v):
    if v == math.inf:
        return "inf"
    if v == -math.inf:
        return "-inf"
    r = repr(float(v))
    return r


def _list(xs):
    return "[" + ", ".join(str(x) for x in xs) + "]"


def _prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


class Fusion:
    """One fusion under construction: its text, inputs and outputs."""

    def __init__(self, rng, tiny, grammar=None):
        self.rng = rng
        self.tiny = tiny
        self.grammar = GRAMMAR if grammar is None else grammar
        self.window = SMALL_WINDOW if rng.random() < SMALL_SHARE else MAIN_WINDOW
        self.decls, self.consts, self.body, self.outs = [], [], [], []
        self.inputs, self.outputs = [], []
        self.names, self.dt, self.const_names = set(), {}, {}
        self.variant, self.model, self.about = "", "", ""
        self.sol = True  # False: bytes moved overstate the traffic (an in-place scatter into a big buffer)

    # -- random choices ---------------------------------------------------
    def pick(self, table):
        """A key of a {choice: weight} table, or an element of a list."""
        if isinstance(table, dict):
            keys = list(table)
            return self.rng.choices(keys, weights=[table[k] for k in keys])[0]
        return self.rng.choice(list(table))

    def chance(self, p):
        return self.rng.random() < p

    def pick_model(self, need=None):
        names = [n for n in MODELS if need is None or need(*MODELS[n])]
        self.model = self.rng.choice(names)
        return MODELS[self.model]

    # -- sizes ------------------------------------------------------------
    def d(self, n, mult=1):
        """Size n as emitted, rounded up to `mult`: n itself, or with
        scale="tiny" a small number that depends on n only (2 to 8; 1
        stays 1)."""
        if self.tiny and n > 1:
            n = 2 + (n * 2654435761 % 4294967296) % 7
        return -(-n // mult) * mult

    def fit(self, cands, nbytes):
        """The first candidate, in random order, whose nbytes(c) lies in this
        fusion's window of bytes moved; else the nearest."""
        cands = list(cands)
        self.rng.shuffle(cands)
        lo, hi = self.window
        for c in cands:
            if lo <= nbytes(c) <= hi:
                return c
        return min(cands, key=lambda c: abs(math.log(max(nbytes(c), 1) / math.sqrt(lo * hi))))

    def tokens(self, per_token, fixed=0, min_batch=1):
        """A (batch, seq) from TOKENS (DECODE too for small fusions) moving
        about fixed + tokens * per_token bytes."""
        cands = [t for t in TOKENS + (DECODE if self.window == SMALL_WINDOW else []) if t[0] >= min_batch]
        return self.fit(cands, lambda t: fixed + t[0] * t[1] * per_token)

    def lead(self, bs, flat=None):
        """The token dims as emitted: [B, S] or flattened [B*S]."""
        b, s = bs
        if flat is None:
            flat = self.chance(0.5)
        return [self.d(b * s)] if flat else [self.d(b), self.d(s)]

    # -- text ---------------------------------------------------------------
    def fresh(self, name):
        base, k = name, 2
        while name in self.names:
            name = f"{base}{k}"
            k += 1
        self.names.add(name)
        return name

    def input(self, name, dtype, shape, values="normal", layout=None, broadcast=False):
        """A tensor input (values: see the module doc; layout: pinned, or
        drawn when the fusion is finished; broadcast=True: may be given with
        stride-0 dims, as an expanded tensor: biases, masks, loss grads)."""
        name = self.fresh(name)
        self.decls.append(f"input {name}: tensor<{dtype}, {len(shape)}>")
        self.inputs.append({"name": name, "dtype": dtype, "shape": [int(s) for s in shape], "layout": layout,
                            "values": values, "_broadcast": broadcast or (None if len(shape) == 1 else False)})
        self.dt[name] = dtype
        return name

    def const(self, value, dtype="float32", name="c"):
        literal = ("true" if value else "false") if dtype == "bool" else (
            str(int(value)) if dtype in ("int64", "int32", "int8", "uint8") else _fmt_float(value))
        # integer constants are sizes: one per name, so that sizes equal
        # by chance (tiny) stay separate constants
        key = (dtype, literal) + ((name,) if dtype == "int64" else ())
        if key not in self.const_names:
            n = self.fresh(name)
            self.consts.append(f"const {n}: {dtype} = {literal}")
            self.const_names[key] = n
            self.dt[n] = dtype
        return self.const_names[key]

    def i64(self, value, name="n"):
        return self.const(value, "int64", name)

    def op(self, name, call, dtype="float32"):
        name = self.fresh(name)
        self.body.append(f"{name} = {call}")
        self.dt[name] = dtype
        return name

    def op2(self, n1, n2, call, dtype="float32"):
        n1, n2 = self.fresh(n1), self.fresh(n2)
        self.body.append(f"{n1}, {n2} = {call}")
        self.dt[n1] = self.dt[n2] = dtype
        return n1, n2

    def cast(self, x, dtype, name=None):
        if self.dt.get(x) == dtype:
            return x
        return self.op(name or f"{x}_{dtype[:1]}{''.join(c for c in dtype if c.isdigit())}",
                       f"cast({x}) {{dtype={dtype}}}", dtype)

    def f32(self, x):
        return self.cast(x, "float32", x + "f")

    def output(self, name, shape, dtype, alias=None, layout=None):
        """Output `name` of this shape and dtype (alias: the input, by name,
        that it is written into)."""
        if alias is not None:
            k = [i["name"] for i in self.inputs].index(alias)
            assert self.inputs[k]["shape"] == [int(s) for s in shape] and self.inputs[k]["dtype"] == dtype, \
                (name, alias, shape, dtype)
            self.inputs[k]["_broadcast"] = False
            self.outs.append(f"output {name} {{alias={k}}}")
        else:
            k = None
            self.outs.append(f"output {name}")
        self.outputs.append({"name": name, "dtype": dtype, "shape": [int(s) for s in shape],
                             "layout": layout, "alias": k})

    # -- layouts ------------------------------------------------------------
    def _input_layout(self, inp):
        shape, values, rank = inp["shape"], inp["values"], len(inp["shape"])
        if rank == 0:
            return {"kind": "contiguous"}
        if isinstance(values, dict) or values == "bool":
            return {"kind": "offset", "offset": self.pick(OFFSETS)} if self.chance(0.15) else {"kind": "contiguous"}
        big = [d for d in range(rank) if shape[d] > 1]
        if rank == 1:
            kind = self.pick({"contiguous": 75, "offset": 20, "broadcast": 5})
            if kind == "broadcast" and inp["_broadcast"] is None:
                inp["_broadcast"] = True  # a 1-d weight given as an expanded scalar
        elif inp["_broadcast"]:  # an operand that frameworks often pass expanded
            kind = self.pick(dict(INPUT_LAYOUTS, broadcast=40))
        else:
            kind = self.pick(INPUT_LAYOUTS)
        if kind == "broadcast" and (not inp["_broadcast"] or not big):
            kind = "contiguous"
        if kind == "permuted":
            order = list(range(rank))
            while order == list(range(rank)):
                if rank == 2 or self.chance(0.5):  # the last two dims swapped: a transposed view
                    order = list(range(rank - 2)) + [rank - 1, rank - 2]
                else:
                    self.rng.shuffle(order)
            return {"kind": "permuted", "order": order}
        if kind == "padded":
            return {"kind": "padded", "pad": self.pick(PADS)}
        if kind == "offset":
            return {"kind": "offset", "offset": self.pick(OFFSETS)}
        if kind == "broadcast":
            outer = [d for d in big if d != rank - 1] or big
            dims = [self.pick(outer)]
            if len(outer) > 1 and self.chance(0.25):
                dims = sorted(set(dims + [self.pick(outer)]))
            return {"kind": "broadcast", "dims": sorted(dims)}
        return {"kind": "contiguous"}

    def _output_layout(self, out):
        rank = len(out["shape"])
        if out["alias"] is not None or rank < 2 or self.pick(OUTPUT_LAYOUTS) == "contiguous":
            return {"kind": "contiguous"}
        order = list(range(rank))
        while order == list(range(rank)):
            self.rng.shuffle(order)
        return {"kind": "permuted", "order": order}

    def finish(self, index, cls):
        for inp in self.inputs:
            if inp["layout"] is None:
                inp["layout"] = self._input_layout(inp)
            del inp["_broadcast"]
        for out in self.outputs:
            if out["layout"] is None:
                out["layout"] = self._output_layout(out)
        name = f"c{index:04d}_{self.variant}"
        shapes = ", ".join("x".join(map(str, i["shape"])) or "()" for i in self.inputs)
        head = [f"# {name} ({cls}{', ' + self.model if self.model else ''}): {self.about}",
                f"#! shapes: {shapes}"]
        text = "\n".join(head + self.decls + self.consts + self.body + self.outs) + "\n"
        return {"name": name, "class": cls, "text": text, "inputs": self.inputs, "outputs": self.outputs,
                "model": self.model, "sol": self.sol, "bytes": bytes_moved(self.inputs, self.outputs),
                "memory": memory_needed(self.inputs, self.outputs)}


def unique_elements(inp):
    """Elements of an input's storage that the fusion reads (stride-0 dims once)."""
    shape = inp["shape"]
    dims = inp["layout"].get("dims", []) if inp["layout"]["kind"] == "broadcast" else []
    return _prod(s for d, s in enumerate(shape) if d not in dims)


def input_strides(inp):
    """(strides in elements, storage offset) of an input in its layout."""
    shape, lay = inp["shape"], inp["layout"]

    def row_major(dims):
        st, acc = [0] * len(dims), 1
        for d in range(len(dims) - 1, -1, -1):
            st[d], acc = acc, acc * dims[d]
        return st
    kind = lay["kind"]
    if kind == "permuted":
        mem = row_major([shape[d] for d in lay["order"]])
        st = [0] * len(shape)
        for j, d in enumerate(lay["order"]):
            st[d] = mem[j]
        return st, 0
    if kind == "padded":
        return row_major(shape[:-1] + [shape[-1] + lay["pad"]]), 0
    if kind == "broadcast":
        st = row_major([1 if d in lay["dims"] else n for d, n in enumerate(shape)])
        return [0 if d in lay["dims"] else x for d, x in enumerate(st)], 0
    return row_major(shape), lay.get("offset", 0)


def bytes_moved(inputs, outputs):
    """Each input read once (stride-0 dims once), each output written once
    (an aliased output too: its input is counted as read)."""
    return (sum(unique_elements(i) * BYTES[i["dtype"]] for i in inputs)
            + sum(_prod(o["shape"]) * BYTES[o["dtype"]] for o in outputs))


def memory_needed(inputs, outputs):
    """Device memory for the inputs' storage (padding and offsets included)
    and the outputs that are not written in place."""
    total = 0
    for i in inputs:
        n, lay = unique_elements(i), i["layout"]
        if lay["kind"] == "padded" and i["shape"]:
            n = n // max(i["shape"][-1], 1) * (i["shape"][-1] + lay["pad"])
        elif lay["kind"] == "offset":
            n += lay["offset"]
        total += n * BYTES[i["dtype"]]
    return total + sum(_prod(o["shape"]) * BYTES[o["dtype"]] for o in outputs if o["alias"] is None)


# ---------------------------------------------------------------------------
# Pieces shared by the classes

def storage(g):
    return g.pick(STORAGE)


def act(g, kind, h):
    """An activation of the float32 value h, as frameworks spell it."""
    if kind in ("gelu", "gelu_tanh", "silu", "relu", "sigmoid", "tanh"):
        return g.op({"gelu_tanh": "gelu_t", "sigmoid": "sig"}.get(kind, kind), f"{kind}({h})")
    if kind == "quick_gelu":  # CLIP: x * sigmoid(1.702 x)
        s = g.op("s", f"mul({h}, {g.const(1.702, name='k')})")
        sg = g.op("sg", f"sigmoid({s})")
        return g.op("qg", f"mul({h}, {sg})")
    if kind == "relu2":  # squared ReLU (Primer, Nemotron)
        r = g.op("r", f"relu({h})")
        return g.op("r2", f"mul({r}, {r})")
    if kind == "leaky_relu":
        pos = g.op("pos", f"gt({h}, {g.const(0.0, name='zero')})", "bool")
        neg = g.op("neg", f"mul({h}, {g.const(0.01, name='slope')})")
        return g.op("lr", f"where({pos}, {h}, {neg})")
    raise ValueError(kind)


ACTS = {"gelu": 3, "gelu_tanh": 3, "silu": 3, "relu": 2, "sigmoid": 1, "tanh": 1, "quick_gelu": 1, "relu2": 1,
        "leaky_relu": 1}


def act_grad(g, kind, h):
    """d act(h) / dh in float32, as the frameworks' backward kernels compute it."""
    one = g.const(1.0, name="one")
    if kind == "silu":
        s = g.op("s", f"sigmoid({h})")
        om = g.op("om", f"sub({one}, {s})")
        hs = g.op("hs", f"mul({h}, {om})")
        t = g.op("t", f"add({one}, {hs})")
        return g.op("dact", f"mul({s}, {t})")
    if kind == "gelu":  # 0.5 (1 + erf(h / sqrt 2)) + h exp(-h^2 / 2) / sqrt(2 pi)
        a = g.op("a", f"mul({h}, {g.const(0.7071067811865476, name='rsqrt2')})")
        e = g.op("erf", f"erf({a})")
        cdf0 = g.op("cdf0", f"add({e}, {one})")
        cdf = g.op("cdf", f"mul({cdf0}, {g.const(0.5, name='half')})")
        h2 = g.op("h2", f"mul({h}, {h})")
        nh = g.op("nh", f"mul({h2}, {g.const(-0.5, name='mhalf')})")
        ex = g.op("ex", f"exp({nh})")
        pdf = g.op("pdf", f"mul({ex}, {g.const(0.3989422804014327, name='rsqrt2pi')})")
        hp = g.op("hp", f"mul({h}, {pdf})")
        return g.op("dact", f"add({cdf}, {hp})")
    if kind == "gelu_tanh":  # aten's gelu_backward(approximate='tanh')
        beta, kappa = g.const(0.7978845608028654, name="beta"), g.const(0.044715, name="kappa")
        h2 = g.op("h2", f"mul({h}, {h})")
        h3 = g.op("h3", f"mul({h2}, {h})")
        k3 = g.op("k3", f"mul({h3}, {kappa})")
        inner0 = g.op("inner0", f"add({h}, {k3})")
        inner = g.op("inner", f"mul({inner0}, {beta})")
        t = g.op("t", f"tanh({inner})")
        half = g.const(0.5, name="half")
        left0 = g.op("left0", f"add({t}, {one})")
        left = g.op("left", f"mul({left0}, {half})")
        t2 = g.op("t2", f"mul({t}, {t})")
        sech2 = g.op("sech2", f"sub({one}, {t2})")
        d0 = g.op("d0", f"mul({h2}, {g.const(0.134145, name='k3x')})")
        d1 = g.op("d1", f"add({d0}, {one})")
        dinner = g.op("dinner", f"mul({d1}, {beta})")
        r0 = g.op("r0", f"mul({h}, {half})")
        r1 = g.op("r1", f"mul({r0}, {sech2})")
        right = g.op("right", f"mul({r1}, {dinner})")
        return g.op("dact", f"add({left}, {right})")
    if kind == "relu":
        pos = g.op("pos", f"gt({h}, {g.const(0.0, name='zero')})", "bool")
        return g.op("dact", f"cast({pos}) {{dtype=float32}}")
    raise ValueError(kind)


def _log_sum_exp_parts(g, xf, axes):
    """m = max(x), d = x - m, e = exp(d), s = sum(e), ls = log(s) over
    axes (kept), as softmax-like fusions spell them."""
    m = g.op("m", f"max({xf}) {reduce_axes_attr(axes, True)}")
    d = g.op("d", f"sub({xf}, {m})")
    e = g.op("e", f"exp({d})")
    s = g.op("s", f"sum({e}) {reduce_axes_attr(axes, True)}")
    ls = g.op("ls", f"log({s})")
    return m, d, e, s, ls


def reduce_axes_attr(axes, keepdim):
    return f"{{axes={_list(axes)}, keepdim={'true' if keepdim else 'false'}}}"


def kept(shape, axes):
    return [1 if d in axes else s for d, s in enumerate(shape)]


def dropped(shape, axes):
    return [s for d, s in enumerate(shape) if d not in axes]


# ---------------------------------------------------------------------------
# The fusion classes: each draws its parameters and builds one fusion.

def pointwise(g):
    st = storage(g)
    H, heads, _, hd, F, V = g.pick_model()
    sz = BYTES[st]
    kind = g.pick({"bias_act": 3, "residual_dropout": 2, "modulate": 1, "chain": 5, "dequant": 2,
                   "residual_cast": 1, "attn_mask": 1})
    if kind == "bias_act":
        width = g.pick([H, F])
        save = g.chance(0.3)
        a = g.pick(ACTS)
        bs = g.tokens(width * sz * (3 if save else 2))
        lead = g.lead(bs)
        W = g.d(width)
        x = g.input("x", st, lead + [W])
        b = g.input("bias", st, [W])
        h = g.op("h", f"add({g.f32(x)}, {g.f32(b)})")
        y = g.cast(act(g, a, h), st, "y")
        inplace = not save and g.chance(0.2)
        g.output(y, lead + [W], st, alias=x if inplace else None)
        if save:
            g.output(g.cast(h, st, "pre"), lead + [W], st)
        g.variant, g.about = f"bias_{a}" + ("_inplace" if inplace else ""), f"{a}(x + bias), float32 math"
    elif kind == "residual_dropout":
        p = g.pick([0.1, 0.05, 0.2])
        res_dt = g.pick({st: 3, "float32": 1})
        bs = g.tokens(H * (sz + 1 + 2 * BYTES[res_dt]))
        lead = g.lead(bs)
        Hd = g.d(H)
        x = g.input("x", st, lead + [Hd])
        keep = g.input("keep", "bool", lead + [Hd], values="bool")
        r = g.input("residual", res_dt, lead + [Hd])
        if g.chance(0.5):
            kf = g.op("keepf", f"cast({keep}) {{dtype=float32}}")
            d = g.op("dropped", f"mul({g.f32(x)}, {kf})")
        else:
            d = g.op("dropped", f"where({keep}, {g.f32(x)}, {g.const(0.0, name='zero')})")
        s = g.op("scaled", f"mul({d}, {g.const(1 / (1 - p), name='inv_keep')})")
        h = g.op("h", f"add({s}, {g.f32(r)})")
        y = g.cast(h, res_dt, "out")
        inplace = g.chance(0.3)
        g.output(y, lead + [Hd], res_dt, alias=r if inplace else None)
        g.variant = "dropout_residual" + ("_inplace" if inplace else "")
        g.about = f"residual + dropout(x, p={p}) with a saved keep mask"
    elif kind == "modulate":  # DiT / Flux adaLN: x * (1 + scale) + shift, per sample
        gate = g.chance(0.5)
        bs = g.tokens(H * sz * (4 if gate else 2), min_batch=2)
        B, S, Hd = g.d(bs[0]), g.d(bs[1]), g.d(H)
        x = g.input("x", st, [B, S, Hd])
        shift = g.input("shift", st, [B, Hd], broadcast=True)
        scale = g.input("scale", st, [B, Hd], broadcast=True)
        sh = g.op("sh", f"unsqueeze({g.f32(shift)}) {{dim=1}}")
        sc = g.op("sc", f"unsqueeze({g.f32(scale)}) {{dim=1}}")
        sc1 = g.op("sc1", f"add({sc}, {g.const(1.0, name='one')})")
        m = g.op("m", f"mul({g.f32(x)}, {sc1})")
        y = g.op("y", f"add({m}, {sh})")
        if gate:
            gt = g.input("gate", st, [B, Hd])
            r = g.input("residual", st, [B, S, Hd])
            gu = g.op("gu", f"unsqueeze({g.f32(gt)}) {{dim=1}}")
            gy = g.op("gy", f"mul({y}, {gu})")
            y = g.op("out", f"add({g.f32(r)}, {gy})")
        g.output(g.cast(y, st, "yo"), [B, S, Hd], st)
        g.variant, g.about = "modulate" + ("_gate" if gate else ""), "adaLN modulation (DiT): x * (1 + scale) + shift"
    elif kind == "chain":
        width = g.pick([H, F, hd * heads])
        rank3 = g.chance(0.5)
        nsteps = g.pick([2, 3, 4, 5])
        extra = [g.pick({"full": 3, "row": 3, "col": 2, "const": 3, "unary": 4}) for _ in range(nsteps)]
        n_full = 2 + sum(1 for e in extra if e == "full")
        bs = g.tokens(width * sz * n_full)
        lead = g.lead(bs, flat=not rank3)
        W = g.d(width)
        shape = lead + [W]
        x = g.input("x", st, shape)
        v = g.f32(x)
        used = []
        for k, e in enumerate(extra):
            if e == "unary":
                u = g.pick(["exp", "tanh", "sigmoid", "silu", "gelu", "abs", "neg", "square", "log1p_abs", "clamp",
                            "leaky"])
                used.append(u)
                if u == "square":
                    v = g.op("sq", f"mul({v}, {v})")
                elif u == "log1p_abs":
                    a = g.op("a", f"abs({v})")
                    v = g.op("l", f"log1p({a})")
                elif u == "clamp":
                    v = g.op("cl", f"clamp({v}, {g.const(-6.0, name='lo')}, {g.const(6.0, name='hi')})")
                elif u == "leaky":
                    v = act(g, "leaky_relu", v)
                elif u == "exp":  # exp of a clamped value, as in soft-capped scores
                    t = g.op("t", f"minimum({v}, {g.const(20.0, name='cap')})")
                    v = g.op("e", f"exp({t})")
                else:
                    v = g.op(f"{u}_{k + 1}", f"{u}({v})")  # torch.fx's names
                continue
            o = g.pick(["add", "mul", "sub", "maximum"] if e != "const" else ["add", "mul", "div"])
            used.append(o)
            if e == "const":
                c = g.const(g.pick([0.5, 2.0, 0.125, 1.4142135623730951, 0.08838834764831845, 1e-3]), name="k")
                v = g.op(o[:1] + "c", f"{o}({v}, {c})")
                continue
            if e == "full":
                oshape = shape
            elif e == "row":
                oshape = [W] if g.chance(0.6) else [1] * len(lead) + [W]
            else:
                oshape = lead + [1]
            odt = g.pick({st: 3, "float32": 1})
            y = g.input(g.pick(["y", "z", "w", "u"]), odt, oshape, broadcast=True)
            if e == "full" and o == "add" and g.chance(0.3):  # an EMA / interpolation
                v = g.op("lp", f"lerp({v}, {g.f32(y)}, {g.const(0.1, name='wgt')})")
            else:
                v = g.op(o[:1] + "t", f"{o}({v}, {g.f32(y)})")
        out_dt = g.pick({st: 4, "float32": 1})
        yo = g.cast(v, out_dt, "out")
        inplace = out_dt == st and g.chance(0.15)
        g.output(yo, shape, out_dt, alias=x if inplace else None)
        g.variant = "chain" + str(len(extra)) + ("_inplace" if inplace else "")
        g.about = "pointwise chain: " + ", ".join(used)
    elif kind == "dequant":
        qdt = g.pick({"float8_e4m3fn": 2, "int8": 1})
        gran = g.pick({"token": 2, "channel": 2, "tensor": 1})
        width = g.pick([H, F])
        then = g.pick({"none": 2, "silu": 1, "bias": 1})
        bs = g.tokens(width * (1 + sz))
        lead = g.lead(bs, flat=True)
        W = g.d(width)
        q = g.input("q", qdt, lead + [W])
        sshape = {"token": lead + [1], "channel": [W], "tensor": []}[gran]
        s = g.input("scale", "float32", sshape, values="nonnegative", broadcast=gran == "token")
        y = g.op("deq", f"mul({g.f32(q)}, {s})")
        if then == "silu":
            y = g.op("act", f"silu({y})")
        elif then == "bias":
            b = g.input("bias", st, [W])
            y = g.op("yb", f"add({y}, {g.f32(b)})")
        g.output(g.cast(y, st, "y"), lead + [W], st)
        g.variant = f"dequant_{'fp8' if qdt.startswith('float8') else 'int8'}_{gran}"
        g.about = f"dequantize {qdt} with a per-{gran} float32 scale" + ("" if then == "none" else f", then {then}")
    elif kind == "residual_cast":  # mixed precision residual stream: float32 h, storage copy
        bs = g.tokens(H * (sz + 8 + sz))
        lead = g.lead(bs)
        Hd = g.d(H)
        x = g.input("x", st, lead + [Hd])
        r = g.input("residual", "float32", lead + [Hd])
        h = g.op("h", f"add({r}, {g.f32(x)})")
        inplace = g.chance(0.5)
        g.output(h, lead + [Hd], "float32", alias=r if inplace else None)
        if st != "float32":
            g.output(g.cast(h, st, "hs"), lead + [Hd], st)
        g.variant = "residual_cast" + ("_inplace" if inplace else "")
        g.about = "float32 residual stream + x, and its storage-dtype copy"
    else:  # attn_mask: scores * scale + additive mask over [B, heads, S, S]
        B, S = g.fit(ATTN, lambda bs: bs[0] * heads * bs[1] ** 2 * sz * 2)
        Bd, Hh, Sd = g.d(B), g.d(heads), g.d(S)
        x = g.input("scores", st, [Bd, Hh, Sd, Sd])
        mshape = g.pick({"pad": 1, "full": 1})
        if mshape == "pad":
            mask = g.input("mask", "float32", [Bd, 1, 1, Sd], broadcast=True)
        else:
            mask = g.input("mask", "bool", [Bd, 1, Sd, Sd], values="bool", broadcast=True)
        s = g.op("s", f"mul({g.f32(x)}, {g.const(1 / math.sqrt(hd), name='scale')})")
        if mshape == "pad":
            y = g.op("masked", f"add({s}, {mask})")
        else:
            y = g.op("masked", f"where({mask}, {s}, {g.const(-math.inf, name='ninf')})")
        g.output(g.cast(y, st, "y"), [Bd, Hh, Sd, Sd], st)
        g.variant, g.about = f"attn_mask_{mshape}", "attention scores scaled and masked (eager attention)"


def reduction(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, _, hd, F, V = g.pick_model()
    kind = g.pick({"generic": 6, "argmax": 1, "normalize": 1, "logsumexp": 1, "masked_mean": 1, "center": 1})
    if kind == "argmax":  # greedy decoding over the vocabulary
        T = g.fit(TOKENS + DECODE, lambda t: t[0] * t[1] * V * sz)
        Td, Vd = g.d(T[0] * T[1]), g.d(V)
        x = g.input("logits", st, [Td, Vd])
        v = g.f32(x)
        if g.chance(0.5):
            v = g.op("t", f"div({v}, {g.const(0.7, name='temperature')})")
        ix = g.op("next_token", f"argmax({v}) {{axes=[1], keepdim=false}}", "int64")
        g.output(ix, [Td], "int64")
        if g.chance(0.4):
            m = g.op("top", f"max({v}) {{axes=[1], keepdim=false}}")
            g.output(m, [Td], "float32")
        g.variant, g.about = "argmax_vocab", "greedy next token: argmax over the vocabulary"
        return
    if kind == "masked_mean":  # mean pooling of token embeddings under an attention mask
        bs = g.tokens(H * sz + 1, min_batch=2)
        B, S, Hd = g.d(bs[0]), g.d(bs[1]), g.d(H)
        x = g.input("hidden", st, [B, S, Hd])
        mask = g.input("mask", "bool", [B, S], values="bool")
        mf = g.op("mf", f"cast({mask}) {{dtype=float32}}")
        m3 = g.op("m3", f"unsqueeze({mf}) {{dim=2}}")
        xm = g.op("xm", f"mul({g.f32(x)}, {m3})")
        s = g.op("s", f"sum({xm}) {{axes=[1], keepdim=false}}")
        n = g.op("n", f"sum({m3}) {{axes=[1], keepdim=false}}")
        n1 = g.op("n1", f"maximum({n}, {g.const(1e-9, name='tiny')})")
        y = g.op("pooled", f"div({s}, {n1})")
        g.output(g.cast(y, st, "out"), [B, Hd], st)
        g.variant, g.about = "masked_mean_pool", "mean over the sequence of the unmasked tokens"
        return
    # A tensor of rank 2 to 4 and the dims reduced.
    pro = g.pick({"none": 3, "abs": 2, "square": 3, "mul": 2, "exp": 1})
    n_in = 2 if kind == "generic" and pro == "mul" else 1
    n_out = 1 if kind == "generic" or kind == "logsumexp" else 2
    sz = sz * (n_in + n_out) if kind in ("normalize", "center") else sz * n_in
    form = g.pick({"tokens": 3, "heads": 1, "image": 2})
    if form == "tokens":
        width = g.pick([H, F, V]) if kind == "generic" else g.pick([H, F])
        bs = g.tokens(width * sz)
        lead = g.lead(bs)
        shape = lead + [g.d(width)]
    elif form == "heads":
        S = g.pick([1024, 2048, 4096, 8192])
        B = g.fit([1, 2, 4, 8, 16, 32], lambda b: b * heads * S * hd * sz)
        shape = [g.d(B), g.d(heads), g.d(S), g.d(hd)]
    else:
        img = g.fit(IMAGES, lambda i: _prod(i) * sz)
        shape = [g.d(s) for s in img]
        g.model = "vision"
    rank = len(shape)
    if kind in ("normalize", "logsumexp", "center"):
        axes = [rank - 1] if form != "image" or g.chance(0.3) else [1]
    else:
        r = g.pick({"inner": 3, "outer": 2, "pair": 2, "all": 1, "any": 2})
        if r == "inner":
            axes = [rank - 1]
        elif r == "outer":
            axes = [0] if rank == 2 or g.chance(0.5) else list(range(rank - 1))
        elif r == "all":
            axes = list(range(rank))
        elif r == "pair" and rank >= 3:
            a = g.rng.randrange(rank - 1)
            axes = [a, a + 1] if g.chance(0.5) else sorted({a, rank - 1})
        else:
            axes = sorted(g.rng.sample(range(rank), g.rng.randrange(1, rank)))
    x = g.input("x", st, shape)
    xf = g.f32(x)
    if kind == "normalize":  # F.normalize(x, dim)
        sq = g.op("sq", f"mul({xf}, {xf})")
        ss = g.op("ss", f"sum({sq}) {reduce_axes_attr(axes, True)}")
        nrm = g.op("norm", f"sqrt({ss})")
        den = g.op("den", f"maximum({nrm}, {g.const(1e-12, name='eps')})")
        y = g.op("y", f"div({xf}, {den})")
        g.output(g.cast(y, st, "out"), shape, st)
        g.variant, g.about = "l2_normalize", f"x / max(||x||, eps) over axes {axes}"
        return
    if kind == "logsumexp":
        m, d, e, s, ls = _log_sum_exp_parts(g, xf, axes)
        y = g.op("lse", f"add({ls}, {m})")
        keep = g.chance(0.5)
        if not keep:
            y = g.op("lse_sq", f"squeeze({y}) {{dims={_list(axes)}}}")
        g.output(y, kept(shape, axes) if keep else dropped(shape, axes), "float32")
        g.variant, g.about = "logsumexp", f"logsumexp over axes {axes}"
        return
    if kind == "center":  # x - mean(x) (GRPO advantages, zero-centering), maybe / std
        scale = g.chance(0.5)
        if scale:
            v, mu = g.op2("var", "mean", f"var_mean({xf}) {{axes={_list(axes)}, keepdim=true, correction=1}}")
            sd = g.op("std", f"sqrt({v})")
            sde = g.op("den", f"add({sd}, {g.const(1e-4, name='eps')})")
            c = g.op("c", f"sub({xf}, {mu})")
            y = g.op("y", f"div({c}, {sde})")
        else:
            mu = g.op("mean", f"mean({xf}) {reduce_axes_attr(axes, True)}")
            y = g.op("y", f"sub({xf}, {mu})")
        g.output(g.cast(y, st, "out"), shape, st)
        g.variant, g.about = "center" + ("_scale" if scale else ""), f"x - mean(x) over axes {axes}"
        return
    # generic: prologue, reduction, epilogue
    red = g.pick({"sum": 4, "mean": 3, "max": 2, "min": 1, "var": 2})
    if pro == "abs":
        v = g.op("a", f"abs({xf})")
    elif pro == "square":
        v = g.op("sq", f"mul({xf}, {xf})")
    elif pro == "mul":
        y = g.input("y", st, shape, broadcast=True)
        v = g.op("p", f"mul({xf}, {g.f32(y)})")
    elif pro == "exp":
        c = g.op("c", f"minimum({xf}, {g.const(30.0, name='cap')})")
        v = g.op("e", f"exp({c})")
    else:
        v = xf
    keep = g.chance(0.5)
    if red == "var":
        corr = g.pick([0, 1])
        r = g.op("var", f"var({v}) {{axes={_list(axes)}, keepdim={'true' if keep else 'false'}, correction={corr}}}")
    else:
        r = g.op(f"{red}_1", f"{red}({v}) {reduce_axes_attr(axes, keep)}")
    nonneg = pro in ("abs", "square", "exp") or red == "var"
    epi = g.pick({"none": 3, "scale": 1, "sqrt": 2 if nonneg else 0, "rsqrt_eps": 1 if nonneg else 0, "cast": 2})
    out_dt = "float32"
    if epi == "scale":
        r = g.op("scaled", f"mul({r}, {g.const(g.pick([0.5, 1e-3, 0.0078125]), name='k')})")
    elif epi == "sqrt":
        r = g.op("root", f"sqrt({r})")
    elif epi == "rsqrt_eps":
        re = g.op("re", f"add({r}, {g.const(1e-6, name='eps')})")
        r = g.op("rinv", f"rsqrt({re})")
    elif epi == "cast":
        out_dt = st
        r = g.cast(r, st, "out")
    oshape = kept(shape, axes) if keep else dropped(shape, axes)
    g.output(r, oshape, out_dt)
    if g.chance(0.2) and red in ("sum", "mean") and len(axes) < rank:  # a second reduction of the same input
        r2 = g.op("mx", f"max({v}) {reduce_axes_attr(axes, keep)}")
        g.output(r2, oshape, "float32")
    g.variant = f"{red}_{pro}_r{rank}"
    g.about = f"{red} over axes {axes} (keepdim={'true' if keep else 'false'}) with prologue {pro}, epilogue {epi}"


def _rms(g, xf, axis, eps, as_written):
    """1 / sqrt(mean(x^2) + eps) with keepdim, as written or fused."""
    if as_written:
        sq = g.op("sq", f"pow({xf}, {g.const(2.0, name='two')})")
    else:
        sq = g.op("sq", f"mul({xf}, {xf})")
    ms = g.op("ms", f"mean({sq}) {reduce_axes_attr([axis], True)}")
    me = g.op("me", f"add({ms}, {g.const(eps, name='eps')})")
    if as_written:
        rt = g.op("rt", f"sqrt({me})")
        return g.op("rstd", f"reciprocal({rt})")
    return g.op("rstd", f"rsqrt({me})")


def _mean_rstd(g, xf, axes, eps, as_written):
    if as_written:
        mu = g.op("mean", f"mean({xf}) {reduce_axes_attr(axes, True)}")
        xc = g.op("xc", f"sub({xf}, {mu})")
        sq = g.op("sq", f"pow({xc}, {g.const(2.0, name='two')})")
        var = g.op("var", f"mean({sq}) {reduce_axes_attr(axes, True)}")
        ve = g.op("ve", f"add({var}, {g.const(eps, name='eps')})")
        sd = g.op("std", f"sqrt({ve})")
        rstd = g.op("rstd", f"reciprocal({sd})")
        return mu, rstd, xc
    var, mu = g.op2("var", "mean", f"var_mean({xf}) {{axes={_list(axes)}, keepdim=true, correction=0}}")
    ve = g.op("ve", f"add({var}, {g.const(eps, name='eps')})")
    rstd = g.op("rstd", f"rsqrt({ve})")
    xc = g.op("xc", f"sub({xf}, {mu})")
    return mu, rstd, xc


def _quantize(g, y, shape, axis):
    """int8 per-token dynamic or float8 static quantization of float32 y:
    outputs the quantized values (and the int8 scale)."""
    if g.chance(0.5):
        a = g.op("ay", f"abs({y})")
        am = g.op("amax", f"max({a}) {reduce_axes_attr([axis], True)}")
        sc0 = g.op("sc0", f"div({am}, {g.const(127.0, name='qmax')})")
        sc = g.op("qscale", f"maximum({sc0}, {g.const(1e-8, name='tiny')})")
        qv = g.op("qv", f"div({y}, {sc})")
        qr = g.op("qr", f"round({qv})")
        qc = g.op("qc", f"clamp({qr}, {g.const(-128.0, name='qlo')}, {g.const(127.0, name='qhi')})")
        q = g.op("q", f"cast({qc}) {{dtype=int8}}", "int8")
        g.output(q, shape, "int8")
        g.output(sc, kept(shape, [axis]), "float32")
        return "int8"
    ys = g.op("ys", f"mul({y}, {g.const(g.pick([0.5, 4.0, 16.0]), name='inv_scale')})")
    yc = g.op("yc", f"clamp({ys}, {g.const(-448.0, name='fmin')}, {g.const(448.0, name='fmax')})")
    q = g.op("q", f"cast({yc}) {{dtype=float8_e4m3fn}}", "float8_e4m3fn")
    g.output(q, shape, "float8_e4m3fn")
    return "fp8"


def norm_fwd(g):
    st = storage(g)
    sz = BYTES[st]
    kind = g.pick({"layernorm": 4, "rmsnorm": 5, "add_rmsnorm": 3, "add_layernorm": 1, "gemma_rmsnorm": 1,
                   "ln_channels_first": 1, "groupnorm": 2, "batchnorm": 1, "instancenorm": 1})
    as_written = g.chance(0.25)
    if kind in ("ln_channels_first", "groupnorm", "batchnorm", "instancenorm"):
        img = g.fit(IMAGES, lambda i: _prod(i) * sz * 2)
        N, C, Hh, W = img
        G = 32 if C % 32 == 0 else 16
        if kind == "groupnorm":
            Gd, Cg = g.d(G), g.d(C // G)
            shape = [g.d(N), Gd * Cg, g.d(Hh), g.d(W)]
        else:
            shape = [g.d(s) for s in img]
        Cd = shape[1]
        x = g.input("x", st, shape)
        w = g.input("weight", st, [Cd])
        b = g.input("bias", st, [Cd])
        xf = g.f32(x)
        one = g.i64(1, "one")
        wc = g.op("wc", f"reshape({g.f32(w)}, [{g.i64(Cd, 'channels')}, {one}, {one}])")
        bc = g.op("bc", f"reshape({g.f32(b)}, [{g.i64(Cd, 'channels')}, {one}, {one}])")
        eps = 1e-5 if kind != "ln_channels_first" else 1e-6
        if kind == "groupnorm":
            nb, gr, rest = g.i64(shape[0], "batch"), g.i64(Gd, "groups"), g.i64(-1, "rest")
            xg = g.op("xg", f"reshape({xf}, [{nb}, {gr}, {rest}])")
            mu, rstd, xc = _mean_rstd(g, xg, [2], eps, as_written)
            ng = g.op("ng", f"mul({xc}, {rstd})")
            n = g.op("n", f"reshape({ng}, [{nb}, {g.i64(Cd, 'channels')}, {g.i64(shape[2], 'height')}, "
                          f"{g.i64(shape[3], 'width')}])")
            stats_shape, stats_axes = [shape[0], Gd], [2]
        else:
            axes = {"ln_channels_first": [1], "batchnorm": [0, 2, 3], "instancenorm": [2, 3]}[kind]
            mu, rstd, xc = _mean_rstd(g, xf, axes, eps, as_written)
            n = g.op("n", f"mul({xc}, {rstd})")
            stats_shape, stats_axes = dropped(shape, axes), axes
        o = g.op("o", f"mul({n}, {wc})")
        o = g.op("ob", f"add({o}, {bc})")
        if kind == "groupnorm" and g.chance(0.5):  # GroupNorm + SiLU of a UNet block
            o = g.op("act", f"silu({o})")
            kind = "groupnorm_silu"
        g.output(g.cast(o, st, "y"), shape, st)
        if kind == "batchnorm":  # training: saved stats and running stats updated in place
            rm = g.input("running_mean", "float32", [Cd], broadcast=False)
            rv = g.input("running_var", "float32", [Cd], values="nonnegative", broadcast=False)
            mus = g.op("mu", f"squeeze({mu}) {{dims=[0, 2, 3]}}")
            vu = g.op("var_unbiased", f"var({xf}) {{axes=[0, 2, 3], keepdim=false, correction=1}}")
            mom, keepm = g.const(0.1, name="momentum"), g.const(0.9, name="one_minus_momentum")
            a1 = g.op("rm0", f"mul({rm}, {keepm})")
            a2 = g.op("rm1", f"mul({mus}, {mom})")
            rm2 = g.op("new_running_mean", f"add({a1}, {a2})")
            b1 = g.op("rv0", f"mul({rv}, {keepm})")
            b2 = g.op("rv1", f"mul({vu}, {mom})")
            rv2 = g.op("new_running_var", f"add({b1}, {b2})")
            inplace = g.chance(0.7)
            g.output(rm2, [Cd], "float32", alias=rm if inplace else None)
            g.output(rv2, [Cd], "float32", alias=rv if inplace else None)
            g.output(g.op("save_rstd", f"squeeze({rstd}) {{dims=[0, 2, 3]}}"), [Cd], "float32")
            kind += "_train"
        elif kind.startswith("groupnorm") and g.chance(0.5):
            g.output(g.op("save_mean", f"squeeze({mu}) {{dims={_list(stats_axes)}}}"), stats_shape, "float32")
            g.output(g.op("save_rstd", f"squeeze({rstd}) {{dims={_list(stats_axes)}}}"), stats_shape, "float32")
        g.model = "vision"
        g.variant = kind + ("_as_written" if as_written else "")
        g.about = f"{kind} of an NCHW activation, float32 statistics, eps {eps}"
        return
    H = g.pick_model()[0]
    residual = kind.startswith("add_")
    quant = not residual and g.chance(0.2)
    stats = not quant and g.chance(0.3)
    per_tok = H * sz * (2 + (2 if residual else 0)) - (H * sz - H if quant else 0)
    bs = g.tokens(per_tok)
    lead = g.lead(bs)
    Hd = g.d(H)
    shape = lead + [Hd]
    axis = len(shape) - 1
    x = g.input("x", st, shape)
    inplace = residual and g.chance(0.5)
    if residual:
        r = g.input("residual", st, shape)
        h = g.op("h", f"add({g.f32(x)}, {g.f32(r)})")
        hs = g.cast(h, st, "new_residual")
        xf = g.f32(hs)
    else:
        xf = g.f32(x)
    eps = g.pick([1e-5, 1e-6]) if "rms" in kind else 1e-5
    w_dt = g.pick({st: 3, "float32": 1})
    if "layernorm" in kind:
        affine = g.pick({"wb": 4, "w": 1, "none": 1})
        mu, rstd, xc = _mean_rstd(g, xf, [axis], eps, as_written)
        o = g.op("n", f"mul({xc}, {rstd})")
        if affine != "none":
            w = g.input("weight", w_dt, [Hd])
            o = g.op("nw", f"mul({o}, {g.f32(w)})")
        if affine == "wb":
            b = g.input("bias", w_dt, [Hd])
            o = g.op("nb", f"add({o}, {g.f32(b)})")
    else:
        rstd = _rms(g, xf, axis, eps, as_written)
        mu = None
        w = g.input("weight", w_dt, [Hd])
        n = g.op("n", f"mul({xf}, {rstd})")
        if kind == "gemma_rmsnorm":
            w1 = g.op("w1", f"add({g.f32(w)}, {g.const(1.0, name='one')})")
            o = g.op("o", f"mul({n}, {w1})")
        elif st != "float32" and w_dt == st and g.chance(0.5):  # HF Llama: weight * normed.to(input dtype)
            nb = g.cast(n, st, "ns")
            o = g.op("o", f"mul({w}, {nb})", st)
        else:
            o = g.op("o", f"mul({n}, {g.f32(w)})")
    q = ""
    if quant:
        q = "_" + _quantize(g, g.f32(o), shape, axis)
    else:
        g.output(g.cast(o, st, "y"), shape, st, alias=x if inplace else None)
    if residual:
        g.output(hs, shape, st, alias=r if inplace else None)
    if stats:
        if mu is not None:
            g.output(mu, kept(shape, [axis]), "float32")
        g.output(rstd, kept(shape, [axis]), "float32")
    g.variant = kind + q + ("_stats" if stats else "") + ("_inplace" if inplace else "") + (
        "_as_written" if as_written else "")
    g.about = f"{kind} over the hidden dim, eps {eps}" + (", quantized output" if quant else "") + (
        ", saved statistics" if stats else "")


def norm_bwd(g):
    st = storage(g)
    sz = BYTES[st]
    kind = g.pick({"layernorm": 3, "rmsnorm": 3, "batchnorm": 1})
    if kind == "batchnorm":
        img = g.fit(IMAGES, lambda i: _prod(i) * sz * 3)
        shape = [g.d(s) for s in img]
        C = shape[1]
        dy = g.input("dy", st, shape)
        x = g.input("x", st, shape)
        mean = g.input("save_mean", "float32", [C])
        rstd = g.input("save_rstd", "float32", [C], values="nonnegative")
        w = g.input("weight", st, [C])
        one = g.i64(1, "one")
        cs = [g.i64(C, "channels"), one, one]
        m3 = g.op("m3", f"reshape({mean}, [{', '.join(cs)}])")
        r3 = g.op("r3", f"reshape({rstd}, [{', '.join(cs)}])")
        w3 = g.op("w3", f"reshape({g.f32(w)}, [{', '.join(cs)}])")
        xc = g.op("xc", f"sub({g.f32(x)}, {m3})")
        xhat = g.op("xhat", f"mul({xc}, {r3})")
        dyf = g.f32(dy)
        db = g.op("dbeta", f"sum({dyf}) {{axes=[0, 2, 3], keepdim=false}}")
        dyx = g.op("dyx", f"mul({dyf}, {xhat})")
        dw = g.op("dgamma", f"sum({dyx}) {{axes=[0, 2, 3], keepdim=false}}")
        mdy = g.op("mdy", f"mean({dyf}) {{axes=[0, 2, 3], keepdim=true}}")
        mdyx = g.op("mdyx", f"mean({dyx}) {{axes=[0, 2, 3], keepdim=true}}")
        a = g.op("a", f"sub({dyf}, {mdy})")
        b = g.op("b", f"mul({xhat}, {mdyx})")
        c = g.op("c", f"sub({a}, {b})")
        wr = g.op("wr", f"mul({w3}, {r3})")
        dx = g.op("dx", f"mul({c}, {wr})")
        g.output(g.cast(dx, st, "dxo"), shape, st)
        g.output(dw, [C], "float32")
        g.output(db, [C], "float32")
        g.model, g.variant, g.about = "vision", "batchnorm_bwd", "batch norm backward over (N, H, W), training"
        return
    H = g.pick_model()[0]
    dres = g.chance(0.3)
    recompute = g.chance(0.25)
    bs = g.tokens(H * sz * (3 + (2 if dres else 0)))
    lead = g.lead(bs)
    Hd = g.d(H)
    shape = lead + [Hd]
    axis = len(shape) - 1
    wdt = g.pick({st: 3, "float32": 1})
    dy = g.input("dy", st, shape)
    x = g.input("x", st, shape)
    xf, dyf = g.f32(x), g.f32(dy)
    if recompute:
        if kind == "layernorm":
            mean, rstd, xc = _mean_rstd(g, xf, [axis], 1e-5, False)
        else:
            rstd = _rms(g, xf, axis, 1e-6, False)
    else:
        if kind == "layernorm":
            mean = g.input("mean", "float32", kept(shape, [axis]))
        rstd = g.input("rstd", "float32", kept(shape, [axis]), values="nonnegative")
        if kind == "layernorm":
            xc = g.op("xc", f"sub({xf}, {mean})")
    w = g.input("weight", wdt, [Hd])
    xhat = g.op("xhat", f"mul({xc if kind == 'layernorm' else xf}, {rstd})")
    gw = g.op("g", f"mul({dyf}, {g.f32(w)})")
    gx = g.op("gx", f"mul({gw}, {xhat})")
    s2 = g.op("s2", f"mean({gx}) {reduce_axes_attr([axis], True)}")
    b = g.op("b", f"mul({xhat}, {s2})")
    if kind == "layernorm":
        s1 = g.op("s1", f"mean({gw}) {reduce_axes_attr([axis], True)}")
        a = g.op("a", f"sub({gw}, {s1})")
        c = g.op("c", f"sub({a}, {b})")
    else:
        c = g.op("c", f"sub({gw}, {b})")
    dx = g.op("dx", f"mul({c}, {rstd})")
    if dres:
        dr = g.input("dresidual", st, shape)
        dx = g.op("dxr", f"add({dx}, {g.f32(dr)})")
    g.output(g.cast(dx, st, "dxo"), shape, st)
    waxes = list(range(axis))
    keep = g.chance(0.3)
    dyx = g.op("dyx", f"mul({dyf}, {xhat})")
    dw = g.op("dw", f"sum({dyx}) {reduce_axes_attr(waxes, keep)}")
    wshape = kept(shape, waxes) if keep else [Hd]
    g.output(dw, wshape, "float32")
    if kind == "layernorm" and g.chance(0.8):
        db = g.op("db", f"sum({dyf}) {reduce_axes_attr(waxes, keep)}")
        g.output(db, wshape, "float32")
    g.variant = f"{kind}_bwd" + ("_dres" if dres else "") + ("_recompute" if recompute else "")
    g.about = f"{kind} backward: grad input" + (" + residual grad" if dres else "") + ", weight grads" + (
        ", statistics recomputed" if recompute else " from saved statistics")


def softmax(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, _, hd, F, V = g.pick_model()
    kind = g.pick({"softmax": 4, "log_softmax": 2, "softmax_bwd": 2, "log_softmax_bwd": 1, "attn_causal": 2})
    if kind == "attn_causal":
        B, S = g.fit(ATTN, lambda bs: bs[0] * heads * bs[1] ** 2 * sz * 2)
        shape = [g.d(B), g.d(heads), g.d(S), g.d(S)]
        Sd = shape[2]
        x = g.input("scores", st, shape)
        s = g.op("s", f"mul({g.f32(x)}, {g.const(1 / math.sqrt(hd), name='scale')})")
        n = g.op("n", f"size({x}) {{dim=3}}", "int64")
        z, one = g.i64(0, "zero"), g.i64(1, "one")
        pos = g.op("pos", f"iota({n}, {z}, {one}) {{dtype=int64}}", "int64")
        row = g.op("row", f"unsqueeze({pos}) {{dim=1}}", "int64")
        col = g.op("col", f"unsqueeze({pos}) {{dim=0}}", "int64")
        future = g.op("future", f"gt({col}, {row})", "bool")
        sm = g.op("masked", f"where({future}, {g.const(-math.inf, name='ninf')}, {s})")
        axis = 3
        xf = sm
        g.variant, g.about = "attn_causal_softmax", "eager attention probabilities: scale, causal mask, softmax"
    else:
        where = g.pick({"inner": 4, "outer": 2, "middle": 1})
        if where == "inner":
            width = g.pick([V, V, 4096, 1024, 32768])
            bs = g.tokens(width * sz * (4 if "bwd" in kind else 2))
            lead = g.lead(bs)
            shape = lead + [g.d(width)]
            axis = len(shape) - 1
        elif where == "outer":  # [classes, tokens] or [tokens, batch] stored with the reduced dim outermost
            width = g.pick([V, 1024, 8192, 50])
            T = g.fit([t[0] * t[1] for t in TOKENS], lambda t: t * width * sz * (4 if "bwd" in kind else 2))
            shape = [g.d(width), g.d(T)]
            axis = 0
        else:  # [N, C, L]: class scores over dim 1 (per-position classification)
            C = g.pick([19, 150, 1000, 21])
            L = g.pick([4096, 16384, 65536])
            N = g.fit([1, 2, 4, 8, 16, 32], lambda n: n * C * L * sz * (4 if "bwd" in kind else 2))
            shape = [g.d(N), g.d(C), g.d(L)]
            axis = 1
        if kind in ("softmax_bwd", "log_softmax_bwd"):
            dy = g.input("dy", st, shape)
            y = g.input("y", st, shape)
            dyf, yf = g.f32(dy), g.f32(y)
            if kind == "softmax_bwd":
                p = g.op("p", f"mul({dyf}, {yf})")
                s = g.op("s", f"sum({p}) {reduce_axes_attr([axis], True)}")
                d = g.op("d", f"sub({dyf}, {s})")
                dx = g.op("dx", f"mul({yf}, {d})")
            else:
                s = g.op("s", f"sum({dyf}) {reduce_axes_attr([axis], True)}")
                e = g.op("p", f"exp({yf})")
                es = g.op("es", f"mul({e}, {s})")
                dx = g.op("dx", f"sub({dyf}, {es})")
            g.output(g.cast(dx, st, "dxo"), shape, st)
            g.variant, g.about = f"{kind}_{where}", f"{kind} over axis {axis} from the saved output"
            return
        x = g.input("x", st, shape)
        xf = g.f32(x)
        if g.chance(0.3):
            xf = g.op("xt", f"div({xf}, {g.const(g.pick([0.7, 2.0, 1.3]), name='temperature')})")
        g.variant, g.about = f"{kind}_{where}", f"{kind} over axis {axis}"
    m = g.op("m", f"max({xf}) {reduce_axes_attr([axis], True)}")
    d = g.op("d", f"sub({xf}, {m})")
    e = g.op("e", f"exp({d})")
    s = g.op("s", f"sum({e}) {reduce_axes_attr([axis], True)}")
    if kind == "log_softmax":
        ls = g.op("ls", f"log({s})")
        y = g.op("y", f"sub({d}, {ls})")
        odt = g.pick({st: 1, "float32": 1})
    else:
        if g.chance(0.5):
            y = g.op("y", f"div({e}, {s})")
        else:
            r = g.op("r", f"reciprocal({s})")
            y = g.op("y", f"mul({e}, {r})")
        odt = st
    g.output(g.cast(y, odt, "out"), shape, odt)


def cross_entropy(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, _, hd, F, V = g.pick_model()
    kinds = {"fwd": 3, "bwd": 3, "logprobs": 1, "fwd_channels": 1}
    if g.grammar >= 2:  # as AOTAutograd's decompositions write a training step's loss
        kinds.update(fwd_saved=2, bwd_saved=2)
    kind = g.pick(kinds)
    if kind in ("fwd_saved", "bwd_saved"):
        _cross_entropy_saved(g, st, sz, V, kind == "bwd_saved")
        return
    if kind == "fwd_channels":  # cross-entropy over dim 1 of [N, C, L] (segmentation, token classification)
        C = g.pick([19, 150, 1000, 21])
        L = g.pick([4096, 16384, 65536, 262144])
        N = g.fit([1, 2, 4, 8, 16, 32], lambda n: n * L * (C * sz + 12))
        Nd, Cd, Ld = g.d(N), g.d(C), g.d(L)
        x = g.input("logits", st, [Nd, Cd, Ld])
        lab = g.input("target", "int64", [Nd, Ld], values={"index": Cd})
        xf = g.f32(x)
        m, d, e, s, ls = _log_sum_exp_parts(g, xf, [1])
        lse = g.op("lse", f"add({ls}, {m})")
        l3 = g.op("t3", f"unsqueeze({lab}) {{dim=1}}", "int64")
        tgt = g.op("target_logit", f"gather({xf}, {l3}) {{dim=1}}")
        loss = g.op("loss3", f"sub({lse}, {tgt})")
        loss = g.op("loss", f"squeeze({loss}) {{dims=[1]}}")
        g.output(loss, [Nd, Ld], "float32")
        g.model = "vision"
        g.variant, g.about = "cross_entropy_dim1", "per-position cross-entropy over the classes of dim 1"
        return
    smooth = kind != "logprobs" and g.chance(0.3)
    eps_ls = g.pick([0.1, 0.05])
    flat = g.chance(0.7)
    T = g.fit(TOKENS + DECODE, lambda t: t[0] * t[1] * V * sz * (2 if kind == "bwd" else 1))
    Vd = g.d(V)
    lead = [g.d(T[0] * T[1])] if flat else [g.d(T[0]), g.d(T[1])]
    shape = lead + [Vd]
    ax = len(shape) - 1
    x = g.input("logits", st, shape)
    xf = g.f32(x)
    if kind == "bwd":
        lab = g.input("label", "int64", lead, values={"index": Vd})
        lse = g.input("lse", "float32", lead + [1])
        dl = g.input("dloss", "float32", lead + [1], broadcast=True)  # mean's grad: an expanded scalar
        vocab, z, one = g.i64(Vd, "vocab"), g.i64(0, "zero"), g.i64(1, "one")
        cls = g.op("cls", f"iota({vocab}, {z}, {one}) {{dtype=int64}}", "int64")
        lu = g.op("lab", f"unsqueeze({lab}) {{dim={ax}}}", "int64")
        hit = g.op("hit", f"eq({cls}, {lu})", "bool")
        oh = g.op("onehot", f"cast({hit}) {{dtype=float32}}")
        d = g.op("d", f"sub({xf}, {lse})")
        p = g.op("p", f"exp({d})")
        if smooth:
            ohs = g.op("ohs", f"mul({oh}, {g.const(1 - eps_ls, name='confidence')})")
            t = g.op("tgt", f"add({ohs}, {g.const(eps_ls / V, name='smooth')})")
        else:
            t = oh
        gr = g.op("g", f"sub({p}, {t})")
        dx = g.op("dx", f"mul({gr}, {dl})")
        inplace = g.chance(0.4)  # the gradient written over the logits (Liger, Megatron)
        g.output(g.cast(dx, st, "dlogits"), shape, st, alias=x if inplace else None)
        g.variant = "cross_entropy_bwd" + ("_smooth" if smooth else "") + ("_inplace" if inplace else "")
        g.about = "cross-entropy backward from the saved logsumexp" + (", label smoothing" if smooth else "")
        return
    softcap = g.chance(0.2)
    if softcap:  # Gemma 2: cap * tanh(x / cap)
        cap = g.const(30.0, name="softcap")
        xc = g.op("xc", f"div({xf}, {cap})")
        th = g.op("th", f"tanh({xc})")
        xf = g.op("capped", f"mul({th}, {cap})")
    lab = g.input("label", "int64", lead, values={"index": Vd})
    m, d, e, s, ls = _log_sum_exp_parts(g, xf, [ax])
    lse = g.op("lse", f"add({ls}, {m})")
    lu = g.op("lab", f"unsqueeze({lab}) {{dim={ax}}}", "int64")
    tgt = g.op("target", f"gather({xf}, {lu}) {{dim={ax}}}")
    if kind == "logprobs":  # log p(label) of sampled tokens (RL fine-tuning)
        lp = g.op("logprob", f"sub({tgt}, {lse})")
        lp = g.op("logprobs", f"squeeze({lp}) {{dims=[{ax}]}}")
        g.output(lp, lead, "float32")
        if g.chance(0.5):
            ent0 = g.op("pe", f"mul({e}, {d})")
            ent1 = g.op("spe", f"sum({ent0}) {reduce_axes_attr([ax], True)}")
            ent2 = g.op("spes", f"div({ent1}, {s})")
            ent = g.op("entropy", f"sub({ls}, {ent2})")
            g.output(g.op("ent", f"squeeze({ent}) {{dims=[{ax}]}}"), lead, "float32")
        g.variant, g.about = "token_logprobs", "log-probabilities of the given tokens (and entropy)"
        return
    nll = g.op("nll", f"sub({lse}, {tgt})")
    loss = nll
    if smooth:
        mx = g.op("mean_logit", f"mean({xf}) {reduce_axes_attr([ax], True)}")
        sm = g.op("smooth_loss", f"sub({lse}, {mx})")
        a = g.op("a", f"mul({nll}, {g.const(1 - eps_ls, name='confidence')})")
        b = g.op("b", f"mul({sm}, {g.const(eps_ls, name='eps_ls')})")
        loss = g.op("loss_ls", f"add({a}, {b})")
    zl = g.chance(0.2)
    if zl:  # PaLM z-loss
        l2 = g.op("lse2", f"mul({lse}, {lse})")
        zz = g.op("z", f"mul({l2}, {g.const(1e-4, name='z_coef')})")
        loss = g.op("loss_z", f"add({loss}, {zz})")
    red = g.pick({"none": 3, "mean": 1})
    if red == "mean":
        tot = g.op("total", f"mean({loss}) {{axes={_list(range(len(shape)))}, keepdim=false}}")
        g.output(tot, [], "float32")
    else:
        g.output(g.op("loss", f"squeeze({loss}) {{dims=[{ax}]}}"), lead, "float32")
    g.output(lse, lead + [1], "float32")
    g.variant = "cross_entropy_fwd" + ("_smooth" if smooth else "") + ("_zloss" if zl else "") + (
        "_softcap" if softcap else "") + ("_mean" if red == "mean" else "")
    g.about = "cross-entropy forward over the vocabulary, saved logsumexp"


def _cross_entropy_saved(g, st, sz, V, backward):
    """F.cross_entropy(logits.float(), labels) of a training step, as
    AOTAutograd's decompositions write it (the torch backend's partitions):
    the forward returns the mean loss over the labels other than -100 and
    the float32 log-probabilities it saves for the backward (gathered at
    the labels, so written by one kernel and read by another); the backward
    (nll_loss's, then log_softmax's) scatters -1 at each row's label into
    zeros (a one-hot), scales it by the loss's gradient over the count and
    takes exp(logp) times its row sum from it."""
    T = g.fit(TOKENS, lambda t: t[0] * t[1] * V * (4 + sz))
    N, Vd = g.d(T[0] * T[1]), g.d(V)
    shape = [N, Vd]
    ignore, zi, zf = g.i64(-100, "ignore"), g.i64(0, "zero"), g.const(0.0, name="fzero")
    lab = g.input("label", "int64", [N], values={"index": Vd})
    valid = g.op("valid", f"ne({lab}, {ignore})", "bool")
    safe = g.op("safe", f"where({valid}, {lab}, {zi})", "int64")
    lu = g.op("lab", f"unsqueeze({safe}) {{dim=1}}", "int64")
    if backward:
        logp = g.input("logp", "float32", shape)
        gout = g.input("grad_loss", "float32", [])
        count = g.input("count", "float32", [])
        w = g.op("w", f"div({gout}, {count})")
        rows, vocab, one = g.i64(N, "rows"), g.i64(Vd, "vocab"), g.i64(1, "one")
        z = g.op("z", f"full([{rows}, {vocab}], {zf}) {{dtype=float32}}")
        m1 = g.op("m1", f"full([{rows}, {one}], {g.const(-1.0, name='minus_one')}) {{dtype=float32}}")
        oh = g.op("onehot", f"scatter({z}, {lu}, {m1}) {{dim=1}}")
        vu = g.op("valid1", f"unsqueeze({valid}) {{dim=1}}", "bool")
        wv = g.op("wv", f"where({vu}, {w}, {zf})")
        g1 = g.op("dnll", f"mul({oh}, {wv})")
        sg = g.op("dsum", f"sum({g1}) {{axes=[1], keepdim=true}}")
        p = g.op("p", f"exp({logp})")
        ps = g.op("psum", f"mul({p}, {sg})")
        dx = g.op("dx", f"sub({g1}, {ps})")
        g.output(g.cast(dx, st, "dlogits"), shape, st)
        g.variant = "cross_entropy_bwd_saved"
        g.about = "cross-entropy backward from the saved log-probabilities, through a one-hot scatter"
        return
    x = g.input("logits", st, shape)
    xf = g.f32(x)
    m, d, e, s, ls = _log_sum_exp_parts(g, xf, [1])
    logp = g.op("logp", f"sub({d}, {ls})")
    t = g.op("picked", f"gather({logp}, {lu}) {{dim=1}}")
    t = g.op("picked1", f"squeeze({t}) {{dims=[1]}}")
    nll = g.op("nll", f"neg({t})")
    nll = g.op("nllv", f"where({valid}, {nll}, {zf})")
    tot = g.op("total", f"sum({nll}) {{axes=[0], keepdim=false}}")
    cnt = g.op("count", f"sum({g.cast(valid, 'float32', 'validf')}) {{axes=[0], keepdim=false}}")
    g.output(g.op("loss", f"div({tot}, {cnt})"), [], "float32")
    g.output(logp, shape, "float32")
    g.output(cnt, [], "float32")
    g.variant = "cross_entropy_fwd_saved"
    g.about = "cross-entropy forward saving its log-probabilities for the backward, mean over the labels"


def _rotate_half(g, xf, D, last, c, s, tag):
    """HF rotate_half: x * cos + cat(-x2, x1) * sin over the last dim."""
    x1 = g.op(f"{tag}1", f"slice({xf}) {{dim={last}, start=0, stop={D // 2}}}")
    x2 = g.op(f"{tag}2", f"slice({xf}) {{dim={last}, start={D // 2}, stop=end}}")
    n2 = g.op(f"n{tag}2", f"neg({x2})")
    rot = g.op(f"{tag}r", f"cat({n2}, {x1}) {{dim={last}}}")
    a = g.op(f"{tag}c", f"mul({xf}, {c})")
    b = g.op(f"{tag}s", f"mul({rot}, {s})")
    return g.op(f"{tag}o", f"add({a}, {b})")


def _rotate_interleaved(g, xf, shape, c, s, tag):
    """GPT-J / Meta Llama: pairs (x[2i], x[2i+1]) rotated; cos, sin of D/2."""
    last = len(shape) - 1
    xe = g.op(f"{tag}e", f"slice({xf}) {{dim={last}, start=0, stop=end, step=2}}")
    xo = g.op(f"{tag}od", f"slice({xf}) {{dim={last}, start=1, stop=end, step=2}}")
    a = g.op(f"{tag}ec", f"mul({xe}, {c})")
    b = g.op(f"{tag}os", f"mul({xo}, {s})")
    re = g.op(f"{tag}re", f"sub({a}, {b})")
    a2 = g.op(f"{tag}es", f"mul({xe}, {s})")
    b2 = g.op(f"{tag}oc", f"mul({xo}, {c})")
    ro = g.op(f"{tag}ro", f"add({a2}, {b2})")
    ue = g.op(f"{tag}ue", f"unsqueeze({re}) {{dim={last + 1}}}")
    uo = g.op(f"{tag}uo", f"unsqueeze({ro}) {{dim={last + 1}}}")
    st = g.op(f"{tag}st", f"cat({ue}, {uo}) {{dim={last + 1}}}")
    dims = [g.i64(n, f"{tag}_d{k}") for k, n in enumerate(shape)]
    return g.op(f"{tag}o", f"reshape({st}, [{', '.join(dims)}])")


def rotary(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, kvh, hd, F, V = g.pick_model(need=lambda H, h, k, d, F, V: d % 2 == 0)
    style = g.pick({"half": 4, "interleaved": 2, "partial": 2})
    qk = g.chance(0.6)
    order = g.pick({"bshd": 2, "bhsd": 1})
    table = g.pick({"direct": 3, "gather": 1})
    tdt = g.pick({"float32": 2, st: 1})
    pct = g.pick([0.25, 0.5]) if style == "partial" else 1.0
    rd = int(hd * pct) // 2 * 2
    per_tok = (heads + (kvh if qk else 0)) * hd * sz * 2
    bs = g.tokens(per_tok)
    B, S, Hq, Hk, D = g.d(bs[0]), g.d(bs[1]), g.d(heads), g.d(kvh), g.d(hd, 2 if style != "partial" else 4)
    R = D if style != "partial" else min(g.d(rd, 2), D // 4 * 2)  # tiny: at most half of D
    tw = R // 2 if style == "interleaved" else R  # width of the cos/sin tables

    def shape_of(nh):
        return [B, S, nh, D] if order == "bshd" else [B, nh, S, D]

    q = g.input("q", st, shape_of(Hq))
    k = g.input("k", st, shape_of(Hk)) if qk else None
    if table == "direct":
        cos = g.input("cos", tdt, [S, tw])
        sin = g.input("sin", tdt, [S, tw])
    else:  # cached tables indexed by position ids
        P = g.d(g.pick([4096, 8192, 32768, 131072]))
        cc = g.input("cos_cached", tdt, [P, tw])
        sc = g.input("sin_cached", tdt, [P, tw])
        pid = g.input("position_ids", "int64", [S], values={"index": P})
        cos = g.op("cos", f"index_select({cc}, {pid}) {{dim=0}}", tdt)
        sin = g.op("sin", f"index_select({sc}, {pid}) {{dim=0}}", tdt)
    cf, sf = g.f32(cos), g.f32(sin)
    # [S, 1, w] against [B, S, h, d]; [1, S, w] against [B, h, S, d]: broadcast over the heads
    c = g.op("c", f"unsqueeze({cf}) {{dim={1 if order == 'bshd' else 0}}}")
    s = g.op("s", f"unsqueeze({sf}) {{dim={1 if order == 'bshd' else 0}}}")
    inplace = g.chance(0.25)
    for name, t, nh in (("q", q, Hq), ("k", k, Hk)):
        if t is None:
            continue
        shp = shape_of(nh)
        tf = g.f32(t)
        if style == "half":
            o = _rotate_half(g, tf, D, 3, c, s, name)
        elif style == "interleaved":
            o = _rotate_interleaved(g, tf, shp, c, s, name)
        else:
            xr = g.op(f"{name}_rot", f"slice({tf}) {{dim=3, start=0, stop={R}}}")
            xp = g.op(f"{name}_pass", f"slice({tf}) {{dim=3, start={R}, stop=end}}")
            ro = _rotate_half(g, xr, R, 3, c, s, name)
            o = g.op(f"{name}_cat", f"cat({ro}, {xp}) {{dim=3}}")
        g.output(g.cast(o, st, f"{name}_out"), shp, st, alias=t if inplace else None)
    g.variant = f"rope_{style}" + ("_qk" if qk else "_q") + f"_{order}" + ("_gather" if table == "gather" else "") + (
        "_inplace" if inplace else "")
    g.about = f"rotary embedding ({style}{f', {pct:g} of the head dim' if style == 'partial' else ''}) " \
              f"on {'q and k' if qk else 'q'} laid out {order}"


def gated_act(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, kvh, hd, F, V = g.pick_model()
    kind = g.pick({"swiglu": 4, "geglu": 2, "geglu_tanh": 1, "reglu": 1})
    a = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh", "reglu": "relu"}[kind]
    bwd = g.chance(0.45)
    fused = g.chance(0.5)  # gate and up in one [T, 2F] tensor (one projection), split by slicing
    bs = g.tokens(F * sz * (5 if bwd else 3))
    lead = g.lead(bs)
    Fd = g.d(F)
    shape = lead + [Fd]
    last = len(shape) - 1
    if fused:
        gu = g.input("gate_up", st, lead + [2 * Fd])
        guf = g.f32(gu)
        gt = g.op("gate", f"slice({guf}) {{dim={last}, start=0, stop={Fd}}}")
        up = g.op("up", f"slice({guf}) {{dim={last}, start={Fd}, stop=end}}")
    else:
        gt = g.f32(g.input("gate", st, shape))
        up = g.f32(g.input("up", st, shape))
    if not bwd:
        h = act(g, a, gt)
        y = g.op("y", f"mul({h}, {up})")
        g.output(g.cast(y, st, "out"), shape, st)
        g.variant, g.about = kind, f"{kind}: {a}(gate) * up" + (" from a fused gate_up tensor" if fused else "")
        return
    dy = g.f32(g.input("dy", st, shape))
    h = act(g, a, gt)
    dup = g.op("dup", f"mul({dy}, {h})")
    dh = g.op("dh", f"mul({dy}, {up})")
    dg = g.op("dgate", f"mul({dh}, {act_grad(g, a, gt)})")
    if fused:
        cat = g.op("dgate_up", f"cat({dg}, {dup}) {{dim={last}}}")
        g.output(g.cast(cat, st, "dgu"), lead + [2 * Fd], st)
    else:
        g.output(g.cast(dg, st, "dg"), shape, st)
        g.output(g.cast(dup, st, "du"), shape, st)
    if g.chance(0.3):  # the forward activation recomputed and saved
        y = g.op("y", f"mul({h}, {up})")
        g.output(g.cast(y, st, "out"), shape, st)
    g.variant = f"{kind}_bwd" + ("_fused" if fused else "")
    g.about = f"{kind} backward: grads of gate and up" + (" as one [T, 2F] tensor" if fused else "")


def permute(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, kvh, hd, F, V = g.pick_model()
    kind = g.pick({"transpose2d": 2, "seq_batch": 1, "split_heads": 2, "merge_heads": 2, "nchw_nhwc": 2,
                   "k_transpose": 1, "batch_transpose": 1})
    fuse = g.pick({"none": 2, "scale": 2, "cast": 1, "add": 1})
    dt_out = st if fuse != "cast" else ("float32" if st != "float32" else "bfloat16")
    sz = (sz + BYTES[dt_out]) / 2  # the fits below count 2 * sz per element
    if kind == "transpose2d":
        Mn = g.fit([(H, F), (F, H), (V, H), (H, 3 * H), (8192, 8192), (16384, 4095)], lambda p: p[0] * p[1] * sz * 2)
        shape, perm = [g.d(Mn[0]), g.d(Mn[1])], [1, 0]
    elif kind == "seq_batch":  # Megatron [S, B, H] <-> [B, S, H]
        bs = g.tokens(H * sz * 2, min_batch=2)
        shape, perm = [g.d(bs[1]), g.d(bs[0]), g.d(H)], [1, 0, 2]
    elif kind == "split_heads":  # [B, S, h, d] -> [B, h, S, d]
        bs = g.tokens(heads * hd * sz * 2)
        shape, perm = [g.d(bs[0]), g.d(bs[1]), g.d(heads), g.d(hd)], [0, 2, 1, 3]
    elif kind == "merge_heads":  # [B, h, S, d] -> [B, S, h, d] (then viewed [B, S, h*d])
        bs = g.tokens(heads * hd * sz * 2)
        shape, perm = [g.d(bs[0]), g.d(heads), g.d(bs[1]), g.d(hd)], [0, 2, 1, 3]
    elif kind == "nchw_nhwc":
        img = g.fit(IMAGES, lambda i: _prod(i) * sz * 2)
        shape = [g.d(s) for s in img]
        perm = [0, 2, 3, 1] if g.chance(0.5) else [0, 3, 1, 2]
    elif kind == "k_transpose":  # [B, h, S, d] -> [B, h, d, S]
        bs = g.tokens(kvh * hd * sz * 2)
        shape, perm = [g.d(bs[0]), g.d(kvh), g.d(bs[1]), g.d(hd)], [0, 1, 3, 2]
    else:  # [B, M, N] -> [B, N, M]
        M = g.pick([H, F, 1024, 4095])
        B = g.fit([1, 2, 4, 8, 16, 32, 64], lambda b: b * M * 2048 * sz * 2)
        shape, perm = [g.d(B), g.d(M), g.d(2048)], [0, 2, 1]
    x = g.input("x", st, shape)
    v = x
    if fuse == "scale":  # q * 1/sqrt(d) on the way
        v = g.op("xs", f"mul({g.f32(x)}, {g.const(g.pick([0.08838834764831845, 0.125, 0.5]), name='scale')})")
    elif fuse == "add":
        bshape = [1] * (len(shape) - 1) + [shape[-1]]
        b = g.input("bias", st, bshape)
        v = g.op("xb", f"add({g.f32(x)}, {g.f32(b)})")
    p = g.op("p", f"permute({v}) {{perm={_list(perm)}}}", g.dt[v])
    oshape = [shape[i] for i in perm]
    if kind == "merge_heads" and g.chance(0.6):
        dims = [g.i64(oshape[0], "b"), g.i64(oshape[1], "s"), g.i64(-1, "rest")]
        p = g.op("merged", f"reshape({p}, [{', '.join(dims)}])", g.dt[p])
        oshape = [oshape[0], oshape[1], oshape[2] * oshape[3]]
    y = g.cast(p, dt_out, "y")
    g.output(y, oshape, dt_out, layout={"kind": "contiguous"} if g.chance(0.8) else None)
    g.variant = f"{kind}_r{len(shape)}" + ("" if fuse == "none" else f"_{fuse}")
    g.about = f"permute {perm} of a rank-{len(shape)} tensor" + ("" if fuse == "none" else f" with a fused {fuse}")


def slice_cat_pad(g):
    st = storage(g)
    sz = BYTES[st]
    H, heads, kvh, hd, F, V = g.pick_model()
    kind = g.pick({"qkv_split": 3, "kv_cat": 2, "pad_vocab": 1, "pad_seq": 1, "pad_image": 1, "strided": 1,
                   "last_token": 1, "feature_cat": 1})
    if kind == "qkv_split":  # fused qkv projection output split into heads, [B, h, S, d]
        W = (heads + 2 * kvh) * hd
        bs = g.tokens(W * sz * 2)
        B, S, Hq, Hk, D = g.d(bs[0]), g.d(bs[1]), g.d(heads), g.d(kvh), g.d(hd)
        x = g.input("qkv", st, [B, S, (Hq + 2 * Hk) * D])
        b, s, d = g.i64(B, "b"), g.i64(S, "s"), g.i64(D, "d")
        scale = g.chance(0.4)
        for name, lo, nh in (("q", 0, Hq), ("k", Hq * D, Hk), ("v", (Hq + Hk) * D, Hk)):
            part = g.op(name, f"slice({x}) {{dim=2, start={lo}, stop={lo + nh * D}}}", st)
            r = g.op(f"{name}4", f"reshape({part}, [{b}, {s}, {g.i64(nh, 'h' + name)}, {d}])", st)
            p = g.op(f"{name}t", f"permute({r}) {{perm=[0, 2, 1, 3]}}", st)
            if name == "q" and scale:
                qs = g.op("qs", f"mul({g.f32(p)}, {g.const(1 / math.sqrt(hd), name='scale')})")
                p = g.cast(qs, st, "qo")
            g.output(p, [B, nh, S, D], st, layout={"kind": "contiguous"})
        g.variant, g.about = "qkv_split" + ("_scale" if scale else ""), "fused QKV split into [B, heads, S, d]"
        return
    if kind == "kv_cat":  # KV cache append along the sequence
        Sp = g.pick([1024, 2048, 4095, 8192])
        Sn = g.pick([1, 16, 128, 1024])
        B = g.fit([1, 2, 4, 8, 16, 32, 64], lambda b: b * kvh * (Sp + Sn) * hd * sz * 2)
        Bd, Hk, Spd, Snd, D = g.d(B), g.d(kvh), g.d(Sp), g.d(Sn), g.d(hd)
        past = g.input("past", st, [Bd, Hk, Spd, D])
        new = g.input("new", st, [Bd, Hk, Snd, D])
        y = g.op("kv", f"cat({past}, {new}) {{dim=2}}", st)
        g.output(y, [Bd, Hk, Spd + Snd, D], st)
        g.variant, g.about = "kv_cache_cat", "KV cache: past and new keys concatenated along the sequence"
        return
    if kind == "feature_cat":  # cat along features of two or three tensors (DenseNet, U-Net skips)
        n = g.pick([2, 3])
        img = g.fit(IMAGES, lambda i: _prod(i) * sz * 2 * n)
        N, C, Hh, W = [g.d(s) for s in img]
        parts = [g.input(f"x{k}", st, [N, C, Hh, W]) for k in range(n)]
        y = g.op("y", f"cat({', '.join(parts)}) {{dim=1}}", st)
        g.output(y, [N, n * C, Hh, W], st)
        g.model, g.variant, g.about = "vision", f"channel_cat{n}", f"{n} feature maps concatenated over channels"
        return
    if kind == "pad_vocab":  # embedding / LM head rows padded to a multiple of 128
        H, heads, kvh, hd, F, V = g.pick_model(need=lambda H, h, k, d, F, V: V * H * sz * 2 <= 2 * GiB)
        Vp = -(-V // 128) * 128
        Vd = g.d(V)
        Vpd = Vd + (Vp - V if not g.tiny else 3)
        Hd = g.d(H)
        w = g.input("weight", st, [Vd, Hd])
        y = g.op("padded", f"pad({w}, {g.const(0.0, st, 'zero')}) {{pads=[0, {Vpd - Vd}, 0, 0]}}", st)
        g.output(y, [Vpd, Hd], st)
        g.variant, g.about = "pad_vocab", f"vocabulary {V} padded to {Vp} rows"
        return
    if kind == "pad_seq":  # [B, S, H] padded along S to a multiple of 128, value 0
        bs = g.tokens(H * sz * 2, min_batch=2)
        B, S, Hd = g.d(bs[0]), g.d(bs[1]), g.d(H)
        extra = (-bs[1]) % 128 or 128
        ex = extra if not g.tiny else 2
        x = g.input("x", st, [B, S, Hd])
        y = g.op("padded", f"pad({x}, {g.const(0.0, st, 'zero')}) {{pads=[0, 0, 0, {ex}, 0, 0]}}", st)
        g.output(y, [B, S + ex, Hd], st)
        g.variant, g.about = "pad_seq", "sequence padded with zeros to a multiple of 128"
        return
    if kind == "pad_image":  # conv padding of an NCHW map, 1 on each side
        img = g.fit(IMAGES, lambda i: _prod(i) * sz * 2)
        N, C, Hh, W = [g.d(s) for s in img]
        x = g.input("x", st, [N, C, Hh, W])
        v = x
        if g.chance(0.5):  # reflection is not an op; a fused activation instead
            v = g.cast(g.op("a", f"silu({g.f32(x)})"), st, "act")
        y = g.op("padded", f"pad({v}, {g.const(0.0, st, 'zero')}) {{pads=[0, 0, 0, 0, 1, 1, 1, 1]}}", st)
        g.output(y, [N, C, Hh + 2, W + 2], st)
        g.model, g.variant, g.about = "vision", "pad_image", "NCHW map padded by 1 on both sides of H and W"
        return
    if kind == "strided":  # even and odd positions (downsampling, pairs)
        bs = g.tokens(H * sz * 2)
        lead = g.lead(bs, flat=True)
        Hd = g.d(H, 2)
        x = g.input("x", st, lead + [Hd])
        xe = g.op("even", f"slice({x}) {{dim=1, start=0, stop=end, step=2}}", st)
        xo = g.op("odd", f"slice({x}) {{dim=1, start=1, stop=end, step=2}}", st)
        y = g.op("y", f"add({g.f32(xe)}, {g.f32(xo)})")
        g.output(g.cast(y, st, "out"), lead + [Hd // 2], st)
        g.output(xe, lead + [Hd // 2], st)
        g.variant, g.about = "strided_pairs", "even and odd columns (step-2 slices): their sum and the evens"
        return
    # last_token: hidden states of the last position of each sequence
    bs = g.fit([(b, s) for b in (8, 64, 256, 1024) for s in (512, 2048, 4096)], lambda t: t[0] * t[1] * H * sz)
    g.sol = False  # reads one position of the S in the input
    B, S, Hd = g.d(bs[0]), g.d(bs[1]), g.d(H)
    x = g.input("hidden", st, [B, S, Hd])
    last = g.op("last", f"slice({x}) {{dim=1, start=-1, stop=end}}", st)
    y = g.op("y", f"squeeze({last}) {{dims=[1]}}", st)
    out_dt = g.pick({st: 1, "float32": 1})
    g.output(g.cast(y, out_dt, "out"), [B, Hd], out_dt)
    g.variant, g.about = "last_token", "the last position of every sequence"


def gather_scatter(g):
    st = storage(g)
    sz = BYTES[st]
    kind = g.pick({"embedding": 3, "embedding_bwd": 2, "kv_cache_write": 2, "scatter_nodes": 2,
                   "moe_combine": 2, "topk_gather": 1})
    gdt = g.pick({"float32": 2, st: 1})
    # tables of at most 1 GiB (embedding_bwd reads and writes the float32 grad)
    H, heads, kvh, hd, F, V = g.pick_model(need=lambda H, h, k, d, F, V: V * H * (BYTES[gdt] * 2 if kind ==
                                                                             "embedding_bwd" else sz) <= GiB)
    if kind == "embedding":
        g.sol = False  # reads only the rows looked up
        bs = g.tokens(H * sz * 2 + 8)
        Vd, Hd = g.d(V), g.d(H)
        T = g.d(bs[0] * bs[1])
        w = g.input("weight", st, [Vd, Hd])
        tok = g.input("tokens", "int64", [T], values={"index": Vd})
        e = g.op("emb", f"index_select({w}, {tok}) {{dim=0}}", st)
        v = e
        extra = g.pick({"none": 2, "scale": 1, "pos": 2})
        if extra == "scale":  # Gemma: embeddings * sqrt(hidden)
            v = g.op("scaled", f"mul({g.f32(e)}, {g.const(math.sqrt(H), name='normalizer')})")
        elif extra == "pos":  # GPT-2: token + learned position embeddings
            P = g.d(g.pick([1024, 2048, 8192]))
            wp = g.input("wpe", st, [P, Hd])
            pid = g.input("positions", "int64", [T], values={"index": P})
            pe = g.op("pos", f"index_select({wp}, {pid}) {{dim=0}}", st)
            v = g.op("h", f"add({g.f32(e)}, {g.f32(pe)})")
        y = g.cast(v, st, "out")
        g.output(y, [T, Hd], st)
        g.variant, g.about = f"embedding_{extra}", "token embedding lookup" + ("" if extra == "none" else f" + {extra}")
    elif kind == "embedding_bwd":  # w.grad.index_add_(0, tokens, dy), float32 grad
        bs = g.tokens(H * sz + 8, fixed=V * H * BYTES[gdt] * 2)
        Vd, Hd, T = g.d(V), g.d(H), g.d(bs[0] * bs[1])
        gw = g.input("grad_weight", gdt, [Vd, Hd], broadcast=False)
        tok = g.input("tokens", "int64", [T], values={"index": Vd})
        dy = g.input("dy", st, [T, Hd])
        src = g.cast(dy, gdt, "dyc")
        det = g.chance(0.5)
        y = g.op("gw_new", f"index_reduce({gw}, {tok}, {src}) {{dim=0, reduce=sum"
                           f"{', deterministic=true' if det else ''}}}", gdt)
        inplace = g.chance(0.7)
        g.output(y, [Vd, Hd], gdt, alias=gw if inplace else None)
        g.sol = not inplace
        g.variant = "embedding_bwd" + ("_det" if det else "") + ("_inplace" if inplace else "")
        g.about = "embedding weight gradient accumulated with index_add"
    elif kind == "kv_cache_write":  # vLLM reshape_and_cache: new k written at their slots
        bs = g.tokens(kvh * hd * sz * 2)
        T = g.d(bs[0] * bs[1])
        # a cache of at most 1 GiB, with room for the tokens written
        slots = g.pick([n for n in (16384, 32768, 65536, 131072, 262144) if n * kvh * hd * sz <= GiB] or [16384])
        slots = max(g.d(slots), T if g.tiny else bs[0] * bs[1])
        Hk, D = g.d(kvh), g.d(hd)
        cache = g.input("key_cache", st, [slots, Hk, D], broadcast=False)
        slot = g.input("slot_mapping", "int64", [T], values={"index": slots, "unique": True})
        k = g.input("key", st, [T, Hk, D])
        kv = k
        if g.chance(0.3):  # stored in the cache's dtype after a scale (fp8 caches scale like this)
            kv = g.cast(g.op("ks", f"mul({g.f32(k)}, {g.const(0.5, name='k_scale')})"), st, "kq")
        y = g.op("cache_new", f"index_reduce({cache}, {slot}, {kv}) {{dim=0, reduce=none}}", st)
        g.output(y, [slots, Hk, D], st, alias=cache)
        g.sol = False
        g.variant, g.about = "kv_cache_write_inplace", "new keys written into the paged cache at their slots"
    elif kind == "scatter_nodes":  # graph network message aggregation
        Fe = g.pick([64, 128, 256, 512])
        E = g.fit([1 << k for k in range(16, 24)], lambda e: e * (Fe * sz + 8) + e // 4 * Fe * sz * 2)
        N = E // g.pick([4, 16])
        Ed, Nd, Fd = g.d(E), g.d(N), g.d(Fe)
        red = g.pick({"sum": 2, "amax": 2, "mean": 1})
        x = g.input("x", st, [Nd, Fd])
        dst = g.input("dst", "int64", [Ed], values={"index": Nd})
        msg = g.input("msg", st, [Ed, Fd])
        d2 = g.op("d2", f"unsqueeze({dst}) {{dim=1}}", "int64")
        m = g.op("m", f"size({dst}) {{dim=0}}", "int64")
        f = g.op("f", f"size({msg}) {{dim=1}}", "int64")
        di = g.op("di", f"expand({d2}, [{m}, {f}])", "int64")
        incl = g.chance(0.5)
        y = g.op("agg", f"scatter({x}, {di}, {msg}) {{dim=0, reduce={red}, include_self={'true' if incl else 'false'}}}",
                 st)
        g.output(y, [Nd, Fd], st)
        g.model = "gnn"
        g.variant, g.about = f"scatter_{red}_nodes", f"messages of {E} edges reduced ({red}) into their nodes"
    elif kind == "moe_combine":  # MoE: expert outputs gathered back per token and weighted
        topk = g.pick([2, 4, 8])
        bs = g.tokens(H * sz * (topk + 1) + topk * 12)
        T, K, Hd = g.d(bs[0] * bs[1]), g.d(topk), g.d(H)
        eo = g.input("expert_out", st, [T * K, Hd])
        inv = g.input("unpermute", "int64", [T * K], values={"index": T * K, "unique": True})
        w = g.input("routing_weights", "float32", [T, K], values="nonnegative")
        gth = g.op("gathered", f"index_select({eo}, {inv}) {{dim=0}}", st)
        r = g.op("per_token", f"reshape({g.f32(gth)}, [{g.i64(T, 't')}, {g.i64(K, 'k')}, {g.i64(Hd, 'h')}])")
        w3 = g.op("w3", f"unsqueeze({w}) {{dim=2}}")
        p = g.op("weighted", f"mul({r}, {w3})")
        y = g.op("y", f"sum({p}) {{axes=[1], keepdim=false}}")
        g.output(g.cast(y, st, "out"), [T, Hd], st)
        g.variant, g.about = f"moe_combine_top{topk}", "MoE combine: expert rows unpermuted, weighted, summed"
    else:  # topk_gather: values at given indices along the vocab (top-k logprobs)
        K = g.pick([5, 20, 64])
        T = g.fit(TOKENS, lambda t: t[0] * t[1] * V * sz)
        Td, Vd, Kd = g.d(T[0] * T[1]), g.d(V), g.d(K)
        x = g.input("logits", st, [Td, Vd])
        idx = g.input("topk_idx", "int64", [Td, Kd], values={"index": Vd})
        xf = g.f32(x)
        m, d, e, s, ls = _log_sum_exp_parts(g, xf, [1])
        lp = g.op("logp", f"sub({d}, {ls})")
        y = g.op("topk_logp", f"gather({lp}, {idx}) {{dim=1}}")
        g.output(y, [Td, Kd], "float32")
        g.variant, g.about = f"topk_logprobs{K}", "log-softmax values at given top-k indices"


def optimizer(g):
    H, heads, kvh, hd, F, V = g.pick_model()
    kind = g.pick({"adamw": 3, "sgd_momentum": 1, "lion": 1})
    gdt = g.pick({"bfloat16": 2, "float32": 1, "float16": 1})
    per = {"adamw": 16 * 2 + BYTES[gdt], "sgd_momentum": 16 + BYTES[gdt], "lion": 16 + BYTES[gdt]}[kind]
    # a weight matrix, or the shard of it that one rank updates (FSDP / ZeRO)
    M, N = g.fit([(m // s, n) for m, n in ((F, H), (H, F), (3 * H, H), (H, H), (V, H)) for s in (1, 2, 4, 8, 16)],
                 lambda p: p[0] * p[1] * per)
    shape = [g.d(M), g.d(N)]
    inplace = g.chance(0.8)
    clip = g.chance(0.3)
    p = g.input("param", "float32", shape, broadcast=False)
    gr = g.input("grad", gdt, shape)
    gf = g.f32(gr)
    if clip:  # grads scaled by the clip coefficient, a 0-dim device tensor
        cc = g.input("clip_coef", "float32", [], values="nonnegative")
        gf = g.op("gc", f"mul({gf}, {cc})")
    al = (lambda t: t if inplace else None)
    if kind == "adamw":
        m = g.input("exp_avg", "float32", shape, broadcast=False)
        v = g.input("exp_avg_sq", "float32", shape, values="nonnegative", broadcast=False)
        step = g.pick([1, 10, 100, 1000])
        lr, wd, b1, b2 = 1e-3, 0.01, 0.9, g.pick([0.999, 0.95])
        m2 = g.op("m", f"lerp({m}, {gf}, {g.const(1 - b1, name='one_minus_beta1')})")
        v0 = g.op("v0", f"mul({v}, {g.const(b2, name='beta2')})")
        gg = g.op("gg", f"mul({gf}, {gf})")
        v1 = g.op("v1", f"mul({gg}, {g.const(1 - b2, name='one_minus_beta2')})")
        v2 = g.op("v", f"add({v0}, {v1})")
        sv = g.op("sv", f"sqrt({v2})")
        sd = g.op("sd", f"div({sv}, {g.const(math.sqrt(1 - b2 ** step), name='bc2_sqrt')})")
        den = g.op("den", f"add({sd}, {g.const(1e-8, name='eps')})")
        u = g.op("u", f"div({m2}, {den})")
        su = g.op("su", f"mul({u}, {g.const(lr / (1 - b1 ** step), name='step_size')})")
        pd = g.op("pd", f"mul({p}, {g.const(1 - lr * wd, name='decay')})")
        p2 = g.op("p", f"sub({pd}, {su})")
        g.output(p2, shape, "float32", alias=al(p))
        g.output(m2, shape, "float32", alias=al(m))
        g.output(v2, shape, "float32", alias=al(v))
        if gdt != "float32" and g.chance(0.5):  # the low-precision copy for the next forward
            g.output(g.cast(p2, gdt, "p_lp"), shape, gdt)
        g.about = f"AdamW step {step}, float32 master weights and moments, {gdt} grads"
    elif kind == "sgd_momentum":
        buf = g.input("momentum_buffer", "float32", shape, broadcast=False)
        b0 = g.op("b0", f"mul({buf}, {g.const(0.9, name='momentum')})")
        wdg = g.op("wdg", f"mul({p}, {g.const(1e-4, name='weight_decay')})")
        d = g.op("d", f"add({gf}, {wdg})")
        b2 = g.op("buf", f"add({b0}, {d})")
        st_ = g.op("st", f"mul({b2}, {g.const(0.1, name='lr')})")
        p2 = g.op("p", f"sub({p}, {st_})")
        g.output(p2, shape, "float32", alias=al(p))
        g.output(b2, shape, "float32", alias=al(buf))
        g.about = "SGD with momentum and weight decay"
    else:
        m = g.input("exp_avg", "float32", shape, broadcast=False)
        c0 = g.op("c0", f"lerp({m}, {gf}, {g.const(0.1, name='one_minus_beta1')})")
        upd = g.op("upd", f"sign({c0})")
        pd = g.op("pd", f"mul({p}, {g.const(1 - 1e-4 * 0.1, name='decay')})")
        su = g.op("su", f"mul({upd}, {g.const(1e-4, name='lr')})")
        p2 = g.op("p", f"sub({pd}, {su})")
        m2 = g.op("m", f"lerp({m}, {gf}, {g.const(0.01, name='one_minus_beta2')})")
        g.output(p2, shape, "float32", alias=al(p))
        g.output(m2, shape, "float32", alias=al(m))
        g.about = "Lion step"
    g.variant = kind + ("_clip" if clip else "") + ("_inplace" if inplace else "")


# The fusion classes and their weights (shares of the corpus).
# The grammar's version. A change that alters what a seed draws takes a
# new version; the builders keep the older ones, so that a seed measured
# in an earlier session draws the same fusions with --grammar N:
#   1  sessions 28-37
#   2  session 38: cross_entropy's forward saving its log-probabilities
#      and backward through a one-hot scatter, as AOTAutograd writes them
#      (only cross_entropy fusions differ from grammar 1)
GRAMMAR = 2

CLASSES = {
    "pointwise": (pointwise, 13),
    "reduction": (reduction, 10),
    "norm_fwd": (norm_fwd, 14),
    "norm_bwd": (norm_bwd, 8),
    "softmax": (softmax, 8),
    "cross_entropy": (cross_entropy, 6),
    "rotary": (rotary, 7),
    "gated_act": (gated_act, 8),
    "permute": (permute, 7),
    "slice_cat_pad": (slice_cat_pad, 6),
    "gather_scatter": (gather_scatter, 6),
    "optimizer": (optimizer, 7),
}


def generate(seed, count, scale="full", classes=None, grammar=None):
    """`count` fusions drawn from `seed` (the same ones every time). scale:
    "full" (real sizes) or "tiny" (every size small, all else the same).
    classes: only these classes (the draws are those of the whole corpus,
    filtered: fusion i is the same fusion with or without a filter).
    grammar: GRAMMAR (the default) or an earlier one, to draw a seed as an
    earlier session did."""
    if scale not in ("full", "tiny"):
        raise ValueError(f"scale must be full or tiny, not {scale!r}")
    rng = random.Random(seed)
    names = list(CLASSES)
    weights = [CLASSES[n][1] for n in names]
    out = []
    for i in range(count):
        cls = rng.choices(names, weights=weights)[0]
        sub = random.Random(rng.getrandbits(64))
        if classes and cls not in classes:
            continue
        g = Fusion(sub, scale == "tiny", grammar)
        CLASSES[cls][0](g)
        entry = g.finish(i, cls)
        if scale == "full":
            assert entry["memory"] <= MEMORY_CAP, (entry["name"], entry["memory"])
        out.append(entry)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--scale", default="full", choices=["full", "tiny"])
    p.add_argument("--classes", default="", help="comma list of classes (default: all)")
    p.add_argument("--grammar", type=int, default=GRAMMAR, help="the grammar's version (default: the latest)")
    p.add_argument("--out", default="", help="folder for NAME.kf files and corpus.json")
    a = p.parse_args(argv)
    corpus = generate(a.seed, a.count, a.scale, [c for c in a.classes.split(",") if c] or None, a.grammar)
    if a.out:
        d = pathlib.Path(a.out)
        d.mkdir(parents=True, exist_ok=True)
        for e in corpus:
            (d / f"{e['name']}.kf").write_text(e["text"])
        (d / "corpus.json").write_text(json.dumps({"seed": a.seed, "count": a.count, "scale": a.scale,
                                                   "fusions": corpus}, indent=1) + "\n")
        print(f"wrote {len(corpus)} fusions to {d}")
    else:
        for e in corpus:
            print(e["text"])
    by = {}
    for e in corpus:
        by[e["class"]] = by.get(e["class"], 0) + 1
    mb = sorted(e["bytes"] / MiB for e in corpus)
    if mb:
        import sys
        print(f"classes: {dict(sorted(by.items()))}; MiB moved: min {mb[0]:.0f}, median {mb[len(mb) // 2]:.0f}, "
              f"max {mb[-1]:.0f}", file=sys.stderr)


if __name__ == "__main__":
    main()
