"""avg_pool, adaptive_avg_pool and segment_avg_pool: the window sum divided by a divisor, and its transpose.
``acc`` is the dtype the sums are kept in (accumulate.py): float64 for the spec."""

from __future__ import annotations

import numpy as np

from .accumulate import F64, rounded_sum, scatter_taps, terms
from .spec import PoolSpec
from .taps import TapPlan


def divisor(spec: PoolSpec, plan: TapPlan) -> np.ndarray:
    """divisor_override, else the taps inside the padded input (count_include_pad: a ceil_mode
    window's overhang is not counted), else the real elements only (SPEC.md, "avg_pool")."""
    if spec.divisor_override is not None:
        return np.asarray(float(spec.divisor_override))
    if spec.is_segment:  # an empty segment's mean is 0 (SPEC.md, segment_avg_pool)
        return np.maximum(plan.geom.window_counts("in_input"), 1).astype(np.float64)
    which = "in_padded" if spec.count_include_pad and not spec.is_adaptive else "in_input"
    return plan.geom.window_counts(which).astype(np.float64)


def window_sum(plan: TapPlan, xw: np.ndarray, fn=None, acc=F64) -> np.ndarray:
    """Sum over each window's real elements of ``fn(x)`` (x itself by default), taps added in
    window order in ``acc``; float64."""
    s = np.zeros(xw.shape[:2] + plan.geom.out_shape, dtype=acc)
    with np.errstate(over="ignore"):  # a sum in the dtype may overflow: that is the point
        for index, valid in plan.taps:
            v = xw[index] if fn is None else fn(xw[index])
            s += terms(v if valid is None else np.where(valid, v, 0.0), acc)
    return s.astype(np.float64, copy=False)


def spread(plan: TapPlan, shape, per_window: np.ndarray, fn=None, xw=None, acc=F64) -> np.ndarray:
    """Transpose of window_sum: every real element of a window receives ``per_window``
    (times ``fn(x)`` of that element when given), added in output-position order in ``acc``."""
    per_tap = []
    for index, valid in plan.taps:
        v = per_window if fn is None else per_window * fn(xw[index])
        per_tap.append(v if valid is None else np.where(valid, v, 0.0))
    return scatter_taps(plan, shape, per_tap, acc)


def forward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, acc=F64) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return rounded_sum(window_sum(plan, xw, acc=acc), acc) / divisor(spec, plan)


def backward(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray, acc=F64) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return spread(plan, xw.shape, g / divisor(spec, plan), acc=acc)


def error_scale(spec: PoolSpec, plan: TapPlan, xw: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First-order error propagation (lp_pool.error_scale): a window sum, and the gradient's
    sum of shares, is as accurate as the sizes of its terms allow, so each output's error
    scales with the op applied to |x| and each gradient element's with the backward of |g|."""
    return forward(spec, plan, np.abs(xw)), spread(plan, xw.shape, np.abs(g) / divisor(spec, plan))
