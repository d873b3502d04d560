"""The reference's accumulation option: float64 and one rounding by default, sums kept in the
input dtype with ``accumulate="dtype"``. Expected values are derived by hand in the comments."""

import ml_dtypes
import numpy as np
import pytest

from poolgrad.reference import PoolSpec, SpecError, backward, forward
from poolgrad.reference.accumulate import routed_sums_exact
from poolgrad.reference.geometry import resolve
from poolgrad.reference.taps import TapPlan


def arr(values, dtype):
    return np.asarray(values, dtype=np.float64).reshape(1, 1, -1).astype(dtype)


def spec_of(dtype, **kw):
    return PoolSpec.from_dict({"kernel_size": 3, "stride": 1, "dtype": dtype, **kw})


def test_max_scatter_in_float16_output_order():
    spec = spec_of("float16", op="max_pool")
    x = arr([0, 1, 5, 2, 0, 0], np.float16)  # 5 wins windows 0, 1, 2; 2 wins window 3
    g = arr([2048, 1, 1, 1], np.float16)
    assert backward(spec, x, g).tolist() == [[[0, 0, 2050, 1, 0, 0]]]
    assert backward(spec, x, g, accumulate="dtype").tolist() == [[[0, 0, 2048, 1, 0, 0]]]
    g_late = arr([1, 1, 2048, 1], np.float16)  # 1 + 1 + 2048 = 2050: exact in this order
    assert backward(spec, x, g_late, accumulate="dtype").tolist() == [[[0, 0, 2050, 1, 0, 0]]]


def test_max_scatter_in_float16_reversed_output_order():
    spec = spec_of("float16", op="max_pool")
    x = arr([0, 1, 5, 2, 0, 0], np.float16)
    # last output first: window 2's gradient, then 1's, then 0's
    g = arr([2048, 1, 1, 1], np.float16)  # 1 + 1 + 2048 = 2050
    assert backward(spec, x, g, accumulate="dtype_axis1_reversed").tolist() == [[[0, 0, 2050, 1, 0, 0]]]
    g_late = arr([1, 1, 2048, 1], np.float16)  # 2048 + 1 rounds to 2048, twice
    assert backward(spec, x, g_late, accumulate="dtype_axis1_reversed").tolist() == [[[0, 0, 2048, 1, 0, 0]]]


@pytest.mark.parametrize("tie", ["first", "last", "all", "split"])
def test_every_tie_rule_scatters_in_the_dtype(tie):
    spec = spec_of("bfloat16", op="max_pool")
    x = arr([0, 1, 5, 2, 0, 0], ml_dtypes.bfloat16)
    g = arr([256, 1, 1, 1], ml_dtypes.bfloat16)  # 256 + 1 + 1 stays 256 in bfloat16; 258 exact
    assert backward(spec, x, g, tie=tie, accumulate="dtype").astype(float).tolist() == [[[0, 0, 256, 1, 0, 0]]]
    assert backward(spec, x, g, tie=tie).astype(float).tolist() == [[[0, 0, 258, 1, 0, 0]]]


def test_avg_window_sum_overflows_in_float16():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 4, "dtype": "float16"})
    x = arr([40000, 40000, 40000, 40000], np.float16)
    assert forward(spec, x).tolist() == [[[40000]]]
    assert forward(spec, x, accumulate="dtype").tolist() == [[[np.inf]]]


def test_avg_backward_adds_the_windows_shares_in_the_dtype():
    spec = spec_of("float16", op="avg_pool", divisor_override=1)
    x = arr(np.zeros(5), np.float16)
    g = arr([2048, 1, 1], np.float16)  # element 2 is in all three windows: 2048 + 1 + 1
    # element 1 gets 2048 + 1 = 2049, a float16 tie that rounds to even 2048 either way;
    # element 2 gets 2050 in float64, but 2048 when each addition is rounded
    assert backward(spec, x, g).tolist() == [[[2048, 2048, 2050, 2, 1]]]
    assert backward(spec, x, g, accumulate="dtype").tolist() == [[[2048, 2048, 2048, 2, 1]]]


def test_lp_power_sum_overflows_in_float16():
    spec = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 2, "dtype": "float16"})
    x = arr([200, 200], np.float16)  # 40000 + 40000 overflows float16; sqrt(80000) does not
    assert forward(spec, x).tolist() == [[[np.float16(np.sqrt(80000.0))]]]
    assert forward(spec, x, accumulate="dtype").tolist() == [[[np.inf]]]
    # the gradient goes through inf ** (1/2 - 1) = 0
    assert backward(spec, x, arr([1], np.float16), accumulate="dtype").tolist() == [[[0, 0]]]


def test_float64_is_the_same_both_ways():
    spec = spec_of("float64", op="avg_pool")
    x = np.random.default_rng(0).normal(size=(2, 3, 9))
    g = np.random.default_rng(1).normal(size=(2, 3, 7))
    assert np.array_equal(backward(spec, x, g), backward(spec, x, g, accumulate="dtype"))
    assert np.array_equal(forward(spec, x), forward(spec, x, accumulate="dtype"))


def test_unknown_accumulation_names_the_field():
    spec = spec_of("float32", op="avg_pool")
    with pytest.raises(SpecError, match="accumulate"):
        forward(spec, arr([1, 2, 3], np.float32), accumulate="float8")


def test_routed_sums_exact_bounds_every_subset():
    spec = spec_of("float16", op="max_pool")
    x = arr(np.zeros(6), np.float16)
    plan = TapPlan(resolve(spec, x.shape))
    shape = plan.pad(x).shape
    assert routed_sums_exact(plan, shape, np.float16, arr([1, 2, 4, 8], np.float16))
    assert routed_sums_exact(plan, shape, np.float16, arr([1024, 512, 512, 1], np.float16))  # <= 2048 quanta
    assert not routed_sums_exact(plan, shape, np.float16, arr([2048, 1, 1, 1], np.float16))
    assert not routed_sums_exact(plan, shape, np.float16, arr([40000, 40000, 1, 1], np.float16))  # overflows


def test_max_scatter_in_float16_one_output_axis_at_a_time():
    # 3x3 -> 2x2 adaptive bins [0, 2) and [1, 3) on each axis: every window selects the centre
    spec = PoolSpec.from_dict({"op": "adaptive_max_pool2d", "output_size": 2, "dtype": "float16"})
    x = np.zeros((1, 1, 3, 3), np.float16)
    x[0, 0, 1, 1] = 5
    g = np.array([[[[2048, 1], [1, 1]]]], np.float16)
    centre = lambda accumulate: backward(spec, x, g, accumulate=accumulate)[0, 0, 1, 1]  # noqa: E731
    assert centre(None) == 2052          # 2051 rounds to even
    assert centre("dtype") == 2048       # ((2048 + 1) + 1) + 1, each rounding back to 2048
    assert centre("dtype_per_axis") == 2050  # rows first: (2048 + 1) = 2048 and (1 + 1) = 2, then 2048 + 2


def test_avg_one_axis_at_a_time():
    """dtype_per_axis for avg: the first axis's sums in the dtype, divided, then the next axis over
    those means. Columns of 40000 + 40000 overflow float16 (inf and -inf, their mean NaN) where the
    whole window's sum, in float64 or in the dtype in window order, is 0."""
    spec = PoolSpec.from_dict({"op": "adaptive_avg_pool2d", "output_size": 1, "dtype": "float16"})
    x = np.array([[[[40000, -40000, 0], [40000, -40000, 0], [0, 0, 0]]]], dtype=np.float16)
    assert forward(spec, x).item() == 0 and forward(spec, x, accumulate="dtype").item() == 0
    assert np.isnan(forward(spec, x, accumulate="dtype_per_axis").item())
    # float32 values that overflow nowhere: the passes' means agree with the spec within rounding,
    # padding and excluded pads (the divisors factor by axis) included, forward and backward
    rng = np.random.default_rng(0)
    pooled = PoolSpec.from_dict({"op": "avg_pool2d", "kernel_size": [2, 3], "stride": 1, "padding": 1,
                                 "count_include_pad": False, "ceil_mode": True, "dtype": "float32"})
    x = rng.normal(size=(2, 3, 5, 6)).astype(np.float32)
    g = rng.normal(size=forward(pooled, x).shape).astype(np.float32)
    for f, args in ((forward, ()), (backward, (g,))):
        np.testing.assert_allclose(f(pooled, x, *args, accumulate="dtype_per_axis"), f(pooled, x, *args),
                                   rtol=1e-6, atol=1e-7)
    override = PoolSpec.from_dict({"op": "avg_pool2d", "kernel_size": 2, "divisor_override": 3})
    with pytest.raises(SpecError, match="accumulate"):
        forward(override, np.ones((1, 1, 4, 4), np.float32), accumulate="dtype_per_axis")
