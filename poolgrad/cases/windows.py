"""Every window of a spec as a table of flat input indices, for generators that place values
in windows (and for tests that check what a window holds)."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from poolgrad.reference import PoolSpec, resolve


def window_taps(spec: PoolSpec, spatial_shape: tuple[int, ...]) -> np.ndarray:
    """``(windows, taps)`` int64: the flat index (C order over ``spatial_shape``) each tap of
    each window reads, windows and taps in row-major order, ``-1`` where the tap reads
    padding, overhang or lies outside an adaptive bin. Read-only (cached)."""
    return _window_taps(without_dtype(spec), tuple(spatial_shape))


def without_dtype(spec: PoolSpec) -> PoolSpec:
    """The spec as a cache key for geometry, which the dtype does not change."""
    return dataclasses.replace(spec, dtype=None)


@functools.lru_cache(maxsize=512)
def _window_taps(spec: PoolSpec, spatial_shape: tuple[int, ...]) -> np.ndarray:
    geom = resolve(spec, (1, 1, *spatial_shape))
    rank = len(spatial_shape)
    strides = np.cumprod((1, *spatial_shape[:0:-1]))[::-1]
    flat = np.zeros((1,) * (2 * rank), dtype=np.int64)
    inside = np.ones((1,) * (2 * rank), dtype=bool)
    for a, (axis, stride) in enumerate(zip(geom.axes, strides)):
        # Axis a's output index goes to dim a and its tap index to dim rank + a.
        shape = [1] * (2 * rank)
        shape[a], shape[rank + a] = axis.positions.shape
        flat = flat + (axis.positions * stride).reshape(shape)
        inside = inside & axis.in_input.reshape(shape)
    n_windows = int(np.prod(geom.out_shape))
    table = np.where(inside, flat, -1).reshape(n_windows, -1)
    table.flags.writeable = False
    return table

