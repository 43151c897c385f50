#!/usr/bin/env python3
"""bench/kf_torch.py (kfuse's fusion text interpreted on torch tensors)
against kfuse's CPU backend, through the Python package, on torch CPU
tensors:

1. every case of bench/cases/ (suite, training, as_written, in_place) in
   float32 and bfloat16 storage at its `#! shapes:` size, inputs drawn as
   bench_torch.py draws them;
2. small hand-written fusions covering each op family (pointwise with int,
   uint8, bool and float16/bfloat16 operands and scalar promotion,
   reductions, shape ops, indexing, scatter, scans, creation, matmul,
   outputs), so that each op of the interpreter meets the CPU backend;
3. each hand-written torch function of bench_torch.py (torch_fn) against
   the interpreter, float32, same inputs;
4. parse-time errors: random ops, device meshes, bad texts.

Outputs must agree within bench_torch.py's tolerance (float32 1e-4,
float16 5e-3, bfloat16 2e-2, times max(1, max|kfuse's|); ints and bools
exactly; NaN and infinities at the same places). A case the interpreter
cannot run (random ops; float8 where this torch lacks it) is skipped by
name with the reason printed. Fails (exit 1) when torch or kfuse cannot be
imported: CTest registers it only where CMake found a Python with torch.

    KFUSE_LIBRARY=build/libkfuse.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 tests/python/test_kf_torch.py [-v] [name-substring ...]
"""
import pathlib
import sys
import traceback

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

try:
    import torch
except ImportError as e:  # CI installs python3-torch: a missing torch is a failure
    print(f"test_kf_torch: FAIL: cannot import torch ({e}); Debian: apt-get install python3-torch")
    sys.exit(1)
import kf_torch  # noqa: E402
import kfuse_cases  # noqa: E402

VERBOSE = "-v" in sys.argv[1:]
FILTERS = [a for a in sys.argv[1:] if not a.startswith("-")]
TOL = {"float64": 1e-4, "float32": 1e-4, "float16": 5e-3, "bfloat16": 2e-2,
       "float8_e4m3fn": 1.25e-1, "float8_e5m2": 2.5e-1}
TORCH = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
         "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "int8": torch.int8,
         "uint8": torch.uint8, "bool": torch.bool}
for _n in ("float8_e4m3fn", "float8_e5m2"):
    if hasattr(torch, _n):
        TORCH[_n] = getattr(torch, _n)

failures, skipped, passed = [], [], []


def selected(name):
    return not FILTERS or any(f in name for f in FILTERS)


# ---------------------------------------------------------------------------
# Inputs

def directives(text):
    d = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("#!") and ":" in line:
            k, v = line[2:].split(":", 1)
            d[k.strip()] = v.strip()
    return d


def parse_shapes(s):
    out = []
    for part in s.split(","):
        part = part.strip()
        out.append(() if part in ("", "()") else tuple(int(x) for x in part.split("x")))
    return out


def parse_named(s, conv):
    out = {}
    for item in (s or "").split(","):
        if item.strip():
            k, v = item.split("=")
            out[k.strip()] = conv(v.strip())
    return out


def make_inputs(program, text, gen, storage_tol=None, bench_case=None):
    """Inputs in the program's input order. Tensor shapes from `#! shapes:`,
    scalars from `#! scalars:`. Floats: randn (|randn| for `#! nonnegative:`),
    or uniform in `#! ranges: NAME=lo:hi`; `#! special: NAME` puts NaN, +-inf,
    +-0 and halves at fixed places. Ints: in [0, the first input's last dim)
    for bench cases (as bench_torch.py), else in [0, 4) or the range. Bools:
    kept with p = 0.9 (bench cases) or 0.5."""
    d = directives(text)
    shapes = parse_shapes(d["shapes"]) if "shapes" in d else []
    scalars = [float(x) if any(c in x for c in ".en") else int(x)
               for x in (d.get("scalars") or "").replace(" ", "").split(",") if x]
    ranges = parse_named(d.get("ranges"), lambda v: tuple(float(x) for x in v.split(":")))
    special = {x.strip() for x in (d.get("special") or "").split(",") if x.strip()}
    nonneg = {x.strip() for x in (d.get("nonnegative") or "").split(",") if x.strip()}
    inputs, ti, si = [], 0, 0
    for name, kind, dtype in zip(program.input_names, program.input_kinds, program.input_dtypes):
        if kind == "scalar":
            inputs.append(scalars[si])
            si += 1
            continue
        shape = shapes[ti]
        ti += 1
        if dtype in ("int64", "int32", "int8", "uint8"):
            lo, hi = ranges.get(name, (0, shapes[0][-1] if bench_case else 4))
            t = torch.randint(int(lo), int(hi), shape, generator=gen).to(TORCH[dtype])
        elif dtype == "bool":
            t = torch.rand(*shape, generator=gen) >= (0.1 if bench_case else 0.5)
        else:
            if name in ranges:
                lo, hi = ranges[name]
                t = torch.rand(*shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
            else:
                t = torch.randn(*shape, generator=gen, dtype=torch.float64)
            if name in nonneg:
                t = t.abs()
            if name in special and t.numel() >= 10:
                flat = t.view(-1)
                for k, v in enumerate([float("nan"), float("inf"), float("-inf"), -0.0, 0.0, 0.5, 2.5, -1.5, 1.0, 1.0]):
                    flat[(k * 7) % flat.numel()] = v
            t = t.to(torch.float32).to(TORCH[dtype])
        inputs.append(t)
    return inputs


# ---------------------------------------------------------------------------
# Comparison

def compare(name, got, ref, dtype_tol=None, whose="kfuse's"):
    """None when `got` matches `ref` (kfuse's), else what differs."""
    if got.shape != ref.shape:
        return f"shape {tuple(got.shape)} vs {whose} {tuple(ref.shape)}"
    if got.dtype != ref.dtype:
        return f"dtype {got.dtype} vs {whose} {ref.dtype}"
    if not got.is_floating_point():
        if not torch.equal(got, ref):
            bad = (got != ref).nonzero()[:5].tolist()
            return f"differs at {bad}: {got[tuple(torch.tensor(bad).T)].tolist() if bad else ''} " \
                   f"vs {whose} {ref[tuple(torch.tensor(bad).T)].tolist() if bad else ''}"
        return None
    g, r = got.double(), ref.double()
    if not torch.equal(torch.isnan(g), torch.isnan(r)):
        return f"NaN at other places: {torch.isnan(g).nonzero()[:5].tolist()} vs {whose} {torch.isnan(r).nonzero()[:5].tolist()}"
    inf_g, inf_r = torch.isinf(g), torch.isinf(r)
    if not torch.equal(inf_g, inf_r) or not torch.equal(g[inf_g], r[inf_r]):
        return "infinities differ"
    fin = torch.isfinite(r)
    if not fin.any():
        return None
    err = (g[fin] - r[fin]).abs().max().item()
    scale = max(1.0, r[fin].abs().max().item())
    tol = dtype_tol if dtype_tol is not None else TOL[str(ref.dtype).replace("torch.", "")]
    if err > tol * scale:
        where = torch.where(fin, (g - r).abs(), torch.zeros_like(g)).argmax().item()
        return f"max error {err:.3g} > {tol:g} x {scale:.3g} (element {where}: {g.reshape(-1)[where].item()!r} " \
               f"vs {whose} {r.reshape(-1)[where].item()!r})"
    return None


def run_kfuse(text, inputs):
    fusion = kfuse.Fusion.from_text(text)
    outs = fusion(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [to_torch(o) for o in outs]


def to_torch(o):
    """A kfuse output as a torch tensor (a copy). torch before 2.0 cannot
    import DLPack bools: those come through NumPy."""
    if o.dtype.name == "bool":
        return torch.from_numpy(o.numpy().copy())
    return torch.from_dlpack(o).clone()


def unchanged(x, before):
    if not x.is_floating_point():
        return torch.equal(x, before)
    nan = torch.isnan(x)
    return torch.equal(nan, torch.isnan(before)) and torch.equal(x[~nan], before[~nan])


def check_program(label, text, inputs, program, tol=None):
    """The interpreter against kfuse's CPU backend on `inputs`."""
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    got = program(*inputs)
    for x, b in zip(inputs, before):
        if isinstance(x, torch.Tensor) and not unchanged(x, b):
            return "the interpreter wrote into an input"
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    for k, o in enumerate(got):
        for x in tensors:
            if o.numel() and x.numel() and o.storage().data_ptr() == x.storage().data_ptr():
                return f"output {k} shares memory with an input"
    ref = run_kfuse(text, inputs)
    if len(got) != len(ref):
        return f"{len(got)} outputs vs kfuse's {len(ref)}"
    for k, (g, r) in enumerate(zip(got, ref)):
        why = compare(label, g, r, tol)
        if why:
            return f"output {k} ({program.output_names[k]}): {why}"
    return None


def record(label, fn):
    if not selected(label):
        return
    try:
        why = fn()
    except NotImplementedError as e:
        skipped.append((label, str(e)))
        print(f"SKIP {label}: {e}")
        return
    except Exception as e:  # noqa: BLE001 (a test harness: report and go on)
        why = f"{type(e).__name__}: {e}"
        if VERBOSE:
            traceback.print_exc()
    if why:
        failures.append((label, why))
        print(f"FAIL {label}: {why}")
    else:
        passed.append(label)
        if VERBOSE:
            print(f"ok   {label}")


# ---------------------------------------------------------------------------
# 1. The benchmark cases

def bench_case_names():
    names = []
    for lst in ("suite", "training", "as_written", "in_place"):
        names += kfuse_cases.suite(name=lst)
    return list(dict.fromkeys(names))


def check_bench_case(name, storage):
    text = kfuse_cases.case_text(name, storage)
    program = kf_torch.parse(text)
    gen = torch.Generator().manual_seed(1)
    inputs = make_inputs(program, text, gen, bench_case=True)
    return check_program(name, text, inputs, program, TOL[storage])


# ---------------------------------------------------------------------------
# 2. Hand-written fusions, one op family each. `DT` stands for the float
# dtype of the run (each text runs once per dtype in its list).

UNARY_FLOAT = {  # op: input range (None: randn with special values)
    "neg": None, "abs": None, "exp": (-3, 3), "exp2": (-3, 3), "expm1": (-2, 2), "log": (0.05, 4),
    "log2": (0.05, 4), "log10": (0.05, 4), "log1p": (-0.9, 3), "sqrt": (0, 4), "rsqrt": (0.05, 4),
    "reciprocal": (0.2, 3), "sin": (-3, 3), "cos": (-3, 3), "tan": (-1.3, 1.3), "asin": (-0.95, 0.95),
    "acos": (-0.95, 0.95), "atan": (-3, 3), "sinh": (-3, 3), "cosh": (-3, 3), "tanh": (-3, 3),
    "asinh": (-3, 3), "acosh": (1, 4), "atanh": (-0.95, 0.95), "sigmoid": None, "relu": None, "gelu": (-4, 4),
    "gelu_tanh": (-4, 4), "silu": (-4, 4), "erf": (-2, 2), "erfc": (-2, 2), "floor": None, "ceil": None,
    "round": None, "trunc": None, "sign": None, "isnan": None, "isinf": None, "isfinite": None,
    "logical_not": None,
}
INT_UNARY = ["neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "isnan", "isinf", "isfinite",
             "logical_not", "bitwise_not"]
INT_RANGE = {"int8": "-128:128", "uint8": "0:256", "int32": "-100000:100000", "int64": "-100000:100000"}
FLOAT_BINARY = ["add", "sub", "mul", "div", "fmod", "remainder", "pow", "atan2", "maximum", "minimum", "eq", "ne",
                "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
INT_BINARY = ["add", "sub", "mul", "fmod", "remainder", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
              "ge", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
              "shift_left", "shift_right", "div", "atan2"]


def hand_cases():
    """(label, text, dtypes) of the hand-written fusions."""
    cases = []
    f3 = ("float32", "bfloat16", "float16")
    for op, rng in UNARY_FLOAT.items():
        extra = f"#! ranges: x={rng[0]}:{rng[1]}" if rng else "#! special: x"
        cases.append((f"unary_{op}", f"""#! shapes: 6x8
{extra}
input x: tensor<DT, 2>
y = {op}(x)
output y
""", f3 + ("float64",)))
    for t in ("int8", "uint8", "int32", "int64", "bool"):
        ops = INT_UNARY if t != "bool" else ["sign", "isnan", "isinf", "isfinite", "logical_not", "bitwise_not"]
        body = "\n".join(f"y{k} = {op}(x)\noutput y{k}" for k, op in enumerate(ops))
        rng = f"#! ranges: x={INT_RANGE[t]}" if t != "bool" else ""
        cases.append((f"unary_int_{t}", f"#! shapes: 6x8\n{rng}\ninput x: tensor<{t}, 2>\n{body}\n", ("-",)))
    # ToFloat ops on ints convert the operand to float32 first.
    cases.append(("unary_int_to_float", """#! shapes: 5x7, 5x7, 5x7
#! ranges: x=-20:20, u=0:50
input x: tensor<int32, 2>
input u: tensor<uint8, 2>
input b: tensor<bool, 2>
a = exp(x)
c = sigmoid(x)
d = sqrt(u)
e = log1p(u)
f = tanh(b)
output a
output c
output d
output e
output f
""", ("-",)))
    for op in FLOAT_BINARY:
        rx, ry = ("0.1:3", "-2:2") if op == "pow" else ("-3:3", "-3:3")
        cases.append((f"binary_{op}", f"""#! shapes: 6x8, 8, 6x8
#! ranges: x={rx}, y={ry}
#! special: z
# tensor-tensor with broadcasting, tensor-constant, constant-tensor, and
# the same values against themselves (equal elements, zeros, NaN, inf)
input x: tensor<DT, 2>
input y: tensor<DT, 1>
input z: tensor<DT, 2>
const c: float32 = 0.7
const two: int64 = 2
a = {op}(x, y)
b = {op}(x, c)
d = {op}(c, x)
e = {op}(z, z)
f = {op}(x, two)
g = {op}(z, x)
output a
output b
output d
output e
output f
output g
""", f3 + ("float64",)))
    for t in ("int8", "uint8", "int32", "int64"):
        for op in INT_BINARY:
            width = {"int8": 8, "uint8": 8, "int32": 32, "int64": 64}[t]
            if op in ("fmod", "remainder"):
                rng = f"x={INT_RANGE[t]}, y=1:9, n=1:9"
            elif op == "pow":
                rng = "x=0:6, y=0:5, n=0:6" if t == "uint8" else "x=-5:6, y=0:5, n=0:6"
            elif op.startswith("shift"):
                rng = f"x={INT_RANGE[t]}, y=-2:{width + 3}, n=0:6"
            else:
                rng = f"x={INT_RANGE[t]}, y={INT_RANGE[t]}, n=0:6"
            neg = "" if t == "uint8" or op not in ("fmod", "remainder") else f"ny = neg(y)\nh = {op}(x, ny)\noutput h\n"
            const = "3" if op not in ("shift_left", "shift_right") else "5"
            second = "n" if op in ("fmod", "remainder", "pow") else "x"  # no zero divisor, no negative power
            cases.append((f"binary_{op}_{t}", f"""#! shapes: 6x8, 8, 6x8
#! ranges: {rng}
input x: tensor<{t}, 2>
input y: tensor<{t}, 1>
input n: tensor<{t}, 2>
const c: int64 = {const}
a = {op}(x, y)
b = {op}(x, c)
e = {op}(x, {second})
output a
output b
output e
{neg}""", ("-",)))
    cases.append(("binary_bool", """#! shapes: 6x8, 6x8
input a: tensor<bool, 2>
input b: tensor<bool, 2>
""" + "".join(f"y{k} = {op}(a, b)\noutput y{k}\n" for k, op in enumerate(
        ["add", "mul", "maximum", "minimum", "eq", "ne", "lt", "ge", "logical_and", "logical_or", "logical_xor",
         "bitwise_and", "bitwise_or", "bitwise_xor", "div", "atan2"])), ("-",)))
    cases.append(("promotion", """#! shapes: 4x6, 4x6, 4x6, 4x6, 6, 4x6
#! ranges: i8=-128:128, i32=-1000:1000, u8=0:256
# kfuse's result_type: mixed ints, int with float scalars, bool with ints,
# rank-0 tensors below tensors, a float16/bfloat16 tensor with float32
input i8: tensor<int8, 2>
input i32: tensor<int32, 2>
input u8: tensor<uint8, 2>
input b: tensor<bool, 2>
input h: tensor<float16, 1>
input x: tensor<DT, 2>
const f: float64 = 0.25
const big: int64 = 1000
const t: bool = true
a = add(i8, i32)
c = mul(i8, f)
d = add(i8, big)
e = add(b, big)
g = add(u8, b)
k = add(h, x)
s = sum(i32) {axes=[]}
l = add(i8, s)
sx = sum(x) {axes=[]}
m = add(h, sx)
n = mul(b, t)
o = sub(u8, i32)
p = div(i32, i8)
output a
output c
output d
output e
output g
output k
output l
output m
output n
output o
output p
""", ("float32", "bfloat16")))
    cases.append(("compare_rounds_scalar", """#! shapes: 40, 40
#! ranges: h=0.0998:0.1002, x=0.0995:0.1005
# f16 == 0.1 compares with 0.1 rounded to float16 (the compute dtype)
input h: tensor<float16, 1>
input x: tensor<DT, 1>
const c: float32 = 0.1
const d: float64 = 0.1
a = eq(h, c)
b = ge(x, d)
e = mul(x, d)
output a
output b
output e
""", ("bfloat16", "float16")))
    cases.append(("scalars", """#! shapes: 4x5, 4x5
#! scalars: 0.1, 3, 2.5, 1, -7, 0.3
# scalar inputs of each kind, scalar-only arithmetic at run time, sizes
input x: tensor<DT, 2>
input s: scalar<float32>
input n: scalar<int64>
input d: scalar<float64>
input b: scalar<bool>
input i: tensor<int32, 2>
input m: scalar<int32>
input e: scalar<bfloat16>
const c: float64 = 0.3
const one: float32 = 1
a1 = mul(x, s)
a2 = add(x, n)
a3 = sub(d, x)
sn = mul(s, n)
a4 = mul(x, sn)
k = add(n, n)
a5 = div(x, k)
a6 = eq(x, s)
a7 = where(b, x, c)
a8 = add(i, m)
a9 = mul(i, s)
sz = size(x) {dim=-1}
ssum = sum(x) {axes=[1], keepdim=true}
a10 = div(ssum, sz)
sd = add(s, d)
a11 = mul(x, sd)
ex = exp(s)
a12 = add(x, ex)
nm = maximum(n, m)
a13 = mul(x, nm)
a14 = mul(x, e)
q = div(n, k)
a15 = add(x, q)
cs = add(c, one)
a16 = mul(x, cs)
output a1
output a2
output a3
output a4
output a5
output a6
output a7
output a8
output a9
output a10
output a11
output a12
output a13
output a14
output a15
output a16
""", ("float32", "bfloat16", "float64")))
    cases.append(("ternary", """#! shapes: 5x6, 5x6, 6, 5x6, 5x6, 5x6, 5x6, 5x6
#! ranges: w=-1:2, lo=-1:0.5, hi=-0.5:1, i=-50:50, j=-50:50, k=-50:50
#! special: x
input x: tensor<DT, 2>
input y: tensor<DT, 2>
input z: tensor<DT, 1>
input c: tensor<bool, 2>
input w: tensor<DT, 2>
input lo: tensor<DT, 2>
input hi: tensor<DT, 2>
input i: tensor<int32, 2>
const half: float32 = 0.5
const q: float32 = 0.3
const r: float32 = 0.7
const a0: float32 = -0.5
const b0: float32 = 0.25
const three: int64 = 3
const mfive: int64 = -5
const t: bool = true
w1 = where(c, x, z)
w2 = where(c, x, half)
w3 = where(c, i, three)
w4 = where(t, x, y)
cl1 = clamp(x, lo, hi)
cl2 = clamp(x, a0, b0)
cl3 = clamp(i, mfive, three)
cl4 = clamp(x, b0, a0)
l1 = lerp(x, y, w)
l2 = lerp(x, y, q)
l3 = lerp(x, z, r)
f1 = fma(x, y, z)
f2 = fma(i, i, three)
f3 = fma(x, half, y)
output w1
output w2
output w3
output w4
output cl1
output cl2
output cl3
output cl4
output l1
output l2
output l3
output f1
output f2
output f3
""", ("float32", "bfloat16", "float16")))
    cases.append(("casts", """#! shapes: 6x8, 6x8, 6x8, 6x8
#! ranges: x=-300:300, big=-100000000:100000000, s=-200:200
#! special: s
input x: tensor<DT, 2>
input big: tensor<int64, 2>
input b: tensor<bool, 2>
input s: tensor<DT, 2>
""" + "".join(f"c{k} = cast(x) {{dtype={t}}}\noutput c{k}\n" for k, t in enumerate(
        ["float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool"])) + """
e1 = cast(big) {dtype=bfloat16}
e2 = cast(big) {dtype=float32}
e3 = cast(big) {dtype=int8}
e4 = cast(b) {dtype=float32}
e5 = cast(b) {dtype=int32}
e6 = cast(s) {dtype=int32}
e7 = cast(s) {dtype=bool}
output e1
output e2
output e3
output e4
output e5
output e6
output e7
""", ("float32", "bfloat16", "float64")))
    cases.append(("reductions", """#! shapes: 3x4x5, 3x4x5, 3x4x5
#! ranges: p=0.5:1.5
#! special: s
input x: tensor<DT, 3>
input p: tensor<DT, 3>
input s: tensor<DT, 3>
r1 = sum(x) {axes=[]}
r2 = sum(x) {axes=[0], keepdim=true}
r3 = sum(x) {axes=[-1]}
r4 = sum(x) {axes=[2, 0], keepdim=false}
r5 = prod(p) {axes=[1]}
r6 = prod(p) {axes=[0, 2], keepdim=true}
r7 = max(s) {axes=[1]}
r8 = min(x) {axes=[0, 1], keepdim=true}
r9 = mean(x) {axes=[0, 1]}
r10 = var(x) {axes=[2], correction=0}
r11 = var(x) {axes=[2]}
r12 = var(x) {axes=[2], correction=3, keepdim=true}
r13 = var(x) {axes=[2], correction=7}
v, m = var_mean(x) {axes=[0, 2], keepdim=true, correction=1}
r14 = argmax(s) {axes=[1]}
r15 = argmin(s) {axes=[-1], keepdim=true}
r16 = argmax(x) {axes=[0]}
r17 = max(x) {axes=[]}
t = sum(x) {axes=[]}
r18 = sum(t)
r19 = max(t) {axes=[]}
r20 = mean(t)
r21 = var(t) {correction=0}
r22 = argmin(r17) {axes=[]}
output r1
output r2
output r3
output r4
output r5
output r6
output r7
output r8
output r9
output r10
output r11
output r12
output r13
output v
output m
output r14
output r15
output r16
output r17
output r18
output r19
output r20
output r21
""".replace("r22 = argmin(r17) {axes=[]}\n", ""), ("float32", "bfloat16", "float16", "float64")))
    cases.append(("reductions_int", """#! shapes: 4x6, 4x6, 4x6, 4x6, 4x6
#! ranges: a=-128:128, p=-3:4, u=0:256, i=0:3
input a: tensor<int8, 2>
input p: tensor<int32, 2>
input u: tensor<uint8, 2>
input b: tensor<bool, 2>
input i: tensor<int64, 2>
r1 = sum(a) {axes=[1]}
r2 = sum(a) {axes=[]}
r3 = prod(p) {axes=[1]}
r4 = prod(p) {axes=[]}
r5 = max(u) {axes=[0]}
r6 = min(a) {axes=[1], keepdim=true}
r7 = sum(b) {axes=[0]}
r8 = max(b) {axes=[1]}
r9 = min(b) {axes=[1]}
r10 = argmax(i) {axes=[1]}
r11 = argmin(i) {axes=[0], keepdim=true}
r12 = argmax(b) {axes=[1]}
r13 = prod(b) {axes=[1]}
r14 = max(u) {axes=[]}
output r1
output r2
output r3
output r4
output r5
output r6
output r7
output r8
output r9
output r10
output r11
output r12
output r13
output r14
""", ("-",)))
    cases.append(("shape_ops", """#! shapes: 3x4, 4, 3x4, 3x4, 3x4
#! ranges: i=-50:50
input x: tensor<DT, 2>
input v: tensor<DT, 1>
input y: tensor<float32, 2>
input i: tensor<int32, 2>
input b: tensor<bool, 2>
const n1: int64 = 1
const n2: int64 = 2
const n3: int64 = 3
const n4: int64 = 4
const n6: int64 = 6
const m1: int64 = -1
const pv: float32 = -1.5
const pf: float64 = 2.7
const pt: bool = true
bd1 = broadcast_in_dim(v, [n2, n3, n4]) {dims=[2]}
bd2 = broadcast_in_dim(x, [n3, n2, m1]) {dims=[0, 2]}
ex1 = expand(v, [n3, m1])
ex2 = expand(x, [n2, n3, n4])
s0 = size(x) {dim=0}
s1 = size(x) {dim=1}
s01 = mul(s0, s1)
rs1 = reshape(x, [n2, n6])
rs2 = reshape(x, [m1])
rs3 = reshape(ex2, [s01, n2])
rs4 = reshape(x, [n1, m1])
pm = permute(ex2) {perm=[2, 0, -2]}
pmr = reshape(pm, [m1, n3])
us = unsqueeze(x) {dim=-1}
sq1 = squeeze(us) {dims=[2]}
sq2 = squeeze(rs4) {dims=[0]}
sl1 = slice(x) {dim=1, start=1, stop=end, step=2}
sl2 = slice(x) {dim=0, start=-2}
sl3 = slice(x) {dim=1, start=1, stop=100}
sl4 = slice(x) {dim=1, start=3, stop=1}
sl5 = slice(x) {dim=-1, start=-3, stop=-1, step=1}
pd1 = pad(x, pv) {pads=[1, 0, 2, 3]}
pd2 = pad(i, pf) {pads=[0, 2, 1, 1]}
pd3 = pad(b, pt) {pads=[1, 1, 0, 0]}
pd4 = pad(v, n3) {pads=[2, 2]}
ct1 = cat(x, y, x) {dim=0}
ct2 = cat(x, i) {dim=-1}
ct3 = cat(v) {dim=0}
ss = segment_set(pmr)
output bd1
output bd2
output ex1
output ex2
output rs1
output rs2
output rs3
output pm
output sq1
output sq2
output sl1
output sl2
output sl3
output sl4
output sl5
output pd1
output pd2
output pd3
output pd4
output ct1
output ct2
output ct3
output ss
""", ("float32", "bfloat16")))
    cases.append(("pad_runtime_value", """#! shapes: 3x4, 3x4
#! scalars: 2.5, 7, -3.75
input x: tensor<DT, 2>
input i: tensor<int8, 2>
input s: scalar<float32>
input n: scalar<int64>
input d: scalar<float64>
a = pad(x, s) {pads=[1, 1, 0, 2]}
b = pad(i, n) {pads=[0, 1, 1, 0]}
c = pad(i, d) {pads=[1, 0, 0, 0]}
e = pad(x, d) {pads=[0, 0, 2, 0]}
output a
output b
output c
output e
""", ("float32", "bfloat16")))
    cases.append(("indexing", """#! shapes: 5x6, 3, 5x4, 3x4, 5x6
#! ranges: si=0:5, g=0:6, g2=0:6, i=-100:100
input x: tensor<DT, 2>
input si: tensor<int32, 1>
input g: tensor<int64, 2>
input g2: tensor<int32, 2>
input i: tensor<int64, 2>
y1 = index_select(x, si) {dim=0}
y2 = gather(x, g) {dim=1}
y3 = gather(x, g2) {dim=-1}
y4 = index_select(i, si) {dim=-2}
y5 = gather(i, g) {dim=1}
output y1
output y2
output y3
output y4
output y5
""", ("float32", "bfloat16")))
    scat = []
    for k, (red, inc) in enumerate([("none", "true"), ("sum", "true"), ("sum", "false"), ("prod", "true"),
                                    ("prod", "false"), ("mean", "true"), ("mean", "false"), ("amax", "true"),
                                    ("amax", "false"), ("amin", "true"), ("amin", "false")]):
        src = "p" if red == "prod" else "s"
        scat.append(f"a{k} = scatter(x, idx, {src}) {{dim=0, reduce={red}, include_self={inc}}}\noutput a{k}\n")
        scat.append(f"b{k} = scatter(x, idx1, {src}) {{dim=1, reduce={red}, include_self={inc}, deterministic=true}}\n"
                    f"output b{k}\n")
        scat.append(f"c{k} = index_reduce(x, ir, {src}) {{dim=0, reduce={red}, include_self={inc}}}\noutput c{k}\n")
        scat.append(f"d{k} = index_reduce(x, ir, {src}1) {{dim=0, reduce={red}, include_self={inc}}}\noutput d{k}\n")
        scat.append(f"e{k} = index_reduce(x, ir2, {src}c) {{dim=1, reduce={red}, include_self={inc}}}\noutput e{k}\n")
    scat_body = "".join(scat)
    cases.append(("scatter", """#! shapes: 5x6, 4x6, 4x6, 4x6, 4x3, 4, 4x1, 4x1, 4, 5x4, 5x4
#! ranges: idx=0:5, idx1=0:6, ir=0:5, ir2=0:6, p=0.5:1.5, p1=0.5:1.5, pc=0.5:1.5
#! special: x
input x: tensor<DT, 2>
input idx: tensor<int64, 2>
input s: tensor<DT, 2>
input p: tensor<DT, 2>
input idx1: tensor<int32, 2>
input ir: tensor<int64, 1>
input s1: tensor<DT, 2>
input p1: tensor<DT, 2>
input ir2: tensor<int32, 1>
input sc: tensor<DT, 2>
input pc: tensor<DT, 2>
""" + scat_body, ("float32", "bfloat16", "float64")))
    cases.append(("scatter_int", ("""#! shapes: 5x6, 4x6, 4x6, 4x6, 4x3, 4, 4x1, 4x1, 4, 5x4, 5x4
#! ranges: x=-100:100, s=-100:100, s1=-100:100, sc=-100:100, idx=0:5, idx1=0:6, ir=0:5, ir2=0:6, p=-3:4, p1=-3:4, pc=-3:4
input x: tensor<TI, 2>
input idx: tensor<int64, 2>
input s: tensor<TI, 2>
input p: tensor<TI, 2>
input idx1: tensor<int32, 2>
input ir: tensor<int64, 1>
input s1: tensor<TI, 2>
input p1: tensor<TI, 2>
input ir2: tensor<int32, 1>
input sc: tensor<TI, 2>
input pc: tensor<TI, 2>
""" + scat_body), ("int32", "int8", "int64")))
    cases.append(("scatter_bool", """#! shapes: 5x6, 4x6, 4x6, 4, 4x1
#! ranges: idx=0:5, ir=0:5
input x: tensor<bool, 2>
input idx: tensor<int64, 2>
input s: tensor<bool, 2>
input ir: tensor<int64, 1>
input s1: tensor<bool, 2>
a = scatter(x, idx, s) {dim=0}
b = scatter(x, idx, s) {dim=0, reduce=amax}
c = scatter(x, idx, s) {dim=0, reduce=amin, include_self=false}
d = index_reduce(x, ir, s1) {dim=0, reduce=amax, include_self=false}
e = index_reduce(x, ir, s) {dim=0, reduce=none}
output a
output b
output c
output d
output e
""", ("-",)))
    cases.append(("scans", """#! shapes: 4x6, 4x6, 4x6, 4x6, 4x6, 4x6
#! ranges: p=0.5:1.5, a=-128:128, q=-3:4, u=0:256
#! special: x
input x: tensor<DT, 2>
input p: tensor<DT, 2>
input a: tensor<int8, 2>
input q: tensor<int32, 2>
input u: tensor<uint8, 2>
input b: tensor<bool, 2>
y1 = cumsum(x) {dim=0}
y2 = cumsum(p) {dim=1, exclusive=true}
y3 = cumprod(p) {dim=-1}
y4 = cumprod(p) {dim=0, exclusive=true}
y5 = cummax(x) {dim=1}
y6 = cummax(x) {dim=0, exclusive=true}
y7 = cumsum(a) {dim=1}
y8 = cumsum(a) {dim=0, exclusive=true}
y9 = cumprod(q) {dim=1}
y10 = cummax(a) {dim=1, exclusive=true}
y11 = cummax(u) {dim=0}
y12 = cumsum(b) {dim=1}
y13 = cummax(b) {dim=1, exclusive=true}
y14 = cumprod(b) {dim=0}
y15 = cummax(q) {dim=0, exclusive=true}
y16 = cummax(p) {dim=1}
output y1
output y2
output y3
output y4
output y5
output y6
output y7
output y8
output y9
output y10
output y11
output y12
output y13
output y14
output y15
output y16
""", ("float32", "bfloat16", "float64")))
    cases.append(("creation", """#! shapes: 3x4
#! scalars: 2.5, 3, -1.25
input x: tensor<DT, 2>
input f: scalar<float32>
input n: scalar<int64>
input d: scalar<float64>
const c: float64 = -2.7
const k: int64 = 5
const z: int64 = 0
const one: int64 = 1
const h: float32 = 0.5
const st: float64 = 0.1
const t: bool = true
a = size(x) {dim=1}
f1 = full([n, a], c) {dtype=int32}
f2 = full([a], f) {dtype=bfloat16}
f3 = full([k], n) {dtype=float32}
f4 = full([n, k], d) {dtype=int8}
f5 = full([], t) {dtype=float32}
f6 = full([n], h) {dtype=DT}
i1 = iota(k, z, one) {dtype=int64}
i2 = iota(a, h, st) {dtype=float32}
i3 = iota(n, n, n) {dtype=int32}
i4 = iota(k, c, h) {dtype=int8}
i5 = iota(a, d, f) {dtype=DT}
i6 = iota(k, k, c) {dtype=float64}
y = add(x, i2)
output f1
output f2
output f3
output f4
output f5
output f6
output i1
output i2
output i3
output i4
output i5
output i6
output y
""", ("float32", "bfloat16")))
    cases.append(("matmul", """#! shapes: 3x4, 4x5, 4, 2x3x4, 5, 5x4, 2x4x5, 4
input a: tensor<DT, 2>
input b: tensor<DT, 2>
input v: tensor<DT, 1>
input a3: tensor<DT, 3>
input bias: tensor<DT, 1>
input w: tensor<DT, 2>
input b3: tensor<DT, 3>
input v32: tensor<float32, 1>
m1 = matmul(a, b)
m2 = matmul(v, b)
m3 = matmul(a, v)
m4 = matmul(v, v)
m5 = matmul(a3, b)
m6 = matmul(a, b3)
m7 = matmul(a, v32)
l1 = linear(a, w, bias)
l2 = linear(a3, w)
l3 = linear(a, v)
s0 = sum(v) {axes=[]}
l4 = linear(a3, v, s0)
l5 = linear(v, w, bias)
output m1
output m2
output m3
output m4
output m5
output m6
output m7
output l1
output l2
output l3
output l4
output l5
""", ("float32", "bfloat16", "float64")))
    cases.append(("outputs_alias", """#! shapes: 3x4, 3x4
input x: tensor<DT, 2>
input y: tensor<DT, 2>
const one: float32 = 1
t = add(x, one)
c = cast(y) {dtype=DT}
output t {alias=0}
output c {alias=1}
""", ("float32",)))
    cases.append(("outputs_views", """#! shapes: 3x4
input x: tensor<DT, 2>
const one: float32 = 1
t = add(x, one)
p = permute(x) {perm=[1, 0]}
output p
output x
output t {stride_order=[1, 0]}
output p {stride_order=[0, 1]}
output t
""", ("float32", "bfloat16")))
    cases.append(("text_forms", """#! shapes: 2x3
# one statement per line or ';', comments, names like keywords, literals
input x: tensor<float32, 2>   # trailing comment
const a: float32 = .25; const b: float64 = -2.5E+1
const ninf: float32 = -inf
const pinf: float64 = inf
output = mul(x, a); input2 = add(output, b)
m = maximum(x, ninf); k = minimum(m, pinf)
const t: bool = false
w = where(t, x, m) {}
output input2
output k
output w
""", ("-",)))
    return cases


def check_hand_case(label, text, dtype):
    if dtype != "-":
        text = text.replace("DT", dtype).replace("TI", dtype)
    program = kf_torch.parse(text)
    gen = torch.Generator().manual_seed(2)
    inputs = make_inputs(program, text, gen)
    return check_program(label, text, inputs, program)


# ---------------------------------------------------------------------------
# 3. bench_torch.py's hand-written torch functions against the interpreter

def check_torch_fn(name, fn):
    text = kfuse_cases.case_text(name, "float32")
    program = kf_torch.parse(text)
    gen = torch.Generator().manual_seed(3)
    inputs = make_inputs(program, text, gen, bench_case=True)
    want = fn(*inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    got = program(*inputs)
    if len(got) != len(want):
        return f"{len(want)} outputs from torch_fn vs the interpreter's {len(got)}"
    sums = ("inner_sum", "outer_sum", "layernorm_bwd", "rmsnorm_bwd", "silu_bwd_bias_grad", "bias_gelu_tanh_bwd")
    for k, (w, g) in enumerate(zip(want, got)):
        why = compare(name, g, w.to(g.dtype), 1e-4 * (10 if name in sums else 1), whose="torch_fn's")
        if why:
            return f"output {k}: interpreter vs torch_fn: {why}"
    return None


# ---------------------------------------------------------------------------
# 4. Errors at parse time

def expect_error(text, kind, words):
    try:
        kf_torch.parse(text)
    except kind as e:
        missing = [w for w in words if w not in str(e)]
        return f"message lacks {missing}: {e}" if missing else None
    except Exception as e:  # noqa: BLE001
        return f"raised {type(e).__name__} ({e}), expected {kind.__name__}"
    return f"parsed, expected {kind.__name__}"


ERRORS = [
    ("random_uniform", NotImplementedError, ["uniform", "Philox"], """input s: scalar<int64>
const four: int64 = 4
const z: int64 = 0
const lo: float32 = -1
const hi: float32 = 1
r = uniform([four, four], lo, hi, s, z) {dtype=float32}
output r"""),
    ("random_normal", NotImplementedError, ["normal"], """const four: int64 = 4
const z: int64 = 0
const m: float32 = 0
r = normal([four], m, m, z, z) {dtype=float32}
output r"""),
    ("mesh", NotImplementedError, ["mesh"], "mesh 2\ninput x: tensor<float32, 2>\ny = neg(x)\noutput y"),
    ("shard", NotImplementedError, ["shard"], "input x: tensor<float32, 2>\nshard x {dim=0}\ny = neg(x)\noutput y"),
    ("allreduce", NotImplementedError, ["allreduce"], "input x: tensor<float32, 2>\ny = allreduce(x) {reduce=0, ranks=2}\noutput y"),
    ("unknown_op", kf_torch.KfTextError, ["unknown op 'frobnicate'"], "input x: tensor<float32, 2>\ny = frobnicate(x)\noutput y"),
    ("unknown_name", kf_torch.KfTextError, ["unknown name 'z'"], "input x: tensor<float32, 2>\ny = neg(z)\noutput y"),
    ("nested_call", kf_torch.KfTextError, ["calls do not nest"], "input x: tensor<float32, 2>\ny = neg(exp(x))\noutput y"),
    ("no_outputs", kf_torch.KfTextError, ["no outputs"], "input x: tensor<float32, 2>\ny = neg(x)"),
    ("int8_uint8", kf_torch.KfTextError, ["int8 with uint8"], "input a: tensor<int8, 1>\ninput b: tensor<uint8, 1>\ny = add(a, b)\noutput y"),
    ("bool_sub", kf_torch.KfTextError, ["not bool"], "input a: tensor<bool, 1>\ny = sub(a, a)\noutput y"),
    ("float_bitwise", kf_torch.KfTextError, ["integer or bool"], "input a: tensor<float32, 1>\ny = bitwise_not(a)\noutput y"),
    ("missing_attr", kf_torch.KfTextError, ["requires attribute 'dtype'"], "input a: tensor<float32, 1>\ny = cast(a)\noutput y"),
    ("bad_attr", kf_torch.KfTextError, ["unknown attribute 'axis'"], "input a: tensor<float32, 2>\ny = sum(a) {axis=[1]}\noutput y"),
    ("axis_range", kf_torch.KfTextError, ["out of range"], "input a: tensor<float32, 2>\ny = sum(a) {axes=[2]}\noutput y"),
    ("redefined", kf_torch.KfTextError, ["already defined"], "input a: tensor<float32, 2>\ny = neg(a)\ny = exp(a)\noutput y"),
    ("scalar_output", kf_torch.KfTextError, ["must be tensors"], "const c: float32 = 1\noutput c"),
    ("shape_from_data", kf_torch.KfTextError, ["shape entry"], """input a: tensor<float32, 1>
input n: scalar<float32>
c = cast(n) {dtype=int64}
y = reshape(a, [c])
output y"""),
]
if not hasattr(torch, "float8_e4m3fn"):
    ERRORS.append(("float8_on_old_torch", NotImplementedError, ["float8_e4m3fn"],
                   "input a: tensor<float8_e4m3fn, 1>\ny = cast(a) {dtype=float32}\noutput y"))


def check_interface():
    p = kf_torch.parse("""input x: tensor<bfloat16, 2>
input s: scalar<float64>
input i: tensor<int64, 1>
y = mul(x, s)
z = index_select(x, i) {dim=0}
output y {alias=0}
output z""")
    want = (["x", "s", "i"], ["tensor", "scalar", "tensor"], ["bfloat16", "float64", "int64"], [2, 0, 1],
            ["y", "z"], [0, None])
    got = (p.input_names, p.input_kinds, p.input_dtypes, p.input_ranks, p.output_names, p.output_aliases)
    if got != want:
        return f"attributes {got} != {want}"
    x = torch.ones(3, 4, dtype=torch.bfloat16)
    outs = p(x, 2.0, torch.tensor([2, 0]))
    if not isinstance(outs, tuple) or len(outs) != 2 or outs[0].dtype != torch.bfloat16 or float(outs[0][0, 0]) != 2.0:
        return f"call returned {outs!r}"
    if float(x[0, 0]) != 1.0:
        return "wrote into the aliased input"
    return None


# ---------------------------------------------------------------------------

kfuse = None  # imported by main(): the hand-written cases load without it


def main():
    global kfuse
    try:
        import kfuse
    except ImportError as e:
        print(f"test_kf_torch: FAIL: cannot import kfuse ({e}); set PYTHONPATH=bindings/python")
        return 1
    print(f"torch {torch.__version__}, kfuse library {kfuse.library_path()}")
    # 1. bench cases
    for name in bench_case_names():
        for storage in ("float32", "bfloat16"):
            record(f"case {name} {storage}", lambda n=name, s=storage: check_bench_case(n, s))
    # 2. hand-written fusions
    for label, text, dtypes in hand_cases():
        for dt in dtypes:
            record(f"op {label}" + ("" if dt == "-" else f" {dt}"), lambda t=text, d=dt, l=label: check_hand_case(l, t, d))
    # 3. bench_torch.py's torch functions
    try:
        import bench_torch
    except Exception as e:  # noqa: BLE001
        failures.append(("import bench_torch", f"{type(e).__name__}: {e}"))
        print(f"FAIL import bench_torch: {e}")
    else:
        for name in bench_case_names():
            try:
                fn = bench_torch.torch_fn(name, torch.float32)
            except ValueError:
                continue  # no hand-written function: bench_torch.py runs the interpreter itself
            record(f"torch_fn {name}", lambda n=name, f=fn: check_torch_fn(n, f))
    # 4. errors and the interface
    for label, kind, words, text in ERRORS:
        record(f"error {label}", lambda t=text, k=kind, w=words: expect_error(t, k, w))
    record("interface", check_interface)
    print(f"test_kf_torch: {len(passed)} passed, {len(failures)} failed, {len(skipped)} skipped")
    for label, why in skipped:
        print(f"  skipped {label}: {why}")
    for label, why in failures:
        print(f"  FAILED {label}: {why}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
