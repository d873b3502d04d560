"""The geometry model of the catalogue: per op, the parameters users vary and their boundary
values (value classes), and the geometry a row of classes stands for (its PoolSpec fields, its
catalogue row), or none where the classes make no valid geometry."""

from __future__ import annotations

import functools
import itertools

from poolgrad.reference import DTYPES as REFERENCE_DTYPES, PoolSpec, SpecError, resolve

from .ids import DEFAULT_SIZE, geometry_tag

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
# Explicit pads past half the kernel, where some paths stop, for the paths that take them:
# kernel - 1 (the largest of paths whose pad must be smaller than the window) and a pad as long
# as the kernel (windows of padding alone, for paths that take any pad). Path rows only: the
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
    # Regions as frameworks draw them (fractional_regions); 2-D and 3-D, the ranks fractional
    # pooling kernels have. A one-element dim has one region whatever the kind: not a class.
    "fractional_max_pool": {"rank": (2, 3), "size": ("even", "odd", "non_square"), "dtype": DTYPES,
                            "regions": ("fixed_size", "partition", "overlapping")},
}


def fractional_regions(kind: str, length: int) -> list[list[int]]:
    """One dim's regions of a kind, about 2/3 as many as the input is long (Graham's ratio
    between 1 and 2), in the encodings SPEC.md's "Fractional regions" names: "partition" a
    pooling sequence's non-overlapping regions, boundaries floor(i * L / out) (steps of
    floor(L / out) and one more); "overlapping" the same, each region one past the next
    boundary; "fixed_size" windows of 2 spread over the input, starts
    floor(i * (L - 2) / (out - 1)), the last at L - 2, at most L - 2 of them (out + kernel - 1
    = L, the spec's fractional_unit_steps, is refused by some kernels: their findings say which)."""
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
    fields = _window_fields(row)
    return fields if fields is not None and _resolves(op, _without_dtype(row)) else None


def _without_dtype(row: dict) -> tuple:
    """A row's classes but its dtype, which no geometry depends on: the key of the work done per
    geometry (the generator asks for each row in every dtype, and again per path and per tag)."""
    return tuple((k, v) for k, v in row.items() if k != "dtype")


def _window_fields(row: dict) -> dict | None:
    """A window op's fields as the row's classes name them, before they are resolved (None: a
    class that does not exist for its kernel)."""
    size = SIZES[row["size"]][row["rank"]]
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
    return fields


@functools.lru_cache(maxsize=None)
def _resolves(op: str, classes: tuple) -> bool:
    """Whether the fields of a row (its classes but the dtype) resolve to a window with output
    that meets the row's ceil_mode class."""
    row = dict(classes)
    fields = _window_fields(row)
    size = SIZES[row["size"]][row["rank"]]
    try:
        spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields})
        geom = resolve(spec, (1, 1, *size))
    except SpecError:
        return False
    if min(geom.out_shape) < 1:
        return False
    if row["ceil_mode"] != "off":
        floor = resolve(PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields, "ceil_mode": False}),
                        (1, 1, *size))
        return (geom.out_shape != floor.out_shape) == (row["ceil_mode"] == "overhang")
    return True


@functools.lru_cache(maxsize=None)
def valid_rows(op: str, paths: bool = False) -> tuple[tuple, ...]:
    """The valid full rows of the op's model (``paths``: with PATH_PADDING's pads too)."""
    model = {**MODEL[op], "padding": MODEL[op]["padding"] + PATH_PADDING} if paths and "padding" in MODEL[op] \
        else MODEL[op]
    names = list(model)
    return tuple(values for values in itertools.product(*model.values())
                 if spec_fields(op, dict(zip(names, values))) is not None)


def value_pairs(rows, n: int) -> set:
    return {((i, row[i]), (j, row[j])) for row in rows for i, j in itertools.combinations(range(n), 2)}


def row_key(row: dict) -> tuple:
    return row["rank"], row["tag"], row["dtype"]


@functools.lru_cache(maxsize=None)
def rows_by_geometry(op: str) -> dict[tuple, tuple[tuple, ...]]:
    """(rank, tag, dtype) -> the valid class rows that come out as that geometry (value classes
    coincide on small inputs: output_size "1", "half" and "input" of a one-element dim)."""
    names = list(MODEL[op])
    out: dict[tuple, list] = {}
    for values in valid_rows(op, paths=True):
        out.setdefault(row_key(geometry_row(op, dict(zip(names, values)))), []).append(values)
    return {key: tuple(rows) for key, rows in out.items()}


def geometry_row(op: str, row: dict) -> dict:
    """The data a catalogue row holds: the op with rank, its geometry tag, size and dtype."""
    return {"op": op, "rank": row["rank"], "tag": _tag(op, _without_dtype(row)),
            "size": list(SIZES[row["size"]][row["rank"]]), "dtype": row["dtype"],
            "classes": {k: str(v) for k, v in row.items() if k not in ("rank", "dtype")}}


@functools.lru_cache(maxsize=None)
def _tag(op: str, classes: tuple) -> str:
    row = dict(classes)
    spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **spec_fields(op, row)})
    return geometry_tag(spec, SIZES[row["size"]][row["rank"]])
