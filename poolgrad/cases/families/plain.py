"""Inputs with nothing placed in them: tie-free values for geometry and option families."""

from __future__ import annotations

from .base import Context, pick, place_per_window


def tie_free(ctx: Context):
    """Distinct values in every plane (so every window has one maximum, 1/8 clear of the
    next, and finite differences agree with the gradient). lp_pool gets positive values (its
    odd norms are undefined for negative window sums)."""
    return ctx.distinct(sign=1 if ctx.spec.op == "lp_pool" else 0)


def negative(ctx: Context):
    """Distinct negative values, so a kernel that pads with 0 instead of -inf lets padding win."""
    return ctx.distinct(sign=-1)


def zero_windows(ctx: Context):
    """lp_pool over zeros, where the p-norm has no derivative: variant "whole": every real
    tap of a window is 0; "partial": some taps, not all."""
    def put(plane, taps, k):
        n = len(taps) if ctx.variant == "whole" else 1 + int(ctx.rng.integers(len(taps) - 1))
        plane[pick(ctx, taps, n)] = 0.0
    return place_per_window(ctx, ctx.distinct(sign=1), put, min_taps=1 if ctx.variant == "whole" else 2)
