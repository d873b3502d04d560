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

fractional_max_pool runs as fractional_max_pool2d/3d (eager, return_mask, to_static) with the
random_u, and kernel_size where every dim's regions have one size, for which paddle's region
formula gives the case's regions (:func:`fractional_regions`); lists no random_u gives are refused.

Segment pooling (segment_max_pool, segment_avg_pool) runs in a variant of its own over the
(items, features) data (poolgrad/adapters/segments.py):
  segment        paddle.geometric.segment_max / segment_mean in dynamic mode (sorted ids; the
                 output ends at the largest id, so trailing empty segments are Unsupported)
  segment_to_static  the same converted by paddle.jit.to_static(full_graph=True), as to_static

A spec paddle has no argument for (dilation, lp_pool3d, divisor_override in 1-D, ...) is
Unsupported with the reason, never emulated.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from poolgrad.adapters import segments
from poolgrad.adapters.base import Keywords, Unsupported
from poolgrad.adapters.framework import Framework, Unstacked, Upstream, WorkerSpec
from poolgrad.reference.geometry import resolve

from . import roi

VARIANTS = ("eager", "channels_last", "return_mask", "to_static", "segment", "segment_to_static")
SEGMENT_VARIANTS = ("segment", "segment_to_static")
# The variants converted to a static program (paddle.jit.to_static).
STATIC_VARIANTS = ("to_static", "segment_to_static")
# paddle's data_format for a channels-last input of each rank, and the functions that take one
DATA_FORMATS = {1: "NLC", 2: "NHWC", 3: "NDHWC"}
CHANNELS_LAST_RANKS = {"max_pool": (2, 3), "avg_pool": (2, 3), "lp_pool": (1, 2),
                       "adaptive_avg_pool": (2, 3), "adaptive_max_pool": ()}

# Only avg pooling has a double-backward kernel (pool2d_double_grad); paddle's forward mode
# (paddle.incubate.autograd.jvp) is built on double backward, so no variant runs it.
AD_MODES = {"double_backward": ("eager",)}
# Seconds per batching group, cold, on 2 cores (a catalogue run's durations over its groups, paddle 3.3.1):
# to_static converts and builds a program per group; return_mask includes restarts after its crashes.
COSTS = {"to_static": 0.06, "segment_to_static": 0.06, "return_mask": 0.017, "eager": 0.01, "channels_last": 0.005}
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


def fractional_regions(u: float, length: int, out: int, kernel: int) -> tuple[tuple[int, int], ...]:
    """The [start, stop) regions paddle's fractional max pooling pools along one dim for
    ``random_u`` u: kernel 0 (kernel_size None) places non-overlapping regions, a kernel places
    regions of that size. As the CPU kernel computes them, in float32 (FractionalRationalU,
    FractionalStartIndex and FractionalEndIndex in paddle/phi/kernels/funcs/pooling.h, clipped
    to the input in FractionalMaxPool2dFunctor / 3dFunctor, pooling.cc)."""
    f = np.float32
    alpha = f(length - kernel) / f(out - (1 if kernel else 0))
    u = f(u)
    if not kernel:  # u scaled so that every region holds base or base + 1 elements
        base = length // out
        u = u * min(f(base + 2) / alpha - f(1), f(length + 1 - base) / alpha - f(out - 1))
    offset = int(u * alpha)
    regions = []
    for i in range(out):
        start = int((f(i) + u) * alpha) - offset
        stop = start + kernel if kernel else int((f(i + 1) + u) * alpha) - offset
        regions.append((max(start, 0), min(stop, length)))
    return tuple(regions)


def _random_u(spec, spatial, kernels) -> float | None:
    """A random_u in (0, 1), exact in float32, for which paddle pools the spec's regions along
    every dim (one u serves all dims), or None. A dim's regions change only where some
    (i + u') * alpha crosses an integer (u' = u or u scaled); the midpoints between such u, the
    crossings and the float32 values beside them are every list the formula can give."""
    cuts = set()
    for regions, length, kernel in zip(spec.regions, spatial, kernels):
        out = len(regions)
        alpha = (length - kernel) / (out - (1 if kernel else 0))
        if not alpha:
            continue
        scale = 1.0
        if not kernel:
            base = length // out
            scale = min((base + 2) / alpha - 1, (length + 1 - base) / alpha - (out - 1))
        for i in range(out + 1):
            for n in range(int(i * alpha), int((i + scale) * alpha) + 2):
                if 0 < (c := (n / alpha - i) / scale) < 1:
                    cuts.add(c)
    bounds = sorted({0.0, 1.0, *cuts})
    middles = [(a + b) / 2 for a, b in zip(bounds, bounds[1:])]
    near = [float(v) for c in cuts for v in (np.float32(c), np.nextafter(np.float32(c), np.float32(0)),
                                             np.nextafter(np.float32(c), np.float32(1)))]
    for u in (float(np.float32(c)) for c in (*middles, *near)):
        if 0 < u < 1 and all(fractional_regions(u, length, len(regions), kernel) == regions
                             for regions, length, kernel in zip(spec.regions, spatial, kernels)):
            return u
    return None


def _fractional(spec, variant: str, shape) -> Keywords | Unsupported:
    """fractional_max_pool2d/3d with the random_u (and kernel_size, where every dim's regions have
    one size) that make paddle pool the spec's regions."""
    rank, spatial = len(shape) - 2, shape[2:]
    if rank == 1:
        return Unsupported("paddle has fractional max pooling in 2-D and 3-D only")
    if variant == "channels_last":
        return Unsupported(f"channels_last: paddle fractional_max_pool{rank}d has no data_format")
    sizes = [{stop - start for start, stop in regions} for regions in spec.regions]
    # kernel_size None: non-overlapping regions; a kernel_size per dim: regions of that size (paddle
    # divides by output - 1 there, so not with an output of 1)
    modes = [(0,) * rank]
    if all(len(s) == 1 for s in sizes) and all(len(r) > 1 for r in spec.regions):
        modes.insert(0, tuple(s.pop() for s in sizes))
    for kernels in modes:
        if all(length >= len(regions) - 1 + kernel for regions, length, kernel in zip(spec.regions, spatial, kernels)):
            u = _random_u(spec, spatial, kernels)
            if u is not None:
                kw = {"output_size": tuple(len(r) for r in spec.regions), "kernel_size": kernels if kernels[0] else None,
                      "random_u": u}
                if variant == "return_mask":
                    kw["return_mask"] = True
                return Keywords(kw)
    return Unsupported("regions no random_u gives: paddle's fractional_max_pool2d/3d place them from one random_u "
                       "shared by every dim, non-overlapping (kernel_size None) or of one kernel_size per dim")


def _segments(spec) -> segments.Segments | Unsupported:
    call = segments.call(spec, "segment_{reduce}")
    if not call.sorted:
        return Unsupported("paddle.geometric.segment_max / segment_mean take sorted segment ids")
    if segments.trailing_empty(spec):
        return Unsupported(f"{segments.trailing_empty(spec)} empty segments after the largest id: "
                           "paddle.geometric.segment_max / segment_mean output max(id) + 1 segments")
    return call


def plan(spec, variant: str, shape) -> Keywords | segments.Segments | Unsupported:
    """The keyword arguments of the paddle.nn.functional call for an input of ``shape``
    (N, C, *spatial), or why this variant has none."""
    refused = segments.refuse(spec, variant, SEGMENT_VARIANTS)
    if refused is not None:
        return refused
    if spec.is_segment:
        return _segments(spec)
    rank = len(shape) - 2
    if spec.op == "fractional_max_pool":
        return _fractional(spec, variant, shape)
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
    return Keywords(kw)


# The *_with_index kernels (return_mask, and adaptive max pooling whatever return_mask is) and the
# fractional kernels give a window with no candidate (no number, or padding alone) mask -1, and their
# backward adds its gradient to the element before its (n, c) plane: in a stack, another case's
# (findings: paddle-cpu-with-index-no-candidate-writes-out-of-bounds). Such cases run alone.
UNSTACKED = (*(Unstacked(("return_mask",), ("max_pool*", "adaptive_max_pool*", "fractional_max_pool*"), (p,))
               for p in ("no_finite_window", "empty_window")),
             Unstacked(("eager", "to_static"), ("adaptive_max_pool*", "fractional_max_pool*"), ("no_finite_window",)))


UPSTREAM = Upstream("PaddlePaddle/Paddle", "the 🐛 报BUG Bug Report form")
# RoI pooling (paddle.vision.ops): planned by the roi package, run by paddle's worker (adapter.py hands it
# the variant).
ROI_WORKER = WorkerSpec("paddle", "poolgrad_paddle.adapter", {}, "paddle", "poolgrad_paddle.roi", UPSTREAM)

# The record the entry point names (poolgrad/adapters/framework.py).
FRAMEWORK = Framework("paddle", "poolgrad_paddle.adapter", "paddle", ("paddlepaddle", "paddlepaddle-gpu"),
                      (*VARIANTS, *roi.ROI_VARIANTS), {"return_mask": "plane"},
                      dict.fromkeys(roi.ROI_VARIANTS, ROI_WORKER), planner=__name__, ad_modes=AD_MODES, costs=COSTS,
                      env_switches=ENV_SWITCHES,
                      upstream=UPSTREAM, unstacked=UNSTACKED)
