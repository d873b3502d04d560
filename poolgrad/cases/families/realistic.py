"""Data as networks produce it, where the other families isolate one property each: random-normal
activations and upstream gradients (every routed sum inexact), post-ReLU zero plateaus (ties
among zeros), 8-bit image values (ties and saturated plateaus), float32 data rounded to
float16/bfloat16 (ties the rounding makes). Every generator returns ``(input, grad_output)``
with a random-normal grad_output, as a training step hands the pooling backward."""

from __future__ import annotations

import numpy as np

from poolgrad.reference import output_shape

from .base import Context


def _with_gradient(ctx: Context, x: np.ndarray):
    out_shape = output_shape(ctx.spec, ctx.shape)
    return x, ctx.rng.standard_normal(out_shape)


def _activations(ctx: Context) -> np.ndarray:
    """Random-normal activations; lp_pool gets their magnitudes (its odd norms are undefined
    for negative window sums, and it pools non-negative features in practice)."""
    x = ctx.rng.standard_normal(ctx.shape)
    return np.abs(x) if ctx.spec.op == "lp_pool" else x


def normal(ctx: Context):
    """Random-normal input (no ties in float32/float64) and upstream gradient, where windows
    overlap (some element is read by two or more): the routed sums are then inexact, which is
    all this family is about. None elsewhere."""
    taps = ctx.windows[ctx.windows >= 0]
    if not taps.size or np.bincount(taps).max() < 2:
        return None
    return _with_gradient(ctx, _activations(ctx))


def relu(ctx: Context):
    """A ReLU's output: random-normal activations with the negative half set to +0.0, so most
    windows hold tied zeros and some are all zero (a zero maximum, a zero lp power sum)."""
    return _with_gradient(ctx, np.maximum(ctx.rng.standard_normal(ctx.shape), 0.0))


def image_u8(ctx: Context):
    """8-bit pixel values, integers 0..255 (exact in every dtype): mid-grey with a wide spread,
    clipped, so about one element in ten saturates at 0 or 255 and equal values meet in a
    window as they do in photographs."""
    return _with_gradient(ctx, np.clip(np.rint(ctx.rng.normal(128.0, 96.0, ctx.shape)), 0, 255))


def half_cast(ctx: Context):
    """float32 features clustered as normalized ones are (1 + 0.05 * N(0, 1)), returned in
    float32: the catalogue rounds them to the case's float16/bfloat16, where values 0.008
    (bfloat16) or 0.001 (float16) apart become equal, so many windows' maxima tie only after
    the cast."""
    x = 1.0 + 0.05 * ctx.rng.standard_normal(ctx.shape)
    return _with_gradient(ctx, x.astype(np.float32))


def dropout_gradient(ctx: Context):
    """A ReLU's output with an upstream gradient that dropout masked: random-normal, half of it
    multiplied by 0, so the masked negative entries are -0.0 (a kernel that assigns the upstream
    gradient keeps that sign where one that adds it to zeros gives +0.0). The most negative entry
    is always among the masked, so every case holds a -0.0."""
    x, g = relu(ctx)
    keep = ctx.rng.random(g.shape) < 0.5
    keep.flat[np.argmin(g)] = False
    return x, g * keep
