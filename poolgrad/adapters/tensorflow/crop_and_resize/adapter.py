"""TensorFlow's crop_and_resize then avg_pool2d or max_pool2d, as detectors write RoI pooling
(crop_and_resize/__init__.py plans it), run by TensorFlow's worker (adapter.py hands it the variant):
dX is the tape's gradient, in eager mode or inside a tf.function (compiled by XLA or not) as a training
step takes it.
Reverse mode only."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from ...base import ERROR, OK, UNSUPPORTED, Outcome, Unsupported
from . import plan


def _step(call):
    """(x, g) -> (y, dx) on NHWC tensors: the crop, its pooling and the tape's gradient."""
    pool = tf.nn.max_pool2d if call.pool == "max" else tf.nn.avg_pool2d

    def step(xt, gt):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            crops = tf.image.crop_and_resize(xt, tf.constant(call.boxes, tf.float32),
                                             tf.constant(call.box_indices, tf.int32), call.crop_size)
            y = pool(crops, call.window, call.stride, "VALID")
        return y, tape.gradient(y, xt, output_gradients=gt)
    return tf.function(step, jit_compile=call.jit_compile) if call.function else step


def run(spec, variant, device, x, grad_output) -> Outcome:
    call = plan(spec, variant, x.shape)
    if isinstance(call, Unsupported):
        return Outcome(UNSUPPORTED, message=call.reason)
    try:
        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            xt = tf.constant(np.transpose(x, (0, 2, 3, 1)))   # NHWC, as detectors hold feature maps
            gt = tf.constant(np.transpose(grad_output, (0, 2, 3, 1)))
            y, dx = _step(call)(xt, gt)
    except Exception as e:  # whatever TensorFlow raised is the result
        return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
    return Outcome(OK, forward=np.transpose(y.numpy(), (0, 3, 1, 2)).copy(),
                   grad_input=np.transpose(dx.numpy(), (0, 3, 1, 2)).copy(), info={"device": device})
