"""Sums that are inexact in the case's dtype: upstream gradients whose routed sums round
(large + small, long chains of small values) and inputs whose window sums overflow or round.
The reference sums in float64 and rounds once; a kernel that keeps its sums in the dtype
differs here, and only here (no ties, no NaN: accumulation is all that is at stake)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from poolgrad import reference
from poolgrad.reference import resolve
from poolgrad.reference.avg_pool import divisor
from poolgrad.reference.dtypes import dtype_from_name, round_to
from poolgrad.reference.taps import TapPlan

from .base import TOP, Context, flat_planes


def _info(ctx: Context):
    return ml_dtypes.finfo(dtype_from_name(ctx.spec.dtype))


def _chain_term(ctx: Context, n: int) -> float | None:
    """A small value 1 + j * 2 ** -mantissa bits (j = 1, 2, 3) that, added n times in the dtype,
    ends away from n times it rounded once (equal terms need n >= 6 for that); None if none."""
    dtype = dtype_from_name(ctx.spec.dtype)
    for j in (1, 2, 3):
        t = 1.0 + j * 2.0 ** -_info(ctx).nmant
        total = dtype.type(0)
        for _ in range(n):
            total = dtype.type(total + dtype.type(t))
        if float(total) != float(round_to(np.array(n * t), dtype)):
            return t
    return None


def _terms(ctx: Context, n: int) -> tuple[float, float] | None:
    """(first, rest) of n terms: "large_small" 2 ** precision then 1s (2048 + 1 + 1 stays 2048
    in float16, 256 + 1 + 1 stays 256 in bfloat16); "chain" n equal small values whose sum in
    the dtype drifts (_chain_term)."""
    if ctx.variant == "chain":
        t = _chain_term(ctx, n) if n >= 3 else None
        return None if t is None else (t, t)
    return 2.0 ** (_info(ctx).nmant + 1), 1.0


# A sum of two terms in the dtype is the exact sum rounded once, as the spec's: three or more
# terms are needed for the order of roundings to show.
MIN_TERMS = 3


def _hubs(ctx: Context, plane_count: int) -> list[list[int]]:
    """Per plane, input elements read by MIN_TERMS or more windows such that no window reads
    two of them (so each hub is its windows' maximum)."""
    reach = [np.flatnonzero((ctx.windows == e).any(axis=1)) for e in range(int(np.prod(ctx.shape[2:])))]
    out = []
    for _ in range(plane_count):
        used, hubs = set(), []
        # Most-read elements first (random among equals): the longest sums.
        for e in sorted(ctx.rng.permutation(len(reach)), key=lambda e: -len(reach[e])):
            windows = set(reach[e].tolist())
            if len(windows) >= MIN_TERMS and not windows & used:
                hubs.append(int(e))
                used |= windows
        out.append(hubs)
    return out


def routed(ctx: Context):
    """(input, grad_output) whose routed sums are inexact in the dtype. max-type ops: hubs,
    elements each the maximum of every window that reads it (distinct values, no ties), get
    the first of those windows' gradients (output order) large and the others small, or a chain
    of small values (variant); every other window's gradient is 1. avg_pool: every element
    receives from the windows reading it, the gradient scaled by each window's divisor so the
    terms are exactly large (windows whose output coordinates are all multiples of 3: one per
    3-wide neighbourhood) and small (no chain: its terms times a divisor are inexact). None where no element is read by MIN_TERMS windows
    (adaptive bins need an output longer than the input for that)."""
    out_shape = ctx.shape[:2] + tuple(resolve(ctx.spec, ctx.shape).out_shape)
    x = ctx.distinct()
    if ctx.spec.op in ("avg_pool", "adaptive_avg_pool"):
        if ctx.variant == "chain":  # chain terms times a divisor are not exact in the dtype
            return None
        coords = np.indices(out_shape[2:])
        first = (coords % 3 == 0).all(axis=0)
        fan_in = int(np.bincount(ctx.windows[ctx.windows >= 0]).max(initial=0))
        terms = _terms(ctx, fan_in) if fan_in >= MIN_TERMS else None
        if terms is None:
            return None
        large, small = terms
        per_window = np.where(first, large, small) * divisor(ctx.spec, TapPlan(resolve(ctx.spec, ctx.shape)))
        return x, np.broadcast_to(per_window, out_shape).copy()
    if not ctx.spec.is_max:
        return None
    g = np.ones(out_shape)
    placed = False
    for plane, grad, hubs in zip(flat_planes(x), g.reshape(len(flat_planes(x)), -1), _hubs(ctx, ctx.planes)):
        for k, e in enumerate(hubs):
            windows = np.flatnonzero((ctx.windows == e).any(axis=1))  # output order
            terms = _terms(ctx, len(windows))
            if terms is None:
                continue
            large, small = terms
            plane[e] = TOP + k
            grad[windows] = small
            grad[windows[0]] = large
            placed = True
    return (x, g) if placed else None


def window_sums(ctx: Context):
    """avg_pool / lp_pool input whose window sums are inexact in the dtype. Variant "overflow":
    every element a distinct value near the dtype's largest (for lp_pool, its p-th power is),
    so a window's sum overflows in the dtype while the mean, or the p-norm, is finite.
    "large_small": each window's first real tap holds 2 ** precision, the rest 1..2 (exact small
    values that a sum in the dtype drops). None where the windows are too small for either."""
    info = _info(ctx)
    x = np.zeros(ctx.shape)
    if x.size == 0:
        return x
    top = float(info.max)
    ulp = 2.0 ** (np.floor(np.log2(top)) - info.nmant)
    for plane in flat_planes(x):
        if ctx.variant == "overflow":
            # Dtype values in the top binade, distinct where the binade's upper half has enough
            # (bfloat16's 64 do not fill a 5x5x5 plane); their sum overflows, each alone does not.
            half_binade = 2 ** info.nmant // 2
            steps = ctx.rng.choice(half_binade, plane.size, replace=plane.size > half_binade)
            power = top - steps * ulp
            plane[:] = power if ctx.spec.op != "lp_pool" else _root_below(power, ctx.spec.norm_type, ctx)
        else:
            plane[:] = 1.0 + ctx.rng.integers(0, 2 ** min(info.nmant, 6), plane.size) / 2.0 ** min(info.nmant, 6)
            for row in ctx.windows:
                taps = row[row >= 0]
                if taps.size and not (plane[taps] >= 2.0).any():
                    plane[taps[0]] = 2.0 ** (info.nmant + 1)
    # Too few taps per window for the sums to round (or overflow): not this family's case.
    xd = x.astype(dtype_from_name(ctx.spec.dtype))
    spec_result = reference.forward(ctx.spec, xd)
    return None if spec_result.tobytes() == reference.forward(ctx.spec, xd, accumulate="dtype").tobytes() else x


def _root_below(power: np.ndarray, p: float, ctx: Context) -> np.ndarray:
    """Values in the dtype whose p-th power stays below ``power`` (so below the dtype's max),
    the largest such."""
    dtype = dtype_from_name(ctx.spec.dtype)
    root = (power ** (1.0 / p)).astype(dtype)
    too_big = root.astype(np.float64) ** p > power
    return np.where(too_big, np.nextafter(root, dtype.type(0)), root).astype(np.float64)
