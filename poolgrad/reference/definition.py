"""The ops of SPEC.md as plain functions, one window at a time: what the fast reference (api.py,
one NumPy pass per tap) computes, written so that it is obviously right, and the fast path is
tested against it (tests/reference/test_reference_vs_loop.py).

Every function takes a ``PoolSpec``, the input ``x`` (N, C, *spatial) and the upstream gradient
``g`` (the forward output's shape) and returns ``(y, dx)``, both in x's dtype: ``g`` is first
rounded to x's dtype, every sum, division and power is computed in float64 and rounded once
(SPEC.md, "Dtypes and rounding"). The windows are the shared geometry's (geometry.resolve,
SPEC.md "Geometry"), the selection of max-type ops the policies' (policies.select, SPEC.md
"Policies"). Too slow for the catalogue: a Python iteration per window and image.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .dtypes import dtype_from_name, round_to
from .errors import SpecError
from .geometry import resolve
from .policies import select
from .spec import PoolSpec

# inf - inf, 0 / 0, 0 * inf and the root of a negative sum are part of the cases: NaN, quietly.
_quiet = np.errstate(all="ignore")


def windows(spec: PoolSpec, shape) -> list[tuple[tuple[int, ...], list[tuple[int, ...]], int]]:
    """Per output position ``o`` (row-major): ``(o, cells, in_padded)``, the window's real
    elements as spatial positions in window order (row-major over its taps; padding and a
    ceil_mode window's overhang are never real) and how many of its taps lie inside the padded
    input. Windows are separable: a tap is real (inside the padded input) when it is on every axis."""
    geom = resolve(spec, shape)
    found = []
    for o in np.ndindex(*geom.out_shape):
        taps = [a.positions[i][a.in_window[i]] for a, i in zip(geom.axes, o)]
        real = [[int(p) for p in t if 0 <= p < a.length] for t, a in zip(taps, geom.axes)]
        in_padded = math.prod(int(a.in_padded[i][a.in_window[i]].sum()) for a, i in zip(geom.axes, o))
        found.append((o, list(itertools.product(*real)), in_padded))
    return found


@_quiet
def max_pool(spec: PoolSpec, x: np.ndarray, g, *, tie: str = "first", nan: str = "propagate"):
    """SPEC.md "max_pool": ``y`` is the element the tie and NaN policies select among the
    window's real elements (padding never takes part), that element itself (its sign of zero,
    its NaN); a window with no candidate gives -inf. ``dx``: each window's ``g`` goes to its
    selected element(s), all of it to each (tie first, last, all) or ``g / count`` to each of
    ``count`` maxima (split); a cell in several windows sums what it receives."""
    x64, g64, y, dx = _arrays(spec, x, g, _MAX_OPS)
    for o, cells, _ in windows(spec, x.shape):
        for n, c in np.ndindex(*x.shape[:2]):
            y[n, c][o], receivers = select([x64[n, c][p] for p in cells], tie, nan)
            share = g64[n, c][o] / len(receivers) if tie == "split" else g64[n, c][o]
            for i in receivers:
                dx[n, c][cells[i]] += share
    return _rounded(y, dx, x.dtype)


def adaptive_max_pool(spec: PoolSpec, x: np.ndarray, g, *, tie: str = "first", nan: str = "propagate"):
    """SPEC.md "adaptive_max_pool": max_pool over adaptive bins, the same policies."""
    return max_pool(_op(spec, "adaptive_max_pool"), x, g, tie=tie, nan=nan)


def fractional_max_pool(spec: PoolSpec, x: np.ndarray, g, *, tie: str = "first", nan: str = "propagate"):
    """SPEC.md "fractional_max_pool": max_pool over the spec's regions, the same policies."""
    return max_pool(_op(spec, "fractional_max_pool"), x, g, tie=tie, nan=nan)


def segment_max_pool(spec: PoolSpec, x: np.ndarray, g, *, tie: str = "first", nan: str = "propagate"):
    """SPEC.md "segment_max_pool": max_pool over one window per segment, its items in item
    order; an empty segment has no candidate (-inf, no gradient)."""
    return max_pool(_op(spec, "segment_max_pool"), x, g, tie=tie, nan=nan)


@_quiet
def avg_pool(spec: PoolSpec, x: np.ndarray, g):
    """SPEC.md "avg_pool": ``y = (sum of the window's real elements) / divisor``; ``dx``: every
    real element of the window receives ``g / divisor``. The divisor is ``divisor_override`` if
    given; else with ``count_include_pad`` the window's taps inside the padded input (a
    ceil_mode window's overhang is not counted), else its real elements (a window wholly in
    padding: 0 / 0, NaN). Adaptive bins have no padding: the divisor is the bin's size."""
    x64, g64, y, dx = _arrays(spec, x, g, ("avg_pool", "adaptive_avg_pool", "segment_avg_pool"))
    for o, cells, in_padded in windows(spec, x.shape):
        if spec.divisor_override is not None:
            divisor = spec.divisor_override
        elif spec.is_segment:
            divisor = max(len(cells), 1)
        else:
            divisor = in_padded if spec.count_include_pad else len(cells)
        for n, c in np.ndindex(*x.shape[:2]):
            y[n, c][o] = sum((x64[n, c][p] for p in cells), np.float64(0)) / divisor
            for p in cells:
                dx[n, c][p] += g64[n, c][o] / divisor
    return _rounded(y, dx, x.dtype)


def adaptive_avg_pool(spec: PoolSpec, x: np.ndarray, g):
    """SPEC.md "adaptive_avg_pool": avg_pool over adaptive bins; the divisor is the bin's size."""
    return avg_pool(_op(spec, "adaptive_avg_pool"), x, g)


def segment_avg_pool(spec: PoolSpec, x: np.ndarray, g):
    """SPEC.md "segment_avg_pool": avg_pool over one window per segment, the divisor its size,
    at least 1 (an empty segment outputs 0 and sends no gradient)."""
    return avg_pool(_op(spec, "segment_avg_pool"), x, g)


@_quiet
def lp_pool(spec: PoolSpec, x: np.ndarray, g):
    """SPEC.md "lp_pool", with ``p = norm_type``, ``K`` the kernel volume and ``n`` the window's
    taps inside the padded input: ``z = K / n * sum x ** p`` over the real elements (``a * K``
    for ``a = avg_pool(x ** p)`` counting padding), ``y = z ** (1 / p)``, and each real element
    receives ``g * z ** (1/p - 1) * K / n * x ** (p - 1)``, where the factor ``z ** (1/p - 1)``
    is 0 for a window whose ``z`` is 0 (relu's derivative at 0)."""
    x64, g64, y, dx = _arrays(spec, x, g, ("lp_pool",))
    p, volume = spec.norm_type, math.prod(resolve(spec, x.shape).kernel_size)
    for o, cells, in_padded in windows(spec, x.shape):
        scale = volume / in_padded
        for n, c in np.ndindex(*x.shape[:2]):
            z = sum((x64[n, c][q] ** p for q in cells), np.float64(0)) * scale
            y[n, c][o] = z ** (1 / p)
            factor = z ** (1 / p - 1) if z != 0 else 0.0
            for q in cells:
                dx[n, c][q] += g64[n, c][o] * factor * scale * x64[n, c][q] ** (p - 1)
    return _rounded(y, dx, x.dtype)


def _crop_reads(first: float, last: float, n: int, j: int, length: int) -> list[tuple[int, float]]:
    """The pixels crop point ``j`` of ``n`` reads along one axis, with their weights: the points run
    from corner to corner (the centre when n = 1); one outside [0, length - 1] reads nothing."""
    p = (first + last) / 2 if n == 1 else first + j * (last - first) / (n - 1)
    if p < 0 or p > length - 1:
        return []
    low = math.floor(p)
    return [(low, 1 - (p - low))] + ([(low + 1, p - low)] if p > low else [])


@_quiet
def roi_crop_max_pool(spec: PoolSpec, x: np.ndarray, g, *, tie: str = "first", nan: str = "propagate"):
    """SPEC.md "roi_crop_max_pool": per box, its crop of ``n = (p - 1) * stride + kernel`` bilinear
    points per axis (a point reading nothing is 0), rounded to x's dtype; max_pool (kernel, stride,
    no padding) over the crop under the policies, the crop's gradient rounded to x's dtype; each
    point's gradient to the pixels it reads, times their weights."""
    _op(spec, "roi_crop_max_pool")
    dtype_from_name(x.dtype, field="input")
    s, (ky, kx), (sy, sx) = spec.spatial_scale, spec.kernel_size, spec.stride
    n = [(p - 1) * st + k for p, st, k in zip(spec.output_size, spec.stride, spec.kernel_size)]
    out_shape = (len(spec.boxes), x.shape[1], *spec.output_size)
    g = np.asarray(g)
    if g.shape != out_shape:
        raise SpecError("grad_output", f"must have the forward output's shape {out_shape}, got {g.shape}")
    g64, x64 = round_to(g.astype(np.float64), x.dtype).astype(np.float64), x.astype(np.float64)
    y, dx = np.zeros(out_shape), np.zeros(x.shape)
    for k, (b, x1, y1, x2, y2) in enumerate(spec.boxes):
        reads = {(i, j): [((r, c), wr * wc) for r, wr in _crop_reads(y1 * s, y2 * s, n[0], i, x.shape[2])
                          for c, wc in _crop_reads(x1 * s, x2 * s, n[1], j, x.shape[3])]
                 for i in range(n[0]) for j in range(n[1])}
        for c in range(x.shape[1]):
            crop = {ij: sum((w * x64[b, c][p] for p, w in cells), np.float64(0)) for ij, cells in reads.items()}
            crop = {ij: float(round_to(np.float64(v), x.dtype)) for ij, v in crop.items()}
            g_crop = dict.fromkeys(crop, 0.0)
            for o in np.ndindex(*spec.output_size):
                cells = [(o[0] * sy + a, o[1] * sx + e) for a in range(ky) for e in range(kx)]
                y[k, c][o], receivers = select([crop[p] for p in cells], tie, nan)
                for i in receivers:
                    g_crop[cells[i]] += g64[k, c][o] / len(receivers) if tie == "split" else g64[k, c][o]
            for ij, cells in reads.items():
                share = float(round_to(np.float64(g_crop[ij]), x.dtype))
                for p, w in cells:
                    dx[b, c][p] += w * share
    return _rounded(y, dx, x.dtype)


BY_OP = {f.__name__: f for f in (max_pool, avg_pool, lp_pool, adaptive_max_pool, adaptive_avg_pool,
                                  fractional_max_pool, segment_max_pool, segment_avg_pool, roi_crop_max_pool)}
_MAX_OPS = ("max_pool", "adaptive_max_pool", "fractional_max_pool", "segment_max_pool")


def _op(spec: PoolSpec, op: str) -> PoolSpec:
    if spec.op != op:
        raise SpecError("op", f"this function defines {op}, the spec asks for {spec.op}; use BY_OP[{spec.op!r}]")
    return spec


def _arrays(spec: PoolSpec, x: np.ndarray, g, ops: tuple[str, ...]):
    """x and g (rounded to x's dtype, as a framework receives it) in float64, and zeroed y, dx."""
    if spec.op not in ops:
        raise SpecError("op", f"this function defines {', '.join(ops)}, the spec asks for {spec.op}; "
                              f"use BY_OP[{spec.op!r}]")
    dtype_from_name(x.dtype, field="input")   # refuses an input of another dtype
    out_shape = tuple(x.shape[:2]) + resolve(spec, x.shape).out_shape
    g = np.asarray(g)
    if g.shape != out_shape:
        raise SpecError("grad_output", f"must have the forward output's shape {out_shape}, got {g.shape}")
    g64 = round_to(g.astype(np.float64), x.dtype).astype(np.float64)
    return x.astype(np.float64), g64, np.zeros(out_shape), np.zeros(x.shape)


def _rounded(y: np.ndarray, dx: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    return round_to(y, dtype), round_to(dx, dtype)
