"""RoI pooling as the frameworks take it (pure: imports no framework).

A RoI case's boxes are ``[batch_index, x1, y1, x2, y2]`` (SPEC.md, "RoI pooling"); its output is
(K boxes, C, ph, pw). RoI ops run only in a framework's RoI variants, named in its planner's
``ROI_VARIANTS`` (adapters.registry.plan refuses them elsewhere), and those variants run nothing
else (:func:`refuse`), so their test ids name the function users call.
"""

from __future__ import annotations

import dataclasses

from .base import Plan, Unsupported


@dataclasses.dataclass(frozen=True)
class RoiCall(Plan):
    """One RoI call (hashable)."""

    op: str                    # "roi_pool" | "roi_align"
    boxes: tuple               # ((batch_index, x1, y1, x2, y2), ...) as the spec has them
    output_size: tuple[int, int]
    spatial_scale: float
    sampling_ratio: int | None = None   # roi_align only
    aligned: bool | None = None


def refuse(spec, variant: str, variants: tuple[str, ...], ops: tuple[str, ...] = ("roi_pool", "roi_align")
           ) -> Unsupported | None:
    """Why ``variant``, one of a planner's RoI ``variants``, does not run ``spec``, or None: it runs the
    RoI ``ops`` it expresses (roi_crop_max_pool is a crop max-pooled, which a detection library's
    roi_pool / roi_align functions are not)."""
    if variant in variants and not spec.is_roi:
        return Unsupported(f"{variant} pools regions of interest only ({', '.join(ops)})")
    if variant in variants and spec.op not in ops:
        return Unsupported(f"{variant} has no {spec.op}: it pools {' and '.join(ops)}")
    return None


def call(spec) -> RoiCall:
    return RoiCall(spec.op, spec.boxes, spec.output_size, spec.spatial_scale, spec.sampling_ratio, spec.aligned)
