"""The catalogue as a whole: deterministic, fast, readable ids, every op and rank, valid for
the reference."""

from __future__ import annotations

import importlib

import pytest

from poolgrad import reference
from poolgrad.adapters import registry
from poolgrad.adapters.base import Unsupported
from poolgrad.cases import catalogue, families
from poolgrad.cases.geometry_classes import MODEL
from poolgrad.cases.ids import geometry_tag, parse_id
from poolgrad.reference import PoolSpec
from poolgrad.reference.properties import case_properties

CASES = catalogue()
# The module, which `cases.catalogue` (the function) shadows as an attribute.
catalogue_module = importlib.import_module("poolgrad.cases.catalogue")


def _same(a, b) -> bool:
    return (a.id == b.id and a.family == b.family and a.spec == b.spec
            and a.input.dtype == b.input.dtype and a.input.shape == b.input.shape
            and a.input.tobytes() == b.input.tobytes() and a.grad_output.tobytes() == b.grad_output.tobytes())


def test_fresh_build_is_identical():
    fresh = catalogue_module._catalogue.__wrapped__()  # bypasses the cache
    assert len(fresh) == len(CASES)
    assert all(_same(a, b) for a, b in zip(fresh, CASES))
    assert [c.id for c in catalogue()] == [c.id for c in CASES]


def test_size_is_what_ci_can_afford():
    # the realistic families (issue 29) add about 600 cases, in calls that exist; the dilation rows at
    # stride 1 with explicit pads (issue 38) about 40
    assert 1500 <= len(CASES) <= 4100


def test_ids_unique():
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids)


def test_every_family_present():
    assert {c.family for c in CASES} == set(families())


@pytest.mark.parametrize("op, rank", [(op, rank) for op in MODEL for rank in MODEL[op]["rank"]])
def test_every_op_and_rank_in_every_dtype(op, rank):
    dtypes = {c.spec.dtype for c in CASES if c.spec.op == op and c.spec.rank == rank}
    assert dtypes == set(reference.DTYPES)


def test_ids_parse_back_to_the_spec():
    for c in CASES:
        parsed = parse_id(c.id)
        assert PoolSpec.from_dict(parsed["spec"]) == c.spec, c.id
        assert parsed["family"] == c.family
        assert parsed["size"] == c.input.shape[2:], c.id
        assert geometry_tag(c.spec, c.input.shape[2:]) == c.id.split("-")[1]


def test_id_reads_like_the_spec():
    c = next(c for c in CASES if c.id == "max_pool2d-k3s1-ties_overlap-float16")
    assert (c.spec.op, c.spec.rank, c.spec.kernel_size, c.spec.stride) == ("max_pool", 2, 3, 1)
    assert parse_id("avg_pool3d-k3s2p0_1ceilcip0div5-negative-bfloat16")["spec"] == {
        "op": "avg_pool3d", "kernel_size": 3, "stride": 2, "padding": [[0, 1]] * 3, "ceil_mode": True,
        "count_include_pad": False, "divisor_override": 5, "dtype": "bfloat16"}
    per_dim = parse_id("max_pool2d-k7x4s8x5p3x2i7x4-random-float32")
    assert per_dim["spec"]["kernel_size"] == [7, 4] and per_dim["spec"]["padding"] == [3, 2]
    assert per_dim["size"] == (7, 4)


def test_arrays_have_the_case_dtype_shape_and_are_read_only():
    # the channels family needs three disjoint 3x3 windows; signed_zero_wide 64 windows of 3x3;
    # segment_realistic a graph's 24 edges; large_plane_mean more elements than float16 counts
    limits = {1: 11, 2: 10, 3: 5}
    for c in CASES:
        dtype = reference.DTYPES[c.spec.dtype]
        limit = 24 if c.spec.is_segment else 4096 if c.family == "large_plane_mean" else limits[c.spec.rank]
        assert c.input.dtype == dtype and c.grad_output.dtype == dtype, c.id
        assert c.input.ndim == c.spec.rank + 2 and max(c.input.shape[2:]) <= limit, c.id
        assert c.grad_output.shape == reference.output_shape(c.spec, c.input.shape), c.id
        assert not c.input.flags.writeable and not c.grad_output.flags.writeable


def test_every_case_runs_through_the_reference():
    for c in CASES:
        y = reference.forward(c.spec, c.input)
        dx = reference.backward(c.spec, c.input, c.grad_output)
        assert y.shape == c.grad_output.shape and dx.shape == c.input.shape, c.id


def test_group_key_batches_same_spec_dtype_and_shape():
    keys = {}
    for c in CASES:
        keys.setdefault(c.group_key, []).append(c)
    for members in keys.values():
        assert len({(m.spec, m.input.shape) for m in members}) == 1
    assert len(keys) < len(CASES)  # families sharing a geometry do batch


def test_family_definitions_are_checked(tmp_path, monkeypatch):
    bad = tmp_path / "families.toml"
    bad.write_text('[oops]\ngenerator = "plain.tie_free"\ngeometries.max_pool = ["k2s2"]\nsizes = [1]\n')
    monkeypatch.setattr(catalogue_module, "FAMILIES_PATH", bad)
    catalogue_module._definitions.cache_clear()
    try:
        with pytest.raises(ValueError, match="oops"):
            catalogue_module._definitions()
    finally:
        catalogue_module._definitions.cache_clear()


def _plans():
    """Every framework path's pure planner, by (framework, variant)."""
    return {(name, variant): (importlib.import_module(fw.worker(variant).planner).plan, variant)
            for name, fw in registry.FRAMEWORKS.items() for variant in fw.variants}


def _taken(plan, variant, cases):
    return [c for c in cases if not isinstance(plan(c.spec, variant, c.input.shape), Unsupported)]


def test_overflowing_sums_reach_every_path_that_averages_in_half_precision():
    """Issue 38: a float16 mean written as extract_patches + reduce_mean gave inf, and no case
    reached it. Every path that takes an average takes a case whose window sum overflows float16,
    and one that overflows bfloat16 (the patch, reshape and global-mean idioms among them)."""
    averages = [c for c in CASES if c.spec.op in ("avg_pool", "adaptive_avg_pool")]
    overflowing = [c for c in averages if c.family.startswith("accumulation_sums") and c.spec.dtype in
                   ("float16", "bfloat16") and "window_sum_overflows" in case_properties(c.spec, c.input)]
    missing = []
    for key, (plan, variant) in _plans().items():
        if _taken(plan, variant, averages):
            reaches = {c.spec.dtype for c in _taken(plan, variant, overflowing)}
            missing += [(key, dtype) for dtype in sorted({"float16", "bfloat16"} - reaches)]
    assert not missing


def test_signed_zero_ties_reach_every_max_path():
    """Issue 38: which tied zero a reduction returns shows only where its order does (one channel
    in MLX, many windows in F.unfold + amax). Every path that takes max pooling takes a case whose
    window ties +0.0 with -0.0, and those that cut 3x3 windows in bfloat16 one with a single channel."""
    ties = [c for c in CASES if c.spec.is_max and c.family.startswith("signed_zero")
            and "signed_zero_tie" in case_properties(c.spec, c.input)]
    one_channel = [c for c in ties if c.input.shape[1] == 1]
    missing = []
    for key, (plan, variant) in _plans().items():
        if not _taken(plan, variant, [c for c in CASES if c.spec.op == "max_pool"]):
            continue
        missing += [key] if not _taken(plan, variant, ties) else []
        missing += [(key, "one channel")] if not _taken(plan, variant, one_channel) and _taken(
            plan, variant, [c for c in CASES if c.spec.op == "max_pool" and c.spec.rank == 2 and c.spec.dtype == "bfloat16"
                            and reference.resolve(c.spec, c.input.shape).kernel_size == (3, 3)
                            and reference.resolve(c.spec, c.input.shape).stride == (1, 1)]) else []
    assert not missing
