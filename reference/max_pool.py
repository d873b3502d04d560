"""max_pool and adaptive_max_pool: forward is a selection, backward routes each window's
upstream gradient to the selected element(s) under a tie and a NaN policy.

Algorithm (what keeps backward within a small factor of framework kernels): one pass per tap
for the window maximum, one compare-and-mark pass per tap to find the selected tap, then a
single gather/scatter through the flat position of every window's selected element
(np.bincount) instead of a masked scatter per tap.
"""

from __future__ import annotations

import numpy as np

from .accumulate import F64, scatter_add, scatter_taps
from .taps import TapPlan


def window_max(plan: TapPlan, xw: np.ndarray, nan: str) -> np.ndarray:
    """The maximum of every window (NaN under propagate if any NaN), -inf where empty."""
    reduce = np.maximum if nan == "propagate" else np.fmax
    m = None
    for index, valid in plan.taps:
        if m is None and valid is None:
            m = xw[index].copy()
            continue
        if m is None:
            m = np.full(plan.out_shape(xw), -np.inf, dtype=xw.dtype)
        if valid is None:
            reduce(m, xw[index], out=m)
        else:
            np.copyto(m, reduce(m, xw[index]), where=valid)
    return m


def tap_hits(plan: TapPlan, xw: np.ndarray, m: np.ndarray, nan: str):
    """(tap, windows whose maximum sits at that tap) for every tap in window order.
    The yielded mask is reused: copy it to keep it."""
    nan_is_max = nan == "propagate" and bool(np.isnan(m).any())
    hit = np.empty(m.shape, dtype=bool)
    for t, (index, valid) in enumerate(plan.taps):
        v = xw[index]
        np.equal(v, m, out=hit)
        if nan_is_max:
            hit |= np.isnan(v)   # m is NaN exactly where some real tap is NaN
        if valid is not None:
            hit &= valid
        yield t, hit


def selected_tap(plan: TapPlan, xw: np.ndarray, m: np.ndarray, tie: str, nan: str) -> np.ndarray:
    """Per window, the tap that tie ``first``/``last`` selects among its maxima, -1 if none."""
    taps = len(plan.taps)
    # Branch-free: a masked copy over the random hit masks mispredicts, a max of scores does
    # not. A hit at tap t scores t + 1 (last) or taps - t (first); 0 means no hit.
    score_type = np.min_scalar_type(taps)
    best = np.zeros(m.shape, dtype=score_type)
    score = np.empty_like(best)
    for t, hit in tap_hits(plan, xw, m, nan):
        np.multiply(hit.view(np.uint8), score_type.type(t + 1 if tie == "last" else taps - t), out=score)
        np.maximum(best, score, out=best)
    if tie == "last":
        return best.astype(np.intp) - 1
    return np.where(best > 0, taps - best.astype(np.intp), -1)


def forward(plan: TapPlan, xw: np.ndarray, tie: str, nan: str) -> np.ndarray:
    """The selected element itself (so a signed zero or a NaN payload is the input's)."""
    m = window_max(plan, xw, nan)
    sel = selected_tap(plan, xw, m, "last" if tie == "last" else "first", nan)
    picked = np.ravel(xw)[plan.flat_index(sel, xw.shape)]
    return np.where(sel >= 0, picked, -np.inf).astype(xw.dtype)


def backward(plan: TapPlan, xw: np.ndarray, g: np.ndarray, tie: str, nan: str, acc=F64) -> np.ndarray:
    """Gradient w.r.t. the padded input, float64; where windows share an element their
    gradients are added in ``acc`` (accumulate.py)."""
    m = window_max(plan, xw, nan)
    if tie in ("first", "last"):
        return route(plan, xw.shape, selected_tap(plan, xw, m, tie, nan), g, acc)
    hits = [hit.copy() for _, hit in tap_hits(plan, xw, m, nan)]
    count = np.sum(hits, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = g if tie == "all" else g / count
    return scatter_taps(plan, xw.shape, [np.where(hit, share, 0.0) for hit in hits], acc)


def route(plan: TapPlan, shape, sel: np.ndarray, g: np.ndarray, acc=F64) -> np.ndarray:
    """Gradient w.r.t. the padded input of ``shape``: each window's ``g`` to its selected tap
    (none where ``sel`` is -1), added in output-position order in ``acc``. A selected padding
    tap receives it in the padded border, which unpad drops."""
    weights = np.where(sel >= 0, g, 0.0)
    index = plan.flat_index(np.maximum(sel, 0), shape)
    return scatter_add(int(np.prod(shape)), index, weights, acc).reshape(shape)
