"""roi_crop_max_pool: RoI pooling as TensorFlow detectors write it, a bilinear crop of each box
(tf.image.crop_and_resize) max-pooled (max_pool2d, VALID), SPEC.md "roi_crop_max_pool".

Box k, ``[batch_index, x1, y1, x2, y2]`` times ``spatial_scale``, is cropped from its image to
``n = (p - 1) * stride + kernel`` points per axis, the crop that max pooling with that kernel and
stride turns into ``output_size`` p. Along an axis of length L, point j of n lies at
``a + j (b - a) / (n - 1)`` from corner a to corner b (the box's centre when n = 1): corner to
corner, crop_and_resize's rule for a normalized coordinate ``c`` at pixel ``c (L - 1)``. A point
outside [0, L - 1] on either axis is 0 (crop_and_resize's default ``extrapolation_value``) and
passes no gradient; a point inside is the bilinear interpolation of its pixels, a corner of
weight 0 not read (a point on a pixel is that pixel). The crop is rounded to the dtype (it is a
tensor of its own, crop_and_resize's output), and max_pool over it is the spec's max_pool, its
tie and NaN policies included; its gradient, rounded to the dtype likewise, is spread back to
each point's pixels by the same weights, summed in float64 and rounded once.
"""

from __future__ import annotations

import math

import numpy as np

from .dtypes import round_to
from .roi_pool import _box_index, _Unpadded, check_input

OP = "roi_crop_max_pool"


def crop_length(spec, axis: int) -> int:
    """Crop points along ``axis`` (0: height, 1: width): what max_pool(kernel, stride, VALID)
    pools to the output size."""
    return (spec.output_size[axis] - 1) * spec.stride[axis] + spec.kernel_size[axis]


def pooled(spec):
    """The max_pool2d over the crop (VALID), in the spec's dtype."""
    from .spec import PoolSpec  # spec.py imports this module's parsers' neighbours
    return PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": list(spec.kernel_size),
                               "stride": list(spec.stride), "dtype": spec.dtype})


def points(first, last, scale: float, n: int) -> np.ndarray:
    """(K, n) point positions along one axis, in pixels: corner to corner."""
    a, b = first * scale, last * scale
    if n == 1:
        return ((a + b) / 2)[:, None]
    return a[:, None] + np.arange(n)[None, :] * ((b - a) / (n - 1))[:, None]


def _axis(at: np.ndarray, length: int):
    """Per point (K, n): its two pixels (K, n, 2), their weights (0 for a corner not read and for a
    point outside [0, length - 1]), and whether it lies outside."""
    outside = (at < 0) | (at > length - 1)
    low = np.clip(np.floor(at), 0, length - 1).astype(np.int64)
    frac = np.where(outside, 0.0, at - np.floor(at))
    pixels = np.stack([low, np.minimum(low + 1, length - 1)], axis=-1)
    weight = np.stack([1.0 - frac, frac], axis=-1) * ~outside[..., None]
    return pixels, weight, outside


class CropPlan(_Unpadded):
    """The crop of every box: ``taps`` as roi_align's plan has them, one per (point row, point
    column, corner row, corner column), each reading (K, C, ny, nx) pixels with a (K, 1, ny, nx)
    weight; ``outside`` (K, 1, ny, nx): the points that take the extrapolation value."""

    def __init__(self, spec, shape):
        check_input(spec, shape)
        _, channels, height, width = shape
        boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64)
        ny, nx = crop_length(spec, 0), crop_length(spec, 1)
        self.y = points(boxes[:, 1], boxes[:, 3], spec.spatial_scale, ny)
        self.x = points(boxes[:, 0], boxes[:, 2], spec.spatial_scale, nx)
        (py, wy, oy), (px, wx, ox) = _axis(self.y, height), _axis(self.x, width)
        self.batch, self.channel = _box_index(spec, channels)
        self.shape = tuple(shape)
        self.crop_shape = (len(spec.boxes), channels, ny, nx)
        self.out = (len(spec.boxes), channels, *spec.output_size)
        self.outside = (oy[:, None, :, None] | ox[:, None, None, :])
        self.taps = [((self.batch, self.channel, py[:, None, :, None, cy], px[:, None, None, :, cx]),
                      wy[:, None, :, None, cy] * wx[:, None, None, :, cx]) for cy in range(2) for cx in range(2)]
        self.pool = pooled(spec)

    def crop(self, x: np.ndarray) -> np.ndarray:
        """The (K, C, ny, nx) crop of ``x``, float64 (not rounded). Corners of weight 0 are not read."""
        c, xf = np.zeros(self.crop_shape), x.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            for index, weight in self.taps:
                c += np.where(weight != 0, weight * xf[index], 0.0)
        return c

    def rounded_crop(self, x: np.ndarray, dtype=None) -> np.ndarray:
        """The crop as crop_and_resize outputs it: rounded to ``dtype`` (default x's)."""
        return round_to(self.crop(x), x.dtype if dtype is None else dtype)

    def spread(self, g_crop: np.ndarray, dtype) -> np.ndarray:
        """The crop's gradient back on the input: each point's share times its corners' weights,
        added in float64 and rounded once to ``dtype``."""
        dx = np.zeros(math.prod(self.shape))
        g = np.asarray(g_crop, dtype=np.float64)
        for (batch, channel, rows, cols), weight in self.taps:
            flat = ((batch * self.shape[1] + channel) * self.shape[2] + rows) * self.shape[3] + cols
            share = np.where(weight != 0, weight * g, 0.0)
            np.add.at(dx, np.broadcast_to(flat, self.crop_shape).ravel(), share.ravel())
        return round_to(dx.reshape(self.shape), dtype)

    def out_shape(self, xw=None) -> tuple[int, ...]:
        return self.out

    def fan_in(self) -> int:
        """The most windows of the max pooling that read one crop point."""
        return math.prod(-(-k // s) for k, s in zip(self.pool.kernel_size, self.pool.stride))


# Case properties of roi_crop_max_pool beyond max_pool's over its crop (properties.py lists them).
PROPERTIES = {
    "roi_crop_infinite_corner": "roi_crop_max_pool: a crop point interpolates an infinite pixel (a corner of nonzero "
                                "weight): kernels that interpolate as a + (b - a) t get NaN there",
}


def properties(spec, x: np.ndarray, pool_properties) -> set[str]:
    """Case properties of ``x``: ``pool_properties(pool spec, crop)``'s (max_pool's over the
    rounded crop: ties, NaN, -inf windows, ...), roi_past_border where a point takes the
    extrapolation value, roi_crop_infinite_corner."""
    plan = CropPlan(spec, x.shape)
    found = set(pool_properties(plan.pool, plan.rounded_crop(x)))
    if plan.outside.any():
        found.add("roi_past_border")
    xf = x.astype(np.float64)
    if any((np.isinf(xf[index]) & (weight != 0)).any() for index, weight in plan.taps):
        found.add("roi_crop_infinite_corner")
    return found
