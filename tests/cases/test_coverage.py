"""Geometry coverage as data: the committed rows are the generator's, and they cover every
feasible pair of boundary values of every op."""

from __future__ import annotations

import pytest

from poolgrad.adapters.base import Unsupported
from poolgrad.cases import api_paths, coverage, geometry_classes
from poolgrad.cases.catalogue import geometry_rows
from poolgrad.cases.ids import input_size, parse_geometry
from poolgrad.reference import PoolSpec, resolve
from poolgrad.reference.geometry import ceil_drops_window


def test_committed_rows_and_doc_are_generated():
    hint = "run: python -m poolgrad.cases.coverage --write"
    generated = coverage.generate()  # here, not at import: every pytest process collects this module
    assert coverage.GEOMETRIES_PATH.read_text() == coverage.render_toml(generated), hint
    assert coverage.COVERAGE_DOC.read_text() == coverage.render_doc(generated), hint


@pytest.mark.parametrize("op", list(geometry_classes.MODEL))
def test_every_feasible_pair_and_path_class_is_covered(op):
    covered, feasible, met, classes = coverage.coverage(op, geometry_rows()[op])
    assert covered == feasible > 0
    assert met == classes


def test_a_missing_row_shows_as_uncovered_pairs():
    rows = [r for r in geometry_rows()["max_pool"] if r["classes"].get("dilation") != "2"]
    covered, feasible, _, _ = coverage.coverage("max_pool", rows)
    assert covered < feasible


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_every_same_path_meets_symmetric_and_asymmetric_pads_along_both_axes_in_every_rank(op):
    """The rows themselves, resolved: each path given "SAME" (Keras on every backend among them)
    takes a row whose SAME pads are even, and one whose pads are uneven, along the first and
    along the last spatial axis, in ranks 1 to 3 (issue 29: Keras-on-torch's average pooling
    was wrong only where SAME pads unevenly, and no row Keras takes did)."""
    for path in api_paths.same_paths():
        plan, variant, _ = api_paths.paths()[path]
        met = set()
        for r in geometry_rows()[op]:
            fields = parse_geometry(r["tag"], r["rank"])
            spec = PoolSpec.from_dict({"op": f"{op}{r['rank']}d", **fields})
            shape = (1, 1, *r["size"])
            if fields.get("padding") != "SAME" or isinstance(plan(spec, variant, shape), Unsupported):
                continue
            pads = resolve(spec, shape).pads
            met |= {(r["rank"], axis, before == after) for axis, (before, after) in (("first", pads[0]), ("last", pads[-1]))
                    if before or after}
        ranks = (2,) if path == "tf.nn.max_pool_with_argmax" else (1, 2, 3)
        if op == "avg_pool" and path == "tf.nn.max_pool_with_argmax":
            continue
        wanted = {(rank, axis, even) for rank in ranks for axis in ("first", "last") for even in (True, False)}
        assert wanted <= met, (path, sorted(wanted - met))


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_every_path_meets_the_largest_explicit_pad_it_takes(op):
    """The rows themselves: each path whose planner takes an explicit pad past torch's limit (half
    the kernel) on some valid row takes a row with that pad (issue 29: explicit padding, zero and
    the largest each path allows; torch itself refuses such a pad, with its own message)."""
    wanted = {c for found in api_paths.path_classes_by_row(op).values() for c in found if c[1] == "padding"}
    rows = geometry_rows()[op]
    met = set()
    for path, (plan, variant, _) in api_paths.paths().items():
        for r in rows:
            fields = parse_geometry(r["tag"], r["rank"])
            spec = PoolSpec.from_dict({"op": f"{op}{r['rank']}d", **fields})
            shape = (1, 1, *r["size"])
            if isinstance(plan(spec, variant, shape), Unsupported):
                continue
            kernel = resolve(spec, shape).kernel_size
            pads = [before for before, _ in resolve(spec, shape).pads]
            met |= {(path, "padding", name) for name, over in (("over_half", [k - 1 for k in kernel]),
                                                                ("kernel", list(kernel)))
                    if pads == over and max(kernel) - 1 > max(kernel) // 2 and fields.get("padding") != "SAME"}
    assert wanted and wanted <= met, sorted(wanted - met)


def test_a_missing_path_row_shows_as_unmet_classes():
    rows = [r for r in geometry_rows()["avg_pool"] if "path" not in r["classes"]]
    _, _, met, classes = coverage.coverage("avg_pool", rows)
    assert met < classes


def test_boundary_classes_mean_what_they_say():
    rows = coverage.covering_rows("max_pool") + coverage.covering_rows("adaptive_avg_pool")
    for row in rows:
        op = "max_pool" if "kernel" in row else "adaptive_avg_pool"
        fields = geometry_classes.spec_fields(op, row)
        size = geometry_classes.SIZES[row["size"]][row["rank"]]
        if row.get("kernel") == "input":
            assert fields["kernel_size"] == list(size)
        if row.get("stride") == "over_kernel":
            assert all(s > k for s, k in zip(fields["stride"], fields["kernel_size"]))
        if row.get("output_size") == "1":
            assert fields["output_size"] == [1] * len(size)
        if row.get("ceil_mode") == "overhang":
            spec = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields})
            floor = PoolSpec.from_dict({"op": f"{op}{row['rank']}d", **fields, "ceil_mode": False})
            assert resolve(spec, (1, 1, *size)).out_shape != resolve(floor, (1, 1, *size)).out_shape


def test_rows_are_valid_geometry_with_their_size():
    for op, rows in geometry_rows().items():
        for r in rows:
            spec = PoolSpec.from_dict({"op": f"{op}{r['rank']}d", **parse_geometry(r["tag"], r["rank"])})
            assert input_size(r["tag"], r["rank"]) == tuple(r["size"])
            assert min(resolve(spec, (1, 1, *r["size"])).out_shape) >= 1, r


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_every_path_that_takes_ceil_mode_meets_a_dropped_window_padded_and_unpadded(op):
    """The rows themselves: each path whose planner takes a ceil_mode window that PyTorch's rule
    drops (one that would start past the input: kernel 3, stride 4 on 8), with padding and
    without, on some valid row takes a row with it (issue 38: PaddlePaddle returns that window,
    and only padded rows met it)."""
    classes = api_paths.path_classes_by_row(op)
    wanted = {c for values in geometry_classes.valid_rows(op) for c in classes[values] if c[1] == "ceil_dropped"}
    met = set()
    for path, (plan, variant, _) in api_paths.paths().items():
        for r in geometry_rows()[op]:
            spec = PoolSpec.from_dict({"op": f"{op}{r['rank']}d", **parse_geometry(r["tag"], r["rank"])})
            shape = (1, 1, *r["size"])
            if isinstance(plan(spec, variant, shape), Unsupported) or not spec.ceil_mode:
                continue
            geom = resolve(spec, shape)
            if any(ceil_drops_window(a.length, k, s, d, *pads) for a, k, s, d, pads
                   in zip(geom.axes, geom.kernel_size, geom.stride, geom.dilation, geom.pads)):
                met.add((path, "ceil_dropped", "padded" if any(map(any, geom.pads)) else "unpadded"))
    assert {(path, "ceil_dropped", kind) for path in ("torch",) for kind in ("padded", "unpadded")} <= wanted
    assert wanted <= met, sorted(wanted - met)
