"""torchvision adapter: torchvision.ops.roi_pool / roi_align as a user calls them, in a worker
(poolgrad/adapters/torch/torchvision/__init__.py plans the call). Reverse mode only."""

from __future__ import annotations

from typing import Any

import torch
import torchvision

from ...base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Outcome, Unsupported
from ..adapter import to_numpy, to_torch
from . import ROI_VARIANTS, plan


def _pool(call, boxes: torch.Tensor):
    if call.op == "roi_pool":
        return lambda t: torchvision.ops.roi_pool(t, boxes, call.output_size, call.spatial_scale)
    return lambda t: torchvision.ops.roi_align(t, boxes, call.output_size, call.spatial_scale,
                                               call.sampling_ratio, call.aligned)


class TorchvisionAdapter:
    framework = "torch"
    variants = ROI_VARIANTS

    def version(self) -> str:
        return torch.__version__

    def devices(self) -> list[str]:
        return ["cpu", "gpu"] if torch.cuda.is_available() else ["cpu"]

    def environment(self) -> dict[str, Any]:
        return {"torch": torch.__version__, "torchvision": torchvision.__version__, "cuda": torch.version.cuda,
                "num_threads": torch.get_num_threads()}

    def run(self, spec, variant, device, x, grad_output) -> Outcome:
        if device == "gpu" and not torch.cuda.is_available():
            return Outcome(NO_DEVICE, message="no CUDA device present")
        call = plan(spec, variant, x.shape)
        if isinstance(call, Unsupported):
            return Outcome(UNSUPPORTED, message=call.reason)
        dev = "cuda" if device == "gpu" else "cpu"
        xt, gt = to_torch(x, dev), to_torch(grad_output, dev)
        boxes = torch.tensor(call.boxes, dtype=torch.float64).to(dtype=xt.dtype, device=dev)
        try:
            xt.requires_grad_(True)
            y = _pool(call, boxes)(xt)
            y.backward(gt)
        except Exception as e:  # whatever torchvision raised is the result
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
        info = {"device_name": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu"}
        return Outcome(OK, forward=to_numpy(y), grad_input=to_numpy(xt.grad), info=info)


ADAPTER = TorchvisionAdapter()
