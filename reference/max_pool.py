"""max_pool and adaptive_max_pool: forward is a selection, backward routes each window's
upstream gradient to the selected element(s) under a tie and a NaN policy."""

from __future__ import annotations

import numpy as np

from .taps import TapPlan


def _candidates(v, valid, nan, has_nan):
    if nan == "ignore" and has_nan:
        keep = ~np.isnan(v)
        return keep if valid is None else valid & keep
    return valid


def select(plan: TapPlan, xw: np.ndarray, tie: str, nan: str):
    """Running selection over taps. Returns (best value, selected tap index or -1)."""
    out_shape = xw.shape[:2] + plan.geom.out_shape
    best = np.full(out_shape, -np.inf, dtype=xw.dtype)
    sel = np.full(out_shape, -1, dtype=np.int32)
    has_nan = bool(np.isnan(xw).any())
    for t, (index, valid) in enumerate(plan.taps):
        v = xw[index]
        cand = _candidates(v, valid, nan, has_nan)
        if t == 0 and cand is None:
            np.copyto(best, v)
            sel.fill(0)
            continue
        better = v > best if tie == "first" else v >= best
        if has_nan and nan == "propagate":
            better |= (np.isnan(v) & ~np.isnan(best)) if tie == "first" else np.isnan(v)
        better |= sel < 0
        if cand is not None:
            better &= cand
        np.copyto(best, v, where=better)
        np.copyto(sel, t, where=better)
    return best, sel


def window_max(plan: TapPlan, xw: np.ndarray, nan: str):
    """The maximum of every window (NaN under propagate if any NaN), -inf where empty."""
    m = np.full(xw.shape[:2] + plan.geom.out_shape, -np.inf, dtype=xw.dtype)
    reduce = np.maximum if nan == "propagate" else np.fmax
    for index, valid in plan.taps:
        if valid is None:
            reduce(m, xw[index], out=m)
        else:
            np.copyto(m, reduce(m, xw[index]), where=valid)
    return m


def forward(plan: TapPlan, xw: np.ndarray, tie: str, nan: str) -> np.ndarray:
    best, _ = select(plan, xw, "last" if tie == "last" else "first", nan)
    return best


def backward(plan: TapPlan, xw: np.ndarray, g: np.ndarray, tie: str, nan: str) -> np.ndarray:
    """Gradient w.r.t. the padded input, float64."""
    grad_p = np.zeros(xw.shape, dtype=np.float64)
    if tie in ("first", "last"):
        _, sel = select(plan, xw, tie, nan)
        for t, (index, _) in enumerate(plan.taps):
            plan.scatter(grad_p, index, np.where(sel == t, g, 0.0))
        return grad_p
    m = window_max(plan, xw, nan)
    m_nan = np.isnan(m)
    hits = []
    count = np.zeros(m.shape, dtype=np.int64)
    for index, valid in plan.taps:
        v = xw[index]
        hit = (v == m) | (np.isnan(v) & m_nan)
        if valid is not None:
            hit &= valid
        hits.append(hit)
        count += hit
    with np.errstate(divide="ignore", invalid="ignore"):
        share = g if tie == "all" else g / count
    for (index, _), hit in zip(plan.taps, hits):
        plan.scatter(grad_p, index, np.where(hit, share, 0.0))
    return grad_p
