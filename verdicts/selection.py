"""A model of how a max-pool kernel scans one window: a running selection over the taps in
window order whose comparison, NaN rule and candidate set are parameters.

With tie in {first, last} and nan in {propagate, ignore} it is the reference's selection
(tests/verdicts check that); the other NaN rules are what real kernels do:
  first_tap   the first candidate tap seeds the running maximum and ``v > best`` (or ``>=``)
              decides after that, so a NaN wins only as a window's first tap
              (TensorFlow CPU MaxPoolGrad)
  as_neg_inf  NaN compares as -inf, so an all-NaN window routes to its first/last tap (oneDNN)
  scan        the running selection is kept only while ``best >= v`` (``>`` for tie=last):
              any comparison with a NaN moves it to the next tap, so a NaN is kept only as
              the last tap and the tap after a NaN wins even if it is not a maximum
              (XLA select_and_scatter with GE)
``nan_tie`` (propagate only) orders NaNs among themselves differently from numeric ties
(PyTorch CPU: ``val > max || isnan(val)`` = numeric ties first, the last NaN wins).
"""

from __future__ import annotations

import itertools

import numpy as np

from reference.taps import TapPlan

NAN_RULES = ("propagate", "ignore", "first_tap", "as_neg_inf", "scan")


def padded_masks(plan: TapPlan) -> list:
    """Per tap, the windows where it reads the input or its padding (not ceil_mode overhang)."""
    masks = []
    for combo in itertools.product(*(range(a.taps) for a in plan.geom.axes)):
        m = np.ones((), dtype=bool)
        for a, t in zip(plan.geom.axes, combo):
            m = np.multiply.outer(m, a.in_padded[:, t])
        masks.append(m)
    return masks


def fill_padding(plan: TapPlan, xw: np.ndarray, value: float) -> np.ndarray:
    """The padded input ``xw`` with every non-input position set to ``value``."""
    full = np.full(xw.shape, value, dtype=xw.dtype)
    plan.unpad(full)[...] = plan.unpad(xw)
    return full


def _better(v, best, tie, nan, nan_tie, signed_zero):
    """Whether tap value ``v`` replaces the running ``best``."""
    if nan == "scan":
        return ~(best > v) if tie == "last" else ~(best >= v)
    better = v >= best if tie == "last" else v > best
    if signed_zero:  # +0 > -0, as IEEE 754-2019 maximum orders them
        zeros = (v == 0) & (best == 0)
        sv, sb = np.signbit(v), np.signbit(best)
        np.copyto(better, ~(~sb & sv) if tie == "last" else (sb & ~sv), where=zeros)
    if nan == "propagate":
        better |= np.isnan(v) if nan_tie == "last" else np.isnan(v) & ~np.isnan(best)
    return better


def scan(plan: TapPlan, xw: np.ndarray, *, tie: str = "first", nan: str = "propagate",
         nan_tie: str | None = None, signed_zero: bool = False, pad_value: float | None = None,
         seeded: bool = False):
    """Running selection over the taps of every window of the padded input ``xw``.

    ``pad_value`` makes padding taps candidates with that value (a kernel that pads
    explicitly). ``seeded``: the selection starts at a -inf that is no tap, which a tap must
    beat like any running maximum (a reduction from an init value), so a window whose
    maximum is -inf selects nothing. Returns (best value, selected tap or -1).
    """
    out_shape = xw.shape[:2] + plan.geom.out_shape
    best = np.full(out_shape, -np.inf, dtype=xw.dtype)
    sel = np.full(out_shape, -1, dtype=np.int32)
    if nan == "as_neg_inf":
        xw = np.where(np.isnan(xw), -np.inf, xw)
    if pad_value is None:
        candidates = [valid for _, valid in plan.taps]
    else:
        xw = fill_padding(plan, xw, pad_value)
        candidates = padded_masks(plan)
    for t, ((index, _), cand) in enumerate(zip(plan.taps, candidates)):
        v = xw[index]
        if nan == "ignore":
            keep = ~np.isnan(v)
            cand = keep if cand is None else cand & keep
        better = _better(v, best, tie, nan, nan_tie or tie, signed_zero)
        if not seeded:
            better |= sel < 0
        if cand is not None:
            better &= cand
        np.copyto(best, v, where=better)
        np.copyto(sel, t, where=better)
    return best, sel
