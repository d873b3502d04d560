"""forward / backward: the reference's public entry points, with input validation."""

from __future__ import annotations

import dataclasses

import numpy as np

from . import accumulate as accumulation
from . import avg_pool, lp_pool, max_pool, policies, roi_crop, roi_pool
from .dtypes import dtype_from_name, dtype_name, round_to, work_dtype
from .errors import SpecError
from .spec import PoolSpec
from .taps import plan_for


def _prepare(spec: PoolSpec, x):
    if not isinstance(spec, PoolSpec):
        raise SpecError("spec", f"must be a PoolSpec (use PoolSpec.from_dict), got {type(spec).__name__}")
    if not isinstance(x, np.ndarray):
        raise SpecError("input", f"must be a NumPy array, got {type(x).__name__}")
    name = dtype_name(x.dtype) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else None
    if name is None:
        raise SpecError("input", f"must be a floating array (float16, bfloat16, float32, float64), got {x.dtype}")
    if spec.dtype is not None and dtype_from_name(spec.dtype) != x.dtype:
        raise SpecError("dtype", f"spec says {spec.dtype} but the input array is {name}; cast the input or change dtype")
    plan = plan_for(spec, x.shape)
    wd = np.float64 if not spec.is_max else work_dtype(x.dtype)
    return plan, plan.pad(x.astype(wd, copy=False))


def forward(spec: PoolSpec, x: np.ndarray, *, tie: str = "first", nan: str = "propagate",
            accumulate: str | None = None) -> np.ndarray:
    """Forward output, in x's dtype. ``tie``/``nan`` matter only to max-type ops, whose
    forward is the element the policy selects (visible through signed zeros and NaN);
    ``accumulate`` only to avg/lp window sums: None sums in float64 and rounds once (the
    spec), "dtype" rounds every addition to x's dtype (accumulate.py)."""
    policies.check(tie, nan)
    accumulation.check(accumulate)
    plan, xw = _prepare(spec, x)
    if spec.op == roi_crop.OP:  # max_pool over the crop (roi_crop.py)
        return forward(plan.pool, plan.rounded_crop(x), tie=tie, nan=nan, accumulate=accumulate)
    if _avg_by_axis(spec, accumulate):
        for one_axis in _avg_passes(spec, plan):
            x = forward(one_axis, x, accumulate="dtype")
        return x
    acc = accumulation.acc_dtype(accumulate, x.dtype)
    if spec.is_max:
        out = max_pool.forward(plan, xw, tie, nan)
    elif spec.op.endswith("avg_pool"):
        out = avg_pool.forward(spec, plan, xw, acc)
    elif spec.op == "roi_align":
        out = roi_pool.align_forward(plan, xw, acc)
    else:
        out = lp_pool.forward(spec, plan, xw, acc)
    return round_to(out, x.dtype)


def backward(spec: PoolSpec, x: np.ndarray, grad_output, *, tie: str = "first",
             nan: str = "propagate", accumulate: str | None = None) -> np.ndarray:
    """dL/dx for L = sum(forward(x) * grad_output), in x's dtype.

    grad_output is first rounded to x's dtype (what a framework receives), then every
    accumulation is done in float64 and rounded once at the end; with ``accumulate="dtype"``
    the sums (the scatter of overlapping windows' gradients, lp's power sums) are kept in x's
    dtype instead, each addition rounded, in the order accumulate.py states.
    """
    policies.check(tie, nan)
    accumulation.check(accumulate)
    plan, xw = _prepare(spec, x)
    if spec.op == roi_crop.OP:  # max_pool's gradient over the crop, spread to the pixels (roi_crop.py)
        g_crop = backward(plan.pool, plan.rounded_crop(x), grad_output, tie=tie, nan=nan, accumulate=accumulate)
        return plan.spread(g_crop, x.dtype)
    if _avg_by_axis(spec, accumulate):
        inputs, passes = [x], _avg_passes(spec, plan)
        for one_axis in passes[:-1]:
            inputs.append(forward(one_axis, inputs[-1], accumulate="dtype"))
        g = grad_output
        for one_axis, xi in reversed(list(zip(passes, inputs))):  # the passes' backward in reverse
            g = backward(one_axis, xi, g, accumulate="dtype")
        return g
    acc = accumulation.acc_dtype(accumulate, x.dtype)
    expected = plan.out_shape(x)
    g = np.asarray(grad_output)
    if g.shape != expected:
        raise SpecError("grad_output", f"must have the forward output's shape {expected}, got {g.shape}")
    g = round_to(g.astype(np.float64, copy=False), x.dtype).astype(np.float64)
    if spec.is_max:
        grad_p = max_pool.backward(plan, xw, g, tie, nan, acc)
    elif spec.op.endswith("avg_pool"):
        grad_p = avg_pool.backward(spec, plan, xw, g, acc)
    elif spec.op == "roi_align":
        grad_p = roi_pool.align_backward(plan, g, acc)
    else:
        grad_p = lp_pool.backward(spec, plan, xw, g, acc)
    return round_to(plan.unpad(grad_p), x.dtype)


def error_scale(spec: PoolSpec, x: np.ndarray, grad_output) -> tuple[np.ndarray, np.ndarray]:
    """avg/lp: per forward output and per gradient element, the size (float64) that the
    error of a computation as accurate as x's dtype allows is eps times a small multiple of:
    first-order error propagation through the op's formula (the terms summed; for lp the
    conditioning of its cancelling power sum). SPEC.md, "Tolerances"."""
    if spec.is_max:
        raise SpecError("op", f"{spec.op} is a selection: its results are compared bit for bit, not within a scale")
    plan, xw = _prepare(spec, x)
    g = _received(x, grad_output)
    if spec.op == "roi_align":
        return roi_pool.align_error_scale(plan, np.abs(xw), np.abs(g))
    if spec.op == roi_crop.OP:
        # A point's terms are its corners' |x| times the weights (the crop of |x|; infinite corners
        # are compared exactly, not scaled); the selected point's at most the window's largest.
        # The gradient: the routed |g| spread by the weights.
        crop = plan.rounded_crop(x)
        terms = round_to(plan.crop(np.where(np.isfinite(x), np.abs(x), 0.0)), x.dtype)
        return (forward(plan.pool, terms).astype(np.float64),
                plan.spread(np.abs(backward(plan.pool, crop, g)), np.float64))
    op = avg_pool if spec.op.endswith("avg_pool") else lp_pool
    with np.errstate(all="ignore"):
        fwd, grad_p = op.error_scale(spec, plan, xw, g)
    return fwd, plan.unpad(grad_p)


def range_error(spec: PoolSpec, x: np.ndarray, grad_output) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lp: what x's dtype's range adds to error_scale (lp_pool.range_error): absolute errors per
    forward output and gradient element (inf where the gradient element takes any value), and
    the forward's ceiling where the dtype cannot resolve the window's power sum (NaN elsewhere).
    SPEC.md, "Tolerances"."""
    if spec.op != "lp_pool":
        raise SpecError("op", f"{spec.op}: only lp_pool computes an intermediate (its powers) past the dtype's range")
    plan, xw = _prepare(spec, x)
    g = _received(x, grad_output)
    forward_error, grad_p, ceiling = lp_pool.range_error(spec, plan, xw, g, x.dtype)
    return forward_error, plan.unpad(grad_p), ceiling


def axis_passes(spec: PoolSpec, geom) -> list[PoolSpec]:
    """A sliding-window or adaptive pool of geometry ``geom`` as one-axis pools, first spatial
    axis first, whose composition is ``spec``: the windows are boxes, so a max of maxima, and an
    average of averages where the divisors factor by axis (no divisor_override)."""
    if spec.regions is not None or spec.is_segment or spec.is_roi:
        raise SpecError("op", f"{spec.op}: its windows are not boxes of one-axis windows; it has no one-axis passes")
    rank = len(geom.axes)

    def only(d, values, rest):
        return tuple(v if e == d else rest for e, v in enumerate(values))
    if spec.is_adaptive:
        return [dataclasses.replace(spec, output_size=only(d, geom.out_shape, None)) for d in range(rank)]
    return [dataclasses.replace(spec, kernel_size=only(d, geom.kernel_size, 1), stride=only(d, geom.stride, 1),
                                dilation=only(d, geom.dilation, 1), padding=only(d, geom.pads, (0, 0)))
            for d in range(rank)]


def _avg_by_axis(spec: PoolSpec, accumulate) -> bool:
    """Whether ``accumulate`` makes ``spec`` one-axis average pools (segments have one axis)."""
    return accumulate == "dtype_per_axis" and spec.op.endswith("avg_pool") and not spec.is_segment


def _avg_passes(spec: PoolSpec, plan) -> list[PoolSpec]:
    """avg's one-axis pools (accumulate "dtype_per_axis": each pass's sums and means rounded to
    the dtype)."""
    if spec.divisor_override is not None:
        raise SpecError("accumulate", "'dtype_per_axis' averages one axis at a time, and a divisor_override "
                                      "does not factor by axis; use 'dtype' or None")
    return axis_passes(spec, plan.geom)


def _received(x: np.ndarray, grad_output) -> np.ndarray:
    """grad_output as a framework receives it: rounded to x's dtype (float64 array)."""
    return round_to(np.asarray(grad_output).astype(np.float64), x.dtype).astype(np.float64)
