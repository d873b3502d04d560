"""max_pool and adaptive_max_pool: forward is a selection, backward routes each window's
upstream gradient to the selected element(s) under a tie and a NaN policy.

Algorithm (fast: benchmarks/): the selected tap of every window comes from the one
vectorised selection (selection.py, one pass per tap), then a
single gather/scatter through the flat position of every window's selected element
(np.bincount) instead of a masked scatter per tap; the mask answers (all, split) mark every
maximum found by one pass per tap for the window maximum.
"""

from __future__ import annotations

import numpy as np

from .selection import scan, selected_tap, tap_hits, window_max
from .accumulate import F64, scatter_add, scatter_taps
from .taps import TapPlan


def forward(plan: TapPlan, xw: np.ndarray, tie: str, nan: str) -> np.ndarray:
    """The selected element itself (so a signed zero or a NaN payload is the input's)."""
    return empty_windows(plan, scan(plan, xw, tie="last" if tie == "last" else "first", nan=nan)[0])


def empty_windows(plan: TapPlan, best: np.ndarray) -> np.ndarray:
    """``best`` with the op's value for windows without a real element, where it has one."""
    if plan.empty_value is None:
        return best
    return np.where(plan.geom.window_counts("in_input") == 0, plan.empty_value, best).astype(best.dtype)


def backward(plan: TapPlan, xw: np.ndarray, g: np.ndarray, tie: str, nan: str, acc=F64) -> np.ndarray:
    """Gradient w.r.t. the padded input, float64; where windows share an element their
    gradients are added in ``acc`` (accumulate.py)."""
    if tie in ("first", "last"):
        return route(plan, xw.shape, selected_tap(plan, xw, tie, nan), g, acc)
    m = window_max(plan, xw, nan)
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
