"""Run the AD modes of max_pool2d (k2, s1) directly through one framework, the way a user would,
and print {"variant mode": derivative} as JSON (encoded like results records): the forward-mode
derivative along the case's direction, and the double backward by grad_output along it.

Run as a script in its own process (one framework per process, as the suite does):
    python reports_direct_modes.py FRAMEWORK
Input and upstream gradient are those of reports.synthetic.tie_case (float32); the direction is
the suite's (verdicts.ad_modes.direction).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from poolgrad.reference import PoolSpec  # noqa: E402
from poolgrad.reports.records import encode_array  # noqa: E402
from poolgrad.reports.synthetic import tie_case  # noqa: E402
from poolgrad.verdicts.ad_modes import direction  # noqa: E402


def torch_modes(x, g, t):
    import torch
    import torch.nn.functional as F
    xt, gt, tt = (torch.from_numpy(a) for a in (x, g, t))
    pool = lambda a: F.max_pool2d(a, 2, 1)  # noqa: E731
    xr, gr = xt.clone().requires_grad_(), gt.clone().requires_grad_()
    (dx,) = torch.autograd.grad(pool(xr), xr, gr, create_graph=True)
    (by_g,) = torch.autograd.grad(dx, gr, tt)
    return {"eager jvp": torch.func.jvp(pool, (xt,), (tt,))[1].numpy(), "eager double_backward": by_g.numpy()}


def tensorflow_modes(x, g, t):
    import tensorflow as tf
    xt, gt, tt = (tf.constant(np.transpose(a, (0, 2, 3, 1))) for a in (x, g, t))
    pool = lambda a: tf.nn.max_pool2d(a, 2, 1, "VALID")  # noqa: E731
    with tf.autodiff.ForwardAccumulator(xt, tt) as acc:
        y = pool(xt)
    with tf.GradientTape() as outer:
        outer.watch(gt)
        with tf.GradientTape() as inner:
            inner.watch(xt)
            y2 = pool(xt)
        dx = inner.gradient(y2, xt, output_gradients=gt)
    by_g = outer.gradient(dx, gt, output_gradients=tt)
    return {"eager jvp": np.transpose(acc.jvp(y).numpy(), (0, 3, 1, 2)),
            "eager double_backward": np.transpose(by_g.numpy(), (0, 3, 1, 2))}


def jax_modes(x, g, t):
    import jax
    from jax import lax
    pool = lambda v: lax.reduce_window(v, np.asarray(-np.inf, v.dtype), lax.max, (1, 1, 2, 2), (1, 1, 1, 1), "VALID")  # noqa: E731
    by_g = jax.vjp(lambda b: jax.vjp(pool, x)[1](b)[0], g)[1](t)[0]
    return {"jit jvp": np.asarray(jax.jit(lambda a, b: jax.jvp(pool, (a,), (b,))[1])(x, t)),
            "eager double_backward": np.asarray(by_g)}


if __name__ == "__main__":
    spec, x, g = tie_case("float32")
    t = direction(PoolSpec.from_dict(spec), x)
    found = {"torch": torch_modes, "tensorflow": tensorflow_modes, "jax": jax_modes}[sys.argv[1]](x, g, t)
    print(json.dumps({key: encode_array(a.astype(np.float64)) for key, a in found.items()}))
