"""The API paths' own geometry classes: the rows a path needs beyond its op's value pairs (SAME
resolved to symmetric and asymmetric pads, ceil_mode with and without overhang, a ceil_mode window
dropped, a one-element input, explicit pads past half the kernel), from the registered
frameworks' records (``api_paths``), read on first use."""

from __future__ import annotations

import functools
import importlib

from poolgrad.adapters import registry
from poolgrad.adapters.base import Unsupported
from poolgrad.reference import PoolSpec, resolve
from poolgrad.reference.geometry import ceil_drops_window

from .geometry_classes import MODEL, PATH_PADDING, SIZES, rows_by_geometry, spec_fields, valid_rows


@functools.cache
def paths() -> dict[str, tuple]:
    """The API paths whose own classes the rows cover, by name: (planner's plan, variant, given
    "SAME" as a string), from the registered frameworks' records (``api_paths``). The pure
    planners say whether a path takes a geometry. A path several records name (a multi-backend
    library's, whose variant runs on every backend) counts once: a row it takes reaches every
    backend."""
    found = {}
    for fw in registry.FRAMEWORKS.values():
        for name, (variant, same) in fw.api_paths.items():
            found.setdefault(name, (importlib.import_module(fw.worker(variant).planner).plan, variant, same))
    return dict(sorted(found.items()))


def same_paths() -> tuple[str, ...]:
    """The paths given padding "SAME" as a string, which resolve it themselves (the spec's SAME rule:
    the odd pad goes after)."""
    return tuple(name for name, (_, _, same) in paths().items() if same)


# Kernel classes in order of preference for a path row: 3 (what users write most; its windows
# at an asymmetric SAME pad read two real elements and the pad, where a 2-tap window reads one)
# first.
_KERNEL_PREFERENCE = ("3", "input", "2", "1")
# Then stride classes: windows that do not overlap first: a compiler can take minutes on the
# backward of a stride-1 3-D average pool, past the suite's per-call timeout, and seconds with
# stride = kernel.
_STRIDE_PREFERENCE = ("kernel", "over_kernel", "1")


def _pad_kind(before: int, after: int) -> str | None:
    return None if before == after == 0 else "symmetric" if before == after else "asymmetric"


def path_classes(op: str, row: dict) -> frozenset[tuple]:
    """The API-path classes a valid class row meets: (path, rank, "SAME", "first"|"last" axis,
    "symmetric"|"asymmetric") for each path of same_paths() that takes it, ceil_mode's class for
    each path that takes that, (path, "one_element") for a one-element input, (path, "padding",
    class) for an explicit pad past half the kernel (PATH_PADDING) that the path takes, (path,
    "ceil_dropped", "padded"|"unpadded") for a ceil_mode window that would start past the input
    (the spec's ceil_mode rule drops it; a kernel without the rule returns one more output row)."""
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
    for name, (plan, variant, same) in paths().items():
        if isinstance(plan(spec, variant, shape), Unsupported):
            continue
        if same and fields.get("padding") == "SAME":
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
        if row.get("dilation", "1") != "1" and row["stride"] == "1" and isinstance(fields.get("padding"), list):
            # Dilated (atrous) pooling as users write it, at stride 1 with explicit pads, in every
            # rank: some paths take a dilation at stride 1 only, and one pads explicit pads with
            # zeros (its findings say which).
            out.add((name, "dilation", row["rank"]))
    return frozenset(out)


@functools.lru_cache(maxsize=None)
def path_classes_by_row(op: str) -> dict[tuple, frozenset]:
    names = list(MODEL[op])
    dtype = names.index("dtype")
    by_geometry: dict[tuple, frozenset] = {}  # a row's path classes do not depend on its dtype
    out = {}
    for values in valid_rows(op, paths=True):
        key = values[:dtype] + values[dtype + 1:]
        if key not in by_geometry:
            by_geometry[key] = path_classes(op, dict(zip(names, values)))
        out[values] = by_geometry[key]
    return out


# Path classes met in passes of their own (path_rows' ``group``), after the others, so that the
# others keep the rows the op's own values give them: PATH_PADDING's pads (from rows with them),
# ceil_mode's dropped window (issue 38: a class the rows chosen for the others met only padded),
# dilation at stride 1 with explicit pads (the rows chosen for the others met it with ceil_mode or
# SAME only, which a path refuses).
PATH_GROUPS = (None, "padding", "ceil_dropped", "dilation")


def path_rows(op: str, have=(), group: str | None = None) -> list[dict]:
    """Valid class rows that meet the path classes of ``group`` (PATH_GROUPS) the geometries
    ``have`` (rank, tag, dtype) leave unmet: greedily, the row meeting the most first, then float32
    (every kernel has it), then by _KERNEL_PREFERENCE and _STRIDE_PREFERENCE, then the product's
    order. Deterministic. Only the "padding" group draws from rows with PATH_PADDING's pads."""
    names = list(MODEL[op])
    own = set(valid_rows(op))
    classes = {values: {c for c in found if (c[1] if c[1] in PATH_GROUPS else None) == group}
               for values, found in path_classes_by_row(op).items() if group == "padding" or values in own}
    geometries = rows_by_geometry(op)
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
