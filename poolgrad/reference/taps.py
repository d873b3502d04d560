"""Vectorised window traversal: one NumPy pass per *tap* (kernel offset), never per window.

For tap ``t`` of the window, the elements every window reads form a strided slice of the
padded input (a fancy index for adaptive bins), so a reduction over the window is a loop of
``kernel volume`` array operations over the whole output, and a backward scatter adds through
the flat index of every window's taps (accumulate.py). This is what keeps the reference fast
(benchmarks/); definition.py states the same ops one window at a time.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from . import roi_crop, roi_pool
from .geometry import Geometry, check_input_shape, resolve


def _as_index(idx: np.ndarray):
    """A slice when ``idx`` is an increasing arithmetic progression, else the array itself."""
    if idx.size == 0:
        return slice(0, 0)
    if idx.size == 1:
        return slice(int(idx[0]), int(idx[0]) + 1)
    step = int(idx[1] - idx[0])
    if step > 0 and np.all(np.diff(idx) == step):
        return slice(int(idx[0]), int(idx[-1]) + 1, step)
    return idx


class TapPlan:
    """Index plan of a geometry: how to read tap ``t`` of every window from the padded input."""

    # What a window with no real element outputs where its op says (RoI pooling: 0); None: the
    # selection's -inf.
    empty_value: float | None = None

    def __init__(self, geom: Geometry):
        self.geom = geom
        self.lo = tuple(max(0, -int(a.positions.min())) if a.positions.size else 0 for a in geom.axes)
        self.hi = tuple(max(0, int(a.positions.max()) - (a.length - 1)) if a.positions.size else 0
                        for a in geom.axes)
        self.taps: list[tuple[tuple, np.ndarray | None]] = []
        self._window_table = None
        in_input = [a.in_input for a in geom.axes]
        for combo in itertools.product(*(range(a.taps) for a in geom.axes)):
            per_axis = [_as_index(a.positions[:, t] + lo) for a, t, lo in zip(geom.axes, combo, self.lo)]
            if any(isinstance(i, np.ndarray) for i in per_axis):
                per_axis = list(np.ix_(*[a.positions[:, t] + lo for a, t, lo in zip(geom.axes, combo, self.lo)]))
            valid = None
            masks = [m[:, t] for m, t in zip(in_input, combo)]
            if not all(m.all() for m in masks):
                valid = masks[0]
                for m in masks[1:]:
                    valid = np.multiply.outer(valid, m)
            self.taps.append(((slice(None), slice(None), *per_axis), valid))

    def pad(self, x: np.ndarray) -> np.ndarray:
        if not any(self.lo) and not any(self.hi):
            return x
        # zeros around the input (np.pad's constant mode, without its per-call set-up)
        padded = np.zeros(x.shape[:2] + tuple(n + lo + hi for n, lo, hi in zip(x.shape[2:], self.lo, self.hi)),
                          dtype=x.dtype)
        self.unpad(padded)[...] = x
        return padded

    def unpad(self, xp: np.ndarray) -> np.ndarray:
        sl = tuple(slice(lo, lo + a.length) for lo, a in zip(self.lo, self.geom.axes))
        return xp[(slice(None), slice(None), *sl)]

    def out_shape(self, xw) -> tuple[int, ...]:
        """The output's shape for the padded input ``xw`` (an array or its shape)."""
        return tuple(getattr(xw, "shape", xw))[:2] + self.geom.out_shape

    def flat_index(self, tap: np.ndarray, padded_shape) -> np.ndarray:
        """Flat index into the padded input (C order) of tap ``tap[n, c, *o]`` of every window
        (any index where ``tap`` is -1: callers mask those windows)."""
        table, per_window = self.window_table(padded_shape)
        return table[per_window + tap] + self._images(padded_shape)

    def tap_index(self, padded_shape) -> np.ndarray:
        """Flat index into the padded input (C order) of every tap of every window, shaped
        (N, C, *output axes, taps): ``flat_index`` of each tap, stacked on a last axis."""
        table, _ = self.window_table(padded_shape)
        return table.reshape(self.geom.out_shape + (len(self.taps),)) + self._images(padded_shape)[..., None]

    def _images(self, padded_shape) -> np.ndarray:
        """Each (n, c) image's first flat index, shaped (N, C, 1, ...) against the output."""
        image = math.prod(padded_shape[2:])
        return (np.arange(padded_shape[0] * padded_shape[1]) * image).reshape(
            padded_shape[:2] + (1,) * len(self.geom.axes))

    def window_table(self, padded_shape) -> tuple[np.ndarray, np.ndarray]:
        """(flat offsets of every window's taps within one padded image of ``padded_shape``,
        laid out as [window, tap] and raveled; each window's first entry's position in it),
        built once per plan."""
        if self._window_table is None:
            self._window_table = self._build_window_table(padded_shape[2:])
        return self._window_table

    def _build_window_table(self, padded_spatial):
        rank = len(self.geom.axes)
        strides = np.cumprod((1,) + tuple(padded_spatial[:0:-1]))[::-1]
        table = np.zeros((), dtype=np.int64)
        for d, (a, lo, stride) in enumerate(zip(self.geom.axes, self.lo, strides)):
            shape = [1] * (2 * rank)
            shape[d], shape[rank + d] = a.out, a.taps
            table = table + ((a.positions + lo) * int(stride)).reshape(shape)
        taps = len(self.taps)
        windows = int(np.prod(self.geom.out_shape))
        per_window = (np.arange(windows, dtype=np.int64) * taps).reshape(self.geom.out_shape)
        return _frozen(table.reshape(-1)), _frozen(per_window)


def plan_for(spec, shape) -> TapPlan:
    """The TapPlan of ``spec`` over an input of ``shape`` (N, C, *spatial), shared: the policy
    search evaluates tens of policies per case, each over the same windows. Shared plans are
    read-only (their arrays refuse writes). A spec that cannot be hashed gets a plan of its own."""
    check_input_shape(shape, spec)  # a bad shape is refused naming the shape given
    if spec.is_roi:  # a box names its image: the plan depends on N too
        return _roi_plan(spec, tuple(int(s) for s in shape))
    try:
        return _shared_plan(spec, tuple(int(s) for s in shape[2:]))
    except TypeError:
        return TapPlan(resolve(spec, shape))


@functools.lru_cache(maxsize=1024)
def _shared_plan(spec, spatial: tuple[int, ...]) -> TapPlan:
    # The geometry depends on the spatial shape only, not on N and C.
    plan = TapPlan(resolve(spec, (1, 1) + spatial))
    for a in plan.geom.axes:
        for arr in (a.positions, a.in_window, a.in_padded):
            _frozen(arr)
    for index, valid in plan.taps:
        for part in (*index, valid):
            if isinstance(part, np.ndarray):
                _frozen(part)
    return plan


@functools.lru_cache(maxsize=64)
def _roi_plan(spec, shape: tuple[int, ...]):
    plans = {"roi_pool": roi_pool.RoiPlan, "roi_align": roi_pool.AlignPlan, roi_crop.OP: roi_crop.CropPlan}
    return plans[spec.op](spec, shape)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
