"""MLX: how a spec becomes the arguments of mlx.nn's pooling layers (pure: importing this does not
import MLX, so collection and the reproducer use it too; adapter.py runs the call in a worker).

mlx.nn has MaxPool1d/2d/3d and AvgPool1d/2d/3d, channels-last (NLC, NHWC, NDHWC), with
``kernel_size``, ``stride`` and one symmetric ``padding`` per dim (mlx/nn/layers/pooling.py):
the input is padded (-inf for max, 0 for avg), cut into windows with ``mx.as_strided`` and
reduced with ``mx.max`` / ``mx.mean`` over the window axes. The output length is always the
floor rule's. What that cannot express is Unsupported, never emulated: dilation, asymmetric
padding, a ceil_mode that adds a window, count_include_pad=False with padding (mx.mean counts
the zero padding), divisor_override, Lp and adaptive pooling.

Variants:
  eager     the layer called directly, gradients with mx.vjp
  compile   mx.compile of the whole computation (forward and vjp), as a compiled training step
"""

from __future__ import annotations

from poolgrad.adapters.base import Keywords, Unsupported
from poolgrad.adapters.framework import Framework, Upstream
from poolgrad.reference.geometry import resolve

VARIANTS = ("eager", "compile")
LAYERS = {"max_pool": "MaxPool", "avg_pool": "AvgPool"}

# What the suite records and schedules by (poolgrad/adapters/registry.py, Framework).
AD_MODES = {"jvp": VARIANTS, "double_backward": VARIANTS}
# compile: mx.compile builds each new fused kernel with the system C++ compiler, measured 3.4 s a
# group cold on 2 busy cores (-n 2, 94 groups); eager: 0.013 s
COSTS = {"eager": 0.013, "compile": 3.4}
# MLX_DISABLE_COMPILE makes mx.compile return the function uncompiled (mlx/compile.cpp)
ENV_SWITCHES = ("MLX_DISABLE_COMPILE",)


def plan(spec, variant: str, shape) -> Keywords | Unsupported:
    """The layer's keyword arguments (per-dim tuples) for an input of ``shape`` (N, C, *spatial),
    or why mlx.nn has none."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown mlx variant {variant!r}; known: {', '.join(VARIANTS)}")
    if spec.op not in LAYERS:
        return Unsupported(f"mlx.nn has no {spec.op} layer (only MaxPool and AvgPool in 1 to 3 dims)")
    geom = resolve(spec, shape)
    if any(d != 1 for d in geom.dilation):
        return Unsupported(f"dilation {geom.dilation}: mlx.nn pools have no dilation")
    if any(before != after for before, after in geom.pads):
        origin = " (SAME resolves to them)" if spec.padding == "SAME" else ""
        return Unsupported(f"asymmetric padding {list(geom.pads)}{origin}: mlx.nn pools take one symmetric pad per dim")
    padding = tuple(before for before, _ in geom.pads)
    floor = tuple((length + 2 * p - k) // s + 1
                  for length, p, k, s in zip(shape[2:], padding, geom.kernel_size, geom.stride))
    if floor != geom.out_shape:
        return Unsupported(f"ceil_mode output {geom.out_shape} (floor rule: {floor}): mlx.nn pools have no ceil_mode")
    if spec.op == "avg_pool":
        if spec.divisor_override is not None:
            return Unsupported("divisor_override: mlx.nn.AvgPool divides by the window size (mx.mean)")
        if not spec.count_include_pad and any(padding):
            return Unsupported("count_include_pad=False with padding: mlx.nn.AvgPool averages the zero "
                               "padding too (mx.mean over the padded window)")
    return Keywords({"kernel_size": geom.kernel_size, "stride": geom.stride, "padding": padding})


# The record the entry point names (poolgrad/adapters/framework.py).
FRAMEWORK = Framework("mlx", "poolgrad_mlx.adapter", "mlx", ("mlx",), VARIANTS, planner=__name__,
                      ad_modes=AD_MODES, costs=COSTS, env_switches=ENV_SWITCHES,
                      upstream=Upstream("ml-explore/mlx", "the Bug report template"))
