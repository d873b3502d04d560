"""PaddlePaddle's RoI pooling as a user calls it (poolgrad_paddle/roi/__init__.py plans the call), run
by paddle's worker (adapter.py hands it the variant): dX is paddle.grad(y, x, grad_output). Reverse
mode only."""

from __future__ import annotations

import numpy as np
import paddle

from poolgrad.adapters.base import ERROR, OK, UNSUPPORTED, Outcome, Unsupported

from .. import adapter as pooling  # its conversions (it imports this module: read at call time)
from . import plan


def _pool(planned, place):
    call = planned.call
    boxes = np.array(planned.boxes)
    boxes_num = paddle.to_tensor(np.array(planned.boxes_num, dtype=np.int32), place=place)

    def pool(t):
        b = paddle.to_tensor(boxes.astype(t.numpy().dtype), place=place)
        if call.op == "roi_pool":
            return paddle.vision.ops.roi_pool(t, b, boxes_num, call.output_size, call.spatial_scale)
        return paddle.vision.ops.roi_align(t, b, boxes_num, call.output_size, call.spatial_scale,
                                           call.sampling_ratio, call.aligned)
    return pool


def run(spec, variant, device, x, grad_output) -> Outcome:
    planned = plan(spec, variant, x.shape)
    if isinstance(planned, Unsupported):
        return Outcome(UNSUPPORTED, message=planned.reason)
    place = paddle.CUDAPlace(0) if device == "gpu" else paddle.CPUPlace()
    xt = pooling.to_paddle(x, place)
    gt = pooling.to_paddle(np.ascontiguousarray(grad_output[list(planned.order)]), place)
    try:
        xt.stop_gradient = False
        y = _pool(planned, place)(xt)
        (dx,) = paddle.grad(y, xt, gt)
    except Exception as e:  # whatever paddle raised is the result
        return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
    info = {"device_name": "cpu" if device == "cpu" else paddle.device.cuda.get_device_name(0)}
    forward = np.ascontiguousarray(pooling.to_numpy(y)[list(planned.restore)])
    return Outcome(OK, forward=forward, grad_input=pooling.to_numpy(dx), info=info)
