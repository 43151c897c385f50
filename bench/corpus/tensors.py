"""Torch tensors for the corpus (bench/corpus/generate.py): inputs in their
layouts, outputs as a caller allocates them, and the check of bench_torch.py.
Works with torch 1.13 (the CPU test) and 2.x (corpus_bench.py)."""
import torch

TORCH_DTYPES = {name: getattr(torch, name) for name in
                ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32",
                 "int8", "uint8", "bool") if hasattr(torch, name)}


def torch_dtype(name):
    if name not in TORCH_DTYPES:
        raise NotImplementedError(f"this torch ({torch.__version__}) has no {name}")
    return TORCH_DTYPES[name]


def values(spec, shape, device, gen):
    """The logical values of an input (module doc of generate.py: "values")."""
    v, dtype = spec["values"], torch_dtype(spec["dtype"])
    n = 1
    for s in shape:
        n *= s
    if isinstance(v, dict):  # indices in [0, HIGH)
        high = v["index"]
        if v.get("unique"):
            if n > high:
                raise ValueError(f"{spec['name']}: {n} unique indices below {high}")
            t = torch.randperm(high, generator=gen, device=device)[:n].reshape(shape)
        else:
            t = torch.randint(0, high, shape, generator=gen, device=device)
        return t.to(dtype)
    if v == "bool":
        return torch.rand(shape, generator=gen, device=device) >= 0.1
    t = torch.randn(shape, generator=gen, device=device)
    if v == "nonnegative":
        t = t.abs()
    if not dtype.is_floating_point:  # int8 and friends: round(32 randn), clamped to the dtype
        info = torch.iinfo(dtype)
        t = (t * 32).round().clamp(info.min, info.max)
    return t.to(dtype)


def make_input(spec, device, gen, value_device=None):
    """The input in its layout (a strided view of its own storage); the values
    drawn on value_device (default: device) with generator gen."""
    shape, lay, dtype = spec["shape"], spec["layout"], torch_dtype(spec["dtype"])
    kind = lay["kind"]
    vdev = value_device or device
    if kind == "broadcast":
        base_shape = [1 if d in lay["dims"] else s for d, s in enumerate(shape)]
        return values(spec, base_shape, vdev, gen).to(device).expand(shape)
    val = values(spec, shape, vdev, gen).to(device)
    if kind == "contiguous":
        return val
    if kind == "permuted":
        order = lay["order"]
        base = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
        view = base.permute([order.index(d) for d in range(len(shape))])
    elif kind == "padded":
        base = torch.empty(shape[:-1] + [shape[-1] + lay["pad"]], dtype=dtype, device=device)  # pads unread
        view = base[..., :shape[-1]]
    elif kind == "offset":
        off = lay["offset"]
        base = torch.empty(val.numel() + off, dtype=dtype, device=device)
        view = base.as_strided(shape, val.stride(), off)
    else:
        raise ValueError(f"unknown layout {lay}")
    view.copy_(val)
    return view


def make_inputs(entry, device, seed=0, value_device=None):
    """The entry's inputs; the same values on every device for one
    value_device (the generators of the CPU and the GPU differ)."""
    gen = torch.Generator(device=value_device or device)
    gen.manual_seed(seed)
    return [make_input(spec, device, gen, value_device) for spec in entry["inputs"]]


def make_output(spec, shape, dtype, device):
    """A caller's output: contiguous in the logical shape, or allocated in the
    permuted memory order (spec: the entry's output)."""
    lay = spec["layout"]
    if lay["kind"] == "permuted" and len(lay["order"]) == len(shape):
        order = lay["order"]
        base = torch.empty([shape[d] for d in order], dtype=dtype, device=device)
        return base.permute([order.index(d) for d in range(len(shape))])
    return torch.empty(shape, dtype=dtype, device=device)


def make_outputs(entry, inputs, shapes, dtypes, device):
    """Outputs as a caller allocates them; an aliased output is its input."""
    return [inputs[o["alias"]] if o["alias"] is not None else make_output(o, list(s), d, device)
            for o, s, d in zip(entry["outputs"], shapes, dtypes)]


def tolerance(dtype):
    """bench_torch.py's rule (times max(1, max |reference|)); 8-bit floats
    and ints as their own."""
    return {torch.float32: 1e-4, torch.float64: 1e-6, torch.bfloat16: 2e-2,
            torch.float16: 5e-3}.get(dtype, 0.13 if dtype.is_floating_point else 1.0)


def compare(out, ref, scale_tol=1.0):
    """(ok, max error, tolerance) of out against ref: both NaN (or the same
    infinity) counts as equal; integers may be off by one (a rounding of a
    quantized value), bools must be equal."""
    if out.shape != ref.shape:
        return False, float("inf"), 0.0
    if ref.numel() == 0:
        return True, 0.0, 0.0
    if ref.dtype == torch.bool or out.dtype == torch.bool:
        bad = (out.to(torch.bool) != ref.to(torch.bool)).sum().item()
        return bad == 0, float(bad), 0.0
    o, r = out.double(), ref.double()
    same = (o == r) | (torch.isnan(o) & torch.isnan(r))
    diff = torch.where(same, torch.zeros_like(o), (o - r).abs())
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    err = diff.max().item()
    finite = r[torch.isfinite(r)]
    scale = max(1.0, finite.abs().max().item() if finite.numel() else 0.0)
    tol = tolerance(ref.dtype) * scale_tol * (scale if ref.dtype.is_floating_point else 1.0)
    return err <= tol, err, tol
