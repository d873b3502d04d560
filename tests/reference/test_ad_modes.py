"""poolgrad.reference.jvp and reference.double_backward: finite differences of forward and backward on
tie-free inputs, the jvp/vjp dot-product identity under every policy (ties and NaN included),
and hand-written examples at ties."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pool_strategies import OPS, inputs
from poolgrad.reference import TIES, ad_modes, PoolSpec, SpecError, backward, double_backward, forward, jvp, resolve
from test_reference_gradcheck import FEW, draw_case, tie_free

STEP = 1e-6


def _finite(a):
    return np.where(np.isfinite(a), a, 0.0)


@pytest.mark.parametrize("op", OPS)
@FEW
@given(data=st.data())
def test_jvp_and_double_backward_are_derivatives(op, data):
    """jvp against central differences of forward, double_backward against central
    differences of sum(backward * v) along random directions of g and x."""
    drawn = draw_case(data, op)
    if drawn is None:
        return
    spec, shape, out, rng = drawn
    x, t = tie_free(rng, shape), rng.standard_normal(shape)
    g, v, d, e = rng.standard_normal(out), rng.standard_normal(shape), rng.standard_normal(shape), rng.standard_normal(out)
    numeric = (_finite(forward(spec, x + STEP * t)) - _finite(forward(spec, x - STEP * t))) / (2 * STEP)
    # a window with no real element is constant (-inf, or avg's 0 / 0 whose tangent is 0 / 0 too)
    varies = np.isfinite(forward(spec, x))
    np.testing.assert_allclose(np.where(varies, jvp(spec, x, t), 0.0), numeric, rtol=1e-5, atol=1e-6)

    def l2(xx, gg):
        return float(np.sum(backward(spec, xx, gg) * v))
    by_g, by_x = double_backward(spec, x, g, v)
    numeric_g = (l2(x, g + STEP * e) - l2(x, g - STEP * e)) / (2 * STEP)
    numeric_x = (l2(x + STEP * d, g) - l2(x - STEP * d, g)) / (2 * STEP)
    assert np.sum(np.where(varies, by_g, 0.0) * e) == pytest.approx(numeric_g, rel=1e-5, abs=1e-6)
    assert np.sum(by_x * d) == pytest.approx(numeric_x, rel=1e-4, abs=1e-5)
    if spec.op != "lp_pool":
        assert not by_x.any()


@pytest.mark.parametrize("tie", TIES)
@pytest.mark.parametrize("nan", ["propagate", "ignore"])
@pytest.mark.parametrize("op", ["max_pool", "adaptive_max_pool"])
@FEW
@given(data=st.data())
def test_jvp_and_vjp_are_transposes_under_every_policy(op, tie, nan, data):
    """<jvp(t), u> == <t, backward(u)>, ties, NaN, infinities and signed zeros included: both
    modes route through one selection. Integer t and u keep every sum exact."""
    drawn = draw_case(data, op)
    if drawn is None:
        return
    spec, shape, out, rng = drawn
    x = data.draw(inputs(shape, "float64"))
    t = rng.integers(-8, 9, size=shape).astype(np.float64)
    u = rng.integers(-8, 9, size=out).astype(np.float64)
    # split divides by the number of maxima: scale so that every share is an integer too
    taps = math.prod(a.taps for a in resolve(spec, shape).axes)
    scale = math.lcm(*range(1, taps + 1)) if tie == "split" else 1
    lhs = math.fsum((jvp(spec, x, t * scale, tie=tie, nan=nan) * u).ravel())
    rhs = math.fsum((t * backward(spec, x, u * scale, tie=tie, nan=nan)).ravel())
    assert lhs == rhs


@pytest.mark.parametrize("tie, expected", [("first", 20.0), ("last", 30.0), ("all", 50.0), ("split", 25.0)])
def test_jvp_at_a_tie(tie, expected):
    """SPEC.md's tie example as forward mode: window order 1, 3, 3, 2; tangents 10, 20, 30, 40."""
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    x = np.array([[[[1.0, 3.0], [3.0, 2.0]]]])
    t = np.array([[[[10.0, 20.0], [30.0, 40.0]]]])
    assert jvp(spec, x, t, tie=tie).item() == expected
    by_g, by_x = double_backward(spec, x, np.full((1, 1, 1, 1), 2.0), t, tie=tie)
    assert by_g.item() == expected and not by_x.any()


@pytest.mark.parametrize("nan, tie, expected", [("propagate", "first", 2.0), ("propagate", "last", 4.0),
                                                ("propagate", "all", 6.0), ("propagate", "split", 3.0),
                                                ("ignore", "first", 3.0)])
def test_jvp_at_nan(nan, tie, expected):
    """SPEC.md's NaN example, window [1, NaN, 3, NaN], with tangents 1, 2, 3, 4."""
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 4})
    x = np.array([[[1.0, np.nan, 3.0, np.nan]]])
    assert jvp(spec, x, np.array([[[1.0, 2.0, 3.0, 4.0]]]), tie=tie, nan=nan).item() == expected


def test_padding_and_empty_windows_carry_no_tangent():
    """SPEC.md's window wholly in padding routes nothing: its output tangent is 0."""
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "padding": [[0, 3]]})
    x = np.array([[[5.0]]])
    assert jvp(spec, x, np.array([[[7.0]]])).tolist() == [[[7.0, 0.0]]]


def test_lp_second_order_by_hand():
    """lp p=2 on one window [3, 4]: y = |x|, dx = g x / y; d/dx sum(dx v) = g (v - x (x.v) / y**2) / y."""
    spec = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 2})
    x, v = np.array([[[3.0, 4.0]]]), np.array([[[1.0, 2.0]]])
    by_g, by_x = double_backward(spec, x, np.array([[[5.0]]]), v)
    assert by_g.item() == pytest.approx((3 * 1 + 4 * 2) / 5)
    np.testing.assert_allclose(by_x, 5.0 * (v - x * 11.0 / 25.0) / 5.0)
    assert jvp(spec, np.zeros((1, 1, 2)), v).item() == 0.0   # z = 0: the reverse rule's 0


def test_lp_second_order_error_scale_counts_the_terms_that_cancel():
    """Along v = x the second order in x of a norm is 0 (lp is homogeneous of degree 1): its two
    terms, g v / y and -g x (x.v) / y**3, cancel exactly, so a dtype computing them apart is off
    by eps times their size, not of the 0 they make. The scale counts each; on an odd p it
    also widens by the cancelling power sum's conditioning."""
    spec = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 2})
    x, g = np.array([[[3.0, 4.0]]]), np.array([[[5.0]]])
    assert np.abs(double_backward(spec, x, g, x)[1]).max() < 1e-12
    by_g, by_x = ad_modes.error_scale("double_backward", spec, x, g, x)
    assert (by_x >= 2 * 5.0 * x / 5.0).all() and by_g.item() >= 5.0     # |g v / y| + |g x (x.v) / y**3|
    cubes = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 3})
    signed, same = (ad_modes.error_scale("jvp", cubes, np.array([[[a, 4.0]]]), None, np.ones((1, 1, 2))) for a in (-3.9, 3.9))
    assert signed[0].item() > 10 * same[0].item()     # z = 4**3 - 3.9**3 is small beside 4**3 + 3.9**3


def test_lp_products_past_the_dtypes_range_are_marked_from_the_reference_alone():
    """float16 lp p=2, one window [10, 1] along t = [4096, 1]: pow's derivative 2 * 10 * 4096 is
    past 65504 though the tangent, 10 * 4096 / |x| ~ 4075.7, is not; the same window along
    t = [1, 1] keeps every product in range, and float32 holds both."""
    spec = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 2})
    x, g = np.array([[[10.0, 1.0]]], np.float16), np.array([[[1.0]]], np.float16)
    big, small = np.array([[[4096.0, 1.0]]]), np.ones((1, 1, 2))
    assert abs(jvp(spec, x, big).item()) < 65504
    assert ad_modes.overflows("jvp", spec, x, g, big)[0].all()
    by_g, by_x = ad_modes.overflows("double_backward", spec, x, g, big)
    assert by_g.all() and by_x.any()
    assert not any(a.any() for a in ad_modes.overflows("double_backward", spec, x, g, small))
    assert not ad_modes.overflows("jvp", spec, x.astype(np.float32), g, big)[0].any()
    max_spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    assert not ad_modes.overflows("jvp", max_spec, x, g, big)[0].any()     # a selection multiplies nothing


def test_rounding_to_the_dtype_and_bad_shapes():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 2})
    x = np.zeros((1, 1, 2), dtype=np.float16)
    out = jvp(spec, x, np.array([[[1.0, 2.0 ** -12]]]))
    assert out.dtype == np.float16 and out.item() == 0.5   # 0.5 + 2**-13 rounds once to 0.5
    with pytest.raises(SpecError, match="tangent"):
        jvp(spec, x, np.zeros((1, 1, 3)))
    with pytest.raises(SpecError, match="v"):
        double_backward(spec, x, np.zeros((1, 1, 1)), np.zeros((1, 1)))
