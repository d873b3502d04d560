"""lp_pool, PyTorch's definition: y = (sign(a) * relu(|a|) * K) ** (1/p) where
a = avg_pool(x ** p) with count_include_pad and K the kernel volume. So y = (sum x**p)**(1/p)
for full windows, a ceil_mode window clipped at the edge is scaled by K / (taps inside), and
the relu makes the gradient of a window whose sum is 0 exactly 0 (not inf * 0). ``acc`` is the
dtype the power sums and the gradient's sums are kept in (accumulate.py)."""

from __future__ import annotations

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
