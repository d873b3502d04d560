"""Each family holds what its name says, checked window by window with brute-force windows."""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections import defaultdict

import ml_dtypes
import numpy as np
import pytest

from brute_windows import windows

from poolgrad import reference
from poolgrad.cases import catalogue, families
from poolgrad.cases.families import Context, generate
from poolgrad.cases.ids import parse_id
from poolgrad.cases.windows import window_taps
from poolgrad.reference import PoolSpec, output_shape, resolve
from poolgrad.reference.dtypes import dtype_from_name
from poolgrad.reference.properties import case_properties

catalogue_module = importlib.import_module("poolgrad.cases.catalogue")
CASES = catalogue()


def planes(a: np.ndarray) -> np.ndarray:
    """(N*C, spatial elements) float64."""
    return a.astype(np.float64).reshape(a.shape[0] * a.shape[1], -1)


def variant_of(case):
    return parse_id(case.id)["variant"]


def planes_and_windows(case):
    """(plane values as float64, taps with None for padding, real taps) for every window."""
    wins = windows(case.spec, case.input.shape[2:])
    for plane in planes(case.input):
        for taps in wins:
            yield plane, taps, [t for t in taps if t is not None]


def any_window(case, pred) -> bool:
    return any(pred(plane[real], taps, real, plane) for plane, taps, real in planes_and_windows(case) if real)


def n_max(v) -> int:
    return int((v == v.max()).sum())


def is_neg_zero(v) -> bool:
    return v == 0 and math.copysign(1.0, v) < 0


def ties_window(case):
    if variant_of(case) == "all":
        return any_window(case, lambda v, *_: len(v) >= 2 and n_max(v) == len(v))
    n = int(variant_of(case))
    return any_window(case, lambda v, *_: n_max(v) >= n)


def ties_overlap(case):
    wins = windows(case.spec, case.input.shape[2:])
    real = [{t for t in w if t is not None} for w in wins]
    for plane in planes(case.input):
        top = [max(plane[list(r)]) for r in real]
        for i, j in ((i, j) for i in range(len(real)) for j in range(len(real)) if i != j):
            shared = [a for a in real[i] & real[j] if plane[a] == top[i] == top[j]]
            if shared and any(plane[b] == top[j] for b in real[j] - real[i]):
                return True
    return False


def on_edge(case, flat):
    coords = np.unravel_index(flat, case.input.shape[2:])
    return any(c == 0 or c == n - 1 for c, n in zip(coords, case.input.shape[2:]))


def ties_border(case):
    if variant_of(case) == "edges":
        return any_window(case, lambda v, *_: len(v) >= 2 and v[0] == v[-1] == v.max())
    return any_window(case, lambda v, taps, real, plane: None in taps and n_max(v) >= 2 and any(
        on_edge(case, t) for t in real if plane[t] == v.max()))


def signed_zero(case):
    variant = variant_of(case)

    def zero_maxima(v, *_):
        zeros = [z for z in v if z == 0]
        if v.max() != 0 or len(zeros) < 2:
            return False
        signs = [is_neg_zero(z) for z in zeros]
        return {"pos_first": not signs[0] and signs[-1], "neg_first": signs[0] and not signs[-1],
                "neg_only": all(signs)}[variant]
    return any_window(case, zero_maxima)


def nan(case):
    check = {
        "first": lambda v: np.isnan(v[0]),
        "middle": lambda v: np.isnan(v[len(v) // 2]) and len(v) >= 3,
        "last": lambda v: np.isnan(v[-1]),
        "several": lambda v: np.isnan(v).sum() >= 2,
        "with_ties": lambda v: np.isnan(v).any() and (~np.isnan(v)).sum() >= 2 and n_max(v[~np.isnan(v)]) >= 2,
        "whole_window": lambda v: np.isnan(v).all(),
    }[variant_of(case)]
    return any_window(case, lambda v, *_: check(v))


def rounding_ties(case):
    """Tied maxima in the case's dtype that were distinct before rounding."""
    rng = np.random.default_rng(catalogue_module.seed_of(case.id))
    ctx = Context(rng, case.spec, case.input.shape, variant_of(case))
    source = generate(catalogue_module._definitions()[case.family]["generator"], ctx)
    assert source.dtype == (np.float64 if case.spec.dtype == "float32" else np.float32)
    assert source.astype(case.input.dtype).tobytes() == case.input.tobytes()
    return tied_by_rounding(case, source)


def subnormal(case):
    info = ml_dtypes.finfo(dtype_from_name(case.spec.dtype))
    normal = float(info.smallest_normal)
    if variant_of(case) == "values":
        x = case.input.astype(np.float64)
        return bool(((x != 0) & (np.abs(x) < normal)).all())

    def zero_then_subnormal(v, *_):
        m = v.max()
        return 0 < m < normal and 0.0 in v[:list(v).index(m)]
    return any_window(case, zero_then_subnormal)


def reaches_padding(case):
    return any(None in taps for _, taps, _ in planes_and_windows(case))


def negative(case):
    """All values negative, in windows that reach the padding."""
    return reaches_padding(case) and bool((case.input.astype(np.float64) < 0).all())


def zero_windows(case):
    whole = variant_of(case) == "whole"
    return any_window(case, lambda v, *_: (v == 0).all() if whole else 0 < (v == 0).sum() < len(v))


def tie_free(case):
    x = planes(case.input)
    distinct = all(len(set(p)) == len(p) for p in x)
    return distinct and np.isfinite(x).all() and (not case.spec.is_max or not any_window(case, lambda v, *_: n_max(v) > 1))


def every_lane(case):
    """Every (n, c) plane has a numeric tie at its maximum, a NaN after a number, and a window
    whose maximum is a zero of both signs; the case has its variant's channel count."""
    def plane_has(plane, pred):
        return any(real and pred(plane[real]) for taps in windows(case.spec, case.input.shape[2:])
                   for real in [[t for t in taps if t is not None]])
    finite_tie = lambda v: np.isfinite(v).all() and n_max(v) >= 2 and v.max() != 0  # noqa: E731
    nan_after_number = lambda v: np.isnan(v[1:]).any() and not np.isnan(v[0])  # noqa: E731
    zero_tie = lambda v: (v.max() == 0 and any(is_neg_zero(a) for a in v)  # noqa: E731
                          and any(a == 0 and not is_neg_zero(a) for a in v))
    return case.input.shape[1] == int(variant_of(case)[1:]) and all(
        plane_has(p, finite_tie) and plane_has(p, nan_after_number) and plane_has(p, zero_tie)
        for p in planes(case.input))


def sums_inexact(side: int):
    """The reference computed with every addition rounded to the dtype differs from the spec
    (float64 sums rounded once): in the forward (side 0) or the gradient (side 1)."""
    def check(case):
        def run(acc):
            f = reference.forward(case.spec, case.input, accumulate=acc)
            return f if side == 0 else reference.backward(case.spec, case.input, case.grad_output, accumulate=acc)
        return run(None).tobytes() != run("dtype").tobytes()
    return check


def accumulation_sums(case):
    return sums_inexact(0)(case) or sums_inexact(1)(case)


def random_normal_gradient(case) -> bool:
    """A training step's upstream gradient: random normal (negative or fractional values), not
    the routing probe's positive powers of two."""
    g = case.grad_output.astype(np.float64)
    return g.size == 0 or bool((g < 0).any() or (g != np.round(g)).any())


def overlapping(case) -> bool:
    taps = window_taps(case.spec, case.input.shape[2:])
    return np.bincount(taps[taps >= 0]).max() >= 2


def relu_plateaus(case) -> bool:
    """A ReLU's output: non-negative, its zeros +0.0 (that half the values are zeros is
    test_realistic_families_meet_ties_and_inexact_sums')."""
    x = case.input.astype(np.float64)
    return bool((x >= 0).all() and not np.signbit(x).any())


def image_u8(case) -> bool:
    x = case.input.astype(np.float64)
    return bool(((x >= 0) & (x <= 255) & (x == np.round(x))).all())


def half_cast_source(case) -> np.ndarray:
    rng = np.random.default_rng(catalogue_module.seed_of(case.id))
    return generate("realistic.half_cast", Context(rng, case.spec, case.input.shape, None))[0]


def half_cast(case) -> bool:
    """float32 features near 1, rounded once from float32 to the case's dtype."""
    source = half_cast_source(case)
    return (source.dtype == np.float32 and source.astype(case.input.dtype).tobytes() == case.input.tobytes()
            and bool((np.abs(source - 1) < 0.5).all()))


def tied_by_the_cast(case) -> bool:
    """A window whose maxima tie in the case's dtype and are distinct in float32."""
    return tied_by_rounding(case, half_cast_source(case))


def tied_by_rounding(case, source) -> bool:
    """A window whose maxima tie in the case's input and are distinct in ``source``, the values
    it was rounded from."""
    wins = windows(case.spec, case.input.shape[2:])
    for plane, src in zip(planes(case.input), planes(source)):
        for taps in wins:
            real = [t for t in taps if t is not None]
            tied = [t for t in real if plane[t] == plane[real].max()]
            if len(tied) >= 2 and len(set(src[tied])) == len(tied):
                return True
    return False


def realistic(check):
    return lambda case: random_normal_gradient(case) and check(case)


CHECKS = {
    "realistic_normal": realistic(lambda c: overlapping(c) and np.isfinite(c.input.astype(np.float64)).all()),
    "realistic_relu": realistic(relu_plateaus),
    "realistic_image_u8": realistic(image_u8),
    "realistic_half_cast": realistic(half_cast),
    "realistic_dropout": lambda c: relu_plateaus(c) and bool(np.signbit(c.grad_output[c.grad_output == 0]).any()),
    "realistic_channels": lambda c: c.input.shape[1] == 64 and realistic(relu_plateaus)(c),
    "channels": every_lane,
    "ties_window": ties_window,
    "ties_overlap": ties_overlap,
    "ties_border": ties_border,
    "signed_zero": signed_zero,
    "inf_ties": lambda c: any_window(c, lambda v, *_: (v == np.inf).sum() >= 2),
    "all_neginf": lambda c: any_window(c, lambda v, *_: (v == -np.inf).all()),
    "nan": nan,
    "rounding_ties": rounding_ties,
    "subnormal": subnormal,
    "negative": negative,
    "zero_windows": zero_windows,
    "accumulation_routed": sums_inexact(1),
    "accumulation_sums": accumulation_sums,
    "accumulation_sums_idioms": accumulation_sums,
    "signed_zero_wide": lambda c: c.input.shape[1] == 1 and signed_zero(c),
    "large_plane_mean": lambda c: ("count_over_precision" in case_properties(c.spec, c.input)
                                   and realistic(relu_plateaus)(c)),
    "random": tie_free,
    "large_nc": lambda c: c.input.shape[0] * c.input.shape[1] == 64 and tie_free(c),
    "empty_batch": lambda c: c.input.shape[0] == 0 and c.input.size == 0,
    # RoI families: the properties of the boxes' bins (reference/roi_pool.properties)
    "roi_distinct": lambda c: c.spec.is_roi and "ties" not in roi_properties(c) and np.isfinite(c.input).all(),
    "roi_ties": lambda c: "ties" in roi_properties(c),
    "roi_nan": lambda c: "nan" in roi_properties(c),
    "roi_neginf": lambda c: {"neginf_window", "infinite_max"} <= roi_properties(c),
    "roi_realistic": lambda c: c.spec.is_roi and realistic(relu_plateaus)(c),
    "roi_crop": lambda c: roi_crop(c),
    # segment families: the value families' checks over each segment's items
    "segment_ties": ties_window,
    "segment_signed_zero": signed_zero,
    "segment_nan": nan,
    "segment_neginf": lambda c: any_window(c, lambda v, *_: (v == -np.inf).all()),
    "segment_random": tie_free,
    "segment_realistic": lambda c: c.input.shape[2] == 24 and realistic(relu_plateaus)(c),
}


def roi_properties(case) -> frozenset[str]:
    return case_properties(case.spec, case.input) if case.spec.is_roi else frozenset()


def roi_crop(case) -> bool:
    """roi_crop_max_pool's values by variant, the box set's border boxes in every case; ties within a
    crop window of the first box, which lies inside (the box wholly outside ties its extrapolated 0s;
    distinct pixels may still interpolate to equal points)."""
    props, variant = roi_properties(case), case.id.split("-")[-2]
    inside = dataclasses.replace(case.spec, boxes=case.spec.boxes[:1])
    return "roi_past_border" in props and {
        "distinct": bool(np.isfinite(case.input).all()),
        "ties": "ties" in case_properties(inside, case.input),
        "nan": {"nan", "nan_with_number"} <= props,
        "neginf": {"neginf_window", "roi_crop_infinite_corner"} <= props}[variant]


def test_every_family_has_a_check():
    assert set(CHECKS) == set(families())


@pytest.mark.parametrize("family", families())
def test_family_holds_what_it_says(family):
    failing = [c.id for c in CASES if c.family == family and not CHECKS[family](c)]
    assert not failing, failing[:10]


@pytest.mark.parametrize("check, variant", [
    (ties_window, "2"), (ties_overlap, None), (ties_border, "edges"), (signed_zero, "neg_only"),
    (nan, "first"), (subnormal, "vs_zero"), (zero_windows, "partial"),
])
def test_checks_reject_a_tie_free_case(check, variant):
    """The checks are not vacuous: a tie-free input (relabelled) fails them."""
    plain = next(c for c in CASES if c.id == "max_pool2d-k3s1-random-float32")
    fake_id = "-".join(p for p in ("max_pool2d", "k3s1", "relabelled", variant, "float32") if p)
    assert not check(dataclasses.replace(plain, id=fake_id))


def test_value_families_share_every_geometry_call():
    """Value families are orthogonal to geometry: the random family's geometry rows are the
    compiled groups, and every other value family lands in them (no call of its own)."""
    groups = {(c.spec, c.input.shape) for c in CASES if c.family == "random"}
    shape_families = {"channels", "realistic_channels", "large_nc", "empty_batch", "accumulation_sums_idioms",
                      "signed_zero_wide", "large_plane_mean"}
    assert all((c.spec, c.input.shape) in groups for c in CASES
               if c.family not in shape_families and not (c.spec.is_roi or c.spec.is_segment))


def test_realistic_channels_run_in_the_channels_calls():
    channels = {(c.spec, c.input.shape) for c in CASES if c.family == "channels"}
    cases = [c for c in CASES if c.family == "realistic_channels"]
    assert cases and all((c.spec, c.input.shape) in channels for c in cases)


def test_realistic_families_meet_ties_and_inexact_sums():
    """What the realistic families are for, over the catalogue: ReLU zeros, 8-bit values and
    the float16/bfloat16 cast tie many max windows (tied only after the cast, for the cast), and
    random-normal gradients make the routed sums inexact in the dtype."""
    def share(family, holds):
        cases = [c for c in CASES if c.family == family and c.spec.is_max]
        return sum(map(holds, cases)) / len(cases)
    ties = lambda c: any_window(c, lambda v, *_: n_max(v) >= 2)  # noqa: E731
    assert share("realistic_relu", ties) > 0.3
    assert share("realistic_relu", lambda c: (c.input.astype(np.float64) == 0).mean() > 0.25) > 0.9
    assert share("realistic_image_u8", ties) > 0.3
    assert share("realistic_half_cast", tied_by_the_cast) > 0.25
    assert share("realistic_normal", sums_inexact(1)) > 0.2  # two-term sums round once, as the spec's


def test_window_table_matches_brute_force_windows():
    for spec, shape in {(c.spec.with_dtype("float64"), c.input.shape[2:]) for c in CASES if not c.spec.is_roi}:
        table = window_taps(spec, shape).tolist()
        brute = [[-1 if t is None else t for t in w] for w in windows(spec, shape)]
        if spec.is_adaptive or spec.regions is not None or spec.is_segment:  # windows vary in size; the table pads short ones with -1
            table = [[t for t in row if t >= 0] for row in table]
        assert table == brute, (spec, shape)
