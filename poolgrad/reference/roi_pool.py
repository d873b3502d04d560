"""roi_pool and roi_align: pooling over regions of interest (boxes), as detectors pool.

A case lists its boxes, ``[batch_index, x1, y1, x2, y2]`` each (fixed, as fractional pooling's
regions are): box k pools image ``batch_index`` of the (N, C, H, W) input into (C, ph, pw), so
the output is (K, C, ph, pw), its first dim the boxes', not N. Coordinates are in input pixels
once multiplied by ``spatial_scale``; everything is computed in float64 (SPEC.md, "RoI pooling").

roi_pool (torchvision's roi_pool_kernel.cpp): a box's corners times the scale rounded half away
from zero (C's round), the box [start, end] inclusive and at least one pixel; along each axis
its bins are the adaptive bins of that length, ``[floor(i L / p), ceil((i + 1) L / p))`` (exact,
in integers) offset by the start and clipped to the input. The forward and backward are
max_pool's selection (selection.py: the same tie and NaN policies) over a bin's elements in
row-major order, through :class:`RoiPlan`, which reads each box's bins from its own image; a bin
with no element outputs 0 and routes nothing.

roi_align (torchvision's roi_align_kernel.cpp, roi_align_common.h): corners times the scale,
minus 0.5 when ``aligned``; unaligned boxes at least 1 pixel wide; ``grid`` samples per bin and
axis (``sampling_ratio`` if > 0, else ceil(bin size)), sample ``s`` of bin ``i`` at
``start + i * bin + (s + 0.5) * bin / grid``. A sample outside [-1, L] contributes 0; one inside is
clamped to >= 0 and interpolated between ``floor`` and the next pixel (both the last pixel from
L - 1 on). The output is the mean of the bin's samples (a bin without samples outputs 0), the
gradient its transpose. A corner of weight 0 is not read: the interpolation at a pixel is that
pixel, whatever its neighbour holds.
"""

from __future__ import annotations

import copy
import dataclasses
import math

import numpy as np

from .accumulate import F64, scatter_add, terms
from .errors import SpecError

_BOX = "[batch_index, x1, y1, x2, y2]"


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def parse_boxes(value) -> tuple[tuple[float, ...], ...]:
    """The spec's ``boxes`` in canonical form: a non-empty list of [batch_index, x1, y1, x2, y2],
    the batch index a non-negative integer, the coordinates finite numbers."""
    if not isinstance(value, (list, tuple)) or not value:
        raise SpecError("boxes", f"must be a non-empty list of boxes {_BOX}, got {value!r}")
    boxes = []
    for k, box in enumerate(value):
        numbers = [_number(v) for v in box] if isinstance(box, (list, tuple)) and len(box) == 5 else None
        if numbers is None or None in numbers:
            raise SpecError("boxes", f"box {k} must be {_BOX} of finite numbers, got {box!r}")
        if not numbers[0].is_integer() or numbers[0] < 0:
            raise SpecError("boxes", f"box {k}'s batch_index must be a non-negative integer (the image it pools), "
                            f"got {box[0]!r}")
        boxes.append((int(numbers[0]), *numbers[1:]))
    return tuple(boxes)


def parse_output_size(value) -> tuple[int, int]:
    """(ph, pw) from an int or a pair of positive ints."""
    pair = list(value) if isinstance(value, (list, tuple)) else [value, value]
    if len(pair) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in pair):
        raise SpecError("output_size", f"must be a positive int or [height, width] of positive ints, got {value!r}")
    return pair[0], pair[1]


def parse_scale(value) -> float:
    scale = _number(value)
    if scale is None or scale <= 0:
        raise SpecError("spatial_scale", f"must be a positive finite number (input pixels per box unit, e.g. 0.25 "
                        f"for a stride-4 feature map), got {value!r}")
    return scale


def parse_sampling_ratio(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError("sampling_ratio", f"must be an integer: samples per bin and axis, or <= 0 for "
                        f"ceil(bin size), got {value!r}")
    return value


def check_input(spec, shape) -> None:
    """RoI pooling reads (N, C, H, W) inputs; every box's batch index names one of the N images."""
    if len(shape) != 4:
        raise SpecError("input", f"{spec.op} pools (N, C, H, W) inputs, got shape {tuple(shape)}")
    if any(s <= 0 for s in shape[2:]):
        raise SpecError("input", f"spatial dims must be non-empty, got shape {tuple(shape)}")
    worst = max(b[0] for b in spec.boxes)
    if worst >= shape[0]:
        raise SpecError("boxes", f"a box pools image {worst} but the input has {shape[0]} (N = {shape[0]}); "
                        "batch indices count from 0")


def output_shape(spec, shape) -> tuple[int, ...]:
    return (len(spec.boxes), shape[1], *spec.output_size)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(v) + 0.5), v).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class _Bins:
    """roi_pool's bins along one axis: [lo, hi) per box and bin (K, p), clipped to [0, length)."""
    lo: np.ndarray
    hi: np.ndarray
    past_border: np.ndarray   # (K,) the box's bins reach outside the input before clipping


def _quantized_bins(first, last, scale: float, pooled: int, length: int) -> _Bins:
    start, end = _round_half_away(first * scale), _round_half_away(last * scale)
    size = np.maximum(end - start + 1, 1)[:, None]
    i = np.arange(pooled)[None, :]
    lo, hi = i * size // pooled + start[:, None], -(-(i + 1) * size // pooled) + start[:, None]
    past = (lo < 0).any(axis=1) | (hi > length).any(axis=1)
    return _Bins(np.clip(lo, 0, length), np.clip(hi, 0, length), past)


@dataclasses.dataclass(frozen=True)
class RoiGeometry:
    """What the verdicts and properties ask of a geometry: the pooled spatial shape and each
    window's real elements (K, 1, ph, pw); no per-axis table (a box's bins are its own)."""
    out_shape: tuple[int, int]
    counts: np.ndarray
    axes: tuple = ()
    pads = None
    kernel_size = None

    def window_counts(self, which: str) -> np.ndarray:
        return self.counts


def _box_index(spec, channels: int):
    batch = np.array([b[0] for b in spec.boxes], dtype=np.int64)[:, None, None, None]
    return batch, np.arange(channels)[None, :, None, None]


class _Unpadded:
    """RoI plans read the input as it is: no padding."""

    out: tuple[int, ...]

    def pad(self, x: np.ndarray) -> np.ndarray:
        return x

    def unpad(self, xp: np.ndarray) -> np.ndarray:
        return xp

    def out_shape(self, xw=None) -> tuple[int, ...]:
        return self.out


class RoiPlan(_Unpadded):
    """roi_pool's windows as a TapPlan reads them (taps.py): tap ``(ty, tx)`` of every bin of every
    box, read from the box's own image, gives a (K, C, ph, pw) array; ``valid`` says which bins
    that tap is inside. No padding: ``pad`` and ``unpad`` are the identity."""

    empty_value = 0.0  # a bin with no element outputs 0 (torchvision: "an empty pooling region")

    def __init__(self, spec, shape):
        check_input(spec, shape)
        _, channels, height, width = shape
        boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64)
        ph, pw = spec.output_size
        self.rows = _quantized_bins(boxes[:, 1], boxes[:, 3], spec.spatial_scale, ph, height)
        self.cols = _quantized_bins(boxes[:, 0], boxes[:, 2], spec.spatial_scale, pw, width)
        self.batch, self.channel = _box_index(spec, channels)
        self.shape = tuple(shape)
        self.out = (len(spec.boxes), channels, ph, pw)
        ny, nx = (np.maximum(b.hi - b.lo, 0) for b in (self.rows, self.cols))
        self.geom = RoiGeometry((ph, pw), ny[:, None, :, None] * nx[:, None, None, :])
        ty, tx = max(int(ny.max()), 1), max(int(nx.max()), 1)
        self._ry, self._iny = self._positions(self.rows, ty, height)
        self._rx, self._inx = self._positions(self.cols, tx, width)
        self.taps = []
        for a in range(ty):
            for b in range(tx):
                index = (self.batch, self.channel, self._ry[:, None, :, None, a], self._rx[:, None, None, :, b])
                valid = self._iny[:, None, :, None, a] & self._inx[:, None, None, :, b]
                self.taps.append((index, None if valid.all() else valid))

    @staticmethod
    def _positions(bins: _Bins, taps: int, length: int):
        pos = bins.lo[..., None] + np.arange(taps)
        return np.minimum(pos, length - 1), pos < bins.hi[..., None]

    def flat_index(self, tap: np.ndarray, shape) -> np.ndarray:
        """Flat index into the input (C order) of tap ``tap[k, c, i, j]`` of every bin."""
        tx = self._rx.shape[-1]
        row = np.take_along_axis(np.broadcast_to(self._ry[:, None, :, None, :], self.out + self._ry.shape[-1:]),
                                 (tap // tx)[..., None], -1)[..., 0]
        col = np.take_along_axis(np.broadcast_to(self._rx[:, None, None, :, :], self.out + (tx,)),
                                 (tap % tx)[..., None], -1)[..., 0]
        return ((self.batch * self.shape[1] + self.channel) * self.shape[2] + row) * self.shape[3] + col

    def tap_index(self, shape) -> np.ndarray:
        """Flat index into the input of every tap of every bin, (K, C, ph, pw, taps)."""
        return np.stack([self.flat_index(np.full(self.out, t), shape) for t in range(len(self.taps))], axis=-1)


def align_bins(first, last, spec, pooled: int):
    """roi_align's bins along one axis, per box: (start, bin size, samples per bin); sample j of
    bin i lies at ``start + i * bin + (j + 0.5) * bin / grid``."""
    offset = 0.5 if spec.aligned else 0.0
    start, end = first * spec.spatial_scale - offset, last * spec.spatial_scale - offset
    size = end - start if spec.aligned else np.maximum(end - start, 1.0)
    grid = (np.full(len(start), spec.sampling_ratio) if spec.sampling_ratio > 0
            else np.ceil(size / pooled).astype(np.int64))
    return start, size / pooled, grid


def _align_samples(first, last, spec, pooled: int, length: int):
    """roi_align along one axis: per box, bin, sample and corner (K, p, S, 2) the pixel read and
    its weight (0 for a corner not read), per box its grid size, and per box, bin and sample
    whether the box has that sample, whether it lies outside [-1, length] and whether it is
    clamped to a border pixel (in [-1, 0) or past length - 1)."""
    start, bin_size, grid = align_bins(first, last, spec, pooled)
    samples = max(int(grid.max()), 1)
    s = np.arange(samples)[None, None, :]
    g = np.maximum(grid, 1)[:, None, None]
    at = start[:, None, None] + np.arange(pooled)[None, :, None] * bin_size[:, None, None] \
        + (s + 0.5) * bin_size[:, None, None] / g
    taken = np.broadcast_to(s < grid[:, None, None], at.shape)
    outside = (at < -1.0) | (at > length)
    y = np.maximum(at, 0.0)
    low = np.floor(y).astype(np.int64)
    last_pixel = low >= length - 1
    low = np.where(last_pixel, length - 1, low)
    high = np.where(last_pixel, length - 1, low + 1)
    frac = np.where(last_pixel, 0.0, y - low)
    weight = np.stack([1.0 - frac, frac], axis=-1) * (taken & ~outside)[..., None]
    clamped = taken & ~outside & ((at < 0) | (at > length - 1))
    # the size of the terms that form a sample's position (box corners scaled, the position): a
    # kernel computing it in the dtype misplaces it by eps times that, which moves its weights so much
    magnitude = (np.abs(first) + np.abs(last))[:, None, None] * spec.spatial_scale + np.abs(at)
    return np.stack([low, np.minimum(high, length - 1)], axis=-1), weight, grid, taken, taken & outside, clamped, magnitude


class AlignPlan(_Unpadded):
    """roi_align's samples as weighted taps, in the kernel's order (per sample, row-major, its four
    corners): tap t reads (K, C, ph, pw) elements with a (K, 1, ph, pw) weight; ``count`` is the
    divisor per box, max(grid_h * grid_w, 1)."""

    def __init__(self, spec, shape):
        check_input(spec, shape)
        _, channels, height, width = shape
        boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64)
        ph, pw = spec.output_size
        py, wy, gy, taken_y, self.outside_y, self.clamped_y, my = _align_samples(boxes[:, 1], boxes[:, 3], spec, ph, height)
        px, wx, gx, taken_x, self.outside_x, self.clamped_x, mx = _align_samples(boxes[:, 0], boxes[:, 2], spec, pw, width)
        self.batch, self.channel = _box_index(spec, channels)
        self.shape = tuple(shape)
        self.out = (len(spec.boxes), channels, ph, pw)
        self.count = np.maximum(gy * gx, 1).astype(np.float64)[:, None, None, None]
        self.empty = (np.maximum(gy, 0) * np.maximum(gx, 0) == 0)[:, None, None, None]
        self.taps = []
        self.sampled = []  # per tap: the bins whose sample it is lies inside the input
        self.position_error = []  # per tap: what error_scale adds to its weight (_align_samples' magnitude)
        for sy in range(py.shape[2]):
            for sx in range(px.shape[2]):
                inside = ((taken_y & ~self.outside_y)[:, None, :, None, sy]
                          & (taken_x & ~self.outside_x)[:, None, None, :, sx])
                for cy in range(2):
                    for cx in range(2):
                        rows, cols = py[:, None, :, None, sy, cy], px[:, None, None, :, sx, cx]
                        weight = wy[:, None, :, None, sy, cy] * wx[:, None, None, :, sx, cx]
                        self.taps.append(((self.batch, self.channel, rows, cols), weight))
                        self.sampled.append(inside)
                        self.position_error.append(np.where(inside, my[:, None, :, None, sy] + mx[:, None, None, :, sx], 0.0))

    def flat(self, index) -> np.ndarray:
        batch, channel, rows, cols = index
        return np.broadcast_to(((batch * self.shape[1] + channel) * self.shape[2] + rows) * self.shape[3] + cols,
                               self.out)


def align_forward(plan: AlignPlan, x: np.ndarray, acc=F64) -> np.ndarray:
    """The mean of each bin's samples, float64; with ``acc`` each weighted corner rounded and added
    in the kernel's order in that dtype. Corners of weight 0 are not read."""
    s = np.zeros(plan.out, dtype=acc)
    with np.errstate(invalid="ignore", over="ignore"):
        for index, weight in plan.taps:
            s += terms(np.where(weight != 0, weight * x[index], 0.0), acc)
        return s.astype(np.float64) / plan.count


def align_backward(plan: AlignPlan, g: np.ndarray, acc=F64) -> np.ndarray:
    """Each bin's g / count times a corner's weight, added into that pixel of the box's image in
    the kernel's order (boxes, channels, bins, samples, corners)."""
    share = g / plan.count
    index = np.stack([plan.flat(i) for i, _ in plan.taps], axis=-1)
    values = np.stack([np.where(w != 0, share * w, 0.0) for _, w in plan.taps], axis=-1)
    return scatter_add(math.prod(plan.shape), index, values, acc, taps=True).reshape(plan.shape)


def align_error_scale(plan: AlignPlan, x_abs: np.ndarray, g_abs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """roi_align's error scale (api.error_scale): the op applied to |x| and |g|, plus the same with
    each corner's weight replaced by its sample's position magnitude. A weight is a fraction of a
    position, so a kernel that computes positions in the dtype moves it by eps times the position's
    size, not the weight's (a weight of 1e-3 at position 5 is off by about 5e3 of its own ulp); a
    corner the spec gives weight 0 may then be read too (its finite values: non-finite ones are
    compared exactly)."""
    moved = copy.copy(plan)
    moved.taps = [(index, slack) for (index, _), slack in zip(plan.taps, plan.position_error)]
    finite = np.where(np.isfinite(x_abs), x_abs, 0.0)
    return (align_forward(plan, x_abs) + align_forward(moved, finite),
            align_backward(plan, g_abs) + align_backward(moved, g_abs))


def fan_in(plan) -> int:
    """The most (box, bin, tap) reads of one input element: what the routing probe sizes by."""
    if hasattr(plan, "fan_in"):  # roi_crop_max_pool: the reads of one crop point
        return plan.fan_in()
    if isinstance(plan, AlignPlan):
        index = np.stack([np.where(w != 0, plan.flat(i), -1) for i, w in plan.taps], axis=-1)
    else:
        read = np.stack([np.broadcast_to(True if v is None else v, plan.out) for _, v in plan.taps], axis=-1)
        index = np.where(read, plan.tap_index(plan.shape), -1)
    index = index[:, :1]  # one channel: every channel reads alike
    return int(np.bincount(index[index >= 0].ravel()).max(initial=1))


# Case properties of RoI pooling (properties.py lists them with the others).
PROPERTIES = {
    "roi_past_border": "RoI pooling: a box reaches past the input (roi_pool: a bin before clipping; roi_align: a sample)",
    "roi_sample_outside": "roi_align: a sample lies outside [-1, H] x [-1, W] and contributes 0",
    "roi_unweighted_nonfinite": "roi_align: a pixel the spec does not read for a sample holds NaN or an infinity (a "
                                "corner of weight 0, or for a sample outside the input its image's first pixel) where "
                                "the pixels it reads leave the bin finite: kernels that multiply every corner, or read "
                                "pixel 0 there, get NaN",
    "roi_sample_clamped": "roi_align: a sample lies in [-1, 0) or past the last pixel (up to the length) on some axis "
                          "and is interpolated at the border pixel",
    "roi_aligned_under_one_pixel": "roi_align with aligned: a box spans less than one pixel on some axis (scale "
                                   "applied), which the spec keeps as it is (no samples where it is 0 or less)",
}


def properties(spec, x: np.ndarray) -> set[str]:
    """The case properties (properties.PROPERTIES) that hold for ``x`` under a RoI spec."""
    xf = x.astype(np.float64)
    if spec.op == "roi_align":
        return _align_properties(spec, xf)
    plan = RoiPlan(spec, x.shape)
    found = {"roi_past_border"} if (plan.rows.past_border | plan.cols.past_border).any() else set()
    real = [np.broadcast_to(True if valid is None else valid, plan.out) for _, valid in plan.taps]
    values = [xf[index] for index, _ in plan.taps]
    count = sum(r.astype(np.int64) for r in real)
    nans = sum(r & np.isnan(v) for r, v in zip(real, values))
    neginf = sum(r & np.isneginf(v) for r, v in zip(real, values))
    finite = sum(r & np.isfinite(v) for r, v in zip(real, values))
    top = np.full(plan.out, -np.inf)
    for r, v in zip(real, values):
        np.copyto(top, np.fmax(top, v), where=r & ~np.isnan(v))
    tops = sum(r & (v == top) for r, v in zip(real, values))
    zeros = [sum(r & (v == 0) & (np.signbit(v) == sign) for r, v in zip(real, values)) for sign in (False, True)]
    has = count > 0
    flags = {
        "nan": nans > 0, "nan_several": nans > 1, "nan_with_number": (nans > 0) & (nans < count),
        "nan_only": has & (nans == count), "ties": (tops > 1) & (nans < count),
        "infinite_max": (nans < count) & np.isinf(top),
        "infinity": sum(r & np.isinf(v) for r, v in zip(real, values)) > 0,
        "signed_zero_tie": (top == 0) & (zeros[0] > 0) & (zeros[1] > 0),
        "neginf_window": has & (neginf == count), "no_finite_window": has & (finite == 0),
        "empty_window": ~has, "zero_window": has & (zeros[0] + zeros[1] == count),
    }
    return found | {name for name, hit in flags.items() if np.any(hit)}


def _align_properties(spec, xf: np.ndarray) -> set[str]:
    plan = AlignPlan(spec, xf.shape)
    boxes = np.array([b[1:] for b in spec.boxes]) * spec.spatial_scale
    small = (boxes[:, 2] - boxes[:, 0] < 1) | (boxes[:, 3] - boxes[:, 1] < 1)
    found = {"roi_aligned_under_one_pixel"} if spec.aligned and small.any() else set()
    if (plan.outside_y.any(axis=(1, 2)) | plan.outside_x.any(axis=(1, 2))).any():
        found |= {"roi_sample_outside", "roi_past_border"}
    if plan.clamped_y.any() or plan.clamped_x.any():
        found |= {"roi_sample_clamped", "roi_past_border"}
    if plan.empty.any():
        found.add("empty_window")
    read_nan, read_inf, read_bad, unread_bad = (np.zeros(plan.out, bool) for _ in range(4))
    for (index, weight), sampled in zip(plan.taps, plan.sampled):
        v = xf[index]
        read_nan |= np.isnan(v) & (weight != 0)
        read_inf |= np.isinf(v) & (weight != 0)
        read_bad |= ~np.isfinite(v) & (weight != 0)
        unread_bad |= ~np.isfinite(v) & (weight == 0) & sampled
    outside = (plan.outside_y.any(axis=2)[:, :, None] | plan.outside_x.any(axis=2)[:, None, :])[:, None]
    first_pixel = xf[plan.batch[:, :, 0, 0], plan.channel[:, :, 0, 0], 0, 0][..., None, None]
    unread_bad |= outside & ~np.isfinite(first_pixel)
    found |= {name for name, read in (("nan", read_nan), ("infinity", read_inf)) if read.any()}
    # only where the pixels the spec reads leave the bin finite: there a kernel's 0 * v shows
    return found | ({"roi_unweighted_nonfinite"} if (unread_bad & ~read_bad).any() else set())
