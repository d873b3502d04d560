"""Values at the dtype's limits of precision: near-ties that rounding makes equal, and
subnormals."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from poolgrad.reference.dtypes import dtype_from_name

from .base import TOP, Context, flat_planes, pick, place_per_window


def _source_dtype(dtype_name: str) -> np.dtype:
    """Where the values come from before rounding: float32 for the 16-bit types, float64
    for float32."""
    return np.dtype(np.float64 if dtype_name == "float32" else np.float32)


def rounding_ties(ctx: Context):
    """Two taps of a window hold v + ulp/8 and v + ulp/4 (ulp of v in the case's dtype):
    distinct in the source dtype, both rounding to v in the case's dtype, so the window's
    maximum becomes a tie only after rounding. Returned in the source dtype."""
    nmant = ml_dtypes.finfo(dtype_from_name(ctx.spec.dtype)).nmant

    def put(plane, taps, k):
        v = TOP + k
        ulp = 2.0 ** (np.floor(np.log2(v)) - nmant)
        plane[pick(ctx, taps, 2)] = v + ulp * ctx.rng.permutation([0.125, 0.25])
    x = place_per_window(ctx, ctx.distinct(), put, min_taps=2)
    return None if x is None else x.astype(_source_dtype(ctx.spec.dtype))


def subnormal(ctx: Context):
    """Variant "values": every element a distinct positive subnormal of the dtype (k times
    the smallest, k < 128), so a flush-to-zero kernel sees all-zero windows. "vs_zero": over
    negative values, a window's first chosen tap is +0.0 and a later one the smallest
    subnormal, which wins unless subnormals are flushed."""
    tiny = float(ml_dtypes.finfo(dtype_from_name(ctx.spec.dtype)).smallest_subnormal)
    if ctx.variant == "values":
        x = np.zeros(ctx.shape)
        planes = flat_planes(x)
        for plane in planes:
            plane[:] = (ctx.rng.choice(127, plane.size, replace=False) + 1) * tiny
        return x

    def put(plane, taps, k):
        plane[pick(ctx, taps, 2)] = (0.0, tiny)
    return place_per_window(ctx, ctx.distinct(sign=-1), put, min_taps=2)
