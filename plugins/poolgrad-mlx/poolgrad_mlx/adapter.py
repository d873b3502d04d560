"""MLX adapter: runs the call ``plan`` (poolgrad_mlx/__init__.py) makes of a spec, as an MLX user
calls it, in a worker process.

The layer takes channels-last arrays: the input and the upstream gradient are transposed to
N...C in NumPy before the call and the results back after it, so the function MLX
differentiates is the layer alone. Gradients come from ``mx.vjp`` (forward mode ``mx.jvp``,
double backward the vjp of the vjp). MLX converts float64 NumPy arrays to float32 unless told
the dtype, and has no NumPy buffer for bfloat16: both are converted explicitly and exactly.

A layer that refuses its arguments when it is built (ValueError from mlx/nn/layers/pooling.py)
is UNSUPPORTED with MLX's message; anything MLX raises calling it is ERROR.
"""

from __future__ import annotations

import functools
import os
import tempfile

import ml_dtypes

# MLX's CPU compiler (mx.compile) writes each kernel's library to <temp dir>/mlx/<version>/cpu and
# loads it from there; a process that finds a library another process is still writing loads it
# half-written ("Could not load C++ shared library ...: file too short", mlx/backend/cpu/compiled.cpp:
# no atomic rename), as two workers of `-n 2` did. Each pytest-xdist worker's MLX gets a directory
# of its own (kept: a rerun finds its libraries compiled).
os.environ["TMPDIR"] = os.path.join(tempfile.gettempdir(), f"poolgrad-mlx-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}")
os.makedirs(os.environ["TMPDIR"], exist_ok=True)

import mlx.core as mx  # noqa: E402
import mlx.nn as nn  # noqa: E402
import numpy as np  # noqa: E402

from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED, Keywords, ModeMethods, Outcome, Unsupported  # noqa: E402

from . import LAYERS, VARIANTS, plan  # noqa: E402

_DTYPES = {"float16": mx.float16, "bfloat16": mx.bfloat16, "float32": mx.float32, "float64": mx.float64}
_DEVICES = {"cpu": mx.cpu, "gpu": mx.gpu}


def to_mlx(a: np.ndarray) -> mx.array:
    if a.dtype == ml_dtypes.bfloat16:  # no NumPy buffer format for bfloat16; float32 holds it exactly
        return mx.array(a.astype(np.float32)).astype(mx.bfloat16)
    return mx.array(a, dtype=_DTYPES[a.dtype.name])


def to_numpy(a: mx.array) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        return np.asarray(a.astype(mx.float32)).astype(ml_dtypes.bfloat16)
    return np.asarray(a)


def _layer(op: str, rank: int, kw: Keywords):
    return getattr(nn, f"{LAYERS[op]}{rank}d")(**kw)


def _reverse(layer, x, g) -> dict:
    (y,), (dx,) = mx.vjp(layer, [x], [g])
    return {"forward": y, "grad_input": dx}


def _jvp(layer, x, g, tangent) -> dict:
    (y,), (y_t,) = mx.jvp(layer, [x], [tangent])
    return {"forward": y, "tangent_output": y_t, "grad_input": mx.vjp(layer, [x], [g])[1][0]}


def _double_backward(layer, x, g, v) -> dict:
    """mx.vjp of the function (x, g) -> vjp(layer, x)(g)."""
    def grad_input(a, b):
        return mx.vjp(layer, [a], [b])[1][0]
    (dx,), (by_x, by_g) = mx.vjp(grad_input, [x, g], [v])
    return {"grad_input": dx, "grad_grad_output": by_g, "grad_grad_input": by_x}


_MODES = {"run": _reverse, "jvp": _jvp, "double_backward": _double_backward}


class MlxAdapter(ModeMethods):
    framework = "mlx"
    variants = VARIANTS

    def __init__(self):
        self._compiled: dict[tuple, object] = {}

    def version(self) -> str:
        return mx.__version__

    def devices(self) -> list[str]:
        return [d for d, dev in _DEVICES.items() if mx.is_available(dev)]

    def environment(self) -> dict:
        return {"mlx": mx.__version__, "devices": self.devices(), "default_device": str(mx.default_device())}

    def _callable(self, method, spec, variant, kw, x):
        """arrays -> the mode's arrays; compile keeps one mx.compile per call it traced."""
        layer = _layer(spec.op, x.ndim - 2, kw)
        if variant == "eager":
            return functools.partial(_MODES[method], layer)
        key = (method, spec, x.shape, x.dtype.str)
        if key not in self._compiled:
            self._compiled[key] = mx.compile(functools.partial(_MODES[method], layer))
        return self._compiled[key]

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        kw = plan(spec, variant, x.shape)  # raises for an unknown variant
        if device not in self.devices():
            return Outcome(NO_DEVICE, message=f"no {device} device available to MLX")
        if isinstance(kw, Unsupported):
            return Outcome(UNSUPPORTED, message=kw.reason)
        try:
            computation = self._callable(method, spec, variant, kw, x)
        except ValueError as refusal:  # the layer checks its arguments when it is built
            return Outcome(UNSUPPORTED, message=f"{type(refusal).__name__}: {refusal}")
        rank = x.ndim - 2
        to_last, to_first = (0, *range(2, rank + 2), 1), (0, rank + 1, *range(1, rank + 1))
        try:
            with mx.stream(_DEVICES[device]):
                arrays = computation(*(to_mlx(np.ascontiguousarray(a.transpose(to_last))) for a in (x, grad_output, *extra)))
                mx.eval(arrays)
        except Exception as e:  # whatever MLX raised is the result
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}")
        info = {"device": device}
        if variant == "compile":
            info["compiles"] = len(self._compiled)
        return Outcome(OK, info=info, **{k: np.ascontiguousarray(to_numpy(a).transpose(to_first)) for k, a in arrays.items()})


ADAPTER = MlxAdapter()
