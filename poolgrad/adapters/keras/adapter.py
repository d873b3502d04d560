"""Keras adapter: calls the layer ``plan`` (poolgrad/adapters/keras/__init__.py) makes of a spec, on
each of Keras's backends (the ``keras`` variant of torch, tensorflow and jax).

Keras fixes its backend when it is imported, from KERAS_BACKEND, so this module runs in one
worker per backend, started with KERAS_BACKEND set (poolgrad/adapters/keras/__init__.py, ``on``).

The layers are called as Keras users call them: MaxPooling{1,2,3}D, AveragePooling{1,2,3}D and
AdaptiveMaxPooling / AdaptiveAveragePooling{1,2,3}D, channels_last (Keras's default), called
eagerly on the backend's tensors, with the case dtype as the layer's dtype (a default float32
layer would silently cast float16/bfloat16 inputs). The derivatives are the backend's own
autodiff of the layer call, taken by the backend adapter's own mode functions (tf.GradientTape,
jax.vjp, torch autograd), so a keras result differs from the backend's other variants only by
what Keras itself does.

Arguments Keras takes and refuses are unsupported with Keras's own message (``_refused``).
"""

from __future__ import annotations

import functools
import importlib
import os

import numpy as np

from ..base import ERROR, NO_DEVICE, OK, UNSUPPORTED, ModeMethods, Outcome, Unsupported
from . import VARIANTS, Layer, plan

_BACKEND_ADAPTERS = {"tensorflow": "poolgrad.adapters.tensorflow.adapter", "jax": "poolgrad.adapters.jax.adapter", "torch": "poolgrad.adapters.torch.adapter"}
BACKEND = os.environ.get("KERAS_BACKEND")
if BACKEND not in _BACKEND_ADAPTERS:
    raise RuntimeError(f"KERAS_BACKEND={BACKEND!r}: the keras adapter runs in a worker started with KERAS_BACKEND "
                       f"set to one of {', '.join(_BACKEND_ADAPTERS)} (poolgrad/adapters/keras/__init__.py, on)")
# The backend's adapter first: it configures the framework as every poolgrad target runs it
# (JAX's 64-bit types, no TF32), and its mode functions differentiate the layer call.
_backend = importlib.import_module(_BACKEND_ADAPTERS[BACKEND])

import keras  # noqa: E402

_MODES = {"run": _backend._reverse, "jvp": _backend._jvp, "double_backward": _backend._double_backward}


def _build(layer: Layer, dtype: str):
    cls = getattr(keras.layers, layer.name)
    if layer.keepdims is not None:
        return cls(data_format=layer.data_format, keepdims=layer.keepdims, dtype=dtype)
    if layer.output_size is not None:
        return cls(layer.output_size, data_format="channels_last", dtype=dtype)
    return cls(layer.pool_size, strides=layer.strides, padding=layer.padding, data_format="channels_last", dtype=dtype)


@functools.lru_cache(maxsize=None)
def _layer(layer: Layer, dtype: str):
    return _build(layer, dtype)


def _pool(layer: Layer, dtype: str, out_shape: tuple):
    """The layer's call; a global layer without keepdims returns (N, C), viewed as the pooled
    shape ``out_shape`` (in the layer's data format) so its gradient has the case's layout."""
    call = _layer(layer, dtype)
    return (lambda t: keras.ops.reshape(call(t), out_shape)) if layer.keepdims is False else call


def _layout(layer: Layer, rank: int) -> tuple[tuple, tuple]:
    """The transpositions channels-first -> the layer's data format, and back."""
    if layer.data_format == "channels_first":
        return tuple(range(rank + 2)), tuple(range(rank + 2))
    return (0, *range(2, rank + 2), 1), (0, rank + 1, *range(1, rank + 1))


def _refused(layer: Layer, x: np.ndarray) -> bool:
    """Whether Keras refused the layer's arguments for this input, as opposed to failing on a
    call it accepts: a new layer called on a symbolic keras.KerasTensor of the channels-last
    shape and dtype (Keras's own shape inference, no data, no kernel) raises too."""
    shape = tuple(np.transpose(x, _layout(layer, x.ndim - 2)[0]).shape)
    try:
        _build(layer, x.dtype.name)(keras.KerasTensor(shape, dtype=x.dtype.name))
    except Exception:  # noqa: BLE001 - Keras refuses with ValueError, its backends with their own
        return True
    return False


def _tensorflow(mode, pool, device, arrays) -> dict:
    import tensorflow as tf
    with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
        out = mode(lambda t: (pool(t), None), *map(tf.constant, arrays))   # TF's modes take (y, indices)
        return {k: t.numpy() for k, t in out.items() if t is not None}


def _jax(mode, pool, device, arrays) -> dict:
    import jax
    dev = jax.devices(device)[0]
    return {k: np.asarray(t) for k, t in mode(pool, *(jax.device_put(a, dev) for a in arrays)).items()}


def _torch(mode, pool, device, arrays) -> dict:
    dev = "cuda" if device == "gpu" else "cpu"
    out = mode(pool, False, *(_backend.to_torch(a, dev) for a in arrays))   # False: no indices
    return {k: _backend.to_numpy(t) for k, t in out.items() if t is not None}


_CALL = {"tensorflow": _tensorflow, "jax": _jax, "torch": _torch}[BACKEND]


class KerasAdapter(ModeMethods):
    """run, jvp (the backend's forward mode of the layer call) and double_backward (the backend's
    gradient of the layer call's gradient) through the backend adapter's own mode functions."""

    framework = BACKEND
    variants = VARIANTS

    def version(self) -> str:
        """The backend's version: a keras target is one of the backend framework's."""
        return _backend.ADAPTER.version()

    def devices(self) -> list[str]:
        return _backend.ADAPTER.devices()

    def environment(self) -> dict:
        return {**_backend.ADAPTER.environment(), "keras": keras.__version__, "keras_backend": keras.backend.backend()}

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        if variant not in VARIANTS:
            raise ValueError(f"unknown keras variant {variant!r}; known: {', '.join(VARIANTS)}")
        if device not in self.devices():
            return Outcome(NO_DEVICE, message=f"no GPU visible to {BACKEND}")
        layer = plan(spec, variant, x.shape)
        if isinstance(layer, Unsupported):
            return Outcome(UNSUPPORTED, message=layer.reason)
        to_layer, to_first = _layout(layer, x.ndim - 2)
        info = {"device": device, "layer": layer.name, "keras": keras.__version__}
        try:
            # Keras places what it converts on its default device (torch: CUDA whenever a GPU is
            # visible), so a cpu target names its device to Keras too.
            with keras.device(f"{device}:0"):
                arrays = _CALL(_MODES[method], _pool(layer, x.dtype.name, np.transpose(grad_output, to_layer).shape),
                               device, [np.ascontiguousarray(np.transpose(a, to_layer)) for a in (x, grad_output, *extra)])
        except Exception as e:  # whatever Keras or its backend raised is the result
            if _refused(layer, x):
                return Outcome(UNSUPPORTED, message=f"{type(e).__name__}: {e}", info=info)
            return Outcome(ERROR, message=f"{type(e).__name__}: {e}", info=info)
        return Outcome(OK, info=info, **{k: np.transpose(a, to_first) for k, a in arrays.items()})


ADAPTER = KerasAdapter()
