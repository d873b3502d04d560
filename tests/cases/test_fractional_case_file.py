"""fractional_max_pool in case files and ids: its regions round-trip, bad regions are refused
naming the field and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

from poolgrad.cases import CaseFileError, load_case_file, write_case_file
from poolgrad.cases.ids import geometry_tag, parse_geometry
from poolgrad.cases.model import make_case
from poolgrad.reference import PoolSpec, forward

# Overlapping, unordered, of different sizes: every way regions can differ from a sliding window.
REGIONS = [[[3, 5], [0, 2], [1, 4]], [[0, 1], [1, 4]]]
GOOD = {"id": "frac", "op": "fractional_max_pool", "regions": REGIONS,
        "input": np.arange(20.0).reshape(1, 1, 5, 4).tolist()}


def _file(tmp_path, *cases):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": list(cases)}))
    return path


def test_regions_load_as_written_and_pool_those_regions(tmp_path):
    (case,) = load_case_file(_file(tmp_path, GOOD))
    assert case.spec.regions == tuple(tuple(map(tuple, dim)) for dim in REGIONS)
    # Row regions [3,5), [0,2), [1,4) and column regions [0,1), [1,4) of x[i, j] = 4 i + j:
    # each region's maximum is its last row's, last column's element.
    assert case.grad_output.shape == (1, 1, 3, 2)
    assert forward(case.spec, case.input).ravel().tolist() == [16, 19, 4, 7, 12, 15]


def test_regions_round_trip_through_a_written_file(tmp_path):
    spec = PoolSpec.from_dict({"op": "fractional_max_pool3d", "regions": [[[0, 2], [1, 3]], [[0, 1]], [[2, 3], [0, 3]]],
                               "dtype": "bfloat16"})
    case = make_case("three", "user", spec, np.arange(27.0).reshape(1, 1, 3, 3, 3))
    write_case_file([case], tmp_path / "w.json")
    (back,) = load_case_file(tmp_path / "w.json")
    assert back.spec == case.spec
    assert json.loads((tmp_path / "w.json").read_text())["cases"][0]["regions"] == [
        [[0, 2], [1, 3]], [[0, 1]], [[2, 3], [0, 3]]]


@pytest.mark.parametrize("regions", [REGIONS, [[[0, 2], [1, 3], [2, 4]], [[0, 3], [1, 4]]],
                                     [[[0, 2], [2, 3]], [[0, 1], [1, 4]], [[0, 4]]]])
def test_geometry_tag_stands_for_the_regions(regions):
    spec = PoolSpec.from_dict({"op": f"fractional_max_pool{len(regions)}d", "regions": regions})
    tag = geometry_tag(spec)
    again = PoolSpec.from_dict({"op": f"fractional_max_pool{len(regions)}d", **parse_geometry(tag, len(regions))})
    assert again == spec, tag


BAD = [
    ("missing", {k: v for k, v in GOOD.items() if k != "regions"}, "required for fractional_max_pool"),
    ("not_per_dim", {**GOOD, "regions": [[0, 2], [2, 5]]}, "must be a pair of integers"),
    ("empty_dim", {**GOOD, "regions": [[], [[0, 1]]]}, "non-empty list"),
    ("empty_region", {**GOOD, "regions": [[[2, 2]], [[0, 1]]]}, "0 <= start < stop"),
    ("past_the_input", {**GOOD, "regions": [[[0, 6]], [[0, 1]]]}, "at most the length"),
    ("dims_disagree", {**GOOD, "regions": [[[0, 2]]]}, "one list of regions per spatial dim"),
    ("rank_disagrees", {**GOOD, "op": "fractional_max_pool3d"}, "one list of regions per spatial dim"),
    ("window_keys", {**GOOD, "kernel_size": 2}, None),
]


@pytest.mark.parametrize("entry, fix", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_regions_name_the_field_and_the_fix(tmp_path, entry, fix):
    with pytest.raises(CaseFileError) as info:
        load_case_file(_file(tmp_path, entry))
    if fix is None:  # a sliding-window key on fractional_max_pool is refused by its own name
        assert info.value.field == "kernel_size" and "it takes: regions" in str(info.value)
    else:
        assert info.value.field == "regions" and fix in str(info.value)
