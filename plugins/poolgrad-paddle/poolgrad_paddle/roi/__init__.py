"""PaddlePaddle's RoI pooling (pure: imports no paddle; adapter.py beside it runs the call in paddle's
worker, upstream.py.j2 writes it for a draft):

  vision_ops   paddle.vision.ops.roi_pool(x, boxes, boxes_num, output_size, spatial_scale) and
               roi_align(..., sampling_ratio, aligned) in dynamic mode

paddle takes boxes as (K, 4) [x1, y1, x2, y2] grouped by image, with boxes_num the count per image,
where the spec has [batch_index, x1, y1, x2, y2] in any order: the call takes the boxes sorted by
image (stably) and its output rows go back to the spec's order, a layout change, never a value
one. Its RoI kernels are registered for float32 and float64 (and int) only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from poolgrad.adapters import roi
from poolgrad.adapters.base import Plan, Unsupported

ROI_VARIANTS = ("vision_ops",)
DTYPES = ("float32", "float64")


@dataclasses.dataclass(frozen=True)
class PaddleRoi(Plan):
    call: roi.RoiCall
    order: tuple[int, ...]       # the spec's box indices, sorted by image
    boxes_num: tuple[int, ...]   # boxes per image

    @property
    def boxes(self) -> tuple:
        """The boxes as paddle takes them: [x1, y1, x2, y2], grouped by image."""
        return tuple(self.call.boxes[i][1:] for i in self.order)

    @property
    def restore(self) -> tuple[int, ...]:
        """Paddle's output rows in the spec's box order: ``y[restore]``."""
        return tuple(int(i) for i in np.argsort(self.order))


def plan(spec, variant: str, shape) -> PaddleRoi | Unsupported:
    refused = roi.refuse(spec, variant, ROI_VARIANTS)
    if refused is not None:
        return refused
    if spec.dtype not in DTYPES:
        return Unsupported(f"{spec.dtype}: paddle's roi_pool and roi_align kernels take float32 and float64")
    batch = np.array([b[0] for b in spec.boxes])
    order = tuple(int(i) for i in np.argsort(batch, kind="stable"))
    return PaddleRoi(roi.call(spec), order, tuple(int(n) for n in np.bincount(batch, minlength=shape[0])))
