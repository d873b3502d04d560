"""The one vectorised selection: a running selection over the taps of every window in window
order, whose comparison, NaN rule and candidate set are parameters.

With tie in {first, last} and nan in {propagate, ignore} it is the spec's selection
(policies.select, one window at a time; the reference's max_pool uses this one, and
tests/reference check the two agree); the other NaN rules and options are the policies the
verdicts' policy search names (SPEC.md, "Verdicts and tolerances"; which framework paths
follow which is what their findings say):
  first_tap   the first candidate tap seeds the running maximum and ``v > best`` (or ``>=``)
              decides after that, so a NaN wins only as a window's first tap
  as_neg_inf  NaN compares as -inf, so an all-NaN window routes to its first/last tap
  scan        the running selection is kept only while ``best >= v`` (``>`` for tie=last):
              any comparison with a NaN moves it to the next tap, so a NaN is kept only as
              the last tap and the tap after a NaN wins even if it is not a maximum
``nan_tie`` (propagate only) orders NaNs among themselves differently from numeric ties
(``nan_tie = "last"``: ``v > best or isnan(v)``, numeric ties first, the last NaN wins).
"""

from __future__ import annotations


import numpy as np

from .taps import TapPlan

NAN_RULES = ("propagate", "ignore", "first_tap", "as_neg_inf", "scan")


def fill_padding(plan: TapPlan, xw: np.ndarray, value: float) -> np.ndarray:
    """The padded input ``xw`` with every non-input position set to ``value``."""
    full = np.full(xw.shape, value, dtype=xw.dtype)
    plan.unpad(full)[...] = plan.unpad(xw)
    return full


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


def _spec_selection(plan: TapPlan, xw: np.ndarray, tie: str, nan: str):
    """The spec's policies (tie first/last, nan propagate/ignore), fast: the window maximum,
    then the first or last tap holding it (-1 if none). Branch-free: a masked copy over the random hit
    masks mispredicts, a max of scores does not (a hit at tap t scores t + 1 for last,
    taps - t for first; 0 means no hit)."""
    m = window_max(plan, xw, nan)
    taps = len(plan.taps)
    score_type = np.min_scalar_type(taps)
    best = np.zeros(m.shape, dtype=score_type)
    score = np.empty_like(best)
    for t, hit in tap_hits(plan, xw, m, nan):
        np.multiply(hit.view(np.uint8), score_type.type(t + 1 if tie == "last" else taps - t), out=score)
        np.maximum(best, score, out=best)
    return best.astype(np.intp) - 1 if tie == "last" else np.where(best > 0, taps - best.astype(np.intp), -1)


def selected_tap(plan: TapPlan, xw: np.ndarray, tie: str = "first", nan: str = "propagate") -> np.ndarray:
    """Per window, the tap the spec's policy selects, -1 if none (what a backward needs)."""
    return _spec_selection(plan, xw, tie, nan)


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

    ``pad_value`` makes every tap outside the input a candidate with that value: padding and
    a ceil_mode window's overhang alike (the input padded explicitly, ceil_mode's extra
    elements included). ``seeded``: the selection starts at a -inf that is no tap,
    which a tap must beat like any running maximum (a reduction from an init value), so a
    window whose maximum is -inf selects nothing. Returns (best value, selected tap or -1).
    """
    if nan in ("propagate", "ignore") and nan_tie in (None, tie) and not (signed_zero or seeded) \
            and pad_value is None:
        sel = _spec_selection(plan, xw, tie, nan)
        picked = np.ravel(xw)[plan.flat_index(np.maximum(sel, 0), xw.shape)]  # its own sign and payload
        return np.where(sel >= 0, picked, -np.inf).astype(xw.dtype), sel
    out_shape = plan.out_shape(xw)
    best = np.full(out_shape, -np.inf, dtype=xw.dtype)
    sel = np.full(out_shape, -1, dtype=np.int32)
    if nan == "as_neg_inf":
        xw = np.where(np.isnan(xw), -np.inf, xw)
    if pad_value is None:
        candidates = [valid for _, valid in plan.taps]
    else:
        xw = fill_padding(plan, xw, pad_value)
        candidates = [None] * len(plan.taps)
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
