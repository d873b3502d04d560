"""Values for RoI pooling's catalogue rows (two 8 x 8 images, the box sets of roi_boxes.toml):
plateaus that tie inside bins, NaNs and -inf among distinct values."""

from __future__ import annotations

import numpy as np

from .base import Context


def plateaus(ctx: Context) -> np.ndarray:
    """Three levels, as a feature map of saturated or quantized activations: most bins hold their
    maximum several times."""
    return ctx.rng.integers(0, 3, ctx.shape).astype(np.float64)


def nan(ctx: Context) -> np.ndarray:
    """Distinct values with a NaN in about one pixel of eight: some bins hold one or several, some
    nothing but NaN (one-pixel boxes)."""
    x = ctx.distinct()
    x[ctx.rng.random(ctx.shape) < 0.125] = np.nan
    return x


def neginf(ctx: Context) -> np.ndarray:
    """Distinct values with the top-left quarter of every plane -inf (a masked region): bins wholly
    inside it hold only -inf, bins across its edge a number too."""
    x = ctx.distinct()
    x[..., : ctx.shape[2] // 2, : ctx.shape[3] // 2] = -np.inf
    return x


def crops(ctx: Context) -> np.ndarray:
    """roi_crop_max_pool's values by variant: distinct, plateaus (ties among a window's crop
    points), NaN, a -inf quarter."""
    return {"distinct": ctx.distinct, "ties": lambda: plateaus(ctx), "nan": lambda: nan(ctx),
            "neginf": lambda: neginf(ctx)}[ctx.variant]()
