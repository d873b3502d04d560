"""The fast reference (forward / backward: one NumPy pass per tap) against the definition
(poolgrad.reference.definition: SPEC.md's ops one window at a time), over generated specs,
inputs (ties, NaN, +-inf, -0.0), every tie and NaN policy and every dtype.

The definition trusts two shared pieces, the geometry (geometry.resolve) and the one rounding
(dtypes.round_to); each is checked here against SPEC.md's rule written once more, independently
of poolgrad (per-axis windows from the spec's formulas, nearest-even rounding by table lookup)."""

from __future__ import annotations

import itertools
import math
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pool_strategies import DTYPES, inputs, routing_probe, shapes, specs
from poolgrad.reference import PoolSpec, SpecError, backward, forward
from poolgrad.reference.definition import BY_OP, windows
from poolgrad.reference.dtypes import round_to

POLICIES = [(tie, nan) for tie in ("first", "last", "all", "split") for nan in ("propagate", "ignore")]
# Modest by default so the file runs in seconds; POOLGRAD_EXAMPLES=500 for a deep search.
FEW = settings(max_examples=int(os.environ.get("POOLGRAD_EXAMPLES", 25)), deadline=None,
               suppress_health_check=[HealthCheck.too_slow])


def assert_bitwise(actual, expected):
    """Equal bit for bit (so -0.0 != 0.0), any NaN equal to any NaN."""
    assert actual.dtype == expected.dtype
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    assert np.array_equal(np.isnan(a64), np.isnan(e64)), (actual, expected)
    keep = ~np.isnan(a64)
    assert np.array_equal(a64[keep], e64[keep]), (actual, expected)
    assert np.array_equal(np.signbit(a64[keep]), np.signbit(e64[keep])), (actual, expected)


def assert_close(actual, expected, dtype):
    """Equal up to one final rounding of differently ordered float64 sums."""
    assert actual.dtype == np.dtype(DTYPES[dtype])
    info = ml_dtypes.finfo(actual.dtype)
    np.testing.assert_allclose(actual.astype(np.float64), expected.astype(np.float64),
                               rtol=max(2 * float(info.eps), 1e-12), atol=float(info.smallest_subnormal) + 1e-12,
                               equal_nan=True)


# SPEC.md "Geometry", per axis: a window is a list of (position, inside the padded input).
def _per_axis(value, rank):
    return list(value) if isinstance(value, (list, tuple)) else [value] * rank


def _pads(spec, spatial, kernel, stride, dilation):
    padding = spec.get("padding", 0)
    if padding == "VALID":
        return [(0, 0)] * len(spatial)
    if padding == "SAME":  # out = ceil(L / s), the odd element of padding at the end
        pads = []
        for L, k, s, d in zip(spatial, kernel, stride, dilation):
            total = max((math.ceil(L / s) - 1) * s + (k - 1) * d + 1 - L, 0)
            pads.append((total // 2, total - total // 2))
        return pads
    return [tuple(p) if isinstance(p, (list, tuple)) else (p, p) for p in _per_axis(padding, len(spatial))]


def _sliding_axis(L, k, s, d, before, after, ceil_mode):
    extent = (k - 1) * d + 1
    if extent > L + before + after:
        return None   # the spec is refused (kernel_size)
    out = (math.ceil if ceil_mode else math.floor)((L + before + after - extent) / s) + 1
    if ceil_mode and (out - 1) * s >= L + before:   # a last window starting in the right padding
        out -= 1
    return [[(p, -before <= p < L + after) for p in range(o * s - before, o * s - before + k * d, d)]
            for o in range(out)]


def spec_axes(spec, spatial):
    """Per spatial axis, its windows; None where the window does not fit the padded input."""
    rank = len(spatial)
    if spec["op"].startswith("fractional"):   # the spec's [start, stop) regions
        return [[[(p, True) for p in range(start, stop)] for start, stop in dim] for dim in spec["regions"]]
    if spec["op"].startswith("segment"):   # segment s: the items whose id is s, in item order
        return [[[(p, True) for p in range(spatial[0]) if spec["segment_ids"][p] == s]
                 for s in range(spec["num_segments"])]]
    if spec["op"].startswith("adaptive"):   # bin i: [floor(i * L / out), ceil((i + 1) * L / out))
        sizes = [L if o is None else o for L, o in zip(spatial, _per_axis(spec["output_size"], rank))]
        return [[[(p, True) for p in range(i * L // out, -(-(i + 1) * L // out))] for i in range(out)]
                for L, out in zip(spatial, sizes)]
    kernel = _per_axis(spec["kernel_size"], rank)
    stride = _per_axis(spec.get("stride") or spec["kernel_size"], rank)
    dilation = _per_axis(spec.get("dilation", 1), rank)
    axes = [_sliding_axis(L, k, s, d, b, a, spec.get("ceil_mode", False)) for L, k, s, d, (b, a)
            in zip(spatial, kernel, stride, dilation, _pads(spec, spatial, kernel, stride, dilation))]
    return None if None in axes else axes


def assert_spec_windows(spec_dict, spec, shape) -> bool:
    """The definition's windows are SPEC.md's (or both refuse the spec); whether it fits."""
    axes = spec_axes(spec_dict, shape[2:])
    if axes is None:
        with pytest.raises(SpecError) as err:
            windows(spec, shape)
        assert err.value.field == "kernel_size"
        return False
    expected = []
    for o in itertools.product(*(range(len(a)) for a in axes)):
        taps = list(itertools.product(*(a[i] for a, i in zip(axes, o))))
        cells = [tuple(p for p, _ in tap) for tap in taps if all(0 <= p < L for (p, _), L in zip(tap, shape[2:]))]
        expected.append((o, cells, sum(all(inside for _, inside in tap) for tap in taps)))
    assert windows(spec, shape) == expected
    return True


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["max_pool", "adaptive_max_pool", "fractional_max_pool", "segment_max_pool"])
@FEW
@given(data=st.data())
def test_max_ops_match_the_definition_under_every_policy(op, dtype, data):
    shape = data.draw(shapes(1 if op.startswith("segment") else None))
    spec_dict, x = data.draw(specs(op, len(shape) - 2, shape[2:])), data.draw(inputs(shape, dtype))
    spec = PoolSpec.from_dict(spec_dict)
    if not assert_spec_windows(spec_dict, spec, shape):
        with pytest.raises(SpecError) as err:
            forward(spec, x)
        assert err.value.field == "kernel_size"
        return
    g = routing_probe(np.random.default_rng(len(x.flat)), forward(spec, x).shape, dtype)
    for tie, nan in POLICIES:
        y, dx = BY_OP[op](spec, x, g, tie=tie, nan=nan)
        assert_bitwise(forward(spec, x, tie=tie, nan=nan), y)
        got = backward(spec, x, g, tie=tie, nan=nan)
        if tie == "split":
            assert_close(got, dx, dtype)
        else:
            assert_bitwise(got, dx)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["avg_pool", "lp_pool", "adaptive_avg_pool", "segment_avg_pool"])
@FEW
@given(data=st.data())
def test_averaging_ops_match_the_definition(op, dtype, data):
    shape = data.draw(shapes(1 if op.startswith("segment") else None))
    spec_dict = data.draw(specs(op, len(shape) - 2, shape[2:]))
    x = data.draw(inputs(shape, dtype))
    if not float(spec_dict.get("norm_type", 1)).is_integer():
        # x ** p of a negative x (or -0.0, -inf) with fractional p is NaN-land where pow and
        # sqrt disagree; SPEC.md leaves it out of the spec.
        x = np.abs(x)
    spec = PoolSpec.from_dict(spec_dict)
    if not assert_spec_windows(spec_dict, spec, shape):
        with pytest.raises(SpecError) as err:
            backward(spec, x, np.zeros(()))
        assert err.value.field == "kernel_size"
        return
    g = DTYPES[dtype](np.random.default_rng(3).standard_normal(forward(spec, x).shape))
    y, dx = BY_OP[op](spec, x, g)
    assert_close(forward(spec, x), y, dtype)
    assert_close(backward(spec, x, g), dx, dtype)


def _table(dtype):
    """Every non-negative finite value of a 16-bit float type, ascending (bit order = value order)."""
    with np.errstate(invalid="ignore"):
        values = np.arange(1 << 15, dtype=np.uint16).view(dtype).astype(np.float64)
    return values[np.isfinite(values)]


def nearest_even(values: np.ndarray, dtype) -> np.ndarray:
    """float64 -> a 16-bit dtype by looking each value up between its two neighbours in the
    table of all the dtype's values (no conversion routine trusted): the nearer, on a tie the
    one with an even last bit; past the largest value's half-ulp, inf."""
    table = _table(dtype)
    top = table[-1] + (table[-1] - table[-2]) / 2
    a = np.abs(values)
    k = np.clip(np.searchsorted(table, a), 1, len(table) - 1)
    below, above = table[k - 1], table[k]
    middle = (below + above) / 2
    pick = np.where((a < middle) | ((a == middle) & ((k - 1) % 2 == 0)), below, above)
    pick = np.where(a >= top, np.inf, np.where(a <= table[-1], pick, table[-1]))
    return np.copysign(np.where(np.isnan(a), np.nan, pick), values).astype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_round_to_is_one_nearest_even_rounding(dtype):
    """round_to against the table: every neighbour pair's midpoint, a hair either side of it,
    and random doubles over the dtype's whole range (subnormals, overflow and -0.0 included)."""
    table = _table(DTYPES[dtype])
    middles = (table[:-1] + table[1:]) / 2
    rng = np.random.default_rng(0)
    values = np.concatenate([middles, np.nextafter(middles, 0), np.nextafter(middles, np.inf),
                             rng.standard_normal(20000) * 2.0 ** rng.integers(-30, 20, 20000),
                             [table[-1] * (1 + 2.0 ** -12), -0.0, np.inf, -np.inf, np.nan, 1 + 2**-8 + 2**-30]])
    values = np.concatenate([values, -values])
    got, want = round_to(values, DTYPES[dtype]), nearest_even(values, DTYPES[dtype])
    assert_bitwise(got, want)


def test_the_definition_refuses_bad_input_naming_the_field():
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    x, g = np.arange(4.0).reshape(1, 1, 4), np.ones((1, 1, 2))
    for call, field in [(lambda: BY_OP["adaptive_max_pool"](spec, x, g), "op"),
                        (lambda: BY_OP["avg_pool"](spec, x, g), "op"),
                        (lambda: BY_OP["max_pool"](spec, x.astype(np.int64), g), "input"),
                        (lambda: BY_OP["max_pool"](spec, x, np.ones((1, 1, 3))), "grad_output")]:
        with pytest.raises(SpecError) as err:
            call()
        assert err.value.field == field
