"""Invariants of max-type backward under every policy: a window's upstream gradient is
conserved and lands only on that window's maxima; split conserves what first does; all and
split equal first when nothing ties."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pool_strategies import inputs, shapes, specs
from poolgrad.reference import PoolSpec, SpecError, backward, forward, output_shape
from poolgrad.reference.definition import windows

FEW = settings(max_examples=int(os.environ.get("POOLGRAD_EXAMPLES", 25)), deadline=None,
               suppress_health_check=[HealthCheck.too_slow])
MAX_OPS = ["max_pool", "adaptive_max_pool"]


@st.composite
def max_cases(draw, specials=True):
    op = draw(st.sampled_from(MAX_OPS))
    shape = draw(shapes())
    spec_dict = draw(specs(op, len(shape) - 2, shape[2:]))
    try:
        output_shape(PoolSpec.from_dict(spec_dict), shape)
    except SpecError as err:   # only a window larger than the padded input is refused
        assert err.field == "kernel_size", err
        spec_dict = {"op": "adaptive_max_pool", "output_size": [2] * (len(shape) - 2)}
    return spec_dict, draw(inputs(shape, "float64", specials=specials))


@pytest.mark.parametrize("tie", ["first", "last", "all", "split"])
@pytest.mark.parametrize("nan", ["propagate", "ignore"])
@FEW
@given(case=max_cases())
def test_each_window_routes_its_gradient_to_its_maxima(tie, nan, case):
    spec_dict, x = case
    spec = PoolSpec.from_dict(spec_dict)
    y = forward(spec, x, tie=tie, nan=nan)
    window_cells = {o: set(cells) for o, cells, _ in windows(spec, x.shape)}   # real elements
    for w in np.ndindex(*y.shape):
        g = np.zeros(y.shape)
        g[w] = 1.0
        dx = backward(spec, x, g, tie=tie, nan=nan)
        elsewhere = dx.copy()
        elsewhere[w[:2]] = 0.0
        assert not elsewhere.any()   # nothing leaks to another image or channel
        image, cells = x[w[:2]], window_cells[w[2:]]
        routed = {c for c in cells if dx[w[:2]][c] != 0}
        assert np.count_nonzero(dx) == len(routed)   # nothing outside the window
        maxima = {c for c in cells if (np.isnan(image[c]) if np.isnan(y[w]) else image[c] == y[w])}
        if not maxima:   # no candidate: all padding, or all NaN under ignore
            assert y[w] == -np.inf and not routed
            continue
        assert routed == maxima if tie in ("all", "split") else (len(routed) == 1 and routed <= maxima)
        assert dx.sum() == (len(maxima) if tie == "all" else pytest.approx(1.0, rel=1e-12))


@FEW
@given(case=max_cases(), seed=st.integers(0, 2**32 - 1))
def test_split_conserves_what_first_routes(case, seed):
    spec_dict, x = case
    spec = PoolSpec.from_dict(spec_dict)
    g = np.random.default_rng(seed).standard_normal(output_shape(spec, x.shape))
    for nan in ("propagate", "ignore"):
        first = backward(spec, x, g, tie="first", nan=nan).sum(axis=tuple(range(2, x.ndim)))
        split = backward(spec, x, g, tie="split", nan=nan).sum(axis=tuple(range(2, x.ndim)))
        np.testing.assert_allclose(split, first, rtol=1e-12, atol=1e-12)


@FEW
@given(shape=shapes(), seed=st.integers(0, 2**32 - 1), data=st.data())
def test_policies_agree_without_ties(shape, seed, data):
    op = data.draw(st.sampled_from(MAX_OPS))
    spec_dict = data.draw(specs(op, len(shape) - 2, shape[2:]))
    spec = PoolSpec.from_dict(spec_dict)
    try:
        out = output_shape(spec, shape)
    except SpecError as err:   # only a window larger than the padded input is refused
        assert err.field == "kernel_size", err
        return
    rng = np.random.default_rng(seed)
    x = rng.permutation(int(np.prod(shape))).reshape(shape).astype(np.float64)
    g = rng.integers(-8, 9, size=out).astype(np.float64)   # exact sums in any order
    first = backward(spec, x, g, tie="first")
    for tie in ("last", "all", "split"):
        assert np.array_equal(backward(spec, x, g, tie=tie), first), tie
