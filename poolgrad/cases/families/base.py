"""What every generator starts from: a plane of distinct values, and the windows to place a
property in."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from poolgrad.reference import PoolSpec

from ..windows import window_taps

# Base values are k/8 for distinct integers |k| <= 256: exact in every dtype (bfloat16 holds
# integers up to 256), at least 1/8 apart, and all below TOP.
_GRID = 8.0
_GRID_SIZE = 256
TOP = 33.0  # placed maxima are TOP + k: above every base value, exact in bfloat16


@dataclasses.dataclass(frozen=True)
class Context:
    rng: np.random.Generator
    spec: PoolSpec          # dtype and rank set
    shape: tuple[int, ...]  # (N, C, *spatial)
    variant: str | None

    @property
    def planes(self) -> int:
        return self.shape[0] * self.shape[1]

    @functools.cached_property
    def windows(self) -> np.ndarray:
        return window_taps(self.spec, self.shape[2:])

    def distinct(self, sign: int = 0) -> np.ndarray:
        """Float64 input whose every plane holds distinct values from the k/8 grid: of both
        signs (``sign=0``), all positive (``1``) or all negative (``-1``)."""
        size = int(np.prod(self.shape[2:]))
        offset = {0: -_GRID_SIZE // 2, 1: 1, -1: -_GRID_SIZE}[sign]
        # A random permutation of the grid per plane, cut to the plane's size.
        picks = self.rng.random((self.planes, _GRID_SIZE)).argsort(axis=1)[:, :size]
        values = (picks.astype(np.float64) + offset) / _GRID
        return values.reshape(self.shape)

    def disjoint_windows(self, min_taps: int = 1, where=None) -> list[np.ndarray]:
        """Windows (their real taps, in window order) in random order, pairwise disjoint,
        each with at least ``min_taps`` real taps and passing ``where(row)`` if given."""
        chosen, used = [], set()
        for w in self.rng.permutation(len(self.windows)):
            row = self.windows[w]
            taps = row[row >= 0]
            if len(taps) < min_taps or used.intersection(taps.tolist()) or (where and not where(row)):
                continue
            chosen.append(taps)
            used.update(taps.tolist())
        return chosen


def flat_planes(x: np.ndarray) -> np.ndarray:
    """A (planes, spatial elements) view of an (N, C, *spatial) array."""
    return x.reshape(x.shape[0] * x.shape[1], -1)


def place_per_window(ctx: Context, x: np.ndarray, put, min_taps: int = 1, where=None) -> np.ndarray | None:
    """Call ``put(plane, taps, k)`` for the k-th of half (rounded up) of each plane's
    disjoint windows, a fresh random choice per plane, so that windows with and without the
    property sit side by side. None if no plane had a window to place in (the property
    cannot be placed in this geometry). Zero-size inputs are returned as they are."""
    if x.size == 0:
        return x
    placed = False
    for plane in flat_planes(x):
        chosen = ctx.disjoint_windows(min_taps, where)
        for k, taps in enumerate(chosen[:(len(chosen) + 1) // 2]):
            put(plane, taps, k)
            placed = True
    return x if placed else None


def pick(ctx: Context, taps: np.ndarray, n: int) -> np.ndarray:
    """``n`` of ``taps``, at random, kept in window order."""
    return np.sort(ctx.rng.choice(taps, n, replace=False))
