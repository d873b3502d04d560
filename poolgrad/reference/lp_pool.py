"""lp_pool (SPEC.md, "lp_pool"): y = (sign(a) * relu(|a|) * K) ** (1/p) where
a = avg_pool(x ** p) with count_include_pad and K the kernel volume. So y = (sum x**p)**(1/p)
for full windows, a ceil_mode window clipped at the edge is scaled by K / (taps inside), and
the relu makes the gradient of a window whose sum is 0 exactly 0 (not inf * 0). ``acc`` is the
dtype the power sums and the gradient's sums are kept in (accumulate.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .accumulate import F64
from .avg_pool import spread, window_sum
from .geometry import window_volume
from .spec import PoolSpec
from .taps import TapPlan


def _scale(plan: TapPlan) -> np.ndarray:
    return window_volume(plan.geom) / plan.geom.window_counts("in_padded")


def _scaled_sum(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, acc=F64) -> np.ndarray:
    return window_sum(plan, xw, lambda v: v ** spec.norm_type, acc) * _scale(plan)


def forward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, acc=F64) -> np.ndarray:
    with np.errstate(all="ignore"):
        return _scaled_sum(spec, plan, xw, acc) ** (1.0 / spec.norm_type)


def backward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray, acc=F64) -> np.ndarray:
    p = spec.norm_type
    with np.errstate(all="ignore"):
        z = _scaled_sum(spec, plan, xw, acc)
        per_window = g * np.where(z != 0, z ** (1.0 / p - 1.0), 0.0) * _scale(plan)
        return spread(plan, xw.shape, per_window, lambda v: v ** (p - 1.0), xw, acc)


def error_scale(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First-order error propagation through the formula: how far, in units of the dtype's
    eps, a computation as accurate as the dtype allows may put each output and gradient
    element. The power sum z = sum x**p cancels where x**p has both signs; its rounding error
    is of the size of Z = sum |x|**p, so its relative error is kappa = Z / |z| times eps. The
    root passes kappa / p of it to y = z ** (1/p); the backward's z ** (1/p - 1) passes
    |1/p - 1| * kappa to every window's share, and every share and sum adds a few eps of the
    terms' size. Where z is 0 (and Z is not) kappa is infinite: no dtype fixes its sign."""
    p = spec.norm_type
    with np.errstate(all="ignore"):
        z = _scaled_sum(spec, plan, xw)
        big_z = _scaled_sum(spec, plan, np.abs(xw))
        kappa = np.where(big_z == 0, 0.0, big_z / np.abs(z))
        y = np.abs(z) ** (1.0 / p)
        forward_scale = y * (1.0 + kappa / p) + np.where(np.isinf(kappa), np.inf, 0.0)
        share = np.abs(g) * np.where(z != 0, np.abs(z) ** (1.0 / p - 1.0), 0.0) * _scale(plan)
        share = np.where(np.isinf(kappa) & (g != 0), np.inf, share * (1.0 + abs(1.0 / p - 1.0) * kappa + p))
        return forward_scale, spread(plan, xw.shape, share, lambda v: np.abs(v) ** (p - 1.0), xw)


def range_error(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray, dtype) -> tuple[np.ndarray, ...]:
    """What the range of ``dtype`` adds to error_scale's rounding, from the reference alone:
    absolute errors (float64) per output and per padded-input gradient element, and per output
    the ceiling of the forward where the dtype cannot resolve the window's power sum (NaN
    elsewhere). IEEE arithmetic, subnormals kept (flushing them is the policy ftz): a term
    |x| ** p below half the smallest subnormal s rounds to 0, one in the subnormal range is off
    by up to s / 2, and so is the window mean that the spec's form (a = avg_pool(x ** p),
    times K) divides by the count and multiplies back; the power sum z is off by up to
    delta = 2 * K * s (K the window volume, twice the terms' and the mean's roundings for a pow
    an ulp off there). That relative error
    delta / |z| passes to y = z ** (1/p) divided by p and to z ** (1/p - 1) times |1/p - 1|
    (x ** (p - 1) is off by up to s as well). Where |z| <= delta (and the window has a nonzero
    term, and z is not exactly 0, the spec's zero case) the dtype's sum can be 0 or change
    sign: the forward is anything from 0 to (|z| + delta) ** (1/p), or NaN (the root of a
    negative sum), and the gradient elements the window reaches any value, inf and NaN
    included (z ** (1/p - 1) at 0)."""
    p = spec.norm_type
    tiny = float(ml_dtypes.finfo(dtype).smallest_subnormal)
    with np.errstate(all="ignore"):
        z = _scaled_sum(spec, plan, xw)
        reached = _scaled_sum(spec, plan, np.abs(xw)) > 0
        delta = 2.0 * window_volume(plan.geom) * tiny
        unresolved = reached & (z != 0) & (np.abs(z) <= delta)
        rho = np.where(reached & (z != 0) & ~unresolved, delta / np.abs(z), 0.0)
        forward_error = np.abs(z) ** (1.0 / p) * rho / p
        ceiling = np.where(unresolved, (np.abs(z) + delta) ** (1.0 / p), np.nan)
        share = np.abs(g) * np.where(z != 0, np.abs(z) ** (1.0 / p - 1.0), 0.0) * _scale(plan)
        gradient_error = (spread(plan, xw.shape, share * abs(1.0 / p - 1.0) * rho, lambda v: np.abs(v) ** (p - 1.0), xw)
                          + spread(plan, xw.shape, share * tiny))
        fed = spread(plan, xw.shape, unresolved.astype(np.float64)) > 0
    # A NaN or infinite window (a NaN or inf input) adds nothing: its cells are compared as before.
    forward_error, gradient_error = (np.nan_to_num(e, nan=0.0, posinf=0.0) for e in (forward_error, gradient_error))
    return forward_error, np.where(fed, np.inf, gradient_error), ceiling
