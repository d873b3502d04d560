"""Run max_pool2d (k2, s1) forward and backward directly through one framework's API paths, the
way a user would (Keras's MaxPooling2D with the framework as its backend among them), and print
{variant: dX} as JSON (encoded like results records).

Run as a script in its own process (one framework per process, as the suite does):
    python reports_direct.py FRAMEWORK DTYPE
Input and upstream gradient are those of reports.synthetic.tie_case.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from poolgrad.reports.records import encode_array  # noqa: E402
from poolgrad.reports.synthetic import tie_case  # noqa: E402


def nhwc(a):
    return np.ascontiguousarray(np.transpose(a, (0, 2, 3, 1)))


def keras_layer(backend: str, dtype):
    os.environ["KERAS_BACKEND"] = backend
    import keras
    return keras.layers.MaxPooling2D(2, 1, dtype=str(dtype))


def torch_grads(x, g):
    import torch
    import torch.nn.functional as F
    dt = getattr(torch, str(x.dtype))

    def grad(fn, layout=torch.contiguous_format):
        xt = torch.from_numpy(x.astype(np.float64)).to(dt).contiguous(memory_format=layout).requires_grad_()
        out = fn(xt)
        (out[0] if isinstance(out, tuple) else out).backward(torch.from_numpy(g.astype(np.float64)).to(dt))
        return xt.grad.to(torch.float64).numpy()
    return {"eager": grad(lambda t: F.max_pool2d(t, 2, 1)),
            "channels_last": grad(lambda t: F.max_pool2d(t, 2, 1), torch.channels_last),
            "module": grad(torch.nn.MaxPool2d(2, 1)),
            "compile": grad(torch.compile(lambda t: F.max_pool2d(t, 2, 1))),
            "return_indices": grad(lambda t: F.max_pool2d(t, 2, 1, return_indices=True)),
            # the Keras layer pools channels-last (NHWC)
            "keras": grad(lambda t: keras_layer("torch", x.dtype)(t.permute(0, 2, 3, 1)).permute(0, 3, 1, 2))}


def tensorflow_grads(x, g):
    import tensorflow as tf
    xt = tf.constant(np.transpose(x, (0, 2, 3, 1)))
    gt = tf.constant(np.transpose(g, (0, 2, 3, 1)))

    def grad(pool, wrap=lambda f: f):
        def fb(a, b):
            with tf.GradientTape() as tape:
                tape.watch(a)
                y = pool(a)
            return tape.gradient(y, a, output_gradients=b)
        return np.transpose(tf.cast(wrap(fb)(xt, gt), tf.float64).numpy(), (0, 3, 1, 2))
    nn = lambda a: tf.nn.max_pool2d(a, 2, 1, "VALID")  # noqa: E731
    return {"eager": grad(nn), "function": grad(nn, tf.function),
            "xla": grad(nn, lambda f: tf.function(f, jit_compile=True)),
            "keras": grad(keras_layer("tensorflow", x.dtype)),
            "with_argmax": grad(lambda a: tf.nn.max_pool_with_argmax(a, 2, 1, "VALID")[0])}


def jax_grads(x, g):
    import jax
    import jax.numpy as jnp
    from flax import linen
    from jax import lax

    def vjp(pool):
        return lambda a, b: jax.vjp(pool, a)[1](b)[0]
    fb = vjp(lambda v: lax.reduce_window(v, np.asarray(-np.inf, v.dtype), lax.max, (1, 1, 2, 2), (1, 1, 1, 1), "VALID"))
    # flax pools channels-last (NHWC).
    flax = vjp(lambda v: jnp.moveaxis(linen.max_pool(jnp.moveaxis(v, 1, -1), (2, 2), strides=(1, 1)), -1, 1))
    keras = vjp(keras_layer("jax", x.dtype))
    return {"eager": np.asarray(fb(x, g)).astype(np.float64),
            "jit": np.asarray(jax.jit(fb)(x, g)).astype(np.float64),
            "flax": np.asarray(jax.jit(flax)(x, g)).astype(np.float64),
            "keras": np.transpose(np.asarray(keras(nhwc(x), nhwc(g))), (0, 3, 1, 2)).astype(np.float64)}


if __name__ == "__main__":
    framework, dtype = sys.argv[1:]
    _, x, g = tie_case(dtype)
    grads = {"torch": torch_grads, "tensorflow": tensorflow_grads, "jax": jax_grads}[framework](x, g)
    print(json.dumps({variant: encode_array(a) for variant, a in grads.items()}))
