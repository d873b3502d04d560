"""RoI pooling called directly through each framework's RoI API, the way a detector calls it, and
the (forward, dX) of each call printed as JSON (NaN and infinities as Python's json writes them).

A script without poolgrad, run first among the reproducers it is compared with, in their
interpreter (tests/repro_runs.py), so the framework is imported once: it reads roi_calls.json
beside it, {"framework": name, "calls": [{"call": the planner's call as a dict, "x": input,
"g": grad_output}, ...]}, the arrays channels-first.
"""

from __future__ import annotations

import json
import os

import numpy as np


def tensorflow(call, x, g):
    """crop_and_resize on the channels-last input, then avg_pool2d or max_pool2d over the crop."""
    import tensorflow as tf

    def step(xt, gt):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            crops = tf.image.crop_and_resize(xt, call["boxes"], call["box_indices"], call["crop_size"])
            y = (tf.nn.max_pool2d if call["pool"] == "max" else tf.nn.avg_pool2d)(
                crops, call["window"], call["stride"], "VALID")
        return y, tape.gradient(y, xt, output_gradients=gt)
    y, dx = (tf.function(step) if call["function"] else step)(tf.constant(np.moveaxis(x, 1, -1)),
                                                              tf.constant(np.moveaxis(g, 1, -1)))
    return np.moveaxis(y.numpy(), -1, 1), np.moveaxis(dx.numpy(), -1, 1)


def paddle(call, x, g):
    """paddle.vision.ops with the boxes [x1, y1, x2, y2] grouped by image, boxes_num per image."""
    import paddle
    roi = call["call"]
    xt = paddle.to_tensor(x)
    xt.stop_gradient = False
    boxes = paddle.to_tensor(np.array([roi["boxes"][i][1:] for i in call["order"]], dtype=x.dtype))
    boxes_num = paddle.to_tensor(call["boxes_num"], dtype="int32")
    if roi["op"] == "roi_pool":
        y = paddle.vision.ops.roi_pool(xt, boxes, boxes_num, roi["output_size"], roi["spatial_scale"])
    else:
        y = paddle.vision.ops.roi_align(xt, boxes, boxes_num, roi["output_size"], roi["spatial_scale"],
                                        roi["sampling_ratio"], roi["aligned"])
    (dx,) = paddle.grad(y, xt, paddle.to_tensor(g[call["order"]]))
    return y.numpy()[np.argsort(call["order"])], dx.numpy()


def torch(call, x, g):
    """torchvision.ops with the boxes a (K, 5) tensor of the input's dtype."""
    import torch
    import torchvision
    xt = torch.tensor(x).requires_grad_()
    boxes = torch.tensor(call["boxes"], dtype=xt.dtype)
    if call["op"] == "roi_pool":
        y = torchvision.ops.roi_pool(xt, boxes, call["output_size"], call["spatial_scale"])
    else:
        y = torchvision.ops.roi_align(xt, boxes, call["output_size"], call["spatial_scale"], call["sampling_ratio"],
                                      call["aligned"])
    y.backward(torch.tensor(g))
    return y.detach().numpy(), xt.grad.numpy()


if __name__ == "__main__":
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "roi_calls.json")) as f:
        todo = json.load(f)
    run = {"tensorflow": tensorflow, "paddle": paddle, "torch": torch}[todo["framework"]]
    out = []
    for c in todo["calls"]:
        x, g = np.array(c["x"], dtype=c["dtype"]), np.array(c["g"], dtype=c["dtype"])
        out.append([a.astype(np.float64).tolist() for a in run(c["call"], x, g)])
    print(json.dumps(out))
