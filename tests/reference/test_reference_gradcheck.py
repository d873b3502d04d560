"""backward against central finite differences of forward, in float64, on tie-free inputs."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pool_strategies import OPS, shapes, specs
from poolgrad.reference import PoolSpec, SpecError, backward, forward, output_shape

STEP = 1e-6
FEW = settings(max_examples=int(os.environ.get("POOLGRAD_EXAMPLES", 25)) // 2, deadline=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def tie_free(rng, shape):
    """Distinct positive values at least 0.1 apart: a step of 1e-6 changes no window's argmax
    (and x ** p stays real for fractional p)."""
    return 1.0 + 0.1 * rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)


def loss(spec, x, g):
    """sum(forward * g) over the finite outputs (a window wholly in padding gives -inf or NaN,
    constant in x)."""
    y = forward(spec, x)
    return float(np.sum(np.where(np.isfinite(y), y * g, 0.0)))


def finite_differences(spec, x, g):
    dx = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        up, down = x.copy(), x.copy()
        up[i] += STEP
        down[i] -= STEP
        dx[i] = (loss(spec, up, g) - loss(spec, down, g)) / (2 * STEP)
    return dx


def draw_case(data, op):
    """(spec, input shape, output shape, rng) for ``op``, or None when the spec does not fit."""
    shape = data.draw(shapes())
    spec = PoolSpec.from_dict(data.draw(specs(op, len(shape) - 2, shape[2:])))
    try:
        out = output_shape(spec, shape)
    except SpecError as err:   # only a window larger than the padded input is refused
        assert err.field == "kernel_size", err
        return None
    return spec, shape, out, np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))


@pytest.mark.parametrize("op", OPS)
@FEW
@given(data=st.data())
def test_backward_is_the_derivative_of_forward(op, data):
    drawn = draw_case(data, op)
    if drawn is None:
        return
    spec, shape, out, rng = drawn
    x = tie_free(rng, shape)
    g = rng.standard_normal(out)
    np.testing.assert_allclose(backward(spec, x, g), finite_differences(spec, x, g),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec_dict", [
    {"op": "max_pool", "kernel_size": [2, 3], "stride": [1, 2], "padding": [[1, 0], [2, 1]], "ceil_mode": True},
    {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": True},
    {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False},
    {"op": "lp_pool", "kernel_size": 2, "stride": 2, "padding": [[0, 1], [1, 0]], "ceil_mode": True, "norm_type": 3},
    {"op": "adaptive_max_pool", "output_size": [3, 7]},
    {"op": "adaptive_avg_pool", "output_size": [4, 2]},
], ids=lambda d: d["op"])
def test_padding_and_ceil_mode_gradients(spec_dict):
    """The fixed, awkward corners (padding, clipped ceil_mode windows, overlapping bins) every
    run, whatever hypothesis draws."""
    rng = np.random.default_rng(7)
    x = tie_free(rng, (1, 2, 5, 5))
    spec = PoolSpec.from_dict(spec_dict)
    g = rng.standard_normal(output_shape(spec, x.shape))
    np.testing.assert_allclose(backward(spec, x, g), finite_differences(spec, x, g), rtol=1e-5, atol=1e-6)
