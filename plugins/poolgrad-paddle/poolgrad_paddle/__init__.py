"""PaddlePaddle: how a spec becomes a paddle.nn.functional pooling call (pure: importing this does
not import paddle, so poolgrad's collection and reproducer use it too; adapter.py runs the call
in a worker).

Variants:
  eager          paddle.nn.functional.<op><r>d in dynamic mode
  channels_last  the same call with data_format NLC / NHWC / NDHWC on a channels-last input (the
                 functions that take a data_format: max_pool2d/3d, avg_pool2d/3d,
                 adaptive_avg_pool2d/3d, lp_pool1d/2d)
  return_mask    max_pool / adaptive_max_pool with return_mask=True (the *_with_index kernels);
                 ``Outcome.indices`` is paddle's int32 mask: the flat position in each (n, c) plane
  to_static      paddle.jit.to_static(<the eager call>, full_graph=True): the function converted
                 whole to a static program, differentiated in dynamic mode as a training step would.
                 Not SOT (to_static's default): SOT makes an int argument it has seen take two
                 values symbolic, which paddle's pooling argument checks then refuse, so a result
                 would depend on what the process translated before

A spec paddle has no argument for (dilation, lp_pool3d, divisor_override in 1-D, ...) is
Unsupported with the reason, never emulated.
"""

from __future__ import annotations

from typing import Any

from poolgrad.adapters.base import Unsupported
from poolgrad.adapters.framework import Framework, Unstacked, Upstream
from poolgrad.reference.geometry import resolve

VARIANTS = ("eager", "channels_last", "return_mask", "to_static")
# paddle's data_format for a channels-last input of each rank, and the functions that take one
DATA_FORMATS = {1: "NLC", 2: "NHWC", 3: "NDHWC"}
CHANNELS_LAST_RANKS = {"max_pool": (2, 3), "avg_pool": (2, 3), "lp_pool": (1, 2),
                       "adaptive_avg_pool": (2, 3), "adaptive_max_pool": ()}

# Only avg pooling has a double-backward kernel (pool2d_double_grad); paddle's forward mode
# (paddle.incubate.autograd.jvp) is built on double backward, so no variant runs it.
AD_MODES = {"double_backward": ("eager",)}
# Seconds per batching group, cold, on 2 cores (a catalogue run's durations over its groups, paddle 3.3.1):
# to_static converts and builds a program per group; return_mask includes restarts after its crashes.
COSTS = {"to_static": 0.06, "return_mask": 0.017, "eager": 0.01, "channels_last": 0.005}
# Environment variables paddle reads at start that change which pooling kernels run (oneDNN's).
ENV_SWITCHES = ("FLAGS_use_onednn", "FLAGS_use_mkldnn", "FLAGS_tracer_onednn_ops_on",
                "FLAGS_tracer_onednn_ops_off", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def function_name(spec, shape) -> str:
    """The paddle.nn.functional function of a spec for an input of ``shape``."""
    return f"{spec.op}{len(shape) - 2}d"


def _padding(spec, pads, rank: int):
    """paddle's padding argument: the spec's own string, one int per dim when symmetric, else
    paddle's flat [before, after, ...] list (one pair per spatial dim)."""
    if isinstance(spec.padding, str):
        return spec.padding
    if all(before == after for before, after in pads):
        return pads[0][0] if rank == 1 else tuple(before for before, _ in pads)
    return tuple(p for pair in pads for p in pair)


def _sliding_arguments(spec, geom, rank: int, variant: str) -> dict | Unsupported:
    if any(d != 1 for d in geom.dilation):
        return Unsupported(f"dilation {geom.dilation}: paddle's pooling functions have no dilation")
    if spec.op == "lp_pool" and rank == 3:
        return Unsupported("paddle has no lp_pool3d (lp_pool1d and lp_pool2d only)")
    if variant == "return_mask" and not isinstance(spec.padding, str) and any(b != a for b, a in geom.pads):
        return Unsupported(f"asymmetric padding {list(geom.pads)} with return_mask: paddle's max_pool*_with_index "
                           f"kernels take one symmetric pad per dim")
    one = (lambda v: v[0]) if rank == 1 else (lambda v: v)
    kw: dict[str, Any] = {"kernel_size": one(geom.kernel_size), "stride": one(geom.stride),
                          "padding": _padding(spec, geom.pads, rank), "ceil_mode": spec.ceil_mode}
    if spec.op == "avg_pool":
        kw["exclusive"] = not spec.count_include_pad
        if spec.divisor_override is not None:
            if rank == 1:
                return Unsupported("divisor_override: paddle avg_pool1d has none")
            kw["divisor_override"] = spec.divisor_override
    elif spec.op == "lp_pool":
        kw["norm_type"] = spec.norm_type
    return kw


def plan(spec, variant: str, shape) -> dict | Unsupported:
    """The keyword arguments of the paddle.nn.functional call for an input of ``shape``
    (N, C, *spatial), or why this variant has none."""
    rank = len(shape) - 2
    if variant == "to_static" and spec.dtype == "bfloat16":
        # Measured with paddle 3.3.1: eager calls raise NotFound (no bfloat16 CPU kernel), but the
        # converted program does not return (over 100 s for a 4x4 max pool): not run, for the budget.
        return Unsupported("to_static in bfloat16: paddle has no bfloat16 CPU pooling kernel, and the static "
                           "program hangs instead of raising (measured with paddle 3.3.1)")
    if spec.op not in CHANNELS_LAST_RANKS:
        return Unsupported(f"{spec.op}: paddle has no call that takes the spec's windows (fractional_max_pool2d/3d "
                           f"place their regions from random_u, not from a list)")
    if variant == "channels_last" and rank not in CHANNELS_LAST_RANKS[spec.op]:
        return Unsupported(f"channels_last: paddle {spec.op}{rank}d has no data_format")
    if variant == "return_mask" and not spec.is_max:
        return Unsupported(f"return_mask: paddle {spec.op} returns no mask")
    geom = resolve(spec, shape)
    if spec.is_adaptive:
        kw = {"output_size": geom.out_shape[0] if rank == 1 else geom.out_shape}
    else:
        kw = _sliding_arguments(spec, geom, rank, variant)
        if isinstance(kw, Unsupported):
            return kw
    if variant == "channels_last":
        kw["data_format"] = DATA_FORMATS[rank]
    if variant == "return_mask":
        kw["return_mask"] = True
    return kw


# The *_with_index kernels (return_mask, and adaptive max pooling whatever return_mask is) give a
# window with no candidate (no number, or padding alone) mask -1, and their backward adds its
# gradient to the element before its (n, c) plane: in a stack, another case's
# (findings: paddle-cpu-with-index-no-candidate-writes-out-of-bounds). Such cases run alone.
UNSTACKED = (Unstacked(("return_mask",), ("max_pool*", "adaptive_max_pool*"), ("no_finite_window", "empty_window")),
             Unstacked(("eager", "to_static"), ("adaptive_max_pool*",), ("no_finite_window",)))


# The record the entry point names (poolgrad/adapters/framework.py).
FRAMEWORK = Framework("paddle", "poolgrad_paddle.adapter", "paddle", ("paddlepaddle", "paddlepaddle-gpu"), VARIANTS,
                      {"return_mask": "plane"}, planner=__name__, ad_modes=AD_MODES, costs=COSTS,
                      env_switches=ENV_SWITCHES,
                      upstream=Upstream("PaddlePaddle/Paddle", "the 🐛 报BUG Bug Report form"), unstacked=UNSTACKED)
