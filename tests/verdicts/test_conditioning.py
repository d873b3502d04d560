"""Tolerances that know the formula's conditioning (SPEC.md, "Tolerances"): lp_pool computed as
accurately as float32 allows passes where its power sum nearly cancels, while a real divergence
(a dropped term, a NaN where the reference has a number, a gradient outside every window, a
wrong scale) still fails. The float32 computation is this file's own, in NumPy."""

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec
from verdict_cases import classify

SPEC = PoolSpec.from_dict({"op": "lp_pool1d", "kernel_size": 2, "stride": 3, "norm_type": 3, "dtype": "float32"})


def _data():
    """Random-normal windows of two, the power sums of some nearly cancelling (second element
    close to minus the first), all positive so the root is defined."""
    rng = np.random.default_rng(7)
    a = np.abs(rng.standard_normal((1, 1, 256))).astype(np.float32) + np.float32(0.5)
    b = -a * np.float32(1 - 2.0 ** -12) * (rng.random(a.shape) < 0.25) + np.abs(rng.standard_normal(a.shape)) * (
        rng.random(a.shape) >= 0.25)
    x = np.zeros((1, 1, 3 * 256), dtype=np.float32)  # stride 3: element 2 of every 3 is in no window
    x[..., 0::3], x[..., 1::3] = a, b.astype(np.float32)
    g = rng.standard_normal((1, 1, 256)).astype(np.float32)
    return x, g


def _float32_lp(x, g):
    """lp_pool (p = 3, kernel 2, stride 3) with every operation rounded to float32."""
    x0, x1 = x[..., 0::3], x[..., 1::3]
    z = x0 * x0 * x0 + x1 * x1 * x1
    y = np.cbrt(z)
    share = g * np.where(z != 0, np.float32(1) / (y * y), np.float32(0))
    grad = np.zeros_like(x)
    grad[..., 0::3], grad[..., 1::3] = share * x0 * x0, share * x1 * x1
    return y.astype(np.float32), grad


def _cancelling(x):
    """Z / |z| per window: the power sum's condition number."""
    x0, x1 = x[..., 0::3].astype(np.float64), x[..., 1::3].astype(np.float64)
    return (np.abs(x0) ** 3 + np.abs(x1) ** 3) / np.abs(x0 ** 3 + x1 ** 3)


def test_an_ill_conditioned_power_sum_computed_in_float32_conforms():
    x, g = _data()
    y, grad = _float32_lp(x, g)
    assert _cancelling(x).max() > 1e3  # some windows cancel: the old bound (256 eps of the terms) fails there
    want = reference.backward(SPEC, x, g).astype(np.float64)
    naive = 256 * np.finfo(np.float32).eps * np.maximum(np.abs(want), np.abs(reference.backward(SPEC, np.abs(x), np.abs(g))))
    assert (np.abs(grad.astype(np.float64) - want) > naive).any()
    v = classify(SPEC, x, g, Outcome(OK, y, grad))
    assert v.verdict == "conforms", v.message


def _mutant(kind):
    x, g = _data()
    y, grad = _float32_lp(x, g)
    well = int(np.argmin(_cancelling(x)))  # a well-conditioned window
    if kind == "dropped term":
        grad[..., 3 * well] = 0
    elif kind == "nan":
        grad[..., 3 * well + 1] = np.nan
    elif kind == "outside every window":
        grad[..., 3 * well + 2] = grad[..., 3 * well]
    elif kind == "wrong scale":
        y[..., well] *= np.float32(2 ** (1 / 3))  # a divisor of 1/2 inside the root
    return x, g, Outcome(OK, y, grad)


@pytest.mark.parametrize("kind", ["dropped term", "nan", "outside every window", "wrong scale"])
def test_a_real_divergence_still_fails(kind):
    x, g, outcome = _mutant(kind)
    v = classify(SPEC, x, g, outcome)
    assert v.verdict == "wrong", v.message
