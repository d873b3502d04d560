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
