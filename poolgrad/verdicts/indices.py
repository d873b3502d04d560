"""Judging the indices a max-pool path returns (return_indices, an argmax output): each
window's index must point at an element holding the forward's value, and scattering the
upstream gradient through the indices must give the framework's own gradient."""

from __future__ import annotations

import numpy as np

from poolgrad.reference.accumulate import scatter_add
from poolgrad.reference.dtypes import round_to

from .compare import same_bits

# How a framework writes an index, by the name its adapter registers (poolgrad/adapters/registry.py):
#   plane                 the flat position within the window's (n, c) plane
#   image_channels_last   (spatial flat position) * C + c within the n-th image (a channels-last argmax)
LAYOUTS = ("plane", "image_channels_last")


def plane_indices(indices: np.ndarray, layout: str, channels: int) -> np.ndarray:
    """Indices as flat positions within each (n, c) plane; -1 where an index names another
    channel than its window's (it cannot point at the window's element)."""
    idx = np.asarray(indices).astype(np.int64)
    if layout == "plane":
        return idx
    if layout == "image_channels_last":
        c = np.arange(channels).reshape((1, channels) + (1,) * (idx.ndim - 2))
        return np.where(idx % channels == c, idx // channels, -1)
    raise ValueError(f"unknown index layout {layout!r}; known: {', '.join(LAYOUTS)}")


def disagreement(observed, layout: str) -> str | None:
    """Why the indices an outcome returned disagree with its forward or its gradient
    (``observed``: the outcome's arrays against its case's reference, verdicts.observed.Observed),
    or None when they agree."""
    x, grad_output = observed.reference.x, observed.reference.grad_output
    (forward, grad_input), indices = observed.arrays, observed.outcome.indices
    if x.size == 0:
        return None
    n, c = x.shape[:2]
    plane = x.reshape(n * c, -1)
    idx = plane_indices(indices, layout, c).reshape(n * c, -1)
    valid = (idx >= 0) & (idx < plane.shape[1])
    rows = np.arange(n * c)[:, None]
    picked = np.where(valid, plane[rows, np.clip(idx, 0, plane.shape[1] - 1)], np.nan)
    fwd = np.asarray(forward).reshape(n * c, -1)
    bad_value = ~(valid & same_bits(picked.astype(fwd.dtype), fwd))
    g = np.asarray(grad_output).astype(x.dtype).astype(np.float64).reshape(n * c, -1)
    flat = (np.broadcast_to(rows, idx.shape) * plane.shape[1] + idx)[valid]
    got = np.asarray(grad_input).reshape(n * c, -1)
    # Summed as the spec sums (float64, one rounding) or as a kernel that accumulates in the
    # dtype (accumulate = "dtype"): the indices agree if either gives the returned gradient. A
    # zero's sign is the accumulation's (0 + -0 is +0, a scatter that assigns keeps -0), which
    # the gradient's own comparison judges (zero_sign), not where the indices point.
    bad_grad = None
    for acc in (np.float64, x.dtype):
        routed = round_to(scatter_add(plane.size, flat, g[valid], np.dtype(acc)).reshape(plane.shape), x.dtype)
        bad = ~(same_bits(routed, got) | ((routed == 0) & (got == 0)))
        bad_grad = bad if bad_grad is None or bad.sum() < bad_grad.sum() else bad_grad
    parts = []
    if bad_value.any():
        parts.append(f"{int(bad_value.sum())} of {bad_value.size} indices do not point at an element "
                     f"holding the forward's value")
    if bad_grad.any():
        parts.append(f"the gradient scattered through the indices differs from the returned gradient "
                     f"in {int(bad_grad.sum())} cell(s)")
    return "; ".join(parts) or None
