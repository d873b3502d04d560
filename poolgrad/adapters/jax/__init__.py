"""JAX: how a spec becomes lax.reduce_window's window, or flax.linen's pooling arguments (pure:
importing this does not import JAX, so collection and the reproducer use it too; adapter.py
runs the call in a worker).

Variants: eager, jit (reduce_window as a JAX user writes pooling) and flax (flax.linen's
max_pool / avg_pool).

Pooling as users write it without reduce_window (poolgrad/adapters/idioms.py says which specs
each can express), a :class:`Reduction`:
  reduce, reduce_jit   jnp.max / jnp.mean over the spatial axes (keepdims=True): global pooling
                       (the adaptive ops with output size 1), eager and jitted
  reshape              x.reshape(N, C, H/k, k, ...) then jnp.max / jnp.mean over the block axes:
                       windows that tile the input
  patches              lax.conv_general_dilated_patches (any rank, padding pairs, stride,
                       dilation as rhs_dilation) then jnp.max / jnp.mean over each window's taps
Segment pooling (segment_max_pool, segment_avg_pool) runs in variants of its own over the
(items, features) data (adapters/segments.py):
  segment, segment_jit  jax.ops.segment_max; the mean as jraph.segment_mean writes it,
                        segment_sum / max(segment_sum of ones, 1); indices_are_sorted where the
                        ids are sorted; eager and jitted
reshape and patches run under jax.jit, as a model using them would (eager, every primitive of
the patches' convolution and its VJP compiles on its own: 0.75 s a call group).
"""

from __future__ import annotations

import dataclasses
import math

from poolgrad.reference.geometry import resolve

from .. import idioms, keras, segments
from ..base import Plan, Unsupported
from ..framework import Framework, Upstream, WorkerEnvironment

VARIANTS = ("eager", "jit", "flax", "reduce", "reduce_jit", "reshape", "patches", "segment", "segment_jit")
JITTED = ("jit", "flax", "reduce_jit", "reshape", "patches", "segment_jit")
SEGMENT_VARIANTS = ("segment", "segment_jit")
IDIOMS = ("reduce", "reduce_jit", "reshape", "patches")
# lax.reduce_window is given the resolved pairs; flax.linen takes "SAME" itself
API_PATHS = {"lax.reduce_window": ("eager", False), "flax": ("flax", True)}

# What the suite records and schedules by (poolgrad/adapters/registry.py, Framework).
AD_MODES = {"jvp": ("eager", "jit", "reduce", "reduce_jit"), "double_backward": ("eager", "jit", "reduce", "reduce_jit")}
# eager: XLA compiles each primitive of forward and VJP; keras: dozens of eagerly compiled
# primitives in adaptive pooling; jit: one compilation of forward + VJP
COSTS = {"keras": 1.2, "eager": 0.34, "flax": 0.28, "jit": 0.2,
         # patches: the one-hot convolution and its VJP compile per group, the dearest idiom
         "patches": 0.62, "reduce": 0.45, "reshape": 0.18, "reduce_jit": 0.1,
         "keras_global": 1.1, "keras_global_cf": 0.35}
ENV_SWITCHES = ("XLA_FLAGS", "JAX_ENABLE_X64", "JAX_DEFAULT_MATMUL_PRECISION")
# XLA_FLAGS holds XLA's CPU backend to one thread (TensorFlow's XLA reads it too: the pool sets
# every record's variables in every worker). In a worker sharing its GPU, JAX would otherwise
# preallocate 75 % of its memory. JAX keeps a persistent compile cache only when asked, and then
# only of compilations over 1 s by default; pooling programs take ~0.1 s.
WORKER_ENVIRONMENT = WorkerEnvironment(
    one_thread={"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"},
    shared_gpu={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    compile_cache=lambda root: {"JAX_COMPILATION_CACHE_DIR": str(root / "jax"),
                                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
UPSTREAM = Upstream("jax-ml/jax", "the Bug report form")


@dataclasses.dataclass(frozen=True)
class Window(Plan):
    """The window over the spatial axes: reduce_window's, or for flax what its pools take
    (``pads`` is then the spec's padding string or (low, high) pairs)."""

    kernel: tuple
    stride: tuple
    dilation: tuple
    pads: tuple | str


@dataclasses.dataclass(frozen=True)
class Reduction(Plan):
    """An idiom: jnp.max / jnp.mean over ``axes`` of x, of x reshaped to ``shape`` (reshape), or
    of its patches (``window`` given: conv_general_dilated_patches' (N, C * taps, *out) viewed
    as ``shape`` (N, C, taps, *out))."""

    axes: tuple
    shape: tuple | None = None
    window: Window | None = None


def _idiom(spec, variant: str, shape) -> Reduction | Unsupported:
    if variant == "reshape":
        view = idioms.block_view(spec, shape)
        return view if isinstance(view, Unsupported) else Reduction(view[1], view[0])
    if variant == "patches":
        p = idioms.patches(spec, shape)
        if isinstance(p, Unsupported):
            return p
        return Reduction((2,), (*shape[:2], math.prod(p.kernel), *p.out_shape),
                         Window(p.kernel, p.stride, p.dilation, p.pads))
    axes = idioms.global_axes(spec, shape)
    return axes if isinstance(axes, Unsupported) else Reduction(axes)


def reduce_window_args(spec, geom, spatial) -> Window | Unsupported:
    """reduce_window's window over the spatial axes.

    The right pad is the one that makes reduce_window's floor rule produce exactly geometry's
    windows: in floor mode it is the spec's pad less any trailing padding no window reads; with
    ceil_mode it adds the extra padding holding the partial last window. This is reduce_window's
    own padding argument (not the input padded beforehand), and its padded elements take the
    init value: -inf for max, 0 for add.
    """
    if spec.is_adaptive:
        if any(length % out for length, out in zip(spatial, geom.out_shape)):
            return Unsupported("jax has no adaptive pooling; non-uniform bins not expressible in reduce_window")
        kernel = tuple(length // out for length, out in zip(spatial, geom.out_shape))
        return Window(kernel, kernel, (1,) * len(kernel), ((0, 0),) * len(kernel))
    pads = []
    for length, out, k, s, d, (before, _) in zip(spatial, geom.out_shape, geom.kernel_size,
                                                 geom.stride, geom.dilation, geom.pads):
        right = (out - 1) * s + d * (k - 1) + 1 - length - before
        pads.append((before, max(right, 0)))
    return Window(geom.kernel_size, geom.stride, geom.dilation, tuple(pads))


def plan(spec, variant: str, shape) -> Window | Reduction | segments.Segments | Unsupported:
    """The window for an input of ``shape`` (N, C, *spatial), or why none exists."""
    refused = segments.refuse(spec, variant, SEGMENT_VARIANTS)
    if refused is not None:
        return refused
    if spec.is_segment:
        return segments.call(spec, "segment_{reduce}")
    if spec.op == "fractional_max_pool":
        return Unsupported("JAX and Flax have no fractional max pooling")
    if variant in IDIOMS:
        return _idiom(spec, variant, shape)
    geom = resolve(spec, shape)
    if variant != "flax":
        return reduce_window_args(spec, geom, shape[2:])
    if spec.op == "lp_pool":
        return Unsupported("flax.linen has no Lp pooling")
    if spec.is_adaptive:  # uniform bins are the window = stride = L / out call
        return reduce_window_args(spec, geom, shape[2:])
    if spec.ceil_mode:
        return Unsupported("flax.linen pooling has no ceil_mode")
    if any(d > 1 for d in geom.dilation):
        return Unsupported("flax.linen pooling has no dilation (flax.linen.pool passes none to reduce_window)")
    if spec.divisor_override is not None:
        return Unsupported("flax.linen.avg_pool has no divisor_override")
    return Window(geom.kernel_size, geom.stride, geom.dilation,
                  spec.padding if isinstance(spec.padding, str) else geom.pads)


# The record pyproject.toml registers (poolgrad/adapters/framework.py); Keras on JAX runs in a worker
# of its own.
FRAMEWORK = Framework("jax", "poolgrad.adapters.jax.adapter", "jax", ("jax",), (*VARIANTS, *keras.VARIANTS),
                      workers=keras.on("jax"), planner=__name__, ad_modes=AD_MODES, costs=COSTS,
                      env_switches=ENV_SWITCHES, api_paths={**API_PATHS, **keras.API_PATHS},
                      worker_environment=WORKER_ENVIRONMENT, upstream=UPSTREAM)
