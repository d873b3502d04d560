"""torchvision's RoI pooling, a variant of torch (pure: importing this imports neither torch nor
torchvision; adapter.py runs the call in a worker of its own, which needs torchvision):

  torchvision   torchvision.ops.roi_pool(input, boxes, output_size, spatial_scale) and
                roi_align(..., sampling_ratio, aligned), boxes a (K, 5) tensor of the input's dtype

Without torchvision the variant is not installed (its worker requires it); the other torch
variants never run RoI ops (adapters.registry.plan). torchvision's roi_pool kernels take float32
and float64 on CPU (and half on CUDA); what a dtype they refuse raises is their error.
"""

from __future__ import annotations

from ... import roi
from ...base import Unsupported
from ...framework import Upstream, WorkerSpec

ROI_VARIANTS = ("torchvision",)
UPSTREAM = Upstream("pytorch/vision", "the 🐛 Bug Report form")
WORKER = WorkerSpec("torch-torchvision", "poolgrad.adapters.torch.torchvision.adapter", {}, "torchvision", __name__, UPSTREAM)


def plan(spec, variant: str, shape) -> roi.RoiCall | Unsupported:
    return roi.refuse(spec, variant, ROI_VARIANTS) or roi.call(spec)
