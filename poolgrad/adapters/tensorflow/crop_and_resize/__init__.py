"""RoI Align as TensorFlow detectors write it (pure: imports no TensorFlow; adapter.py beside it runs
the call in TensorFlow's worker):

  crop_and_resize   tf.image.crop_and_resize(x, boxes, box_indices, (ph * s, pw * s)) on the NHWC
                    input, then tf.nn.avg_pool2d over s x s: roi_align with sampling_ratio s

crop_and_resize puts crop point k of n at ``y1 * (L - 1) + k * (y2 - y1) * (L - 1) / (n - 1)``
(normalized box corners); the plan picks the corners that put the points on roi_align's samples,
``start + (k + 0.5) * bin / s``, so averaging each bin's s x s points is roi_align. What it cannot
say: an adaptive sampling_ratio (one crop size for every box), an axis of one pixel (the
normalized corners divide by L - 1), dtypes other than float32 (its boxes and its output are
float32), and roi_pool, whose quantized bins are no crop (detectors max-pool such crops instead,
another geometry: SPEC.md, "roi_pool, roi_align").
"""

from __future__ import annotations

import dataclasses

import numpy as np

from poolgrad.adapters import roi
from poolgrad.adapters.base import Unsupported
from poolgrad.reference.roi_pool import align_bins

ROI_VARIANTS = ("crop_and_resize",)


@dataclasses.dataclass(frozen=True)
class CropAndResize:
    boxes: tuple             # per box, normalized [y1, x1, y2, x2]
    box_indices: tuple       # per box, its image
    crop_size: tuple[int, int]
    window: int              # the avg_pool2d window and stride: samples per bin and axis


def _corners(first, last, spec, pooled: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Normalized corners whose crop points along one axis are roi_align's samples."""
    start, bin_size, grid = align_bins(first, last, spec, pooled)
    step = bin_size / grid
    return (start + 0.5 * step) / (length - 1), (start + (pooled * grid - 0.5) * step) / (length - 1)


def plan(spec, variant: str, shape) -> CropAndResize | Unsupported:
    refused = roi.refuse(spec, variant, ROI_VARIANTS)
    if refused is not None:
        return refused
    if spec.op != "roi_align":
        return Unsupported("crop_and_resize samples bilinearly: it expresses roi_align; roi_pool's quantized bins "
                           "are no crop (a crop max-pooled is another geometry)")
    if spec.sampling_ratio <= 0:
        return Unsupported(f"sampling_ratio {spec.sampling_ratio}: one crop_size serves every box, so the samples "
                           "per bin must be fixed (sampling_ratio > 0)")
    if spec.dtype != "float32":
        return Unsupported(f"{spec.dtype}: crop_and_resize takes float32 boxes and returns float32")
    if min(shape[2:]) < 2:
        return Unsupported(f"input {tuple(shape[2:])}: crop_and_resize's normalized corners divide by length - 1")
    boxes = np.array([b[1:] for b in spec.boxes], dtype=np.float64)
    (ph, pw), h, w = spec.output_size, shape[2], shape[3]
    y1, y2 = _corners(boxes[:, 1], boxes[:, 3], spec, ph, h)
    x1, x2 = _corners(boxes[:, 0], boxes[:, 2], spec, pw, w)
    s = spec.sampling_ratio
    return CropAndResize(tuple(map(tuple, np.stack([y1, x1, y2, x2], axis=1).tolist())),
                         tuple(b[0] for b in spec.boxes), (ph * s, pw * s), s)
