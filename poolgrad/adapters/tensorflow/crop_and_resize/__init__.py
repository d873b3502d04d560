"""RoI pooling as TensorFlow detectors write it (pure: imports no TensorFlow; adapter.py beside it runs
the call in TensorFlow's worker), tf.image.crop_and_resize(x, boxes, box_indices, crop_size) on the
NHWC input, then pooling the crop:

  crop_and_resize                avg_pool2d over s x s: roi_align with sampling_ratio s (eager)
  crop_and_resize_max            max_pool2d(kernel, stride, VALID): roi_crop_max_pool, as the TF
                                 Object Detection API's Faster R-CNN pools its proposals (eager)
  crop_and_resize_max_function   the same in a tf.function, as a training step runs it
  crop_and_resize_max_xla        the same in tf.function(jit_compile=True), as a detector compiled by
                                 XLA runs it

crop_and_resize puts crop point k of n at ``y1 * (L - 1) + k * (y2 - y1) * (L - 1) / (n - 1)``
(normalized box corners). For roi_align the plan picks the corners that put the points on its
samples, ``start + (k + 0.5) * bin / s``, so averaging each bin's s x s points is roi_align; for
roi_crop_max_pool the corners are the box's own, over L - 1 (its points span the box corner to
corner). What it cannot say: an adaptive sampling_ratio (one crop size for every box), an axis of
one pixel (the normalized corners divide by L - 1), dtypes other than float32 (its boxes and its
output are float32), and roi_pool, whose quantized bins are no crop.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from poolgrad.adapters import roi
from poolgrad.adapters.base import Plan, Unsupported
from poolgrad.reference import roi_crop
from poolgrad.reference.roi_pool import align_bins

ROI_VARIANTS = ("crop_and_resize", "crop_and_resize_max", "crop_and_resize_max_function", "crop_and_resize_max_xla")
_OPS = {"crop_and_resize": "roi_align", "crop_and_resize_max": "roi_crop_max_pool",
        "crop_and_resize_max_function": "roi_crop_max_pool", "crop_and_resize_max_xla": "roi_crop_max_pool"}


@dataclasses.dataclass(frozen=True)
class CropAndResize(Plan):
    boxes: tuple             # per box, normalized [y1, x1, y2, x2]
    box_indices: tuple       # per box, its image
    crop_size: tuple[int, int]
    window: tuple[int, int]  # the pooling's window over the crop (roi_align: samples per bin and axis)
    stride: tuple[int, int]
    pool: str                # "avg" | "max"
    function: bool = False   # run in a tf.function
    jit_compile: bool = False  # that tf.function compiled by XLA


def _corners(first, last, spec, pooled: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalized corners whose crop points along one axis are roi_align's samples."""
    start, bin_size, grid = align_bins(first, last, spec, pooled)
    step = bin_size / grid
    return (start + 0.5 * step) / (length - 1), (start + (pooled * grid - 0.5) * step) / (length - 1)


def plan(spec, variant: str, shape) -> CropAndResize | Unsupported:
    # averaged (roi_align) or max-pooled (roi_crop_max_pool): roi_pool's quantized bins are no crop
    refused = roi.refuse(spec, variant, ROI_VARIANTS, (_OPS[variant],) if variant in _OPS else ())
    if refused is not None:
        return refused
    if spec.dtype != "float32":
        return Unsupported(f"{spec.dtype}: crop_and_resize takes float32 boxes and returns float32")
    if min(shape[2:]) < 2:
        return Unsupported(f"input {tuple(shape[2:])}: crop_and_resize's normalized corners divide by length - 1")
    if spec.op == roi_crop.OP:
        boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64) * spec.spatial_scale
        (h, w), sizes = shape[2:], (roi_crop.crop_length(spec, 0), roi_crop.crop_length(spec, 1))
        corners = boxes[:, [1, 0, 3, 2]] / np.array([h - 1, w - 1, h - 1, w - 1], dtype=np.float64)
        return CropAndResize(tuple(map(tuple, corners.tolist())), tuple(b[0] for b in spec.boxes), sizes,
                             spec.kernel_size, spec.stride, "max", variant.endswith(("_function", "_xla")),
                             variant.endswith("_xla"))
    if spec.sampling_ratio <= 0:
        return Unsupported(f"sampling_ratio {spec.sampling_ratio}: one crop_size serves every box, so the samples "
                           "per bin must be fixed (sampling_ratio > 0)")
    boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64)
    (ph, pw), h, w = spec.output_size, shape[2], shape[3]
    y1, y2 = _corners(boxes[:, 1], boxes[:, 3], spec, ph, h)
    x1, x2 = _corners(boxes[:, 0], boxes[:, 2], spec, pw, w)
    s = spec.sampling_ratio
    return CropAndResize(tuple(map(tuple, np.stack([y1, x1, y2, x2], axis=1).tolist())),
                         tuple(b[0] for b in spec.boxes), (ph * s, pw * s), (s, s), (s, s), "avg")
