"""JAX adapter: pooling as a JAX user writes it, with lax.reduce_window.

JAX has no pooling API of its own (flax.linen's pools are thin wrappers over the same call):
max is ``reduce_window(max, -inf)``, avg is ``reduce_window(add, 0)`` divided by a count the
user computes (a reduce_window sum over ones), lp is a power sum. The spec's padding is
translated into reduce_window's pads (reference.geometry resolves SAME and ceil_mode's extra
pad); every value — divisors, scales, forward and VJP — is JAX's own and returned as is.

Variants: ``eager`` calls the function directly (JAX still compiles each primitive on its
own); ``jit`` traces pooling + VJP once per (spec, shape) and reuses the compiled function;
``flax`` calls flax.linen's max_pool / avg_pool (channels-last, its own count_include_pad and
divisors), jitted the same way. flax is optional: without it that variant is not installed.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from poolgrad.reference.geometry import resolve

from ..base import ERROR, NO_DEVICE, NOT_INSTALLED, OK, UNSUPPORTED, Adapter, ModeMethods, Outcome, Unsupported
from .. import idioms, segments
from . import JITTED, SEGMENT_VARIANTS, VARIANTS, Reduction, Window, plan

# float64 cases must run in float64, not be silently downcast to float32.
jax.config.update("jax_enable_x64", True)
# No reduced-precision shortcuts on GPU (pooling has no matmul, but the suite records it).
jax.config.update("jax_default_matmul_precision", "highest")
# The scoped switch (flax's float32 counts): jax.enable_x64 since JAX 0.8, jax.experimental's before.
_ENABLE_X64 = jax.enable_x64 if hasattr(jax, "enable_x64") else importlib.import_module("jax.experimental").enable_x64

_PLATFORM = {"cpu": "cpu", "gpu": "gpu"}


def _pool_fn(spec, window_args: Window, shape, dtype):
    """The pooling function x -> y for one spec and input shape, as a JAX user would write it."""
    geom = resolve(spec, shape)
    kernel, stride, dilation, pads = window_args.kernel, window_args.stride, window_args.dilation, window_args.pads

    def window(x, init, op, window_pads=pads):
        return lax.reduce_window(x, np.asarray(init, x.dtype), op, (1, 1, *kernel), (1, 1, *stride),
                                 ((0, 0), (0, 0), *window_pads), window_dilation=(1, 1, *dilation))

    if spec.is_max:
        return lambda x: window(x, -np.inf, lax.max)

    def counts(include_pad):
        """How many elements each window sums, counted by JAX the way users count them: a
        reduce_window sum over ones, the spec's padding counted as ones when it is included
        (the ceil_mode overhang beyond it never is). The ones are float32 (jnp.ones' and flax's
        counts) or the case's float64: a float16 or bfloat16 sum of ones stops growing at 2048 or
        256, which no user takes for a window's size."""
        ones = np.ones((1, 1, *shape[2:]), np.promote_types(dtype, np.float32))
        if not include_pad:
            return window(ones, 0, lax.add)
        spec_pads = geom.pads or ((0, 0),) * len(kernel)
        # Trailing spec padding that no window reads (pads' right is smaller) is left out, or
        # the counts would have more windows than the pooled sum.
        read = tuple((b, min(r, a)) for (b, r), (_, a) in zip(pads, spec_pads))
        padded = jnp.pad(ones, ((0, 0), (0, 0), *read), constant_values=1)
        return window(padded, 0, lax.add, tuple((0, max(r - a, 0)) for (_, r), (_, a) in zip(pads, spec_pads)))

    if spec.op == "lp_pool":
        # PyTorch's definition: a ceil_mode window clipped at the edge is scaled by K / count.
        p = spec.norm_type
        scale = float(np.prod(kernel)) / counts(True)
        return lambda x: (window(x ** p, 0, lax.add) * scale.astype(x.dtype)) ** (1.0 / p)
    if spec.divisor_override is not None:
        return lambda x: window(x, 0, lax.add) / np.asarray(spec.divisor_override, dtype)
    divisor = counts(spec.count_include_pad)
    return lambda x: window(x, 0, lax.add) / divisor.astype(x.dtype)


def _flax_pool_fn(spec, window_args: Window):
    """The pooling function x -> y through flax.linen, as a flax user calls it: channels-last,
    ``window_shape``, ``strides`` and ``padding`` as the string the spec names or (low, high)
    pairs. Flax computes divisors and output shapes itself (it resolves SAME on its own)."""
    from flax import linen  # optional: absent, the variant is not installed
    if spec.is_max:
        pool = linen.max_pool
    else:
        pool = functools.partial(linen.avg_pool, count_include_pad=spec.count_include_pad)

    def channels_last(x):
        return jnp.moveaxis(pool(jnp.moveaxis(x, 1, -1), window_args.kernel, strides=window_args.stride,
                                 padding=window_args.pads), -1, 1)
    return channels_last


def _idiom_fn(spec, reduction: Reduction):
    """jnp.max / jnp.mean over the planned axes of x, its blocks or its patches."""
    reduce = jnp.max if spec.op in idioms.MAX_OPS else jnp.mean
    if reduction.window is not None:
        w = reduction.window

        def patches(x):
            return lax.conv_general_dilated_patches(x, w.kernel, w.stride, w.pads, rhs_dilation=w.dilation)
        return lambda x: reduce(patches(x).reshape(reduction.shape), axis=reduction.axes)
    if reduction.shape is not None:
        return lambda x: reduce(x.reshape(reduction.shape), axis=reduction.axes)
    return lambda x: reduce(x, axis=reduction.axes, keepdims=True)


def _segment_fn(call: segments.Segments):
    """jax.ops.segment_max over the (items, features) data; the mean as jraph.segment_mean
    computes it (jraph/_src/utils.py): segment_sum / max(segment_sum of ones, 1)."""
    kw = {"segment_ids": jnp.asarray(call.segment_ids), "num_segments": call.num_segments,
          "indices_are_sorted": call.sorted}
    if call.reduce == "max":
        return lambda x: jax.ops.segment_max(x, **kw)

    def mean(x):
        count = jax.ops.segment_sum(jnp.ones_like(x), **kw)
        return jax.ops.segment_sum(x, **kw) / jnp.maximum(count, jnp.ones((), dtype=count.dtype))
    return mean


def _pool(spec, variant, shape, dtype):
    """The variant's pooling function for the planned call, or Unsupported."""
    window_args = plan(spec, variant, shape)
    if isinstance(window_args, Unsupported):
        return window_args
    if isinstance(window_args, segments.Segments):
        return _segment_fn(window_args)
    if isinstance(window_args, Reduction):
        return _idiom_fn(spec, window_args)
    return _flax_pool_fn(spec, window_args) if variant == "flax" else _pool_fn(spec, window_args, shape, dtype)


def _forward_and_vjp(pool, x, g):
    y, vjp = jax.vjp(pool, x)
    # flax's avg_pool with count_include_pad=False divides by a pool of jnp.ones (float32), so
    # its output can be wider than x; g is widened (exactly) to it, as L = sum(y * g) needs.
    return y, vjp(g.astype(y.dtype))[0]


def _reverse(pool, x, g) -> dict:
    y, dx = _forward_and_vjp(pool, x, g)
    return {"forward": y, "grad_input": dx}


def _jvp(pool, x, g, tangent) -> dict:
    """jax.jvp for the tangent, jax.vjp for the gradient (one jit in the jitted variants)."""
    y, y_t = jax.jvp(pool, (x,), (tangent,))
    return {"forward": y, "tangent_output": y_t, "grad_input": _forward_and_vjp(pool, x, g)[1]}


def _double_backward(pool, x, g, v) -> dict:
    """jax.vjp of the function (x, g) -> vjp(pool, x)(g)."""
    dx, vjp = jax.vjp(lambda a, b: _forward_and_vjp(pool, a, b)[1], x, g)
    by_x, by_g = vjp(v.astype(dx.dtype))
    return {"grad_input": dx, "grad_grad_output": by_g, "grad_grad_input": by_x}


_MODES = {"run": _reverse, "jvp": _jvp, "double_backward": _double_backward}


def _refused(spec, variant, x) -> bool:
    """Whether JAX (or flax) refused the call's arguments, as opposed to failing on a call it
    accepts. lax.reduce_window checks its window, strides and padding while tracing (its shape
    rule), flax.linen.pool asserts on its padding pairs, and both run for an abstract input:
    a forward that also fails under jax.eval_shape (shape and dtype, no data, no
    differentiation, no compilation) was refused. One that fails only in the VJP (JAX has no
    VJP for dilated max windows) or in XLA is an error."""
    pool = _pool(spec, variant, x.shape, x.dtype)
    try:
        jax.eval_shape(pool, jax.ShapeDtypeStruct(x.shape, x.dtype))
    except Exception:  # JAX refuses with TypeError or ValueError, flax with AssertionError
        return True
    return False


class JaxAdapter(ModeMethods, Adapter):
    framework = "jax"
    variants = VARIANTS

    def __init__(self):
        self.traces = 0  # running count of jit traces, across all specs

    def version(self) -> str:
        return jax.__version__

    def _device(self, device):
        try:
            return jax.devices(_PLATFORM[device])[0]
        except RuntimeError:  # jax raises when the backend is absent
            return None

    def devices(self) -> list[str]:
        return [d for d in _PLATFORM if self._device(d) is not None]

    def environment(self) -> dict:
        import jaxlib
        env = {"jax": jax.__version__, "jaxlib": jaxlib.__version__,
               "backend": jax.default_backend(),
               "devices": {d: [dev.device_kind for dev in jax.devices(d)] for d in self.devices()},
               "matmul_precision": jax.config.jax_default_matmul_precision}
        if "XLA_FLAGS" in os.environ:
            env["XLA_FLAGS"] = os.environ["XLA_FLAGS"]
        try:
            env["flax"] = importlib.metadata.version("flax")
        except importlib.metadata.PackageNotFoundError:
            pass
        return env

    @functools.lru_cache(maxsize=None)
    def _jitted(self, spec, shape, dtype, variant, mode):
        pool = _pool(spec, variant, shape, dtype)

        def traced(*arrays):
            result = mode(pool, *arrays)
            self.traces += 1  # once per completed trace (then compiled), never per call
            return result
        return jax.jit(traced)

    def _mode(self, method, spec, variant, device, x, grad_output, *extra) -> Outcome:
        mode = _MODES[method]
        if variant not in self.variants:
            raise ValueError(f"unknown jax variant {variant!r}; known: {self.variants}")
        dev = self._device(device)
        if dev is None:
            return Outcome(status=NO_DEVICE, message="no GPU visible to JAX")
        # flax runs under JAX's default config (no 64-bit types: its float32 counts are what
        # users get) except for float64 cases, which need them.
        with _ENABLE_X64(variant != "flax" or x.dtype == np.float64):
            if variant in SEGMENT_VARIANTS:  # (items, features) data in and out (adapters/segments.py)
                return segments.as_planes(self._run(mode, spec, variant, dev, *map(
                    segments.items, (x, grad_output, *extra))), *x.shape[:2])
            return self._run(mode, spec, variant, dev, x, grad_output, *extra)

    def _run(self, mode, spec, variant, dev, x, grad_output, *extra) -> Outcome:
        planned = plan(spec, variant, x.shape)
        if isinstance(planned, Unsupported):
            return Outcome(status=UNSUPPORTED, message=planned.reason)
        try:
            if variant not in JITTED:
                fn = functools.partial(mode, _pool(spec, variant, x.shape, x.dtype))
            else:
                fn = self._jitted(spec, x.shape, x.dtype, variant, mode)
        except ImportError as e:
            return Outcome(status=NOT_INSTALLED, message=f"{variant} is not installed ({e})")
        info = {"device": dev.device_kind}
        try:
            arrays = {k: np.asarray(a) for k, a in fn(*(jax.device_put(a, dev) for a in (x, grad_output, *extra))).items()}
        except Exception as e:  # whatever JAX raised is the result
            if _refused(spec, variant, x):
                return Outcome(status=UNSUPPORTED, message=f"{type(e).__name__}: {e}", info=info)
            return Outcome(status=ERROR, message=f"{type(e).__name__}: {e}", info=info)
        if variant in JITTED:
            info["compiles"] = self.traces
        return Outcome(status=OK, info=info, **arrays)


ADAPTER = JaxAdapter()
