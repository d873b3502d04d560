"""TensorFlow: how a spec becomes a tf.nn pooling call (pure: importing this does not import
TensorFlow, so collection and the reproducer use it too; adapter.py runs the call in a worker).

Variants: eager, function (tf.function), xla (tf.function(jit_compile=True)), with_argmax
(tf.nn.max_pool_with_argmax).

Pooling as users write it without a tf.nn pooling op (poolgrad/adapters/idioms.py says which
specs each can express), channels-last like every TF call here:
  reduce, reduce_function, reduce_xla   tf.reduce_max / tf.reduce_mean over the spatial axes
                  (keepdims=True): global pooling (the adaptive ops with output size 1), eager,
                  in tf.function and with XLA
  reshape         tf.reshape(x, (N, H/k, k, ..., C)) then reduce_max / reduce_mean over the
                  block axes: windows that tile the input
  patches         tf.image.extract_patches (2-D; padding VALID or SAME, strides, rates) then
                  reduce_max / reduce_mean over each window's taps

fractional_max_pool (2-D, eager only): tf.raw_ops.FractionalMaxPool, differentiated by the tape
(its registered gradient is FractionalMaxPoolGrad fed the op's own row and column pooling
sequences). The op draws its sequences itself; the only control is its seed, so the adapter
tries seeds (deterministic=True) until the op draws the case's sequences, checks that it did,
and reports that call's output and gradient: the framework's own forward and backward over
exactly the case's regions, never a forward computed some other way. Regions TensorFlow cannot
draw (steps other than floor(L / out) and one more, a first region not at 0, a last not ending
at L) are Unsupported; so are float16 and bfloat16, which the op has no kernel for.

Segment pooling (segment_max_pool, segment_avg_pool) runs in variants of its own over the
(items, features) data (adapters/segments.py), eager, in tf.function and with XLA:
  segment, segment_function, segment_xla         tf.math.segment_max / segment_mean (sorted
                  ids; the output ends at the largest id, so trailing empty segments are Unsupported)
  unsorted_segment, unsorted_segment_function, unsorted_segment_xla
                  tf.math.unsorted_segment_max / _mean (any ids, num_segments)

Padding is passed as the string "SAME"/"VALID" when the spec resolves (reference.geometry) to
exactly those pads for this input, else as explicit pairs; inputs are never pre-padded to
emulate a spec. A concept TF has no argument for (ceil_mode, count_include_pad, Lp, ...) is
Unsupported with the reason.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

from poolgrad.reference.geometry import padding_name, resolve

from .. import idioms, keras, onednn, segments
from . import crop_and_resize
from ..base import Plan, Unsupported
from ..framework import Framework, Unstacked, Upstream, WorkerEnvironment, WorkerSpec

VARIANTS = ("eager", "function", "xla", "with_argmax", "reduce", "reduce_function", "reduce_xla", "reshape", "patches",
            "segment", "segment_function", "segment_xla", "unsorted_segment", "unsorted_segment_function",
            "unsorted_segment_xla")
SEGMENT_VARIANTS = ("segment", "segment_function", "segment_xla", "unsorted_segment", "unsorted_segment_function",
                    "unsorted_segment_xla")
# The variants traced by tf.function, and whether with XLA (jit_compile).
GRAPHS = {"function": False, "xla": True, "reduce_function": False, "reduce_xla": True,
          "segment_function": False, "segment_xla": True, "unsorted_segment_function": False,
          "unsorted_segment_xla": True}
IDIOMS = ("reduce", "reduce_function", "reduce_xla", "reshape", "patches")
API_PATHS = {"tf.nn": ("eager", True), "tf.nn.max_pool_with_argmax": ("with_argmax", True)}

# What the suite records and schedules by (poolgrad/adapters/registry.py, Framework).
AD_MODES = {"jvp": ("eager", "function", "reduce", "reduce_function"),
            "double_backward": ("eager", "function", "reduce", "reduce_function")}
COSTS = {"xla": 0.2, "keras": 0.11, "function": 0.06,   # function: one trace per group
         "reduce": 0.11, "reduce_function": 0.24, "reduce_xla": 0.11, "reshape": 0.04, "patches": 0.06,
         "keras_global": 0.11, "keras_global_cf": 0.11}
ENV_SWITCHES = ("TF_ENABLE_MAXPOOL_NANPROP", *onednn.ISA_CAP_SWITCHES, "TF_DETERMINISTIC_OPS",
                "TF_CUDNN_DETERMINISTIC", "XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS")
# Its CPU kernels may go through oneDNN (off with TF_ENABLE_ONEDNN_OPTS=0); the adapter reports
# whether they do as "onednn".
DISPATCH = onednn.OneDNN("onednn", off_switch=("TF_ENABLE_ONEDNN_OPTS", "0"))


def _compile_cache(root) -> dict:
    """XLA's persistent cache, which TF keeps only when asked: a flag added to the user's TF_XLA_FLAGS."""
    flags = [os.environ.get("TF_XLA_FLAGS", ""), f"--tf_xla_persistent_cache_directory={root / 'tf-xla'}"]
    return {"TF_XLA_FLAGS": " ".join(f for f in flags if f)}


# In a worker sharing its GPU (pool.py), TF would otherwise take all of the GPU's memory.
WORKER_ENVIRONMENT = WorkerEnvironment(one_thread={"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"},
                                       shared_gpu={"TF_FORCE_GPU_ALLOW_GROWTH": "true"}, compile_cache=_compile_cache)
UPSTREAM = Upstream("tensorflow/tensorflow", "the TensorFlow Issue Template, type Bug")


@dataclasses.dataclass(frozen=True)
class Call(Plan):
    """Everything static about one TF pooling call (hashable: part of the trace-cache key)."""

    api: str                 # "nn", "pool" (tf.nn.pool, for dilation), "argmax"
    op: str                  # spec.op
    rank: int
    kernel: tuple | None
    stride: tuple | None
    dilation: tuple | None
    padding: Any             # "SAME" | "VALID" | explicit pairs ((b, a), ...) per spatial axis
    # The idioms (api "reduce", "reshape", "patches"): the axes reduced, of x or of ``shape``,
    # the shape x (reshape) or the patches are viewed as first.
    axes: tuple | None = None
    shape: tuple | None = None
    # fractional_max_pool (api "fractional"): the row and column pooling sequences, overlapping.
    sequences: tuple | None = None
    overlapping: bool = False


def _idiom(spec, variant: str, shape) -> Call | Unsupported:
    """The Call of an idiom variant (``shape`` is channels-first (N, C, *spatial); the Call's
    shapes and axes are channels-last, as the call runs)."""
    rank = len(shape) - 2
    n, c = shape[0], shape[1]
    if variant == "reshape":
        view = idioms.block_view(spec, shape, channels_last=True)
        if isinstance(view, Unsupported):
            return view
        return Call("reshape", spec.op, rank, None, None, None, None, view[1], view[0])
    if variant == "patches":
        if rank != 2:
            return Unsupported("tf.image.extract_patches takes 2-D images only")
        window = idioms.patches(spec, shape)
        if isinstance(window, Unsupported):
            return window
        padding = padding_name(resolve(spec, shape))
        if not isinstance(padding, str):
            return Unsupported(f"padding {list(window.pads)} is neither 'SAME' nor 'VALID' for this input, and "
                               f"tf.image.extract_patches takes only those")
        return Call("patches", spec.op, rank, window.kernel, window.stride, window.dilation, padding, (3,),
                    (n, *window.out_shape, math.prod(window.kernel), c))
    axes = idioms.global_axes(spec, shape)
    if isinstance(axes, Unsupported):
        return axes
    return Call("reduce", spec.op, rank, None, None, None, None, tuple(range(1, rank + 1)))


def pooling_sequence(regions, length: int) -> tuple[tuple[int, ...], bool] | str:
    """TensorFlow's pooling sequence for one dim's regions and whether they overlap, or why
    TensorFlow cannot draw them: regions [seq[i], seq[i+1]), or overlapping [seq[i], seq[i+1]]
    (clipped to the input), with seq[0] = 0, seq[-1] = L and steps of floor(L / out) or one more
    (GeneratePoolingSequence, tensorflow/core/kernels/fractional_pool_common.cc)."""
    seq = (*(start for start, _ in regions), length)
    out, k = len(regions), length // len(regions)
    if seq[0] != 0 or any(b <= a for a, b in zip(seq, seq[1:])):
        return f"region starts {seq[:-1]} are not increasing from 0"
    steps = sorted({b - a for a, b in zip(seq, seq[1:])})
    if not set(steps) <= {k, k + 1}:
        return f"steps {steps} between region starts: TensorFlow draws steps of {k} and {k + 1} for {out} of {length}"
    stops = tuple(stop for _, stop in regions)
    for overlapping in (False, True):
        if stops == tuple(min(b + overlapping, length) for b in seq[1:]):
            return seq, overlapping
    return (f"stops {stops}: TensorFlow's regions end at the next start ({seq[1:]}) or, overlapping, "
            f"one past it (clipped to {length})")


def _fractional(spec, variant: str, shape) -> Call | Unsupported:
    if variant != "eager":
        return Unsupported("poolgrad calls tf.raw_ops.FractionalMaxPool eagerly only (the eager variant)")
    if len(shape) != 4:
        return Unsupported("tf.nn.fractional_max_pool is 2-D only")
    found = [pooling_sequence(regions, length) for regions, length in zip(spec.regions, shape[2:])]
    why = [f"dim {d}: {f}" for d, f in enumerate(found) if isinstance(f, str)]
    if why:
        return Unsupported(f"regions TensorFlow's fractional max pooling cannot draw: {'; '.join(why)}")
    # One `overlapping` flag for both dims; a dim with one region reads the same either way.
    modes = {overlapping for (_, overlapping), regions in zip(found, spec.regions) if len(regions) > 1}
    if len(modes) > 1:
        return Unsupported("rows overlap and columns do not (or the reverse): TensorFlow's overlapping is one "
                           "flag for both")
    return Call("fractional", spec.op, 2, None, None, None, None,
                sequences=tuple(seq for seq, _ in found), overlapping=True in modes)


def _segments(spec, variant: str) -> segments.Segments | Unsupported:
    if variant.startswith("unsorted"):
        return segments.call(spec, "unsorted_segment_{reduce}")
    if not segments.call(spec, "").sorted:
        return Unsupported("tf.math.segment_max / segment_mean take sorted segment ids (unsorted ids are "
                           "unsorted_segment_max's)")
    if segments.trailing_empty(spec):
        return Unsupported(f"{segments.trailing_empty(spec)} empty segments after the largest id: tf.math.segment_max / "
                           "segment_mean output max(id) + 1 segments (no num_segments)")
    return segments.call(spec, "segment_{reduce}")


def plan(spec, variant: str, shape) -> Call | segments.Segments | Unsupported:
    """Map a spec onto the variant's TF API, or why none exists."""
    refused = segments.refuse(spec, variant, SEGMENT_VARIANTS)
    if refused is not None:
        return refused
    if spec.is_segment:
        return _segments(spec, variant)
    if spec.op == "fractional_max_pool":
        return _fractional(spec, variant, shape)
    if variant in IDIOMS:
        return _idiom(spec, variant, shape)
    geom = resolve(spec, shape)
    rank = len(shape) - 2
    if spec.op == "lp_pool":
        return Unsupported("TensorFlow has no Lp pooling op")
    if spec.is_adaptive:
        return Unsupported("tf.nn has no adaptive pooling; only the Keras Adaptive*Pooling layers do (the keras variant)")
    if spec.ceil_mode:
        return Unsupported("TensorFlow pooling has no ceil_mode")
    if spec.op == "avg_pool" and spec.divisor_override is not None:
        return Unsupported("TensorFlow avg pooling has no divisor_override")
    padding = padding_name(geom)
    if spec.op == "avg_pool" and spec.count_include_pad and padding != "VALID":
        return Unsupported("TensorFlow avg pooling always excludes padding from the divisor "
                           "(count_include_pad=True needs zero padding)")
    dilated = any(d > 1 for d in geom.dilation)
    if variant == "with_argmax":
        if spec.op != "max_pool" or rank != 2:
            return Unsupported("tf.nn.max_pool_with_argmax is 2-D max pooling only")
        if dilated:
            return Unsupported("tf.nn.max_pool_with_argmax has no dilation")
        api = "argmax"
    else:
        # tf.nn.pool is the one tf.nn path with dilation. Padding pairs go to every tf.nn call
        # as they are: tf.nn refuses what it cannot take itself (see _refusal).
        api = "pool" if dilated else "nn"
    return Call(api, spec.op, rank, geom.kernel_size, geom.stride, geom.dilation, padding)


# Which of tied -0.0 and +0.0 the sorted segment max returns depends on how many features the call
# reduces at once (its Eigen reduction's vectorization: tf-segment-max-signed-zero-by-width), so a
# stack of cases would answer otherwise than each alone.
UNSTACKED = (Unstacked(("segment", "segment_function"), ("segment_max_pool*",), ("signed_zero_tie",)),)


# The record pyproject.toml registers (poolgrad/adapters/framework.py); Keras on TensorFlow runs in a
# worker of its own.
# RoI pooling as detectors write it (crop_and_resize, then avg_pool2d or max_pool2d): planned by its own
# package, run by TensorFlow's worker (adapter.py hands it the variant).
CROP_AND_RESIZE = WorkerSpec("tensorflow", "poolgrad.adapters.tensorflow.adapter", {}, "tensorflow",
                             "poolgrad.adapters.tensorflow.crop_and_resize", UPSTREAM)
FRAMEWORK = Framework("tensorflow", "poolgrad.adapters.tensorflow.adapter", "tensorflow", ("tensorflow", "tensorflow-cpu"),
                      (*VARIANTS, *keras.VARIANTS, *crop_and_resize.ROI_VARIANTS), {"with_argmax": "image_channels_last"},
                      {**keras.on("tensorflow"), **dict.fromkeys(crop_and_resize.ROI_VARIANTS, CROP_AND_RESIZE)},
                      __name__, ad_modes=AD_MODES, costs=COSTS, env_switches=ENV_SWITCHES,
                      dispatch=DISPATCH, api_paths={**API_PATHS, **keras.API_PATHS},
                      worker_environment=WORKER_ENVIRONMENT, upstream=UPSTREAM, unstacked=UNSTACKED)
