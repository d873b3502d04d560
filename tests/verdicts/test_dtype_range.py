"""A dtype's range is part of its accuracy (SPEC.md, "Tolerances"): lp_pool over GELU-like
activations, tiny negative values next to larger ones, in float32. Where a window's cubes
fall below half float32's smallest subnormal its power sum is 0 in float32 (tiny in float64),
and a float32 computation of the formula gives a forward of 0 and a gradient of inf or NaN
(0 ** (-2/3)), or 0 (PyTorch's relu form): accepted there, and nowhere else; a wrong divisor,
a dropped term or a NaN where float32 resolves the sum still fails. An overflowing power sum
stays a behaviour. The float32 computations are this file's own, in NumPy."""

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec
from poolgrad.reference.api import range_error
from poolgrad.verdicts import tolerances
from verdict_cases import classify
from poolgrad.verdicts.compare import within

SPEC = PoolSpec.from_dict({"op": "lp_pool1d", "kernel_size": 3, "stride": 2, "norm_type": 3, "dtype": "float32"})
WINDOWS = 64
# Window i reads x[2i : 2i + 3]; its kind is i % 4.
LARGE, TINY_POSITIVE, TINY_NEGATIVE, SUBNORMAL = range(4)


def _data():
    """Even positions (shared by two windows): GELU's tail, -4e-16 to -1e-16 (cubes below
    half float32's smallest subnormal, 7e-46). Odd positions (one window each) by the
    window's kind: a larger activation; +8e-16 (the window's cubes all round to 0 in float32,
    its float64 sum is positive); -3e-16 (sum negative: the reference's root is NaN); 5e-15
    (a cube of 1.25e-43, 89 subnormal spacings: float32 resolves the sum, about 0.2% off)."""
    rng = np.random.default_rng(3)
    x = -rng.uniform(1e-16, 4e-16, 2 * WINDOWS + 1)
    kind = np.arange(WINDOWS) % 4
    x[1::2] = np.select([kind == LARGE, kind == TINY_POSITIVE, kind == TINY_NEGATIVE],
                        [rng.uniform(0.2, 1.5, WINDOWS), 8e-16, -3e-16], 5e-15)
    g = rng.standard_normal(WINDOWS).astype(np.float32)
    return x.astype(np.float32)[None, None], g[None, None]


def _float32_lp(x, g, relu: bool):
    """PyTorch's formula with every operation rounded to float32: a = mean(x ** 3) * 3,
    y = a ** (1/3); the gradient by the chain rule, a ** (-2/3) unguarded (inf at a = 0, NaN
    below) or, with ``relu``, 0 where a <= 0 (the relu form's derivative)."""
    third = np.float32(1) / np.float32(3)
    windows = np.stack([x[..., t:t + 2 * WINDOWS:2] for t in range(3)])
    cubes = windows * windows * windows
    a = (cubes[0] + cubes[1] + cubes[2]) / np.float32(3) * np.float32(3)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.power(a, third)
        share = g * third * np.power(a, -2 * third)
    if relu:
        share = np.where(a > 0, share, np.float32(0))
    grad = np.zeros_like(x)
    with np.errstate(invalid="ignore"):
        for t in range(3):  # windows in output order, each tap's term rounded once
            grad[..., t:t + 2 * WINDOWS:2] += share * (np.float32(3) * windows[t] * windows[t])
    return y, grad, a


def _cells(kind):
    """The gradient elements that only windows of ``kind`` reach (their middle elements)."""
    return 2 * np.flatnonzero(np.arange(WINDOWS) % 4 == kind) + 1


def test_float32_cannot_resolve_the_tiny_windows():
    x, g = _data()
    _, plain, a = _float32_lp(x, g, relu=False)
    want = reference.backward(SPEC, x, g)
    tiny = _cells(TINY_POSITIVE)
    assert (a[..., tiny // 2] == 0).all()  # float32's power sum is exactly 0 ...
    assert (reference.forward(SPEC, x)[..., tiny // 2] > 0).all()  # ... float64's a tiny number
    assert np.isinf(plain[..., tiny]).all() and np.isfinite(want[..., tiny]).all()


@pytest.mark.parametrize("relu", [False, True], ids=["inf or NaN", "relu form: 0"])
def test_what_float32_gives_where_it_cannot_resolve_the_sum_conforms(relu):
    x, g = _data()
    y, grad, _ = _float32_lp(x, g, relu)
    v = classify(SPEC, x, g, Outcome(OK, y, grad))
    assert v.verdict == "conforms", v.message
    assert f"{WINDOWS // 2} power sum(s) below what float32 resolves" in v.message


def test_a_subnormal_power_sum_is_as_accurate_as_its_spacing():
    """The SUBNORMAL windows' gradients are off by more than the rounding bound alone allows
    (so the conforming verdict above needs the range's first-order part)."""
    x, g = _data()
    _, grad, _ = _float32_lp(x, g, relu=True)
    want = reference.backward(SPEC, x, g)
    scale = np.maximum(np.abs(want.astype(np.float64)), reference.error_scale(SPEC, x, g)[1])
    rounding_only = within(grad, want, tolerances.bound("lp_pool", np.float32, scale))
    assert not rounding_only[..., _cells(SUBNORMAL)].all()


def _mutant(kind):
    x, g = _data()
    y, grad, _ = _float32_lp(x, g, relu=False)
    large, sub, tiny = _cells(LARGE)[3], _cells(SUBNORMAL)[3], _cells(TINY_POSITIVE)[3]
    if kind == "wrong divisor":
        y[..., large // 2] *= np.float32(2 ** (1 / 3))  # a divisor of 1/2 inside the root
    elif kind == "dropped term":
        grad[..., large] = 0
    elif kind == "NaN where the sum is resolved":
        grad[..., large] = np.nan
    elif kind == "NaN where the sum is subnormal":
        grad[..., sub] = np.nan
    elif kind == "inf where the sum is resolved":
        grad[..., sub] = np.inf
    elif kind == "forward above the ceiling":
        y[..., tiny // 2] = np.float32(1e-14)  # the ceiling is (|z| + 2 * 3 * 1.4e-45) ** (1/3), 2e-15
    elif kind == "negative forward":
        y[..., tiny // 2] = np.float32(-1e-16)
    return x, g, Outcome(OK, y, grad)


@pytest.mark.parametrize("kind", ["wrong divisor", "dropped term", "NaN where the sum is resolved",
                                  "NaN where the sum is subnormal", "inf where the sum is resolved",
                                  "forward above the ceiling", "negative forward"])
def test_a_real_divergence_still_fails(kind):
    x, g, outcome = _mutant(kind)
    v = classify(SPEC, x, g, outcome)
    assert v.verdict == "wrong", v.message


def test_an_overflowing_power_sum_stays_a_behaviour():
    """float16, p = 3: a window of 40s sums 192000 > 65504. Kept in float16 the forward is inf
    and the gradient 0 where the spec's are finite: the tolerance does not absorb it (findings
    describe it, e.g. torch-lp-half-power-sum-overflow, as a policy or a failure)."""
    spec = PoolSpec.from_dict({"op": "lp_pool1d", "kernel_size": 3, "stride": 2, "norm_type": 3, "dtype": "float16"})
    x = np.full((1, 1, 5), 40, dtype=np.float16)
    g = np.ones((1, 1, 2), dtype=np.float16)
    with np.errstate(over="ignore"):
        cube = x * x * x  # 64000 each, finite
        z = cube[..., 0] + cube[..., 1] + cube[..., 2]  # inf
    y = np.full((1, 1, 2), np.power(z, np.float16(1 / 3)), dtype=np.float16)
    grad = np.zeros_like(x)  # g * inf ** (-2/3) * 3 * 40 ** 2
    assert np.isinf(y).all()
    v = classify(spec, x, g, Outcome(OK, y, grad))
    assert v.verdict != "conforms", v.message


def test_a_nan_or_inf_window_adds_no_allowance():
    """A NaN window's policies (a zero gradient, say) are still compared within the usual bound:
    its power sum has no range error to add (NaN or inf would accept nothing, or everything)."""
    x = np.array([[[np.nan, 1, 2, 3, np.inf, 1, 2e-16, -1e-16, 3e-16]]], dtype=np.float32)
    forward, gradient, ceiling = range_error(SPEC, x, np.ones((1, 1, 4), dtype=np.float32))
    assert (forward == 0).all() and (gradient[..., :6] == 0).all()
    assert np.isinf(gradient[..., 6:]).all() and np.isnan(ceiling[..., :3]).all() and ceiling[..., 3] > 0
