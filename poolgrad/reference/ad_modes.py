"""Forward mode (JVP) and second order (the derivative of the backward) of every op.

The same tie/NaN policies as the reverse mode, through the same selection (max_pool.py): a
max-type op's output tangent is the tangent of the element(s) its backward routes to
(first/last: that element; all: their sum; split: their mean), so under every policy
``<jvp(t), u> == <t, backward(u)>``. avg is linear: its JVP is the forward applied to the
tangent. lp differentiates the reverse rule's own formula (0 for a window whose z is 0).

Second order: L2 = sum(backward(x, g) * v). Its derivative with respect to ``g`` is the
JVP with tangent ``v`` (backward is the transpose of the JVP), for every op; with respect to
``x`` it is zero for max-type ops (a selection is constant almost everywhere) and avg (linear),
and for lp it is derived from the reverse rule below. Everything is float64, rounded once.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from . import api, avg_pool, lp_pool, max_pool, policies, roi_crop, roi_pool, selection
from .taps import plan_for
from .dtypes import round_to
from .errors import SpecError


def _rounded(name: str, a, shape, dtype) -> np.ndarray:
    """``a`` rounded to the input's dtype (what a framework receives), as float64."""
    a = np.asarray(a)
    if a.shape != shape:
        raise SpecError(name, f"must have shape {shape}, got {a.shape}")
    return round_to(a.astype(np.float64, copy=False), dtype).astype(np.float64)


def _max_jvp(plan, xw, tw, tie, nan) -> np.ndarray:
    if tie in ("first", "last"):
        sel = selection.selected_tap(plan, xw, tie, nan)
        return np.where(sel >= 0, tw.ravel()[plan.flat_index(sel, xw.shape)], 0.0)
    m = selection.window_max(plan, xw, nan)
    total = np.zeros(m.shape)
    count = np.zeros(m.shape)
    for (index, _), (_, hit) in zip(plan.taps, selection.tap_hits(plan, xw, m, nan)):
        total += np.where(hit, tw[index], 0.0)
        count += hit
    if tie == "all":
        return total
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / count, 0.0)


def _lp_terms(spec, plan, xw):
    """(z, the reverse rule's per-window factor c = z ** (1/p - 1) * scale, and its derivative
    in z times the chain's scale ** 2 * p: dc = (1/p - 1) z ** (1/p - 2) * scale ** 2 * p; c and
    dc 0 where z is 0)."""
    p, scale = spec.norm_type, lp_pool._scale(plan)
    z = avg_pool.window_sum(plan, xw, lambda a: a ** p) * scale   # lp's z, float64
    c = np.where(z != 0, z ** (1.0 / p - 1.0), 0.0) * scale
    return z, c, np.where(z != 0, (1.0 / p - 1.0) * z ** (1.0 / p - 2.0), 0.0) * scale * scale * p


def _jvp(spec, plan, xw, tw, tie, nan, dtype=None) -> np.ndarray:
    if spec.op == roi_crop.OP:  # the crop is linear: max_pool's JVP on the crop, the tangent's crop its tangent
        crop = plan.rounded_crop(xw, dtype).astype(np.float64)
        return _max_jvp(plan_for(plan.pool, crop.shape), crop, plan.crop(tw), tie, nan)
    if spec.is_max:
        return _max_jvp(plan, xw, tw, tie, nan)
    if spec.op.endswith("avg_pool"):
        return avg_pool.forward(spec, plan, tw)
    if spec.op == "roi_align":
        return roi_pool.align_forward(plan, tw)
    _, c, _ = _lp_terms(spec, plan, xw)
    return c * avg_pool.window_sum(plan, xw ** (spec.norm_type - 1.0) * tw)


def jvp(spec, x: np.ndarray, tangent, *, tie: str = "first", nan: str = "propagate") -> np.ndarray:
    """The output tangent d/de forward(x + e * tangent) at e = 0, in x's dtype (tangent is
    first rounded to x's dtype). Padding contributes no tangent."""
    policies.check(tie, nan)
    plan, xw = api._prepare(spec, x)
    tw = plan.pad(_rounded("tangent", tangent, x.shape, x.dtype))
    with np.errstate(all="ignore"):
        return round_to(_jvp(spec, plan, xw.astype(np.float64), tw, tie, nan, x.dtype), x.dtype)


def double_backward(spec, x: np.ndarray, grad_output, v, *, tie: str = "first",
                    nan: str = "propagate") -> tuple[np.ndarray, np.ndarray]:
    """(d/d grad_output, d/d x) of sum(backward(x, grad_output) * v), in x's dtype.

    grad_output and v are first rounded to x's dtype."""
    policies.check(tie, nan)
    plan, xw = api._prepare(spec, x)
    out_shape = plan.out_shape(x)
    g = _rounded("grad_output", grad_output, out_shape, x.dtype)
    vw = plan.pad(_rounded("v", v, x.shape, x.dtype))
    xw = xw.astype(np.float64)
    with np.errstate(all="ignore"):
        by_g = _jvp(spec, plan, xw, vw, tie, nan, x.dtype)
        by_x = (sum(_lp_by_x(spec, plan, xw, g, vw, *_lp_terms(spec, plan, xw)[1:])) if spec.op == "lp_pool"
                else np.zeros(xw.shape))
    return round_to(by_g, x.dtype), round_to(plan.unpad(by_x), x.dtype)


def _lp_by_x(spec, plan, xw, g, vw, c, dc) -> tuple[np.ndarray, np.ndarray]:
    """d/dx_j of sum_w g_w c_w s_w with s_w = sum_{i in w} x_i ** (p-1) v_i (the reverse rule),
    as its two terms: x_j ** (p-1) sum_w g_w s_w dc_w, and (p-1) v_j x_j ** (p-2) sum_w g_w c_w
    (none for p = 1: x ** (p - 1) is constant, and no 0 * inf at x = 0)."""
    p = spec.norm_type
    s = avg_pool.window_sum(plan, xw ** (p - 1.0) * vw)
    through_x = avg_pool.spread(plan, xw.shape, g * dc * s, lambda a: a ** (p - 1.0), xw)
    if p == 1.0:
        return through_x, np.zeros(xw.shape)
    return through_x, (p - 1.0) * vw * xw ** (p - 2.0) * avg_pool.spread(plan, xw.shape, g * c)


def error_scale(mode: str, spec, x: np.ndarray, grad_output, t) -> list[np.ndarray]:
    """avg/lp: the size (float64) each derivative's error is eps times a small multiple of, as
    api.error_scale for the reverse mode (jvp: [output tangent]; double_backward: [by
    grad_output, by x]). avg: the formula on |x|, |t|. lp: every factor's magnitude, the
    window factors c and dc widened by the conditioning of the power sum as lp_pool.error_scale
    widens c (kappa = sum |x| ** p / |z|, inf where z is 0 and the terms are not), and the
    second order's two terms, of opposite signs (1/p - 1 < 0), added as magnitudes."""
    plan, xw = api._prepare(spec, x)
    xw = xw.astype(np.float64)
    tw = np.abs(plan.pad(_rounded("t", t, x.shape, x.dtype)))
    with np.errstate(all="ignore"):
        if spec.op != "lp_pool":
            by_g = _jvp(spec, plan, np.abs(xw), tw, "first", "propagate", x.dtype)
            return [by_g] if mode == "jvp" else [by_g, np.zeros(x.shape)]
        p = spec.norm_type
        z, c, dc = _lp_terms(spec, plan, xw)
        kappa = avg_pool.window_sum(plan, np.abs(xw), lambda a: a ** p) * lp_pool._scale(plan) / np.abs(z)
        kappa = np.where(np.isnan(kappa), 0.0, kappa)   # a window of zeros: no sum to condition
        ca, dca = (np.where(np.isinf(kappa), np.inf, np.abs(f) * (1.0 + k * kappa + p))
                   for f, k in ((c, abs(1.0 / p - 1.0)), (dc, abs(1.0 / p - 2.0))))
        ax = np.abs(xw)
        by_g = ca * avg_pool.window_sum(plan, ax ** (p - 1.0) * tw)
        if mode == "jvp":
            return [by_g]
        g = np.abs(_rounded("grad_output", grad_output, plan.out_shape(x), x.dtype))
        # Differentiating the backward's products doubles the roundings each term goes through.
        by_x = 2.0 * sum(np.abs(term) for term in _lp_by_x(spec, plan, ax, g, tw, ca, dca))
    return [by_g, plan.unpad(by_x)]


def overflows(mode: str, spec, x: np.ndarray, grad_output, t) -> list[np.ndarray]:
    """lp: per derivative element (as error_scale's), whether a product of its formula's factors
    may pass x's dtype's largest finite value: the chain rule, computed in the dtype, holds such
    products (the tangent of x ** p, p * x ** (p-1) * t, and of z; for the second order those
    times grad_output and z's powers), so the element can then be anything, inf and NaN
    included. A product is bounded by its factors' magnitudes with those below 1 taken as 1 (no
    product of a subset of them is larger), p among them (pow's derivative multiplies by it
    where the spec's form cancels it). Where a window's power sum is past the range the elements
    it reaches stay checked: that is the forward's own overflow, a behaviour (SPEC.md). Other
    ops: nowhere."""
    plan, xw = api._prepare(spec, x)
    if spec.op != "lp_pool":
        shape = plan.out_shape(x)
        return [np.zeros(shape, bool)] if mode == "jvp" else [np.zeros(shape, bool), np.zeros(x.shape, bool)]
    big, p = float(ml_dtypes.finfo(x.dtype).max), spec.norm_type
    xw = xw.astype(np.float64)
    with np.errstate(all="ignore"):
        ax = np.abs(xw)
        tw = np.maximum(np.abs(plan.pad(_rounded("t", t, x.shape, x.dtype))), 1.0)
        _, c, dc = _lp_terms(spec, plan, xw)
        overflown = avg_pool.window_sum(plan, ax, lambda a: a ** p) > big
        s = max(p, 1.0) * avg_pool.window_sum(plan, np.maximum(ax ** (p - 1.0), 1.0) * tw)
        by_g = (np.maximum(np.abs(c), 1.0) * s > big) & ~overflown
        if mode == "jvp":
            return [by_g]
        g = np.maximum(np.abs(_rounded("grad_output", grad_output, plan.out_shape(x), x.dtype)), 1.0)
        through_x = avg_pool.spread(plan, xw.shape, g * np.maximum(np.abs(dc), 1.0) * s,
                                    lambda a: np.maximum(np.abs(a) ** (p - 1.0), 1.0), xw)
        through_v = (max(p * abs(p - 1.0), 1.0) * tw * np.maximum(ax ** (p - 2.0), 1.0)
                     * avg_pool.spread(plan, xw.shape, g * np.maximum(np.abs(c), 1.0)))
        reached = avg_pool.spread(plan, xw.shape, overflown.astype(np.float64)) > 0
    return [by_g, plan.unpad((through_x + through_v > big) & ~reached)]
