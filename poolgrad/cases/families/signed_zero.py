"""+0.0 against -0.0: windows whose maximum is a zero of either sign, over negative values."""

from __future__ import annotations

from .base import Context, pick, place_per_window

# Zeros at two taps of a window, in window order.
_ZEROS = {"pos_first": (0.0, -0.0), "neg_first": (-0.0, 0.0), "neg_only": (-0.0, -0.0)}


def signed_zero(ctx: Context):
    zeros = _ZEROS[ctx.variant]

    def put(plane, taps, k):
        plane[pick(ctx, taps, 2)] = zeros
    return place_per_window(ctx, ctx.distinct(sign=-1), put, min_taps=2)
