"""NaN at chosen places of a window, and windows of nothing but -inf."""

from __future__ import annotations

import numpy as np

from .base import TOP, Context, pick, place_per_window


def _nan_taps(ctx: Context, taps: np.ndarray) -> np.ndarray:
    v = ctx.variant
    if v == "first":
        return taps[:1]
    if v == "middle":
        return taps[len(taps) // 2:len(taps) // 2 + 1]
    if v == "last":
        return taps[-1:]
    if v == "several":
        return pick(ctx, taps, 2 + int(ctx.rng.integers(len(taps) - 2)) if len(taps) > 2 else 2)
    if v == "whole_window":
        return taps
    raise ValueError(f"unknown nan variant {v!r}")


def nan(ctx: Context):
    """Variants first / middle / last (in window order) / several / whole_window: where the
    NaNs go. "with_ties": one NaN and two equal numeric maxima elsewhere in the window."""
    def put(plane, taps, k):
        if ctx.variant == "with_ties":
            nan_tap, *tied = ctx.rng.permutation(pick(ctx, taps, 3))
            plane[tied] = TOP + k
            plane[nan_tap] = np.nan
        else:
            plane[_nan_taps(ctx, taps)] = np.nan
    min_taps = {"middle": 3, "several": 2, "with_ties": 3}.get(ctx.variant, 1)
    return place_per_window(ctx, ctx.distinct(), put, min_taps=min_taps)


def all_neginf(ctx: Context):
    """Every real tap of a window is -inf (padding, where the geometry has it, is too)."""
    def put(plane, taps, k):
        plane[taps] = -np.inf
    return place_per_window(ctx, ctx.distinct(), put)
