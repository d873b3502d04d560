"""The scan engine reproduces the reference wherever the reference has the same policy."""

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.reference import PoolSpec
from poolgrad.verdicts.extended_policies import Policy

SPECS = [
    {"op": "max_pool", "kernel_size": 3, "stride": 1, "padding": 1},
    {"op": "max_pool", "kernel_size": [2, 3], "stride": [1, 2], "ceil_mode": True},
    {"op": "max_pool", "kernel_size": 2, "dilation": 2, "padding": "SAME"},
    {"op": "adaptive_max_pool", "output_size": [3, 4]},
]


@pytest.mark.parametrize("tie", ["first", "last"])
@pytest.mark.parametrize("nan", ["propagate", "ignore"])
@pytest.mark.parametrize("spec_dict", SPECS)
def test_engine_equals_reference(spec_dict, tie, nan):
    rng = np.random.default_rng(0)
    spec = PoolSpec.from_dict({**spec_dict, "dtype": "float32"})
    x = rng.integers(-2, 3, size=(2, 2, 5, 7)).astype(np.float32)  # many ties
    x[rng.random(x.shape) < 0.15] = np.nan
    x[rng.random(x.shape) < 0.1] = -0.0
    g = rng.integers(1, 9, size=reference.output_shape(spec, x.shape)).astype(np.float32)
    r = Policy(tie, nan).evaluate(spec, x, g)
    assert np.array_equal(r.forward, reference.forward(spec, x, tie=tie, nan=nan), equal_nan=True)
    assert np.array_equal(r.grad_input, reference.backward(spec, x, g, tie=tie, nan=nan))


@pytest.mark.parametrize("tie", ["all", "split"])
def test_tie_within_counts_near_maxima(tie):
    """tie_within: every element less than the tolerance from the window's maximum is one of its
    maxima; an infinite maximum has none (inf - inf is NaN); with no near value it is the tie rule."""
    spec = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 3, "stride": 3, "dtype": "float32"})
    x = np.array([[[1.0, 1.000001, 0.99998, 5e-6, -4e-6, 2e-6, np.inf, 1.0, np.inf]]], dtype=np.float32)
    g = np.array([[[6.0, 3.0, 9.0]]], dtype=np.float32)
    near = Policy(tie, tie_within=1e-5).evaluate(spec, x, g).grad_input
    share = (lambda n: 6.0 / n) if tie == "split" else (lambda n: 6.0)
    first = share(2), share(2), 0.0
    second = [g[0, 0, 1] / 3 if tie == "split" else g[0, 0, 1]] * 3
    np.testing.assert_array_equal(near[0, 0], np.array([*first, *second, 0, 0, 0], dtype=np.float32))
    exact = Policy(tie).evaluate(spec, x, g).grad_input
    assert not np.array_equal(near, exact)
    far = x.copy()
    far[0, 0, :6] = [1, 2, 3, 4, 5, 6]
    np.testing.assert_array_equal(Policy(tie, tie_within=1e-5).evaluate(spec, far, g).grad_input[0, 0, :6],
                                  reference.backward(spec, far, g, tie=tie)[0, 0, :6])


def test_per_axis_passes_apply_a_mask_rule_per_pass():
    """passes = per_axis: D, then H, each pass's near ties taken alone. In the first W column D's
    pass reaches 1 (1.000008 - 1 < 1e-5) and H's both rows (1.000012 - 1.000008 < 1e-5), so 1 gets
    the gradient; the whole window's mask does not reach it (1.000012 - 1 = 1.2e-5)."""
    spec = PoolSpec.from_dict({"op": "adaptive_max_pool3d", "output_size": [1, 1, 2], "dtype": "float32"})
    x = np.array([[[[[1, 5], [1.000012, 6]], [[1.000008, 7], [0, 8]]]]], dtype=np.float32)
    g = np.array([[[[[2, 3]]]]], dtype=np.float32)
    near = dict(tie="all", tie_within=1e-5)
    per_pass = Policy(**near, passes="per_axis").evaluate(spec, x, g)
    whole = Policy(**near).evaluate(spec, x, g)
    np.testing.assert_array_equal(per_pass.forward, whole.forward)
    np.testing.assert_array_equal(per_pass.grad_input[0, 0, :, :, 0], [[2, 2], [2, 0]])
    np.testing.assert_array_equal(whole.grad_input[0, 0, :, :, 0], [[0, 2], [2, 0]])
    np.testing.assert_array_equal(per_pass.grad_input[0, 0, :, :, 1], [[0, 0], [0, 3]])
    # no exact ties here: under the spec's rule the passes route as the whole window does
    np.testing.assert_array_equal(Policy(passes="per_axis").evaluate(spec, x, g).grad_input,
                                  reference.backward(spec, x, g))
