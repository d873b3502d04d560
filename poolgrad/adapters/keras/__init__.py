"""Keras 3: how a spec becomes a Keras pooling layer (pure: importing this does not import
Keras, so collection and the reproducer use it too; adapter.py calls the layer in a worker).

The ``keras`` variant of torch, tensorflow and jax: MaxPooling{1,2,3}D, AveragePooling{1,2,3}D
and AdaptiveMaxPooling / AdaptiveAveragePooling{1,2,3}D, channels_last. A spec Keras has no
argument for (ceil_mode, dilation, Lp, explicit padding that is neither "same" nor "valid",
...) is Unsupported with the reason.

The global layers, for the adaptive ops with output size 1 in every spatial dim
(poolgrad/adapters/idioms.py), as two more variants of each backend:
  keras_global      GlobalMaxPooling{1,2,3}D / GlobalAveragePooling{1,2,3}D as users call them:
                    channels_last, keepdims=False (the (N, C) output is viewed as (N, 1.., C))
  keras_global_cf   the same layers with data_format="channels_first" and keepdims=True
"""

from __future__ import annotations

import dataclasses

from poolgrad.reference.geometry import padding_name, resolve

from .. import idioms
from ..base import Plan, Unsupported
from ..framework import Upstream, WorkerSpec

VARIANTS = ("keras", "keras_global", "keras_global_cf")
# The variants that pool without a pooling layer's windows (as the frameworks' planners name theirs)
IDIOMS = ("keras_global", "keras_global_cf")
GLOBAL_NAMES = {"adaptive_max_pool": "GlobalMaxPooling", "adaptive_avg_pool": "GlobalAveragePooling"}
LAYER_NAMES = {"max_pool": "MaxPooling", "avg_pool": "AveragePooling",
               "adaptive_max_pool": "AdaptiveMaxPooling", "adaptive_avg_pool": "AdaptiveAveragePooling"}
API_PATHS = {"keras": ("keras", True)}  # the layers take padding="same"
# Its variants' bugs go here, whatever the backend.
UPSTREAM = Upstream("keras-team/keras", "the Bug Issue template")


@dataclasses.dataclass(frozen=True)
class Layer(Plan):
    """A Keras pooling layer's class and arguments (hashable: layers are cached by it)."""

    name: str                      # e.g. "MaxPooling2D"
    pool_size: tuple | None
    strides: tuple | None
    padding: str | None            # "valid" | "same"
    output_size: tuple | None      # adaptive layers
    data_format: str = "channels_last"
    keepdims: bool | None = None   # global layers


def _global(spec, variant: str, shape) -> Layer | Unsupported:
    axes = idioms.global_axes(spec, shape)
    if isinstance(axes, Unsupported):
        return axes
    channels_first = variant == "keras_global_cf"
    return Layer(f"{GLOBAL_NAMES[spec.op]}{len(axes)}D", None, None, None, None,
                 "channels_first" if channels_first else "channels_last", channels_first)


def plan(spec, variant: str, shape) -> Layer | Unsupported:
    """The Keras layer for a spec and input shape, or why none exists."""
    if variant != "keras":
        return _global(spec, variant, shape)
    geom = resolve(spec, shape)
    name = f"{LAYER_NAMES.get(spec.op, '')}{len(shape) - 2}D"
    if spec.op not in LAYER_NAMES:
        return Unsupported(f"Keras has no {spec.op} layer")
    if spec.is_adaptive:
        return Layer(name, None, None, None, geom.out_shape)
    if spec.ceil_mode:
        return Unsupported("Keras pooling layers have no ceil_mode")
    if any(d > 1 for d in geom.dilation):
        return Unsupported("Keras pooling layers have no dilation")
    if spec.op == "avg_pool" and spec.divisor_override is not None:
        return Unsupported("Keras average pooling has no divisor_override")
    padding = padding_name(geom)
    if spec.op == "avg_pool" and spec.count_include_pad and padding != "VALID":
        return Unsupported("Keras average pooling always excludes padding from the divisor "
                           "(count_include_pad=True needs zero padding)")
    if not isinstance(padding, str):
        # Keras does not check the argument: pairs fail inside the layer (an AttributeError
        # on TensorFlow), which is no refusal of Keras's.
        return Unsupported(f"padding {list(geom.pads)} is neither 'same' nor 'valid' for this input, "
                           f"and Keras pooling layers take only 'valid'/'same'")
    return Layer(name, geom.kernel_size, geom.stride, padding.lower(), None)


def on(backend: str) -> dict:
    """The Keras variants of a framework's record (``keras``, ``keras_global``, ...): Keras 3's
    pooling layers with the framework as Keras's backend. Keras fixes its backend when it is
    imported (KERAS_BACKEND), so Keras on each backend runs in a worker of its own."""
    worker = WorkerSpec(f"{backend}-keras", "poolgrad.adapters.keras.adapter", {"KERAS_BACKEND": backend}, "keras",
                        __name__, UPSTREAM)
    return dict.fromkeys(VARIANTS, worker)
