"""TensorFlow adapter: runs the call ``plan`` (poolgrad/adapters/tensorflow/__init__.py) makes of a spec
in a worker process: tf.nn pooling (eager, tf.function, XLA) and max_pool_with_argmax (the
Keras layers on TensorFlow are the keras adapter's, poolgrad/adapters/keras).

Inputs arrive channels-first; TF pools channels-last (its CPU kernels implement only NHWC), so
x and grad_output are transposed to N*C, pooled, and results transposed back. dX is
``tape.gradient(y, x, output_gradients=grad_output)``, i.e. d/dx sum(y * grad_output).

Arguments TF has and refuses (pairs where tf.nn takes only a string, tf.nn.pool's dilation
with strides, XLA's explicit padding) are unsupported with TF's own message (_refused).
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import functools  # noqa: E402
import re  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from ..base import ERROR, NO_DEVICE, OK, UNSUPPORTED, ModeMethods, Outcome, Unsupported, unsupported_rule  # noqa: E402
from .. import idioms, segments  # noqa: E402
from . import ENV_SWITCHES, GRAPHS, VARIANTS, Call, plan  # noqa: E402
from .crop_and_resize import ROI_VARIANTS, adapter as crop_and_resize  # noqa: E402

# One tf.function per (call, dtype, shape) is intended here; TF's "excessive retracing" warning
# about it is noise in the worker's stderr.
tf.get_logger().setLevel("ERROR")
# The GPU path must not trade precision for speed (TF32 would round matmul-like kernels).
tf.config.experimental.enable_tensor_float_32_execution(False)



def _pool_fn(call: Call | segments.Segments):
    """A function NWC/NHWC/NDHWC x -> (y, argmax or None) for this call (segments: (items,
    features) data -> (num_segments, features))."""
    if isinstance(call, segments.Segments):
        fn = getattr(tf.math, call.api)
        if call.api.startswith("unsorted"):
            return lambda x: (fn(x, call.segment_ids, call.num_segments), None)
        return lambda x: (fn(x, call.segment_ids), None)
    def tf_pad(pads):
        return pads if isinstance(pads, str) else [[0, 0], *map(list, pads), [0, 0]]
    if call.api in _IDIOMS:
        reduce = tf.reduce_max if call.op in idioms.MAX_OPS else tf.reduce_mean
        view = _IDIOMS[call.api]
        return lambda x: (reduce(view(call, x), axis=call.axes, keepdims=call.api == "reduce"), None)
    if call.api == "fractional":
        return functools.partial(_fractional, call)
    if call.api == "argmax":
        # argmax is TF's flat index within one NHWC image, (y*W + x)*C + c (the default
        # include_batch_in_index=False), so a case's indices do not depend on its place in the
        # stacked batch. With True, TF would add b*H*W*C.
        return lambda x: tf.nn.max_pool_with_argmax(x, call.kernel, call.stride, tf_pad(call.padding),
                                                    include_batch_in_index=False)
    if call.api == "pool":
        kind = "MAX" if call.op == "max_pool" else "AVG"
        return lambda x: (tf.nn.pool(x, call.kernel, kind, strides=call.stride, padding=tf_pad(call.padding),
                                     dilations=call.dilation), None)
    fn = getattr(tf.nn, f"{call.op}{call.rank}d")
    return lambda x: (fn(x, call.kernel, call.stride, tf_pad(call.padding)), None)


class NoSeed(ValueError):
    """No seed tried makes FractionalMaxPool draw the case's sequences: TensorFlow offers no
    other way to give it regions, so the call cannot be made (a refusal, see _REFUSALS)."""


SEED_TRIES = 4096   # a 7 x 7 input pooled to 5 x 5 has 100 sequence pairs; 4096 seeds draw each


def pooling_ratio(sequences: tuple, height: int, width: int) -> list[float]:
    """FractionalMaxPool's pooling_ratio for an output of len(sequence) - 1 per dim: a ratio
    whose floor(length / ratio) (computed in float32 by the op) is that output length, between
    length / (out + 1) and length / out, and at least 1 as the op requires."""
    def ratio(length, out):
        return 1.0 if out == length else length / (out + 0.5)
    return [1.0, ratio(height, len(sequences[0]) - 1), ratio(width, len(sequences[1]) - 1), 1.0]


@functools.lru_cache(maxsize=256)
def fractional_seed(sequences: tuple, height: int, width: int) -> int:
    """The first seed (deterministic=True, seed2 0) for which FractionalMaxPool draws
    ``sequences`` for a height x width input: its sequences depend on the seed and the sizes
    only (GeneratePoolingSequence), not on the values or the overlapping flag."""
    ratio = pooling_ratio(sequences, height, width)
    probe = tf.zeros((1, height, width, 1))
    for seed in range(1, SEED_TRIES + 1):
        _, rows, cols = tf.raw_ops.FractionalMaxPool(value=probe, pooling_ratio=ratio, pseudo_random=False,
                                                     overlapping=False, deterministic=True, seed=seed, seed2=0)
        if (tuple(rows.numpy().tolist()), tuple(cols.numpy().tolist())) == sequences:
            return seed
    raise NoSeed(f"none of the seeds 1-{SEED_TRIES} makes tf.raw_ops.FractionalMaxPool draw the pooling sequences "
                 f"{sequences} for a {height} x {width} input")


def _fractional(call: Call, x):
    """FractionalMaxPool (NHWC) with the seed that draws the call's sequences, checked: the
    op's own forward over the case's regions; the tape's gradient of it is FractionalMaxPoolGrad
    fed those sequences."""
    height, width = int(x.shape[1]), int(x.shape[2])
    y, rows, cols = tf.raw_ops.FractionalMaxPool(
        value=x, pooling_ratio=pooling_ratio(call.sequences, height, width), pseudo_random=False, overlapping=call.overlapping, deterministic=True,
        seed=fractional_seed(call.sequences, height, width), seed2=0)
    drawn = (tuple(rows.numpy().tolist()), tuple(cols.numpy().tolist()))
    if drawn != call.sequences:
        raise AssertionError(f"FractionalMaxPool drew {drawn}, not the case's {call.sequences}")
    return y, None


def _patches(call: Call, x):
    """Each window's taps on an axis of their own: extract_patches flattens a patch (rows,
    columns, channels) into the last axis."""
    patches = tf.image.extract_patches(x, [1, *call.kernel, 1], [1, *call.stride, 1], [1, *call.dilation, 1],
                                       call.padding)
    return tf.reshape(patches, call.shape)


# What an idiom reduces: x itself (reduce), x cut into blocks (reshape), or its patches.
_IDIOMS = {"reduce": lambda call, x: x, "reshape": lambda call, x: tf.reshape(x, call.shape), "patches": _patches}


def _forward_backward(pool, x, g):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y, idx = pool(x)
    return y, tape.gradient(y, x, output_gradients=g), idx


def _reverse(pool, x, g) -> dict:
    y, dx, idx = _forward_backward(pool, x, g)
    return {"forward": y, "grad_input": dx, "indices": idx}


def _jvp(pool, x, g, tangent) -> dict:
    """tf.autodiff.ForwardAccumulator for the tangent, GradientTape for the gradient."""
    with tf.autodiff.ForwardAccumulator(x, tangent) as acc:
        y, _ = pool(x)
    # unconnected_gradients: TF's own zeros where nothing reaches the output
    y_t = acc.jvp(y, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {"forward": y, "tangent_output": y_t, "grad_input": _forward_backward(pool, x, g)[1]}


def _double_backward(pool, x, g, v) -> dict:
    """A GradientTape around the GradientTape that computes dX."""
    with tf.GradientTape() as outer:
        outer.watch([x, g])
        dx = _forward_backward(pool, x, g)[1]
    by_g, by_x = outer.gradient(dx, [g, x], output_gradients=v,
                                unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return {"grad_input": dx, "grad_grad_output": by_g, "grad_grad_input": by_x}


_MODES = {"run": _reverse, "jvp": _jvp, "double_backward": _double_backward}


# How TensorFlow refuses a call's arguments: its Python API checks them (ValueError, TypeError:
# tf.nn.pool's "`strides > 1` not supported in conjunction with `dilation_rate > 1`", "Expected
# string for argument 'padding'"), an op's definition and its kernel's parameter checks refuse
# them (InvalidArgumentError: "Top padding 3 needs to be smaller than the window size 2",
# "tensor_in must not be empty"), and the XLA bridge refuses what it does not implement
# (UnimplementedError: "XLA does not support pooling ops with explicit padding"). A missing kernel
# (NotFoundError; under XLA an op the bridge has no kernel for, which it reports as
# InvalidArgumentError) and an input dtype outside the op's type list are errors of a call the user
# writes as the spec says, as in every framework's dtype without a kernel (_NO_KERNEL).
_REFUSALS = (ValueError, TypeError, tf.errors.InvalidArgumentError, tf.errors.UnimplementedError)
_NO_KERNEL = re.compile(r"attr 'T' of \w+ is not in the list of allowed values"
                        r"|has DataType \w+ not in list of allowed values|No registered '\w+' OpKernel for XLA_\w+_JIT devices")


def _refused(call: Call, variant: str, x: np.ndarray, to_last, device: str) -> bool:
    """Whether TensorFlow refused the call's arguments, as opposed to failing on a call it
    accepts: the forward alone, on zeros of the input's shape and dtype (no data of the case's,
    no gradient), raises one of _REFUSALS. It runs eagerly (a graph reports a missing kernel
    as InvalidArgumentError too), or compiled for the xla variant, whose bridge has refusals
    of its own."""
    pool = _pool_fn(call)
    forward = tf.function(pool, jit_compile=True) if GRAPHS.get(variant) else pool
    try:
        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            forward(tf.constant(np.zeros_like(np.transpose(x, to_last))))
    except _REFUSALS as e:
        return not _NO_KERNEL.search(str(e))
    except Exception:  # noqa: BLE001 - anything else the forward raises is no refusal
        return False
    return False


def _onednn_enabled() -> bool | None:
    """Effective oneDNN state (TF_ENABLE_ONEDNN_OPTS and platform default), via TF's own probe."""
    try:
        from tensorflow.python.util import _pywrap_util_port
        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):   # private module: absent or renamed in other TF builds
        return None


class TensorFlowAdapter(ModeMethods):
    framework = "tensorflow"
    variants = VARIANTS

    def __init__(self):
        self._traced: dict = {}   # (variant, call, dtype, shape) -> tf.function
        self.compiles = 0         # traces of tf.function / XLA functions so far

    def version(self) -> str:
        return tf.__version__

    def devices(self) -> list[str]:
        return ["cpu", "gpu"] if tf.config.list_physical_devices("GPU") else ["cpu"]

    def environment(self) -> dict[str, Any]:
        build = dict(tf.sysconfig.get_build_info())
        gpus = tf.config.list_physical_devices("GPU")
        env = {
            "tensorflow": tf.__version__,
            "cuda_build": build.get("cuda_version"),
            "cudnn_build": build.get("cudnn_version"),
            "is_cuda_build": build.get("is_cuda_build"),
            "gpu": [tf.config.experimental.get_device_details(d).get("device_name", d.name) for d in gpus],
            # oneDNN (default on for x86 Linux) swaps in other max-pool kernels with other
            # tie/NaN routing, notably in graphs (function variant) and for 3-D pooling.
            "onednn": _onednn_enabled(),
        }
        env.update({k: os.environ[k] for k in ENV_SWITCHES if k in os.environ})
        return env

    def _compiled(self, variant, call, dtype, shape, mode):
        key = (variant, call, dtype, shape, mode)
        if key not in self._traced:
            pool = _pool_fn(call)

            def traced(*arrays):
                result = mode(pool, *arrays)
                self.compiles += 1   # Python side effect: once per completed trace, never per call
                return result
            self._traced[key] = tf.function(traced, jit_compile=GRAPHS[variant])
        return self._traced[key]

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        mode = _MODES[method]
        if variant not in VARIANTS and variant not in ROI_VARIANTS:
            raise ValueError(f"unknown tensorflow variant {variant!r}; known: {', '.join(VARIANTS)}")
        if device not in self.devices():
            return Outcome(NO_DEVICE, message="no GPU visible to TensorFlow")
        if variant in ROI_VARIANTS:  # RoI pooling, planned by its own package (reverse mode only)
            return crop_and_resize.run(spec, variant, device, x, grad_output)
        call = plan(spec, variant, x.shape)
        if isinstance(call, Unsupported):
            return Outcome(UNSUPPORTED, message=call.reason)
        if isinstance(call, segments.Segments):  # (items, features) data in and out (adapters/segments.py)
            return segments.as_planes(self._run(mode, call, variant, device, *map(
                segments.items, (x, grad_output, *extra))), *x.shape[:2])
        return self._run(mode, call, variant, device, x, grad_output, *extra)

    def _run(self, mode, call, variant, device, x, grad_output, *extra) -> Outcome:
        """The planned call on x (N, C, *spatial), or on (items, features) data for segments
        (rank 0: no transposes)."""
        rank = x.ndim - 2
        to_last = (0, *range(2, rank + 2), 1)
        to_first = (0, rank + 1, *range(1, rank + 1))
        info = {"device": device, "api": call.api}
        try:
            with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
                tensors = [tf.constant(np.transpose(a, to_last)) for a in (x, grad_output, *extra)]
                if variant in GRAPHS:
                    fn = self._compiled(variant, call, x.dtype, x.shape, mode)
                else:
                    fn = functools.partial(mode, _pool_fn(call))
                arrays = {k: np.transpose(t.numpy(), to_first) for k, t in fn(*tensors).items() if t is not None}
        except Exception as e:  # any TF failure is the framework's answer, reported as such
            info["compiles"] = self.compiles
            if _refused(call, variant, x, to_last, device):
                return Outcome(UNSUPPORTED, message=f"{type(e).__name__}: {e}", info=info)
            status = UNSUPPORTED if mode is not _reverse and unsupported_rule(e) else ERROR
            return Outcome(status, message=f"{type(e).__name__}: {e}", info=info)
        info["compiles"] = self.compiles
        return Outcome(OK, info=info, **arrays)


ADAPTER = TensorFlowAdapter()
