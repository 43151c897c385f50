"""kfuse's fusion text (docs/text-format.md) interpreted on torch tensors.

    program = kf_torch.parse(text)
    outputs = program(*inputs)        # a tuple of new torch tensors, in output order

For any fusion text, a torch function that computes the same outputs as
kfuse (docs/semantics.md), so that torch eager can check kfuse and
`torch.compile` of the same function can be timed against it
(bench/bench_torch.py). Stdlib and torch only.

- `parse` does all the work that does not depend on the inputs' values or
  sizes: names, dtype and rank inference (kfuse's promotion rules), attribute
  checks, constants held in their dtype, constant folding of scalar
  arithmetic. Anything this module cannot compute like kfuse (random ops,
  device meshes, a dtype this torch lacks) raises there, never later.
- A call is a plain loop over the pre-parsed op records, each a closure
  calling torch functions: no data-dependent Python control flow, no
  `.item()`, nothing but torch, so torch.compile (dynamo) traces it whole.
- Tensor inputs are torch tensors of the declared dtype and rank (a bool
  input also takes uint8/int8, as kfuse does); scalar inputs are Python
  numbers. Outputs are new tensors: an output that would share memory with
  an input (a view, a no-op cast) is copied, so a caller may write an
  `{alias=k}` output into input k itself.

Numerics: kfuse computes floats in double and rounds once to the output
dtype. Here float64 ops compute in float64, float32 ops in float32, and
float16/bfloat16/float8 ops in float32 with one cast to the output dtype
(what a framework user writes); operands are first converted to the op's
compute dtype as kfuse does (`f16 == 0.1` compares with 0.1 rounded to
float16). Integer and bool ops compute in int64 and wrap to the output
width (exactly kfuse's rule). Reductions and scans of float16/bfloat16
accumulate in float32; integer sums, products and scans in int64.
matmul and linear run in the promoted dtype itself (torch accumulates
float16/bfloat16 products in float32 and rounds once, as kfuse does up to
the order of the sum).
"""
import math
import struct

import torch
import torch.nn.functional as F

__all__ = ["parse", "Program", "KfTextError"]


class KfTextError(ValueError):
    """A text that kfuse's parser or builder would reject."""


# ---------------------------------------------------------------------------
# dtypes

_FLOATS = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")
_INTS = ("int64", "int32", "int8", "uint8")
_DTYPES = _FLOATS + _INTS + ("bool",)
_NARROW = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")  # computed in float32
_SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1,
         "int64": 8, "int32": 4, "int8": 1, "uint8": 1, "bool": 1}


def _is_float(t):
    return t in _FLOATS


def _is_int(t):
    return t in _INTS


def _category(t):
    return 0 if t == "bool" else (1 if t in _INTS else 2)


def _torch_dtype(name):
    t = getattr(torch, name, None)
    if not isinstance(t, torch.dtype):
        raise NotImplementedError(f"dtype {name}: this torch ({torch.__version__}) has no torch.{name}")
    return t


def _promote(a, b):
    """kfuse's promote_types (core/ir/dtype.cpp): torch's table."""
    if a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    if ca == 1:
        if {a, b} == {"int8", "uint8"}:
            raise KfTextError("cannot promote int8 with uint8: torch gives int16, which kfuse lacks; cast one operand first")
        return a if _SIZE[a] >= _SIZE[b] else b
    if a.startswith("float8") or b.startswith("float8"):
        raise KfTextError(f"cannot promote {a} with {b}: a float8 dtype promotes with no other floating dtype")
    rank = {"float64": 3, "float32": 2}
    ra, rb = rank.get(a, 1), rank.get(b, 1)
    if ra == 1 and rb == 1:
        return "float32"
    return a if ra >= rb else b


def _result_type(vals):
    """kfuse's result_type (core/ir/type_promotion.cpp): tensors of rank >= 1,
    rank-0 tensors and scalars in three tiers; scalars act like Python numbers."""
    def update(state, t):
        return t if state is None else _promote(state, t)

    def combine(higher, lower):
        if higher is None:
            return lower
        if lower is None:
            return higher
        if _is_float(higher):
            return higher
        if higher == "bool" or _category(lower) > _category(higher):
            return _promote(higher, lower)
        return higher

    all_scalars = all(v.is_scalar for v in vals)
    dim = zero = wrapped = None
    for v in vals:
        if all_scalars:
            dim = update(dim, v.dtype)
        elif v.is_scalar:
            wrapped = update(wrapped, "float32" if _is_float(v.dtype) else ("int64" if _is_int(v.dtype) else "bool"))
        elif v.rank == 0:
            zero = update(zero, v.dtype)
        else:
            dim = update(dim, v.dtype)
    return combine(dim, combine(zero, wrapped))


def _td(cd):
    """The dtype torch computes in for kfuse compute dtype `cd`."""
    if cd == "float64":
        return "float64"
    if _is_float(cd):
        return "float32"
    return "int64"


def _py(t):
    """The Python type of a number held in dtype t."""
    return float if _is_float(t) else (bool if t == "bool" else int)


def _wrap_int(v, t):
    """An integer wrapped to dtype t's width (two's complement)."""
    if t == "bool":
        return v != 0
    if t == "uint8":
        return v % 256
    bits = _SIZE[t] * 8
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


def _hold(v, t):
    """Number v as kfuse holds it in dtype t (floats rounded to the format)."""
    if t == "bool":
        return bool(v)
    if _is_int(t):
        return int(v)
    if t == "float64":
        return float(v)
    return torch.tensor(float(v), dtype=torch.float64).to(_torch_dtype(t)).item()


def _convert(v, src, dst):
    """Number v held in src converted to dst as kfuse converts (casts and
    compute dtypes): float -> int truncates (through int64, then wraps),
    -> bool is != 0."""
    if src == dst:
        return v
    if _is_float(src) and _is_int(dst) and v != v:
        return 0  # NaN -> 0, as kfuse
    t = torch.tensor(v, dtype=_torch_dtype(src))
    if _is_float(src) and _is_int(dst):
        t = t.to(torch.int64)
    elif src == "int64" and dst in _NARROW:
        t = t.to(torch.float64)
    return t.to(_torch_dtype(dst)).item()


# ---------------------------------------------------------------------------
# The op table (core/ir/ops.def): type rule of each op.

_UNARY_RULES = {
    "neg": "SameNumeric", "abs": "SameNumeric", "relu": "SameNumeric", "floor": "SameNumeric",
    "ceil": "SameNumeric", "round": "SameNumeric", "trunc": "SameNumeric", "sign": "Same",
    "isnan": "ToBool", "isinf": "ToBool", "isfinite": "ToBool", "logical_not": "ToBool",
    "bitwise_not": "IntegralOnly",
}
for _n in ("exp exp2 expm1 log log2 log10 log1p sqrt rsqrt reciprocal sin cos tan asin acos atan sinh cosh "
           "tanh asinh acosh atanh sigmoid gelu gelu_tanh silu erf erfc").split():
    _UNARY_RULES[_n] = "ToFloat"
_BINARY_RULES = {
    "add": "Promote", "sub": "PromoteNumeric", "mul": "Promote", "div": "PromoteToFloat",
    "fmod": "PromoteNumeric", "remainder": "PromoteNumeric", "pow": "PromoteNumeric",
    "atan2": "PromoteToFloat", "maximum": "Promote", "minimum": "Promote",
    "bitwise_and": "PromoteIntegral", "bitwise_or": "PromoteIntegral", "bitwise_xor": "PromoteIntegral",
    "shift_left": "PromoteIntOnly", "shift_right": "PromoteIntOnly",
}
for _n in "eq ne lt le gt ge logical_and logical_or logical_xor".split():
    _BINARY_RULES[_n] = "Compare"
_TERNARY_RULES = {"where": "Where", "clamp": "PromoteNumeric", "lerp": "PromoteFloatOnly", "fma": "PromoteNumeric"}
_POINTWISE_RULES = {**_UNARY_RULES, **_BINARY_RULES, **_TERNARY_RULES}
_ARITY = {**{k: 1 for k in _UNARY_RULES}, **{k: 2 for k in _BINARY_RULES}, **{k: 3 for k in _TERNARY_RULES}}
_REDUCTIONS = ("sum", "prod", "max", "min", "mean", "var", "var_mean", "argmax", "argmin")
_SHAPE_ARITHMETIC = ("add", "sub", "mul", "maximum", "minimum")
_RANDOM = ("uniform", "normal")
_COMMUNICATION = ("allreduce", "allgather", "reduce_scatter", "shard_slice")
_SCATTER_REDUCE = ("none", "sum", "prod", "mean", "amax", "amin")
_END = (1 << 63) - 1

# Text signatures (core/text/text_printer.cpp): (list position or None,
# min names, max names, {attr: (kind, default)}); default _REQ = required.
_REQ = object()
_REDUCE_ATTRS = {"axes": ("list", []), "keepdim": ("bool", False)}
_SIGS = {
    "cast": (None, 1, 1, {"dtype": ("dtype", _REQ)}),
    "var": (None, 1, 1, {**_REDUCE_ATTRS, "correction": ("int", 1)}),
    "var_mean": (None, 1, 1, {**_REDUCE_ATTRS, "correction": ("int", 1)}),
    "broadcast_in_dim": (1, 1, 1, {"dims": ("list", _REQ)}),
    "expand": (1, 1, 1, {}),
    "reshape": (1, 1, 1, {}),
    "permute": (None, 1, 1, {"perm": ("list", _REQ)}),
    "squeeze": (None, 1, 1, {"dims": ("list", _REQ)}),
    "unsqueeze": (None, 1, 1, {"dim": ("int", _REQ)}),
    "slice": (None, 1, 1, {"dim": ("int", _REQ), "start": ("int", 0), "stop": ("stop", _END), "step": ("int", 1)}),
    "pad": (None, 2, 2, {"pads": ("list", _REQ)}),
    "cat": (None, 1, None, {"dim": ("int", _REQ)}),
    "index_select": (None, 2, 2, {"dim": ("int", _REQ)}),
    "gather": (None, 2, 2, {"dim": ("int", _REQ)}),
    "size": (None, 1, 1, {"dim": ("int", _REQ)}),
    "full": (0, 1, 1, {"dtype": ("dtype", _REQ)}),
    "iota": (None, 3, 3, {"dtype": ("dtype", _REQ)}),
    "uniform": (0, 4, 4, {"dtype": ("dtype", _REQ)}),
    "normal": (0, 4, 4, {"dtype": ("dtype", _REQ)}),
    "matmul": (None, 2, 2, {}),
    "linear": (None, 2, 3, {}),
    "segment_set": (None, 1, 1, {}),
}
for _n in ("scatter", "index_reduce"):
    _SIGS[_n] = (None, 3, 3, {"dim": ("int", _REQ), "reduce": ("reduce", 0), "include_self": ("bool", True),
                              "deterministic": ("bool", False)})
for _n in ("cumsum", "cumprod", "cummax"):
    _SIGS[_n] = (None, 1, 1, {"dim": ("int", _REQ), "exclusive": ("bool", False)})
for _n in ("sum", "prod", "max", "min", "mean", "argmax", "argmin"):
    _SIGS[_n] = (None, 1, 1, dict(_REDUCE_ATTRS))
for _n, _k in _ARITY.items():
    if _n not in _SIGS:
        _SIGS[_n] = (None, _k, _k, {})
_OUTPUT_ATTRS = {"stride_order": ("list", None), "alias": ("int", None)}


# ---------------------------------------------------------------------------
# Lexer

class _Tok:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return {"end": "end of line"}.get(self.kind, repr(self.text))


def _statements(text):
    """Yields the token list of each statement (lines and ';' end them)."""
    if "\0" in text:
        raise KfTextError("NUL byte (0x00) in the text")
    for lineno, line in enumerate(text.split("\n"), 1):
        toks = []
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c in " \t\r":
                i += 1
            elif c == "#":
                break
            elif c == ";":
                if toks:
                    yield toks
                toks = []
                i += 1
            elif c.isascii() and (c.isalpha() or c == "_"):
                j = i + 1
                while j < n and line[j].isascii() and (line[j].isalnum() or line[j] == "_"):
                    j += 1
                toks.append(_Tok("id", line[i:j], lineno, i + 1))
                i = j
            elif c.isdigit() or (c == "." and i + 1 < n and line[i + 1].isdigit()):
                j = i + 1
                while j < n and (line[j].isascii() and (line[j].isalnum() or line[j] in "_.")
                                 or (line[j] in "+-" and line[j - 1] in "eE")):
                    j += 1
                toks.append(_Tok("num", line[i:j], lineno, i + 1))
                i = j
            elif c in "()[]{},=:<>-":
                toks.append(_Tok("p", c, lineno, i + 1))
                i += 1
            else:
                raise KfTextError(f"line {lineno}, column {i + 1}: unexpected character {c!r}")
        if toks:
            yield toks


class _Reader:
    """One statement's tokens, read left to right."""

    def __init__(self, toks):
        self.toks, self.i = toks, 0
        self.line = toks[0].line

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else _Tok("end", "", self.line, 0)

    def take(self):
        t = self.peek()
        self.i += 1
        return t

    def error(self, msg, tok=None):
        tok = tok or self.peek()
        where = f"line {tok.line}" + (f", column {tok.col}" if tok.col else "")
        raise KfTextError(f"{where}: {msg}")

    def expect(self, p, what):
        t = self.peek()
        if t.kind != "p" or t.text != p:
            self.error(f"expected '{p}' {what}, got {t!r}")
        return self.take()

    def is_p(self, p):
        t = self.peek()
        return t.kind == "p" and t.text == p

    def name(self, what="a name"):
        t = self.peek()
        if t.kind != "id":
            self.error(f"expected {what}, got {t!r}")
        return self.take()

    def integer(self, what="an integer"):
        neg = self.is_p("-")
        if neg:
            self.take()
        t = self.peek()
        if t.kind != "num" or not t.text.isdigit():
            self.error(f"expected {what}, got {t!r}")
        self.take()
        v = -int(t.text) if neg else int(t.text)
        if not -(1 << 63) <= v < (1 << 63):
            self.error(f"integer literal '{'-' if neg else ''}{t.text}' does not fit in int64", t)
        return v

    def boolean(self, what="true or false"):
        t = self.peek()
        if t.kind == "id" and t.text in ("true", "false"):
            self.take()
            return t.text == "true"
        self.error(f"expected {what}, got {t!r}")

    def float_literal(self):
        neg = self.is_p("-")
        if neg:
            self.take()
        t = self.take()
        if t.kind == "id" and t.text == "inf":
            v = math.inf
        elif t.kind == "id" and t.text == "nan":
            v = math.nan
            if self.is_p("("):  # nan(0xPAYLOAD): a NaN all the same
                self.take()
                p = self.take()
                if p.kind != "num" or not p.text.startswith("0x"):
                    self.error(f"expected a NaN payload, got {p!r}", p)
                v = struct.unpack("<d", struct.pack("<Q", (0x7FF << 52) | int(p.text, 16)))[0]
                self.expect(")", "after the NaN payload")
        elif t.kind == "num":
            try:
                v = float(t.text)
            except ValueError:
                self.error(f"malformed number '{t.text}'", t)
            if math.isinf(v):
                self.error(f"float literal '{t.text}' is out of range for float64", t)
        else:
            self.error(f"expected a number, inf or nan, got {t!r}", t)
        return -v if neg else v

    def dtype(self):
        t = self.peek()
        if t.kind == "id" and t.text in _DTYPES:
            return self.take().text
        self.error(f"expected a dtype ({', '.join(_DTYPES)}), got {t!r}")

    def int_list(self, what):
        self.expect("[", what)
        items = []
        if not self.is_p("]"):
            while True:
                items.append(self.integer("an integer in the list"))
                if not self.is_p(","):
                    break
                self.take()
        self.expect("]", "after the list")
        return items

    def end(self):
        if self.peek().kind != "end":
            self.error(f"expected end of line after the statement, got {self.peek()!r}")


# ---------------------------------------------------------------------------
# Values known at parse time

class _Val:
    """A value of the fusion: kfuse's kind/dtype/rank, and how it is held
    at run time (rep): 'const' (a Python number, `const`), 'num' (a Python
    number read or computed per call: integer scalar inputs, sizes, shape
    arithmetic, float64 scalar inputs), 'tensor' (a torch tensor: tensor
    values, and 0-dim tensors for other scalars)."""
    __slots__ = ("id", "name", "is_scalar", "dtype", "rank", "rep", "const", "shape_scalar", "may_alias")

    def __init__(self, id_, name, is_scalar, dtype, rank, rep, const=None, shape_scalar=False, may_alias=False):
        self.id, self.name, self.is_scalar, self.dtype, self.rank = id_, name, is_scalar, dtype, rank
        self.rep, self.const, self.shape_scalar, self.may_alias = rep, const, shape_scalar, may_alias


def _norm_dim(d, rank, what, op):
    dd = d + rank if d < 0 else d
    if not 0 <= dd < rank:
        raise KfTextError(f"{op}: {what} {d} is out of range for rank {rank} (expected [{-rank}, {rank - 1}])")
    return dd


# ---------------------------------------------------------------------------
# Pointwise implementations, on operands already in the torch compute dtype.

def _sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


_FLOAT_UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "exp2": torch.exp2, "expm1": torch.expm1,
    "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p, "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
    "tanh": torch.tanh, "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh,
    "sigmoid": torch.sigmoid, "relu": torch.relu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu, "erf": torch.erf, "erfc": torch.erfc,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc, "sign": _sign,
    "isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite, "logical_not": torch.logical_not,
}
_INT_UNARY = {  # int64 operands (bool operands as 0/1)
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil,
    "round": torch.round, "trunc": torch.trunc, "sign": _sign,
    "isnan": lambda x: torch.zeros_like(x, dtype=torch.bool), "isinf": lambda x: torch.zeros_like(x, dtype=torch.bool),
    "isfinite": lambda x: torch.ones_like(x, dtype=torch.bool), "logical_not": torch.logical_not,
    "bitwise_not": torch.bitwise_not,
}
_BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "fmod": torch.fmod,
    "remainder": torch.remainder, "pow": torch.pow, "atan2": torch.atan2, "maximum": torch.maximum,
    "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
    "ge": torch.ge, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor, "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
}
# Ops whose torch function takes a Python number as its second operand.
_NUMBER_OK_SECOND = {"add", "sub", "mul", "div", "fmod", "remainder", "pow", "eq", "ne", "lt", "le", "gt", "ge",
                     "bitwise_and", "bitwise_or", "bitwise_xor"}


def _shift(op, width):
    """kfuse's shifts on int64 operands: a shift < 0 or >= the compute
    dtype's width gives 0 (left) or the sign fill (right)."""
    def left(a, b):
        return torch.where((b < 0) | (b >= width), torch.zeros_like(a), torch.bitwise_left_shift(a, b.clamp(0, 63)))

    def right(a, b):
        return torch.bitwise_right_shift(a, torch.where((b < 0) | (b >= width), torch.full_like(b, 63), b))
    return left if op == "shift_left" else right


def _nan_to_zero(x):
    return torch.where(torch.isnan(x), torch.zeros_like(x), x)


def _clamp(x, lo, hi):
    return torch.minimum(torch.maximum(x, lo), hi)


def _fma(a, b, c):
    return a * b + c


# ---------------------------------------------------------------------------
# Program

class Program:
    """A parsed fusion; call it on torch tensors (see the module's doc)."""

    def __init__(self):
        self.input_names, self.input_kinds, self.input_dtypes, self.input_ranks = [], [], [], []
        self.output_names, self.output_aliases = [], []
        self._vals = []          # _Val by value id
        self._names = {}         # name -> value id
        self._inputs = []        # (value id, converter(x, dev))
        self._ops = []           # closures (env, dev) -> None
        self._outs = []          # closures env -> tensor
        self._device_input = None

    def __repr__(self):
        return (f"<kf_torch.Program inputs={self.input_names} outputs={self.output_names} "
                f"ops={len(self._ops)}>")

    def __call__(self, *inputs):
        if len(inputs) != len(self._inputs):
            raise TypeError(f"expected {len(self._inputs)} inputs ({', '.join(self.input_names)}), got {len(inputs)}")
        if self._device_input is not None:
            dev = inputs[self._device_input].device
        else:
            dev = torch.device("cpu")
        env = list(self._env0)
        for (vid, convert), x in zip(self._inputs, inputs):
            env[vid] = convert(x, dev)
        for op in self._ops:
            op(env, dev)
        return tuple([out(env) for out in self._outs])


def parse(text):
    """Parse a fusion text into a Program (raises KfTextError for a text kfuse
    would reject, NotImplementedError for what this interpreter cannot run)."""
    return _Parser(text).run()


class _Parser:
    def __init__(self, text):
        self.text = text
        self.p = Program()
        self.env0 = []

    # --- values -------------------------------------------------------------

    def new_val(self, r, name_tok, **kw):
        if name_tok.text in self.p._names:
            r.error(f"'{name_tok.text}' is already defined", name_tok)
        v = _Val(len(self.p._vals), name_tok.text, **kw)
        self.p._vals.append(v)
        self.p._names[name_tok.text] = v.id
        self.env0.append(v.const if v.rep == "const" else None)
        return v

    def ref(self, r, what="a value name"):
        t = r.name(what)
        if t.text not in self.p._names:
            if r.is_p("("):
                r.error(f"unknown name '{t.text}' (calls do not nest: bind {t.text}(...) to a name first)", t)
            r.error(f"unknown name '{t.text}'", t)
        return self.p._vals[self.p._names[t.text]]

    # --- statements -----------------------------------------------------------

    def run(self):
        for toks in _statements(self.text):
            r = _Reader(toks)
            first, second = r.peek(), r.peek(1)
            kw = first.kind == "id" and second.kind == "id"
            if first.kind != "id":
                r.error(f"expected a statement, got {first!r}")
            if first.text == "mesh" and second.kind == "num" or kw and first.text in ("shard", "replicate"):
                raise NotImplementedError(f"line {first.line}: '{first.text}': device meshes (docs/multidevice.md) "
                                          "are not supported by kf_torch")
            if kw and first.text == "input":
                self.input_statement(r)
            elif kw and first.text == "const":
                self.const_statement(r)
            elif kw and first.text == "output":
                self.output_statement(r)
            elif kw:
                r.error(f"unknown statement '{first.text}'")
            else:
                self.op_statement(r)
            r.end()
        if not self.p._outs:
            raise KfTextError("the text defines no outputs")
        self.p._env0 = tuple(self.env0)
        return self.p

    def input_statement(self, r):
        r.take()
        name = r.name()
        r.expect(":", "after the input's name")
        kind = r.name("'tensor' or 'scalar'")
        if kind.text == "tensor":
            r.expect("<", "after 'tensor'")
            dtype = r.dtype()
            r.expect(",", "after the tensor's dtype")
            rank = r.integer("a rank")
            r.expect(">", "after the tensor's rank")
            if not 0 <= rank <= 16:
                r.error(f"rank {rank} is out of range", name)
            tdt = _torch_dtype(dtype)
            v = self.new_val(r, name, is_scalar=False, dtype=dtype, rank=rank, rep="tensor", may_alias=True)
            if self.p._device_input is None:
                self.p._device_input = len(self.p._inputs)
            iname = name.text

            def convert(x, dev, tdt=tdt, rank=rank, iname=iname, is_bool=dtype == "bool"):
                if x.dim() != rank:
                    raise ValueError(f"input {iname}: expected rank {rank}, got rank {x.dim()}")
                if x.dtype != tdt:
                    if is_bool and x.dtype in (torch.uint8, torch.int8):
                        return x != 0
                    raise TypeError(f"input {iname}: expected {tdt}, got {x.dtype}")
                return x
        elif kind.text == "scalar":
            r.expect("<", "after 'scalar'")
            dtype = r.dtype()
            r.expect(">", "after the scalar's dtype")
            tdt = _torch_dtype(dtype)
            rank = 0
            if _is_float(dtype) and dtype != "float64":
                v = self.new_val(r, name, is_scalar=True, dtype=dtype, rank=0, rep="tensor")

                def convert(x, dev, tdt=tdt):  # held in its dtype, as a 0-dim tensor
                    if isinstance(x, torch.Tensor):
                        return x.to(device=dev, dtype=tdt).reshape(())
                    return torch.tensor(float(x), dtype=tdt, device=dev)
            else:
                v = self.new_val(r, name, is_scalar=True, dtype=dtype, rank=0, rep="num", shape_scalar=_is_int(dtype))
                if dtype == "float64":
                    def convert(x, dev):
                        return float(x)
                elif dtype == "bool":
                    def convert(x, dev):
                        return bool(x)
                else:  # taken as given: an int outside the dtype's range is the caller's error
                    def convert(x, dev):
                        return int(x)
        else:
            r.error(f"expected 'tensor' or 'scalar', got {kind!r}", kind)
        self.p._inputs.append((v.id, convert))
        self.p.input_names.append(name.text)
        self.p.input_kinds.append(kind.text)
        self.p.input_dtypes.append(dtype)
        self.p.input_ranks.append(rank)

    def const_statement(self, r):
        r.take()
        name = r.name()
        r.expect(":", "after the constant's name")
        dtype = r.dtype()
        r.expect("=", "after the constant's dtype")
        lit = r.peek()
        if _is_float(dtype):
            value = _hold(r.float_literal(), dtype)
        elif dtype == "bool":
            value = r.boolean()
        else:
            value = r.integer("an integer literal")
            lo, hi = {"int64": (-(1 << 63), 1 << 63), "int32": (-(1 << 31), 1 << 31), "int8": (-128, 128),
                      "uint8": (0, 256)}[dtype]
            if not lo <= value < hi:
                r.error(f"constant {value} does not fit {dtype}", lit)
        self.new_val(r, name, is_scalar=True, dtype=dtype, rank=0, rep="const", const=value,
                     shape_scalar=_is_int(dtype))

    def output_statement(self, r):
        r.take()
        v = self.ref(r)
        attrs = self.attributes(r, _OUTPUT_ATTRS, "output")
        if v.is_scalar:
            r.error(f"output {v.name}: outputs must be tensors, got a scalar")
        alias, order = attrs["alias"], attrs["stride_order"]
        if alias is not None:
            if not 0 <= alias < len(self.p._inputs):
                r.error(f"output {v.name}: alias={alias} is not an input index")
            a = self.p._vals[self.p._inputs[alias][0]]
            if a.is_scalar or a.rank != v.rank or a.dtype != v.dtype:
                r.error(f"output {v.name}: alias={alias} names input {a.name}, not a tensor of {v.dtype} rank {v.rank}")
        if order is not None:
            order = [_norm_dim(d, v.rank, "stride_order dim", "output") for d in order]
            if sorted(order) != list(range(v.rank)):
                r.error(f"output {v.name}: stride_order {order} is not a permutation of {v.rank} dims")
        vid, copy = v.id, v.may_alias
        if order is not None and order != list(range(v.rank)):
            inverse = [order.index(d) for d in range(v.rank)]

            def out(env, vid=vid, order=order, inverse=inverse):
                return env[vid].permute(order).clone(memory_format=torch.contiguous_format).permute(inverse)
        elif order is not None:
            def out(env, vid=vid):
                return env[vid].clone(memory_format=torch.contiguous_format)
        elif copy:
            def out(env, vid=vid):
                return env[vid].clone()
        else:
            def out(env, vid=vid):
                return env[vid]
        self.p._outs.append(out)
        self.p.output_names.append(v.name)
        self.p.output_aliases.append(alias)

    def attributes(self, r, sig, owner):
        got = {}
        if r.is_p("{"):
            r.take()
            if not r.is_p("}"):
                while True:
                    t = r.name("an attribute name")
                    if t.text not in sig:
                        r.error(f"unknown attribute '{t.text}' for {owner} (expected {', '.join(sig) or 'none'})", t)
                    if t.text in got:
                        r.error(f"attribute '{t.text}' is given twice", t)
                    r.expect("=", "after the attribute name")
                    kind = sig[t.text][0]
                    of = f" for attribute '{t.text}'"
                    if kind == "list":
                        got[t.text] = r.int_list(of)
                    elif kind == "int":
                        got[t.text] = r.integer("an integer" + of)
                    elif kind == "bool":
                        got[t.text] = r.boolean("true or false" + of)
                    elif kind == "dtype":
                        got[t.text] = r.dtype()
                    elif kind == "stop":
                        if r.peek().kind == "id" and r.peek().text == "end":
                            r.take()
                            got[t.text] = _END
                        else:
                            got[t.text] = r.integer("an integer or 'end'" + of)
                    elif kind == "reduce":
                        w = r.name("none, sum, prod, mean, amax or amin" + of)
                        if w.text not in _SCATTER_REDUCE:
                            r.error(f"unknown reduce '{w.text}'{of}", w)
                        got[t.text] = _SCATTER_REDUCE.index(w.text)
                    if not r.is_p(","):
                        break
                    r.take()
            r.expect("}", "after the attributes")
        for k, (kind, default) in sig.items():
            if k not in got:
                if default is _REQ:
                    r.error(f"{owner} requires attribute '{k}'")
                got[k] = list(default) if isinstance(default, list) else default
        return got

    def op_statement(self, r):
        results = [r.name()]
        while r.is_p(","):
            r.take()
            results.append(r.name())
        r.expect("=", "after the result names")
        op_tok = r.name("an op name")
        op = op_tok.text
        if op in _RANDOM:
            raise NotImplementedError(
                f"line {op_tok.line}: '{op}': kfuse's random ops draw from its own Philox 4x32-10 stream "
                "(docs/semantics.md), which torch cannot reproduce; kf_torch does not support them")
        if op in _COMMUNICATION:
            raise NotImplementedError(f"line {op_tok.line}: '{op}': device mesh communication is not supported "
                                      "by kf_torch (and kfuse's parser rejects it)")
        if op not in _SIGS:
            r.error(f"unknown op '{op}'", op_tok)
        nres = 2 if op == "var_mean" else 1
        if len(results) != nres:
            r.error(f"{op} has {nres} result{'s' if nres > 1 else ''}, got {len(results)} names", op_tok)
        list_pos, lo, hi, attr_sig = _SIGS[op]
        r.expect("(", "after the op name")
        args, shape = [], None
        count = 0
        if not r.is_p(")"):
            while True:
                if count == list_pos:
                    r.expect("[", f"(a shape list) as argument {count + 1} of {op}")
                    shape = []
                    if not r.is_p("]"):
                        while True:
                            shape.append(self.ref(r, "a value name in the shape list"))
                            if not r.is_p(","):
                                break
                            r.take()
                    r.expect("]", "after the shape list")
                else:
                    args.append(self.ref(r, f"a value name as argument {count + 1} of {op}"))
                count += 1
                if not r.is_p(","):
                    break
                r.take()
        r.expect(")", "after argument list")
        nlist = 0 if list_pos is None else 1
        if not (lo + nlist <= count and (hi is None or count <= hi + nlist)) or (list_pos is not None and shape is None):
            r.error(f"{op}: wrong number of arguments ({count})", op_tok)
        attrs = self.attributes(r, attr_sig, op)
        try:
            self.build(op, results, args, shape, attrs, r)
        except KfTextError as e:
            if str(e).startswith("line "):
                raise
            raise KfTextError(f"line {op_tok.line}, column {op_tok.col}: {e}") from None

    # --- op records -------------------------------------------------------------

    def emit(self, fn):
        self.p._ops.append(fn)

    def operand(self, v, cd, td, need_tensor):
        """A getter (env, dev) -> v converted to compute dtype cd, held in the
        torch compute dtype td: a tensor, or a Python number where allowed."""
        tdt = _torch_dtype(td)
        i = v.id
        if v.rep == "const":
            c = _py(td)(_convert(v.const, v.dtype, cd) if _is_float(cd) else v.const)
            if need_tensor:
                return lambda env, dev: torch.full((), c, dtype=tdt, device=dev)
            return lambda env, dev: c
        if v.rep == "num":
            if cd in _NARROW:  # round to cd first (0.1 in a bfloat16 op is 0.10009765625)
                cdt = _torch_dtype(cd)
                src = _py(v.dtype)
                return lambda env, dev: torch.full((), src(env[i]), dtype=cdt, device=dev).to(tdt)
            conv = _py(td)
            if need_tensor:
                return lambda env, dev: torch.full((), conv(env[i]), dtype=tdt, device=dev)
            return lambda env, dev: conv(env[i])
        steps = []
        if _is_float(cd) and v.dtype != cd:
            steps.append(_torch_dtype(cd))
        if (cd if _is_float(cd) else v.dtype) != td:
            steps.append(tdt)
        if not steps:
            return lambda env, dev: env[i]
        if len(steps) == 1:
            s0 = steps[0]
            return lambda env, dev: env[i].to(s0)
        s0, s1 = steps
        return lambda env, dev: env[i].to(s0).to(s1)

    def pointwise(self, op, results, args, r):
        rule = _POINTWISE_RULES[op]
        if len(args) != _ARITY[op]:
            raise KfTextError(f"{op}: expected {_ARITY[op]} arguments, got {len(args)}")
        a0 = args[0].dtype
        if rule in ("Same", "SameNumeric", "IntegralOnly"):
            od = a0
        elif rule == "ToFloat":
            od = a0 if _is_float(a0) else "float32"
        elif rule in ("ToBool", "Compare"):
            od = "bool"
        elif rule == "PromoteToFloat":
            od = _result_type(args)
            od = od if _is_float(od) else "float32"
        elif rule == "Where":
            if args[0].dtype != "bool":
                raise KfTextError(f"where: argument 0 (condition {args[0].name}): expected bool, got {args[0].dtype}")
            od = _result_type(args[1:])
        else:
            od = _result_type(args)
        checked = a0 if rule in ("Same", "SameNumeric", "IntegralOnly") else od
        if rule in ("SameNumeric", "PromoteNumeric") and checked == "bool":
            raise KfTextError(f"{op}: expected numeric (not bool) operands, got bool")
        if rule in ("IntegralOnly", "PromoteIntegral") and _is_float(checked):
            raise KfTextError(f"{op}: expected integer or bool operands, got {checked}")
        if rule == "PromoteIntOnly" and not _is_int(checked):
            raise KfTextError(f"{op}: expected integer operands, got {checked}")
        if rule == "PromoteFloatOnly" and not _is_float(checked):
            raise KfTextError(f"{op}: expected floating-point operands, got {checked}")
        # The compute dtype (core/runtime/cpu/ops_pointwise.cpp).
        cd = _result_type(args) if rule == "Compare" else (a0 if rule == "ToBool" else od)
        td = _td(cd)
        all_scalar = all(a.is_scalar for a in args)
        rank = max([a.rank for a in args if not a.is_scalar], default=0)
        _torch_dtype(od)
        name = results[0]

        # Shape arithmetic: exact Python ints (sizes, scalar inputs, constants).
        if (all_scalar and op in _SHAPE_ARITHMETIC and _is_int(od) and all(a.shape_scalar for a in args)):
            fn = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
                  "maximum": max, "minimum": min}[op]
            if all(a.rep == "const" for a in args):
                c = _wrap_int(fn(args[0].const, args[1].const), od)
                return self.new_val(r, name, is_scalar=True, dtype=od, rank=0, rep="const", const=c, shape_scalar=True)
            v = self.new_val(r, name, is_scalar=True, dtype=od, rank=0, rep="num", shape_scalar=True)
            g = [self.operand(a, "int64", "int64", False) for a in args]
            out = v.id

            def run(env, dev):  # exact, as kfuse's shape arithmetic (no wrap: a symbolic % breaks tracing)
                env[out] = fn(g[0](env, dev), g[1](env, dev))
            self.emit(run)
            return v

        floating = _is_float(cd)
        if op == "where":
            cond = args[0]
            gc = (self.operand(cond, "bool", "bool", True) if cond.rep != "tensor" else (lambda env, dev, i=cond.id: env[i]))
            ga = self.operand(args[1], cd, td, True)
            gb = self.operand(args[2], cd, td, True)
            getters = [gc, ga, gb]
            impl = torch.where
        else:
            if op in _UNARY_RULES:
                if floating:
                    impl = _FLOAT_UNARY[op]
                elif op == "bitwise_not" and cd == "bool":
                    impl = torch.logical_not
                else:
                    impl = _INT_UNARY[op]
                need = [True]
            elif op in ("shift_left", "shift_right"):
                impl, need = _shift(op, _SIZE[cd] * 8), [True, True]
            elif op in _BINARY:
                impl = _BINARY[op]
                need = [True, all_scalar or op not in _NUMBER_OK_SECOND]
            elif op == "clamp":
                if args[1].rep == "const" and args[2].rep == "const" and not all_scalar:
                    impl, need = torch.clamp, [True, False, False]
                else:
                    impl, need = _clamp, [True, True, True]
            elif op == "lerp":
                impl, need = torch.lerp, [True, True, all_scalar]
            else:  # fma
                impl, need = _fma, [True, all_scalar, all_scalar]
            getters = [self.operand(a, cd, td, n) for a, n in zip(args, need)]
        odt = _torch_dtype(od)
        post = None if od == ("bool" if rule in ("ToBool", "Compare") else td) else odt

        def compute(env, dev, getters=getters, impl=impl, post=post):
            res = impl(*[g(env, dev) for g in getters])
            return res if post is None else res.to(post)

        if all_scalar and all(a.rep == "const" for a in args):  # fold
            cpu = torch.device("cpu")
            value = compute(list(self.env0), cpu).item()
            return self.new_val(r, name, is_scalar=True, dtype=od, rank=0, rep="const", const=_py(od)(value))
        v = self.new_val(r, name, is_scalar=all_scalar, dtype=od, rank=rank, rep="tensor")
        out = v.id

        def run(env, dev):
            env[out] = compute(env, dev)
        self.emit(run)
        return v

    def build(self, op, results, args, shape, attrs, r):
        if op in _POINTWISE_RULES:
            return self.pointwise(op, results, args, r)
        if op == "cast":
            return self.cast(results, args, attrs, r)
        scalar_ok = {"pad": (1,), "full": (0,), "iota": (0, 1, 2)}.get(op, ())
        for k, a in enumerate(args):
            if a.is_scalar and k not in scalar_ok:
                raise KfTextError(f"{op}: argument {k} ({a.name}): expected a tensor, got a scalar")
        for s in shape or []:
            if not s.shape_scalar:
                raise KfTextError(f"{op}: shape entry {s.name}: expected an integer constant, scalar input or extent "
                                  "(size), or add, sub, mul, maximum, minimum of those")
        if op in _REDUCTIONS:
            return self.reduction(op, results, args[0], attrs, r)
        handler = getattr(self, "op_" + op)
        return handler(results, args, shape, attrs, r)

    def tensor_result(self, r, name, dtype, rank, fn, may_alias=False):
        _torch_dtype(dtype)
        v = self.new_val(r, name, is_scalar=False, dtype=dtype, rank=rank, rep="tensor", may_alias=may_alias)
        out = v.id

        def run(env, dev):
            env[out] = fn(env, dev)
        self.emit(run)
        return v

    def shape_getter(self, shape):
        gs = [self.operand(s, "int64", "int64", False) for s in shape]
        return lambda env, dev: [g(env, dev) for g in gs]

    def cast(self, results, args, attrs, r):
        (a,) = args
        od = attrs["dtype"]
        odt = _torch_dtype(od)
        _torch_dtype(a.dtype)
        if a.is_scalar and a.rep == "const":
            return self.new_val(r, results[0], is_scalar=True, dtype=od, rank=0, rep="const",
                                const=_py(od)(_convert(a.const, a.dtype, od)))
        steps = []
        if _is_float(a.dtype) and _is_int(od):
            steps.append(_nan_to_zero)  # NaN -> 0, as kfuse (torch leaves it undefined)
            if od != "int64":
                steps.append(torch.int64)  # the low bits of the truncated int64, as kfuse
        elif a.dtype == "int64" and od in _NARROW:
            steps.append(torch.float64)  # through double, as kfuse
        steps.append(odt)
        g = self.scalar_as_tensor(a) if a.is_scalar else (lambda env, dev, i=a.id: env[i])

        def fn(env, dev, g=g, steps=steps):
            x = g(env, dev)
            for s in steps:
                x = s(x) if callable(s) else x.to(s)
            return x
        if a.is_scalar:
            v = self.new_val(r, results[0], is_scalar=True, dtype=od, rank=0, rep="tensor")
            out = v.id

            def run(env, dev):
                env[out] = fn(env, dev)
            self.emit(run)
            return v
        return self.tensor_result(r, results[0], od, a.rank, fn, may_alias=a.may_alias and od == a.dtype)

    def reduction(self, op, results, a, attrs, r):
        rank, keep = a.rank, attrs["keepdim"]
        axes = []
        for d in attrs["axes"]:
            dd = _norm_dim(d, rank, "axis", op) if rank else None
            if rank == 0:
                raise KfTextError(f"{op}: axis {d} is out of range for rank 0")
            if dd in axes:
                raise KfTextError(f"{op}: axis {d} is listed twice")
            axes.append(dd)
        axes = sorted(axes) or list(range(rank))
        t = a.dtype
        if op in ("mean", "var", "var_mean") and not _is_float(t):
            raise KfTextError(f"{op}: expected floating-point operands, got {t}")
        if op in ("argmax", "argmin") and (len(axes) != 1 or rank == 0):
            raise KfTextError(f"{op}: expected exactly one axis of a tensor of rank >= 1, got {len(axes)} axes "
                              f"of a rank-{rank} value")
        out_rank = rank if keep else rank - len(axes)
        if op in ("sum", "prod"):
            od = t if _is_float(t) else "int64"
        elif op in ("argmax", "argmin"):
            od = "int64"
        else:
            od = t
        odt = _torch_dtype(od)
        i = a.id
        scalar_in = rank == 0
        if scalar_in:  # a rank-0 tensor: reduce it as [1] over dim 0
            axes, keep = [0], False
        if _is_float(t):
            pre = None if _td(t) == t else _torch_dtype(_td(t))
        elif op in ("sum", "prod"):
            pre = torch.int64
        elif t == "bool":
            pre = torch.uint8
        else:
            pre = None
        post = odt

        def load(env):
            x = env[i]
            if scalar_in:
                x = x.reshape(1)
            return x if pre is None else x.to(pre)

        if op == "sum":
            def fn(env, dev):
                return load(env).sum(dim=axes, keepdim=keep).to(post)
        elif op == "prod":
            desc = sorted(axes, reverse=True)

            def fn(env, dev):
                x = load(env)
                for d in desc:
                    x = x.prod(dim=d, keepdim=keep)
                return x.to(post)
        elif op in ("max", "min"):
            red = torch.amax if op == "max" else torch.amin

            def fn(env, dev):
                return red(load(env), dim=axes, keepdim=keep).to(post)
        elif op == "mean":
            def fn(env, dev):
                return load(env).mean(dim=axes, keepdim=keep).to(post)
        elif op in ("argmax", "argmin"):
            red = torch.argmax if op == "argmax" else torch.argmin
            d0 = axes[0]

            def fn(env, dev):
                return red(load(env), dim=d0, keepdim=keep)
        else:
            corr = attrs["correction"]
            if corr < 0:
                raise KfTextError(f"{op}: correction must be >= 0, got {corr}")
            if op == "var":
                def fn(env, dev):
                    return torch.var(load(env), dim=axes, correction=corr, keepdim=keep).to(post)
            else:
                v1 = self.new_val(r, results[0], is_scalar=False, dtype=od, rank=out_rank, rep="tensor")
                v2 = self.new_val(r, results[1], is_scalar=False, dtype=od, rank=out_rank, rep="tensor")
                o1, o2 = v1.id, v2.id

                def run(env, dev):
                    var, mean = torch.var_mean(load(env), dim=axes, correction=corr, keepdim=keep)
                    env[o1] = var.to(post)
                    env[o2] = mean.to(post)
                self.emit(run)
                return v1
        return self.tensor_result(r, results[0], od, out_rank, fn)

    # --- shape ops ---------------------------------------------------------------

    def op_broadcast_in_dim(self, results, args, shape, attrs, r):
        (a,) = args
        dims, out_rank = attrs["dims"], len(shape)
        if len(dims) != a.rank:
            raise KfTextError(f"broadcast_in_dim: expected {a.rank} broadcast dims (one per input dim), got {len(dims)}")
        if any(d <= p for p, d in zip([-1] + dims, dims)) or any(d >= out_rank for d in dims):
            raise KfTextError(f"broadcast_in_dim: broadcast dims must increase and be < output rank {out_rank}")
        sizes, i = self.shape_getter(shape), a.id
        source = [dims.index(d) if d in dims else None for d in range(out_rank)]  # input dim of each output dim

        def fn(env, dev):
            x = env[i]
            return x.reshape([1 if j is None else x.shape[j] for j in source]).expand(sizes(env, dev))
        return self.tensor_result(r, results[0], a.dtype, out_rank, fn, may_alias=a.may_alias)

    def op_expand(self, results, args, shape, attrs, r):
        (a,) = args
        if len(shape) < a.rank:
            raise KfTextError(f"expand: expected at least {a.rank} sizes, got {len(shape)}")
        sizes, i = self.shape_getter(shape), a.id
        return self.tensor_result(r, results[0], a.dtype, len(shape), lambda env, dev: env[i].expand(sizes(env, dev)),
                                  may_alias=a.may_alias)

    def op_reshape(self, results, args, shape, attrs, r):
        (a,) = args
        consts = [s.const for s in shape if s.rep == "const"]
        if any(c < -1 for c in consts):
            raise KfTextError("reshape: sizes must be >= 0 or -1")
        if consts.count(-1) > 1:
            raise KfTextError("reshape: only one size may be -1")
        sizes, i = self.shape_getter(shape), a.id
        return self.tensor_result(r, results[0], a.dtype, len(shape), lambda env, dev: env[i].reshape(sizes(env, dev)),
                                  may_alias=a.may_alias)

    def op_permute(self, results, args, shape, attrs, r):
        (a,) = args
        perm = [_norm_dim(d, a.rank, "dim", "permute") for d in attrs["perm"]]
        if sorted(perm) != list(range(a.rank)):
            raise KfTextError(f"permute: {attrs['perm']} is not a permutation of {a.rank} dims")
        i = a.id
        return self.tensor_result(r, results[0], a.dtype, a.rank, lambda env, dev: env[i].permute(perm),
                                  may_alias=a.may_alias)

    def op_squeeze(self, results, args, shape, attrs, r):
        (a,) = args
        dims = [_norm_dim(d, a.rank, "dim", "squeeze") for d in attrs["dims"]]
        if not dims or len(set(dims)) != len(dims):
            raise KfTextError("squeeze: expected distinct dims, at least one")
        i, desc = a.id, sorted(dims, reverse=True)
        # (torch's squeeze(d) keeps a dim of size != 1, where kfuse fails: the
        # check reads sizes only, so it is no data-dependent control flow)
        def fn(env, dev):
            x = env[i]
            for d in desc:
                if x.shape[d] != 1:
                    raise ValueError(f"squeeze: dim {d} has size {x.shape[d]}, expected 1")
                x = x.squeeze(d)
            return x
        return self.tensor_result(r, results[0], a.dtype, a.rank - len(dims), fn, may_alias=a.may_alias)

    def op_unsqueeze(self, results, args, shape, attrs, r):
        (a,) = args
        d = _norm_dim(attrs["dim"], a.rank + 1, "dim", "unsqueeze")
        i = a.id
        return self.tensor_result(r, results[0], a.dtype, a.rank + 1, lambda env, dev: env[i].unsqueeze(d),
                                  may_alias=a.may_alias)

    def op_slice(self, results, args, shape, attrs, r):
        (a,) = args
        d = _norm_dim(attrs["dim"], a.rank, "dim", "slice")
        start, stop, step = attrs["start"], attrs["stop"], attrs["step"]
        if step <= 0:
            raise KfTextError(f"slice: step must be > 0, got {step}")
        index = (slice(None),) * d + (slice(start, None if stop == _END else stop, step),)
        i = a.id
        return self.tensor_result(r, results[0], a.dtype, a.rank, lambda env, dev: env[i][index],
                                  may_alias=a.may_alias)

    def op_pad(self, results, args, shape, attrs, r):
        a, value = args
        if a.is_scalar:
            raise KfTextError("pad: argument 0: expected a tensor, got a scalar")
        if not value.is_scalar:
            raise KfTextError(f"pad: argument 1 (value {value.name}): expected a scalar, got a tensor")
        pads = attrs["pads"]
        if len(pads) != 2 * a.rank:
            raise KfTextError(f"pad: expected {2 * a.rank} pads (low, high per dim), got {len(pads)}")
        if any(p < 0 for p in pads):
            raise KfTextError("pad: negative pad (cropping) is not supported; use slice")
        t, i = a.dtype, a.id
        torch_pads = []
        for d in reversed(range(a.rank)):  # torch's F.pad: last dim first
            torch_pads += [pads[2 * d], pads[2 * d + 1]]
        work = torch.float32 if t.startswith("float8") else None  # F.pad of float8: through float32 (exact)
        tdt = _torch_dtype(t)
        if value.rep == "const":
            fill = _py(t)(_convert(value.const, value.dtype, t))

            def fn(env, dev):
                x = env[i]
                if work is not None:
                    return F.pad(x.to(work), torch_pads, value=float(fill)).to(tdt)
                return F.pad(x, torch_pads, value=fill)
        else:
            g = self.scalar_as_tensor(value)
            steps = [torch.int64, tdt] if _is_float(value.dtype) and t in ("int32", "int8", "uint8") else [tdt]

            def fn(env, dev):
                x = env[i]
                v = g(env, dev)
                for s in steps:
                    v = v.to(s)
                new = [x.shape[d] + pads[2 * d] + pads[2 * d + 1] for d in range(len(x.shape))]
                out = v.expand(new).clone()
                out[tuple(slice(pads[2 * d], pads[2 * d] + x.shape[d]) for d in range(len(x.shape)))] = x
                return out
        return self.tensor_result(r, results[0], t, a.rank, fn)

    def op_cat(self, results, args, shape, attrs, r):
        rank = args[0].rank
        if rank == 0:
            raise KfTextError("cat: expected tensors of rank >= 1")
        for k, a in enumerate(args):
            if a.rank != rank:
                raise KfTextError(f"cat: argument {k} ({a.name}): expected rank {rank}, got rank {a.rank}")
        d = _norm_dim(attrs["dim"], rank, "dim", "cat")
        od = _result_type(args)
        odt = _torch_dtype(od)
        ids = [a.id for a in args]
        if od.startswith("float8"):  # through float32 (exact)
            def fn(env, dev):
                return torch.cat([env[j].to(torch.float32) for j in ids], d).to(odt)
        else:
            def fn(env, dev):
                return torch.cat([env[j].to(odt) for j in ids], d)
        return self.tensor_result(r, results[0], od, rank, fn)

    def op_segment_set(self, results, args, shape, attrs, r):
        (a,) = args
        i = a.id
        return self.tensor_result(r, results[0], a.dtype, a.rank, lambda env, dev: env[i], may_alias=a.may_alias)

    # --- indexing ---------------------------------------------------------------

    def op_index_select(self, results, args, shape, attrs, r):
        a, index = args
        self.check_index(a, index, "index_select", 1)
        d = _norm_dim(attrs["dim"], a.rank, "dim", "index_select")
        i, j = a.id, index.id
        return self.tensor_result(r, results[0], a.dtype, a.rank,
                                  lambda env, dev: torch.index_select(env[i], d, env[j].to(torch.int64)))

    def op_gather(self, results, args, shape, attrs, r):
        a, index = args
        self.check_index(a, index, "gather", a.rank)
        d = _norm_dim(attrs["dim"], a.rank, "dim", "gather")
        i, j = a.id, index.id
        return self.tensor_result(r, results[0], a.dtype, a.rank,
                                  lambda env, dev: torch.gather(env[i], d, env[j].to(torch.int64)))

    @staticmethod
    def check_index(a, index, op, index_rank):
        if not _is_int(index.dtype):
            raise KfTextError(f"{op}: index {index.name}: expected int64 or int32, got {index.dtype}")
        if a.rank == 0:
            raise KfTextError(f"{op}: expected a tensor of rank >= 1")
        if index.rank != index_rank:
            raise KfTextError(f"{op}: index {index.name}: expected rank {index_rank}, got rank {index.rank}")

    def scatter_common(self, op, args, attrs):
        a, index, src = args
        self.check_index(a, index, op, 1 if op == "index_reduce" else a.rank)
        if src.dtype != a.dtype:
            raise KfTextError(f"{op}: src {src.name}: expected {a.dtype} (the input's dtype), got {src.dtype}")
        if src.rank != a.rank:
            raise KfTextError(f"{op}: src {src.name}: expected rank {a.rank}, got rank {src.rank}")
        d = _norm_dim(attrs["dim"], a.rank, "dim", op)
        reduce = _SCATTER_REDUCE[attrs["reduce"]]
        t = a.dtype
        if t == "bool" and reduce in ("sum", "prod", "mean"):
            raise KfTextError(f"{op}: reduce {reduce} on bool; use amax (any) or amin (all)")
        # The dtype the update runs in: floats in float32 (float64 kept),
        # integer sum/prod/mean in int64 (kfuse's wrapping int64
        # accumulator), bool amax/amin as uint8 (any/all).
        if reduce == "none":
            work = None
        elif _is_float(t):
            work = None if t in ("float32", "float64") else torch.float32
        elif t == "bool":
            work = torch.uint8
        elif reduce in ("sum", "prod", "mean"):
            work = torch.int64
        else:
            work = None
        return a, index, src, d, reduce, work, _torch_dtype(t)

    def op_scatter(self, results, args, shape, attrs, r):
        a, index, src, d, reduce, work, tdt = self.scatter_common("scatter", args, attrs)
        i, j, k, inc = a.id, index.id, src.id, attrs["include_self"]
        if reduce == "none":
            def fn(env, dev):
                return env[i].scatter(d, env[j].to(torch.int64), env[k])
        else:
            def fn(env, dev):
                x, s = env[i], env[k]
                if work is not None:
                    x, s = x.to(work), s.to(work)
                return x.scatter_reduce(d, env[j].to(torch.int64), s, reduce, include_self=inc).to(tdt)
        return self.tensor_result(r, results[0], a.dtype, a.rank, fn)

    def op_index_reduce(self, results, args, shape, attrs, r):
        a, index, src, d, reduce, work, tdt = self.scatter_common("index_reduce", args, attrs)
        i, j, k, inc = a.id, index.id, src.id, attrs["include_self"]
        rank = a.rank

        def operands(env):
            x, idx, s = env[i], env[j].to(torch.int64), env[k]
            # src's size-1 dims broadcast (kfuse's extension of torch)
            s = s.expand([idx.shape[0] if e == d else x.shape[e] for e in range(rank)])
            if work is not None:
                x, s = x.to(work), s.to(work)
            return x, idx, s

        if reduce == "none":
            def fn(env, dev):
                x, idx, s = operands(env)
                return x.index_copy(d, idx, s).to(tdt)
        elif reduce == "sum" and inc:
            def fn(env, dev):
                x, idx, s = operands(env)
                return x.index_add(d, idx, s).to(tdt)
        elif reduce == "sum":  # without self: a scatter_reduce over the index broadcast along the slices
            def fn(env, dev):
                x, idx, s = operands(env)
                view = [-1 if e == d else 1 for e in range(rank)]
                return x.scatter_reduce(d, idx.reshape(view).expand(s.shape), s, "sum", include_self=False).to(tdt)
        else:
            def fn(env, dev):
                x, idx, s = operands(env)
                return x.index_reduce(d, idx, s, reduce, include_self=inc).to(tdt)
        return self.tensor_result(r, results[0], a.dtype, a.rank, fn)

    # --- scans ------------------------------------------------------------------

    def scan(self, op, results, args, attrs, r):
        (a,) = args
        if a.rank == 0:
            raise KfTextError(f"{op}: expected a tensor of rank >= 1")
        d = _norm_dim(attrs["dim"], a.rank, "dim", op)
        t = a.dtype
        od = t if (op == "cummax" or _is_float(t)) else "int64"
        odt = _torch_dtype(od)
        if _is_float(t):
            work = _torch_dtype(_td(t))
        elif op == "cummax":
            work = torch.uint8 if t == "bool" else None
        else:
            work = torch.int64
        if op == "cumsum":
            identity = 0
        elif op == "cumprod":
            identity = 1
        elif _is_float(t):
            identity = -math.inf
        else:
            identity = {"int64": -(1 << 63), "int32": -(1 << 31), "int8": -128}.get(t, 0)
        exclusive, i = attrs["exclusive"], a.id

        def fn(env, dev):
            x = env[i]
            if work is not None:
                x = x.to(work)
            if exclusive:  # the identity first, the last element dropped
                n = x.shape[d]
                head = torch.full([1 if e == d else x.shape[e] for e in range(x.dim())], identity,
                                  dtype=x.dtype, device=x.device)
                x = torch.cat([head, x], d).narrow(d, 0, n)
            if op == "cumsum":
                y = torch.cumsum(x, d)
            elif op == "cumprod":
                y = torch.cumprod(x, d)
            else:
                y = torch.cummax(x, d).values
            return y.to(odt)
        return self.tensor_result(r, results[0], od, a.rank, fn)

    def op_cumsum(self, results, args, shape, attrs, r):
        return self.scan("cumsum", results, args, attrs, r)

    def op_cumprod(self, results, args, shape, attrs, r):
        return self.scan("cumprod", results, args, attrs, r)

    def op_cummax(self, results, args, shape, attrs, r):
        return self.scan("cummax", results, args, attrs, r)

    # --- creation ---------------------------------------------------------------

    def scalar_as_tensor(self, v):
        """A getter of scalar v as a 0-dim tensor of its own dtype."""
        if v.rep == "tensor":
            return lambda env, dev, j=v.id: env[j]
        vt = _torch_dtype(v.dtype)
        if v.rep == "const":
            c = v.const
            return lambda env, dev: torch.full((), c, dtype=vt, device=dev)
        return lambda env, dev, j=v.id: torch.full((), env[j], dtype=vt, device=dev)

    def op_full(self, results, args, shape, attrs, r):
        (fill,) = args
        if not fill.is_scalar:
            raise KfTextError(f"full: fill {fill.name}: expected a scalar, got a tensor")
        od = attrs["dtype"]
        odt = _torch_dtype(od)
        sizes = self.shape_getter(shape)
        if fill.rep == "const":
            c = _py(od)(_convert(fill.const, fill.dtype, od))
            if od.startswith("float8"):
                def fn(env, dev):
                    return torch.full(sizes(env, dev), c, dtype=torch.float32, device=dev).to(odt)
            else:
                def fn(env, dev):
                    return torch.full(sizes(env, dev), c, dtype=odt, device=dev)
        else:
            g = self.scalar_as_tensor(fill)
            steps = [torch.int64, odt] if _is_float(fill.dtype) and od in ("int32", "int8", "uint8") else [odt]

            def fn(env, dev):
                v = g(env, dev)
                for s in steps:
                    v = v.to(s)
                return v.expand(sizes(env, dev)).clone()
        return self.tensor_result(r, results[0], od, len(shape), fn)

    def op_iota(self, results, args, shape, attrs, r):
        length, start, step = args
        od = attrs["dtype"]
        if od == "bool":
            raise KfTextError("iota: expected a numeric dtype, got bool")
        if not length.shape_scalar:
            raise KfTextError(f"iota: length {length.name}: expected an integer constant, scalar input or extent")
        for v in (start, step):
            if not v.is_scalar:
                raise KfTextError(f"iota: {v.name}: expected a scalar, got a tensor")
        odt = _torch_dtype(od)
        n = self.operand(length, "int64", "int64", False)
        exact = _is_int(od) and not _is_float(start.dtype) and not _is_float(step.dtype)
        work = "int64" if exact else "float64"
        g0 = self.operand(start, work if exact else start.dtype, work, False) if start.rep != "tensor" else None
        g1 = self.operand(step, work if exact else step.dtype, work, False) if step.rep != "tensor" else None
        wt = _torch_dtype(work)
        if g0 is None:
            g0 = (lambda env, dev, j=start.id: env[j].to(wt))
        if g1 is None:
            g1 = (lambda env, dev, j=step.id: env[j].to(wt))
        # start + i * step: exact int64 (wrapping), else in double, then one
        # conversion to the dtype (kfuse's ops_creation.cpp)
        def fn(env, dev):
            return (torch.arange(n(env, dev), dtype=wt, device=dev) * g1(env, dev) + g0(env, dev)).to(odt)
        return self.tensor_result(r, results[0], od, 1, fn)

    # --- library ----------------------------------------------------------------

    def op_matmul(self, results, args, shape, attrs, r):
        a, b = args
        if a.rank == 0 or b.rank == 0:
            raise KfTextError(f"matmul: expected operands of rank >= 1, got ranks {a.rank} and {b.rank}")
        od = _result_type(args)
        if not _is_float(od):
            raise KfTextError(f"matmul: expected floating-point operands, got {od}")
        if a.rank == 1 and b.rank == 1:
            rank = 0
        elif a.rank == 1:
            rank = b.rank - 1
        elif b.rank == 1:
            rank = a.rank - 1
        else:
            rank = max(a.rank, b.rank)
        odt = _torch_dtype(od)
        i, j = a.id, b.id
        return self.tensor_result(r, results[0], od, rank,
                                  lambda env, dev: torch.matmul(env[i].to(odt), env[j].to(odt)))

    def op_linear(self, results, args, shape, attrs, r):
        x, w = args[0], args[1]
        bias = args[2] if len(args) == 3 else None
        if x.rank < 1:
            raise KfTextError("linear: argument 0 (x): expected rank >= 1")
        if w.rank not in (1, 2):
            raise KfTextError(f"linear: argument 1 (w): expected rank 1 or 2, got rank {w.rank}")
        if bias is not None and bias.rank > 1:
            raise KfTextError(f"linear: argument 2 (bias): expected rank 0 or 1, got rank {bias.rank}")
        od = _result_type(args)
        if not _is_float(od):
            raise KfTextError(f"linear: expected floating-point operands, got {od}")
        odt = _torch_dtype(od)
        i, j = x.id, w.id
        k = bias.id if bias is not None else None
        if w.rank == 2:
            def fn(env, dev):
                return F.linear(env[i].to(odt), env[j].to(odt), None if k is None else env[k].to(odt))
        else:
            def fn(env, dev):
                y = torch.matmul(env[i].to(odt), env[j].to(odt))
                return y if k is None else y + env[k].to(odt)
        return self.tensor_result(r, results[0], od, x.rank if w.rank == 2 else x.rank - 1, fn)

    # --- extents ----------------------------------------------------------------

    def op_size(self, results, args, shape, attrs, r):
        (a,) = args
        if a.rank == 0:
            raise KfTextError("size: expected a tensor of rank >= 1")
        d = _norm_dim(attrs["dim"], a.rank, "dim", "size")
        v = self.new_val(r, results[0], is_scalar=True, dtype="int64", rank=0, rep="num", shape_scalar=True)
        i, out = a.id, v.id

        def run(env, dev):
            env[out] = env[i].shape[d]
        self.emit(run)
        return v
