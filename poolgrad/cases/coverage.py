"""Geometry coverage as data: every pair of boundary values of each op's geometry parameters.

The model below names, per op, the parameters users vary and their boundary values (global
pooling, kernel = input, stride 1 and > kernel, padding 0 and the largest torch allows, SAME
and asymmetric pads, dilation, ceil_mode with and without an overhanging window, one-element
and non-square inputs, every rank and dtype). A pairwise covering array (allpairspy), less the
rows the core rows make unneeded, picks rows so that every *feasible* pair of values meets in
some row; a pair is feasible when some valid full row holds it, which is decided by
enumerating the (small) full product. Each row is a framework call (and a compilation) on
every target, so the array is kept small.

The op's pairs do not promise what each API path distinguishes (a path takes only some rows:
Keras's layers no ceil_mode, dilation or divisor_override, torch no asymmetric pads), so rows are
added where a path's own classes (PATHS, path_classes) are not met yet: SAME resolving to
symmetric and to asymmetric pads along the first and along the last spatial axis, in every rank,
for every path given "SAME" as a string; ceil_mode with and without overhang in every rank for
every path that takes it; a one-element input for every path; explicit pads past torch's limit
(PATH_PADDING) for every path that takes them.

    python -m poolgrad.cases.coverage            print what poolgrad/cases/data/geometries.toml covers
    python -m poolgrad.cases.coverage --write    regenerate poolgrad/cases/data/geometries.toml and docs/COVERAGE.md

Each row is one geometry (op, rank, dtype, spatial size): one framework call that carries
every value family of poolgrad/cases/data/families.toml at once.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import itertools
from pathlib import Path

from allpairspy import AllPairs

from poolgrad.adapters import registry
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import DTYPES as REFERENCE_DTYPES, PoolSpec, SpecError, resolve
from poolgrad.reference.geometry import ceil_drops_window

from .catalogue import GEOMETRIES_PATH, geometry_rows as load
from .ids import DEFAULT_SIZE, geometry_tag, parse_geometry

COVERAGE_DOC = Path(__file__).parents[2] / "docs" / "COVERAGE.md"

# The spatial size of each size class per rank (the "even" class is the catalogue's default).
SIZES = {
    "even": DEFAULT_SIZE,
    "odd": {1: (7,), 2: (7, 7), 3: (5, 5, 5)},
    "one_element": {1: (1,), 2: (1, 6), 3: (1, 4, 3)},
    "non_square": {1: (11,), 2: (7, 4), 3: (5, 3, 4)},
}
DTYPES = tuple(REFERENCE_DTYPES)
_COMMON = {"rank": (1, 2, 3), "size": tuple(SIZES), "dtype": DTYPES}
_WINDOW = {"kernel": ("1", "2", "3", "input"), "stride": ("1", "kernel", "over_kernel"),
           "padding": ("0", "max", "SAME", "asymmetric"), "ceil_mode": ("off", "overhang", "no_overhang")}
# Explicit pads past torch's limit (half the kernel), for the paths that take them: TensorFlow's
# largest (kernel - 1: "needs to be smaller than the window size") and a pad as long as the
# kernel (windows of padding alone; lax.reduce_window and flax take any). Path rows only: the
# pairwise array keeps the op's own boundary values.
PATH_PADDING = ("over_half", "kernel")
# Parameters and boundary values per op (order matters only for reading the rows).
MODEL = {
    "max_pool": {**_COMMON, **_WINDOW, "dilation": ("1", "2")},
    "avg_pool": {**_COMMON, **_WINDOW, "count_include_pad": ("true", "false"),
                 "divisor_override": ("none", "1", "5")},
    "lp_pool": {**_COMMON, **{k: v for k, v in _WINDOW.items() if k != "padding"}, "norm_type": ("1", "2", "3")},
    "adaptive_max_pool": {**_COMMON, "output_size": ("1", "input", "half", "non_dividing", "over_input")},
    "adaptive_avg_pool": {**_COMMON, "output_size": ("1", "input", "half", "non_dividing", "over_input")},
    # Regions as each framework draws them (fractional_regions); 2-D and 3-D, the ranks torch
    # and TensorFlow have. A one-element dim has one region whatever the kind: not a class.
    "fractional_max_pool": {"rank": (2, 3), "size": ("even", "odd", "non_square"), "dtype": DTYPES,
                            "regions": ("fixed_size", "partition", "overlapping")},
}


def _api_paths() -> dict[str, tuple]:
    """The API paths whose own classes the rows cover, by name: (planner's plan, variant, given
    "SAME" as a string), from the registered frameworks' records (``api_paths``). The pure
    planners say whether a path takes a geometry. A path several records name (Keras's, whose
    variant runs on every backend) counts once: a row Keras takes reaches every backend."""
    paths = {}
    for fw in registry.FRAMEWORKS.values():
        for name, (variant, same) in fw.api_paths.items():
            paths.setdefault(name, (importlib.import_module(fw.worker(variant).planner).plan, variant, same))
    return dict(sorted(paths.items()))


PATHS = {name: (plan, variant) for name, (plan, variant, _) in _api_paths().items()}
# The paths given padding "SAME" as a string, which resolve it themselves (TF's rule: the odd
# pad goes after).
SAME_PATHS = tuple(name for name, (_, _, same) in _api_paths().items() if same)
# Kernel classes in order of preference for a path row: 3 (what users write most; its windows
# at an asymmetric SAME pad read two real elements and the pad, where a 2-tap window reads one)
# first.
_KERNEL_PREFERENCE = ("3", "input", "2", "1")
# Then stride classes: windows that do not overlap first. inductor compiles the backward of a
# stride-1 avg_pool3d for minutes (measured, torch 2.13: 105 s for kernel 3, padding 1,
# count_include_pad false on 4x4x4; 4 s with stride 3), past the suite's per-call timeout.
_STRIDE_PREFERENCE = ("kernel", "over_kernel", "1")


# Geometries every value family meets in every rank and dtype (no pairwise array promises a
# triple such as "3-D, float16, overlapping windows"): the pooling users write most, overlap,
# padding, and bins that share elements.
CORE = {
    "max_pool": [("k2s2", "even"), ("k3s1", "even"), ("k3s2p1", "even")],
    "avg_pool": [("k3s2p1", "even")],
    "lp_pool": [("k2s2n2", "even")],
    "adaptive_max_pool": [("o3", "odd")],
    "adaptive_avg_pool": [("o3", "odd")],
    "fractional_max_pool": [],   # regions depend on the input's size: see CORE_CLASSES
}
# Core rows given as value classes: each kind of fractional region in the one geometry both
# torch and TensorFlow run (2-D, float32; TensorFlow's op has no half-precision kernel, torch
# draws windows of one size, TensorFlow partitions or overlaps by one).
CORE_CLASSES = {"fractional_max_pool": [{"rank": 2, "size": "odd", "dtype": "float32", "regions": kind}
                                        for kind in ("fixed_size", "partition", "overlapping")]}


def fractional_regions(kind: str, length: int) -> list[list[int]]:
    """One dim's regions of a kind, about 2/3 as many as the input is long (Graham's ratio
    between 1 and 2): "partition" TensorFlow's non-overlapping regions, boundaries
    floor(i * L / out) (steps of floor(L / out) and one more); "overlapping" the same, each
    region one past the next boundary; "fixed_size" torch's, windows of 2 spread over the
    input, starts floor(i * (L - 2) / (out - 1)), the last at L - 2, at most L - 2 of them
    (torch's 3-D kernel refuses out + kernel - 1 = L, its 2-D kernel takes it)."""
    out = -(-2 * length // 3)
    if kind == "fixed_size":
        out = max(1, min(out, length - 2))
        return [[start, start + 2] for start in
                [i * (length - 2) // (out - 1) for i in range(out - 1)] + [length - 2]]
    bounds = [i * length // out for i in range(out + 1)]
    extra = kind == "overlapping"
    return [[a, min(b + extra, length)] for a, b in zip(bounds, bounds[1:])]



def spec_fields(op: str, row: dict) -> dict | None:
    """The PoolSpec.from_dict fields of a full row, or None where the row is not a valid
    geometry (no window, a value class that does not exist for its kernel, a ceil_mode class
    its numbers do not meet)."""
    size = SIZES[row["size"]][row["rank"]]
    if "regions" in row:
        return {"regions": [fractional_regions(row["regions"], n) for n in size]}
    if "output_size" in row:
        per_dim = {"1": [1] * len(size), "input": list(size), "half": [max(1, n // 2) for n in size],
                   "non_dividing": [3 if n % 3 else 2 for n in size], "over_input": [n + 1 for n in size]}
        out = per_dim[row["output_size"]]
        if row["output_size"] == "non_dividing" and not any(n % o for n, o in zip(size, out)):
            return None
        return {"output_size": out}
    kernel = list(size) if row["kernel"] == "input" else [int(row["kernel"])] * len(size)
    stride = {"1": [1] * len(size), "kernel": kernel, "over_kernel": [k + 1 for k in kernel]}[row["stride"]]
    fields: dict = {"kernel_size": kernel, "stride": stride}
    pad_class = row.get("padding", "0")
    if pad_class == "max":
        if max(kernel) < 2:
            return None  # the largest padding of a 1-tap window is 0: the "0" class
        fields["padding"] = [k // 2 for k in kernel]
    elif pad_class == "over_half":
        if max(kernel) - 1 <= max(kernel) // 2:
            return None  # kernel - 1 is half the kernel: the "max" class
        fields["padding"] = [k - 1 for k in kernel]
    elif pad_class == "kernel":
        fields["padding"] = kernel
    elif pad_class == "SAME":
        fields["padding"] = "SAME"
    elif pad_class == "asymmetric":
        if max(kernel) < 2:
            return None
        fields["padding"] = [[0, 1]] * len(size)
    if row.get("dilation", "1") != "1":
        if max(kernel) < 2:
            return None
        fields["dilation"] = int(row["dilation"])
    if row["ceil_mode"] != "off":
        if pad_class == "SAME":
            return None
        fields["ceil_mode"] = True
    if row.get("count_include_pad") == "false":
        if pad_class == "0":
            return None  # nothing to exclude: the same geometry as "true"
        fields["count_include_pad"] = False
    if row.get("divisor_override", "none") != "none":
        fields["divisor_override"] = int(row["divisor_override"])
    if "norm_type" in row:
        fields["norm_type"] = float(row["norm_type"])
    try:
        spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields})
        geom = resolve(spec, (1, 1, *size))
    except SpecError:
        return None
    if min(geom.out_shape) < 1:
        return None
    if row["ceil_mode"] != "off":
        floor = resolve(PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields, "ceil_mode": False}),
                        (1, 1, *size))
        if (geom.out_shape != floor.out_shape) != (row["ceil_mode"] == "overhang"):
            return None
    return fields


@functools.lru_cache(maxsize=None)
def _valid_rows(op: str, paths: bool = False) -> tuple[tuple, ...]:
    """The valid full rows of the op's model (``paths``: with PATH_PADDING's pads too)."""
    model = {**MODEL[op], "padding": MODEL[op]["padding"] + PATH_PADDING} if paths and "padding" in MODEL[op] \
        else MODEL[op]
    names = list(model)
    return tuple(values for values in itertools.product(*model.values())
                 if spec_fields(op, dict(zip(names, values))) is not None)


def _pairs(rows, n: int) -> set:
    return {((i, row[i]), (j, row[j])) for row in rows for i, j in itertools.combinations(range(n), 2)}


def _key(row: dict) -> tuple:
    return row["rank"], row["tag"], row["dtype"]


@functools.lru_cache(maxsize=None)
def _geometries(op: str) -> dict[tuple, tuple[tuple, ...]]:
    """(rank, tag, dtype) -> the valid class rows that come out as that geometry (value classes
    coincide on small inputs: output_size "1", "half" and "input" of a one-element dim)."""
    names = list(MODEL[op])
    out: dict[tuple, list] = {}
    for values in _valid_rows(op, paths=True):
        out.setdefault(_key(geometry_row(op, dict(zip(names, values)))), []).append(values)
    return {key: tuple(rows) for key, rows in out.items()}


def _array_rows(op: str) -> list[tuple]:
    """allpairspy's covering array of the op's parameters, pruned to partial rows that some
    valid full row extends, then completed: where pruning left a feasible pair out, the first
    valid row holding it is added. Deterministic."""
    names = list(MODEL[op])
    valid = _valid_rows(op)
    prefixes = {row[:n] for row in valid for n in range(1, len(names) + 1)}
    rows = [tuple(r) for r in AllPairs([list(v) for v in MODEL[op].values()],
                                      filter_func=lambda row: tuple(row) in prefixes)]
    for pair in sorted(_pairs(valid, len(names)) - _pairs(rows, len(names)), key=str):
        if pair not in _pairs(rows, len(names)):
            rows.append(next(r for r in valid if all(r[i] == v for i, v in pair)))
    return rows


def covering_rows(op: str, have=()) -> list[dict]:
    """The rows of allpairspy's covering array that the geometries ``have`` (rank, tag, dtype:
    the core rows) leave needed: each row is a framework call, and a compilation, on every
    target, and the core rows cover most pairs already. Taken greedily, the row covering the
    most pairs still uncovered first (the array's first on a tie), until every feasible pair
    is covered; the whole array covers them all, so this ends. allpairspy cannot start from
    given rows: its whole array beside the core rows made 15 more calls (226 rows against 211).
    Only the array's rows are candidates, so the knowledge base's findings were all measured
    on these geometries; a greedy choice among every valid row needs 181 rows, but its new
    geometries meet behaviours no finding explains yet (Keras on torch refusing a SAME window
    larger than a 1-element depth, float32 average sums overflowing in TF, torch.compile's
    dilated ceil_mode 3-D windows, JAX's NaN scan under asymmetric 3-D padding, ...)."""
    n = len(MODEL[op])
    geometries = _geometries(op)
    todo = _pairs(_valid_rows(op), n).difference(*(_pairs(geometries[key], n) for key in have if key in geometries))
    # A row covers the pairs of every valid class row that comes out as its geometry.
    key_of = {values: key for key, group in geometries.items() for values in group}
    candidates = [(row, _pairs(geometries[key_of[row]], n)) for row in _array_rows(op)]
    chosen = []
    while todo:
        row, pairs = max(candidates, key=lambda c: len(c[1] & todo))
        if not pairs & todo:  # the array covers every feasible pair, so this would be a bug
            raise AssertionError(f"{op}: allpairspy's array leaves {sorted(todo)[:3]} uncovered")
        chosen.append(row)
        todo -= pairs
    return [dict(zip(MODEL[op], row)) for row in chosen]


def _pad_kind(before: int, after: int) -> str | None:
    return None if before == after == 0 else "symmetric" if before == after else "asymmetric"


def path_classes(op: str, row: dict) -> frozenset[tuple]:
    """The API-path classes a valid class row meets: (path, rank, "SAME", "first"|"last" axis,
    "symmetric"|"asymmetric") for each path in SAME_PATHS that takes it, ceil_mode's class for
    each path that takes that, (path, "one_element") for a one-element input, (path, "padding",
    class) for an explicit pad past torch's limit (PATH_PADDING) that the path takes, (path,
    "ceil_dropped", "padded"|"unpadded") for a ceil_mode window that would start past the input
    (PyTorch's rule drops it; a kernel without the rule returns one more output row)."""
    fields = spec_fields(op, row)
    size = SIZES[row["size"]][row["rank"]]
    spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields})
    shape = (1, 1, *size)
    geom = resolve(spec, shape)
    pads = geom.pads
    dropped = spec.ceil_mode and any(
        ceil_drops_window(a.length, k, s, d, before, after) for a, k, s, d, (before, after)
        in zip(geom.axes, geom.kernel_size, geom.stride, geom.dilation, pads))
    out = set()
    for name, (plan, variant) in PATHS.items():
        if isinstance(plan(spec, variant, shape), Unsupported):
            continue
        if name in SAME_PATHS and fields.get("padding") == "SAME":
            out.update((name, row["rank"], "SAME", axis, kind) for axis, (before, after) in
                       (("first", pads[0]), ("last", pads[-1])) if (kind := _pad_kind(before, after)))
        if row.get("ceil_mode", "off") != "off":
            out.add((name, row["rank"], "ceil_mode", row["ceil_mode"]))
            if dropped:
                out.add((name, "ceil_dropped", "padded" if any(before or after for before, after in pads)
                         else "unpadded"))
        if row["size"] == "one_element":
            out.add((name, "one_element"))
        if row.get("padding") in PATH_PADDING:
            out.add((name, "padding", row["padding"]))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def _path_classes(op: str) -> dict[tuple, frozenset]:
    names = list(MODEL[op])
    return {values: path_classes(op, dict(zip(names, values))) for values in _valid_rows(op, paths=True)}


# Path classes met in passes of their own (path_rows' ``group``), after the others, so that the
# others keep the rows the op's own values give them: PATH_PADDING's pads (from rows with them),
# ceil_mode's dropped window (issue 38: a class the rows chosen for the others met only padded).
PATH_GROUPS = (None, "padding", "ceil_dropped")


def path_rows(op: str, have=(), group: str | None = None) -> list[dict]:
    """Valid class rows that meet the path classes of ``group`` (PATH_GROUPS) the geometries
    ``have`` (rank, tag, dtype) leave unmet: greedily, the row meeting the most first, then float32
    (every kernel has it), then by _KERNEL_PREFERENCE and _STRIDE_PREFERENCE, then the product's
    order. Deterministic. Only the "padding" group draws from rows with PATH_PADDING's pads."""
    names = list(MODEL[op])
    own = set(_valid_rows(op))
    classes = {values: {c for c in found if (c[1] if c[1] in PATH_GROUPS else None) == group}
               for values, found in _path_classes(op).items() if group == "padding" or values in own}
    geometries = _geometries(op)
    todo = set().union(*classes.values()).difference(
        *(classes.get(values, ()) for key in have for values in geometries.get(key, ())))
    kernel = names.index("kernel") if "kernel" in names else None
    stride = names.index("stride") if "stride" in names else None
    dtype = names.index("dtype")

    def preference(values):
        return (len(classes[values] & todo), values[dtype] == "float32",
                -_KERNEL_PREFERENCE.index(values[kernel]) if kernel is not None else 0,
                -_STRIDE_PREFERENCE.index(values[stride]) if stride is not None else 0)
    chosen = []
    while todo:
        values = max(classes, key=preference)
        chosen.append(values)
        todo -= classes[values]
    return [dict(zip(names, values)) for values in chosen]


def geometry_row(op: str, row: dict) -> dict:
    """The data a catalogue row holds: the op with rank, its geometry tag, size and dtype."""
    fields = spec_fields(op, row)
    spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields})
    size = SIZES[row["size"]][row["rank"]]
    return {"op": op, "rank": row["rank"], "tag": geometry_tag(spec, size), "size": list(size), "dtype": row["dtype"],
            "classes": {k: str(v) for k, v in row.items() if k not in ("rank", "dtype")}}


def coverage(op: str, rows: list[dict]) -> tuple[int, int, int, int]:
    """(feasible pairs the rows cover, feasible pairs, path classes they meet, path classes)
    for the op. A row covers every value pair, and meets every path class, of every valid
    class row that comes out as its geometry."""
    n = len(MODEL[op])
    have = {_key(r) for r in rows}
    realized = [values for key, group in _geometries(op).items() if key in have for values in group]
    feasible = _pairs(_valid_rows(op), n)
    classes = _path_classes(op)
    met = set().union(*(classes[values] for values in realized))
    return len(_pairs(realized, n) & feasible), len(feasible), len(met), len(set().union(*classes.values()))


def render_toml(rows_by_op: dict[str, list[dict]]) -> str:
    lines = ["# Generated by `python -m poolgrad.cases.coverage --write` from the model in poolgrad/cases/coverage.py:",
             "# a pairwise covering array of each op's geometry parameters. Do not edit by hand.", ""]
    for op, rows in rows_by_op.items():
        for r in rows:
            classes = ", ".join(f'{k} = "{v}"' for k, v in r["classes"].items())
            lines += [f"[[{op}]]", f'rank = {r["rank"]}', f'tag = "{r["tag"]}"', f'size = {r["size"]}',
                      f'dtype = "{r["dtype"]}"', f"classes = {{ {classes} }}", ""]
    return "\n".join(lines)


def render_doc(rows_by_op: dict[str, list[dict]]) -> str:
    out = ["# Geometry coverage", "",
           "Generated by `python -m poolgrad.cases.coverage --write`; the model (parameters and boundary values) is in",
           "`poolgrad/cases/coverage.py`, the rows in `poolgrad/cases/data/geometries.toml`. Every row is one framework call that",
           "carries every value family (ties, NaN, infinities, signed zeros, subnormals, ...) at once.", "",
           "Core rows add the geometries every value family meets in every rank and dtype:",
           ", ".join(f"{op} {' '.join(t for t, _ in tags)}" for op, tags in CORE.items() if tags) + "; and "
           + ", ".join(f"{op} ({', '.join(c['regions'] for c in rows)} regions: 2-D, odd size, float32)"
                       for op, rows in CORE_CLASSES.items()) + ".", "",
           "API paths (each framework record's `api_paths`, its planner saying which rows a path takes) add rows where",
           "their own classes are not met: SAME resolving to symmetric and to asymmetric pads along the first and the last",
           f"spatial axis, in every rank, for every path given \"SAME\" ({', '.join(SAME_PATHS)}; a path on several",
           "frameworks, on each); ceil_mode with and without overhang in every rank for every path that takes it; a one-element input",
           "for every path; explicit pads past half the kernel, where some paths stop (kernel - 1, the largest others take, and the",
           "kernel's length, windows of padding alone) for every path that takes them.", "",
           "| op | parameters: boundary values | rows | feasible pairs covered | path classes met |",
           "| --- | --- | --- | --- | --- |"]
    for op, rows in rows_by_op.items():
        covered, feasible, met, classes = coverage(op, rows)
        params = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in MODEL[op].items())
        out.append(f"| {op} | {params} | {len(rows)} | {covered} / {feasible} | {met} / {classes} |")
    return "\n".join(out) + "\n"


def generate() -> dict[str, list[dict]]:
    """Every op's rows, less rows that repeat an earlier row's geometry, size and dtype (value
    classes can coincide, e.g. padding "max" of a 2-tap window on a one-element dim)."""
    out = {}
    for op in MODEL:
        rows = {}
        for tag, size_class in CORE[op]:
            for rank, dtype in itertools.product(MODEL[op]["rank"], DTYPES):
                size = SIZES[size_class][rank]
                spec = PoolSpec.from_dict({"op": f"{op}{rank}d", **parse_geometry(tag, rank)})
                r = {"op": op, "rank": rank, "tag": geometry_tag(spec, size), "size": list(size),
                     "dtype": dtype, "classes": {"core": "true"}}
                rows[(rank, r["tag"], dtype)] = r
        for classes in CORE_CLASSES.get(op, ()):
            r = geometry_row(op, classes)
            rows[_key(r)] = {**r, "classes": {**r["classes"], "core": "true"}}
        for r in map(functools.partial(geometry_row, op), covering_rows(op, have=list(rows))):
            rows.setdefault(_key(r), r)
        for group in PATH_GROUPS:
            for r in map(functools.partial(geometry_row, op), path_rows(op, have=list(rows), group=group)):
                rows.setdefault(_key(r), {**r, "classes": {**r["classes"], "path": "true"}})
        out[op] = list(rows.values())
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m poolgrad.cases.coverage", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="regenerate the rows and docs/COVERAGE.md")
    args = ap.parse_args(argv)
    rows = generate() if args.write else load()
    if args.write:
        GEOMETRIES_PATH.write_text(render_toml(rows))
        COVERAGE_DOC.write_text(render_doc(rows))
    print(render_doc(rows), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
