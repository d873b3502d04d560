"""Channel counts at and around SIMD widths, with a tie, a NaN and a -0.0/+0.0 tie in every
channel: channels-last kernels vectorize over channels, so every lane position (and the
scalar tail past the last full vector) meets each of them."""

from __future__ import annotations

import numpy as np

from .base import TOP, Context, flat_planes, pick


def every_lane(ctx: Context):
    """In each (n, c) plane, three disjoint windows: two taps tied for the maximum, a NaN
    after a number, and a maximum that is a zero of both signs (their order alternating with
    the channel), over negative values."""
    x = ctx.distinct(sign=-1)
    if x.size == 0:
        return x
    for i, plane in enumerate(flat_planes(x)):
        windows = ctx.disjoint_windows(min_taps=2)
        if len(windows) < 3:
            return None
        tie, nan, zero = windows[:3]
        plane[pick(ctx, tie, 2)] = TOP
        plane[nan[1 + int(ctx.rng.integers(len(nan) - 1))]] = np.nan
        plane[pick(ctx, zero, 2)] = (0.0, -0.0) if i % 2 else (-0.0, 0.0)
    return x
