"""Geometry coverage as data: every pair of boundary values of each op's geometry parameters.

The model (geometry_classes.py) names, per op, the parameters users vary and their boundary values (global
pooling, kernel = input, stride 1 and > kernel, padding 0 and half the kernel, SAME
and asymmetric pads, dilation, ceil_mode with and without an overhanging window, one-element
and non-square inputs, every rank and dtype). A pairwise covering array (allpairspy), less the
rows the core rows make unneeded, picks rows so that every *feasible* pair of values meets in
some row; a pair is feasible when some valid full row holds it, which is decided by
enumerating the (small) full product. Each row is a framework call (and a compilation) on
every target, so the array is kept small.

The op's pairs do not promise what each API path distinguishes (a path takes only some rows:
layers APIs no ceil_mode, dilation or divisor_override, some paths no asymmetric pads), so rows are
added where a path's own classes (api_paths.py) are not met yet: SAME resolving to
symmetric and to asymmetric pads along the first and along the last spatial axis, in every rank,
for every path given "SAME" as a string; ceil_mode with and without overhang in every rank for
every path that takes it; a one-element input for every path; explicit pads past half the kernel
(PATH_PADDING) for every path that takes them.

    python -m poolgrad.cases.coverage            print what poolgrad/cases/data/geometries.toml covers
    python -m poolgrad.cases.coverage --write    regenerate poolgrad/cases/data/geometries.toml and docs/COVERAGE.md

Each row is one geometry (op, rank, dtype, spatial size): one framework call that carries
every value family of poolgrad/cases/data/families.toml at once.
"""

from __future__ import annotations

import argparse
import functools
import itertools
from pathlib import Path

from allpairspy import AllPairs

from poolgrad.reference import PoolSpec

from .api_paths import PATH_GROUPS, path_classes_by_row, path_rows, same_paths
from .catalogue import GEOMETRIES_PATH, geometry_rows as load
from .geometry_classes import (DTYPES, MODEL, SIZES, geometry_row, row_key, rows_by_geometry, valid_rows,
                               value_pairs)
from .ids import geometry_tag, parse_geometry

COVERAGE_DOC = Path(__file__).parents[2] / "docs" / "COVERAGE.md"


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
# Core rows given as value classes: each kind of fractional region (fractional_regions) in the
# one geometry the built-in frameworks' fractional kernels all run (2-D, float32: some have no 3-D
# kernel, some no half-precision one).
CORE_CLASSES = {"fractional_max_pool": [{"rank": 2, "size": "odd", "dtype": "float32", "regions": kind}
                                        for kind in ("fixed_size", "partition", "overlapping")]}

def _array_rows(op: str) -> list[tuple]:
    """allpairspy's covering array of the op's parameters, pruned to partial rows that some
    valid full row extends, then completed: where pruning left a feasible pair out, the first
    valid row holding it is added. Deterministic."""
    names = list(MODEL[op])
    valid = valid_rows(op)
    prefixes = {row[:n] for row in valid for n in range(1, len(names) + 1)}
    rows = [tuple(r) for r in AllPairs([list(v) for v in MODEL[op].values()],
                                      filter_func=lambda row: tuple(row) in prefixes)]
    for pair in sorted(value_pairs(valid, len(names)) - value_pairs(rows, len(names)), key=str):
        if pair not in value_pairs(rows, len(names)):
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
    geometries meet behaviours no finding explains yet (a SAME window larger than a one-element
    depth refused, float32 average sums overflowing, dilated ceil_mode 3-D windows compiled,
    NaN from a scan under asymmetric 3-D padding, ...)."""
    n = len(MODEL[op])
    geometries = rows_by_geometry(op)
    todo = value_pairs(valid_rows(op), n).difference(
        *(value_pairs(geometries[key], n) for key in have if key in geometries))
    # A row covers the pairs of every valid class row that comes out as its geometry.
    key_of = {values: key for key, group in geometries.items() for values in group}
    candidates = [(row, value_pairs(geometries[key_of[row]], n)) for row in _array_rows(op)]
    chosen = []
    while todo:
        row, pairs = max(candidates, key=lambda c: len(c[1] & todo))
        if not pairs & todo:  # the array covers every feasible pair, so this would be a bug
            raise AssertionError(f"{op}: allpairspy's array leaves {sorted(todo)[:3]} uncovered")
        chosen.append(row)
        todo -= pairs
    return [dict(zip(MODEL[op], row)) for row in chosen]


def coverage(op: str, rows: list[dict]) -> tuple[int, int, int, int]:
    """(feasible pairs the rows cover, feasible pairs, path classes they meet, path classes)
    for the op. A row covers every value pair, and meets every path class, of every valid
    class row that comes out as its geometry."""
    n = len(MODEL[op])
    have = {row_key(r) for r in rows}
    realized = [values for key, group in rows_by_geometry(op).items() if key in have for values in group]
    feasible = value_pairs(valid_rows(op), n)
    classes = path_classes_by_row(op)
    met = set().union(*(classes[values] for values in realized))
    return len(value_pairs(realized, n) & feasible), len(feasible), len(met), len(set().union(*classes.values()))


def render_toml(rows_by_op: dict[str, list[dict]]) -> str:
    lines = ["# Generated by `python -m poolgrad.cases.coverage --write` from the model in poolgrad/cases/geometry_classes.py:",
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
           "`poolgrad/cases/geometry_classes.py`, the rows in `poolgrad/cases/data/geometries.toml`. Every row is one framework call that",
           "carries every value family (ties, NaN, infinities, signed zeros, subnormals, ...) at once.", "",
           "Core rows add the geometries every value family meets in every rank and dtype:",
           ", ".join(f"{op} {' '.join(t for t, _ in tags)}" for op, tags in CORE.items() if tags) + "; and "
           + ", ".join(f"{op} ({', '.join(c['regions'] for c in rows)} regions: 2-D, odd size, float32)"
                       for op, rows in CORE_CLASSES.items()) + ".", "",
           "API paths (each framework record's `api_paths`, its planner saying which rows a path takes) add rows where",
           "their own classes are not met: SAME resolving to symmetric and to asymmetric pads along the first and the last",
           f"spatial axis, in every rank, for every path given \"SAME\" ({', '.join(same_paths())}; a path on several",
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
            rows[row_key(r)] = {**r, "classes": {**r["classes"], "core": "true"}}
        for r in map(functools.partial(geometry_row, op), covering_rows(op, have=list(rows))):
            rows.setdefault(row_key(r), r)
        for group in PATH_GROUPS:
            for r in map(functools.partial(geometry_row, op), path_rows(op, have=list(rows), group=group)):
                rows.setdefault(row_key(r), {**r, "classes": {**r["classes"], "path": "true"}})
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
