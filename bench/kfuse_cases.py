"""The benchmark cases of bench/cases/ (see suite.txt there), read the way
`kfuse bench` reads them: stdlib only, so that it loads without torch."""
import pathlib
import re

CASES_DIR = pathlib.Path(__file__).resolve().parent / "cases"
TEMPLATE_DTYPE = "bfloat16"  # the word that stands for the storage dtype


def suite(cases_dir=CASES_DIR, name="suite"):
    """Case names of the list NAME.txt (suite: the headline cases, training:
    the training fusions), in order."""
    lines = (l.strip() for l in (cases_dir / f"{name}.txt").read_text().splitlines())
    return [l for l in lines if l and not l.startswith("#")]


def _read(name, cases_dir):
    path = cases_dir / f"{name}.kf"
    if not path.is_file():
        raise ValueError(f"unknown case '{name}': no {path}")
    return path.read_text()


def case_text(name, storage, cases_dir=CASES_DIR):
    """The case's fusion text with `storage` as the storage dtype."""
    return re.sub(rf"\b{TEMPLATE_DTYPE}\b", storage, _read(name, cases_dir))


def input_dtypes(name, storage, cases_dir=CASES_DIR):
    """The dtype of each tensor input, in input order, with `storage` as the storage dtype."""
    return re.findall(r"^input \w+: tensor<(\w+), \d+>", case_text(name, storage, cases_dir), re.M)


def _directive(name, key, cases_dir):
    """The value of the case's last `#! KEY: VALUE` line, or None."""
    value = None
    for line in _read(name, cases_dir).splitlines():
        line = line.strip()
        if line.startswith("#!") and ":" in line and line[2:].split(":", 1)[0].strip() == key:
            value = line.split(":", 1)[1].strip()
    return value


def input_names(name, cases_dir=CASES_DIR):
    """The names of the tensor inputs, in input order."""
    return re.findall(r"^input (\w+): tensor<", _read(name, cases_dir), re.M)


def input_shapes(name, m, n, cases_dir=CASES_DIR):
    """Shapes of the tensor inputs, in input order, from `#! bench: MxN, N`
    (sizes M, N or whole numbers)."""
    line = _directive(name, "bench", cases_dir)
    if line is None:
        raise ValueError(f"case '{name}' has no '#! bench:' line")
    dims = {"M": m, "N": n}
    return [tuple(dims[d.strip()] if d.strip() in dims else int(d) for d in shape.split("x"))
            for shape in line.split(",")]


def nonnegative_inputs(name, cases_dir=CASES_DIR):
    """Indices (in input order) of the tensor inputs named by `#! nonnegative:
    a, b`: values a benchmark must draw >= 0 (second moments under a sqrt)."""
    line = _directive(name, "nonnegative", cases_dir)
    names = input_names(name, cases_dir)
    wanted = [w.strip() for w in line.split(",")] if line else []
    for w in wanted:
        if w not in names:
            raise ValueError(f"case '{name}': '#! nonnegative:' names '{w}', not a tensor input")
    return [i for i, x in enumerate(names) if x in wanted]


def read_kfuse_table(path):
    """The header lines and the rows (dicts by column name, keyed by (case,
    shape, dtype)) of a `kfuse bench --out` file."""
    header, rows, columns = [], {}, None
    for line in pathlib.Path(path).read_text().splitlines():
        if not line.startswith("|"):
            if columns is None and line.strip():
                header.append(line.strip())
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if columns is None:
            columns = cells
        elif not set(cells[0]) <= set("- "):
            row = dict(zip(columns, cells))
            rows[(row["case"], row["shape"], row["dtype"])] = row
    return header, rows


def _self_check():
    """Every suite case loads for every dtype, with one bench shape per tensor input."""
    names = suite() + suite(name="training") + suite(name="as_written")
    for name in names:
        for storage in ("bfloat16", "float16", "float32"):
            text = case_text(name, storage)
            inputs = re.findall(r"^input \w+: tensor<(\w+), (\d+)>", text, re.M)
            shapes = input_shapes(name, 3, 5)
            assert len(inputs) == len(shapes), f"{name}: {len(inputs)} inputs, {len(shapes)} bench shapes"
            for (dtype, rank), shape in zip(inputs, shapes):
                # Storage dtype, float32 (saved statistics, optimizer state),
                # int64 (class labels), bool (dropout keep masks) or
                # float8_e4m3fn (quantized values).
                assert dtype in (storage, "float32", "int64", "bool", "float8_e4m3fn") and int(rank) == len(shape), \
                    f"{name} ({storage}): {dtype}, {rank} vs {shape}"
        nonnegative_inputs(name)
    print(f"{len(names)} cases ok")


if __name__ == "__main__":
    _self_check()
