"""Geometry coverage as data: the committed rows are the generator's, and they cover every
feasible pair of boundary values of every op."""

from __future__ import annotations

import pytest

from poolgrad.cases import coverage
from poolgrad.cases.catalogue import geometry_rows
from poolgrad.cases.ids import input_size, parse_geometry
from poolgrad.reference import PoolSpec, resolve


def test_committed_rows_and_doc_are_generated():
    hint = "run: python -m poolgrad.cases.coverage --write"
    generated = coverage.generate()  # here, not at import: every pytest process collects this module
    assert coverage.GEOMETRIES_PATH.read_text() == coverage.render_toml(generated), hint
    assert coverage.COVERAGE_DOC.read_text() == coverage.render_doc(generated), hint


@pytest.mark.parametrize("op", list(coverage.MODEL))
def test_every_feasible_pair_is_covered(op):
    covered, feasible = coverage.coverage(op, geometry_rows()[op])
    assert covered == feasible > 0


def test_a_missing_row_shows_as_uncovered_pairs():
    rows = [r for r in geometry_rows()["max_pool"] if r["classes"].get("dilation") != "2"]
    covered, feasible = coverage.coverage("max_pool", rows)
    assert covered < feasible


def test_boundary_classes_mean_what_they_say():
    rows = coverage.covering_rows("max_pool") + coverage.covering_rows("adaptive_avg_pool")
    for row in rows:
        op = "max_pool" if "kernel" in row else "adaptive_avg_pool"
        fields = coverage.spec_fields(op, row)
        size = coverage.SIZES[row["size"]][row["rank"]]
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
