"""The reference against the slow per-window loop of slow_pool.py, over generated specs,
inputs (ties, NaN, +-inf, -0.0), every tie and NaN policy and every dtype."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pool_strategies import DTYPES, inputs, routing_probe, shapes, specs
from poolgrad.reference import PoolSpec, SpecError, backward, forward
from slow_pool import TooLarge, output_shape, pool, round_nearest_even

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


def expected(spec_dict, x, g, dtype, tie="first", nan="propagate"):
    y, dx = pool(spec_dict, x, g, tie, nan)
    return round_nearest_even(y, DTYPES[dtype]), round_nearest_even(dx, DTYPES[dtype])


@st.composite
def max_cases(draw, op, dtype):
    shape = draw(shapes(1 if op.startswith("segment") else None))
    return draw(specs(op, len(shape) - 2, shape[2:])), draw(inputs(shape, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["max_pool", "adaptive_max_pool", "fractional_max_pool", "segment_max_pool"])
@FEW
@given(data=st.data())
def test_max_ops_match_loop_under_every_policy(op, dtype, data):
    spec_dict, x = data.draw(max_cases(op, dtype))
    spec = PoolSpec.from_dict(spec_dict)
    try:
        g_shape = output_shape(spec_dict, x.shape)
    except TooLarge:
        with pytest.raises(SpecError) as err:
            forward(spec, x)
        assert err.value.field == "kernel_size"
        return
    g = routing_probe(np.random.default_rng(len(x.flat)), g_shape, dtype)
    for tie, nan in POLICIES:
        y, dx = expected(spec_dict, x, g, dtype, tie, nan)
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
def test_averaging_ops_match_loop(op, dtype, data):
    shape = data.draw(shapes(1 if op.startswith("segment") else None))
    spec_dict = data.draw(specs(op, len(shape) - 2, shape[2:]))
    x = data.draw(inputs(shape, dtype))
    if not float(spec_dict.get("norm_type", 1)).is_integer():
        # x ** p of a negative x (or -0.0, -inf) with fractional p is NaN-land where pow and
        # sqrt disagree; SPEC.md leaves it out of the spec.
        x = np.abs(x)
    spec = PoolSpec.from_dict(spec_dict)
    try:
        y_shape = output_shape(spec_dict, x.shape)
    except TooLarge:
        with pytest.raises(SpecError) as err:
            backward(spec, x, np.zeros(()))
        assert err.value.field == "kernel_size"
        return
    g = DTYPES[dtype](np.random.default_rng(3).standard_normal(y_shape))
    y, dx = expected(spec_dict, x, g, dtype)
    assert_close(forward(spec, x), y, dtype)
    assert_close(backward(spec, x, g), dx, dtype)

