"""A slow, obviously-correct pooling implementation: one Python iteration per window.

Written from the PyTorch and TensorFlow documentation, independently of ``poolgrad/reference/`` (it
imports nothing from it), so that agreement between the two means something. Specs are the
case-file dicts that ``PoolSpec.from_dict`` takes.
"""

from __future__ import annotations

import itertools
import math

import numpy as np


class TooLarge(Exception):
    """The window does not fit the padded input (the reference must refuse the spec)."""


def _per_axis(value, rank):
    return list(value) if isinstance(value, (list, tuple)) else [value] * rank


def _pads(spec, spatial, kernel, stride, dilation):
    padding = spec.get("padding", 0)
    rank = len(spatial)
    if padding == "VALID":
        return [(0, 0)] * rank
    if padding == "SAME":
        # tf.nn.pool: out = ceil(L / s); total padding makes the last window end at the input's
        # end; when it is odd the extra element goes after.
        pads = []
        for L, k, s, d in zip(spatial, kernel, stride, dilation):
            extent = (k - 1) * d + 1
            total = max((math.ceil(L / s) - 1) * s + extent - L, 0)
            pads.append((total // 2, total - total // 2))
        return pads
    return [tuple(p) if isinstance(p, (list, tuple)) else (p, p) for p in _per_axis(padding, rank)]


def _sliding_axis(L, k, s, d, before, after, ceil_mode):
    """Windows along one axis: a list of windows, each a list of (position, inside padded input)."""
    extent = (k - 1) * d + 1
    if extent > L + before + after:
        raise TooLarge
    # torch.nn.MaxPool docs: floor or ceil of (L + pads - extent) / s, plus one; in ceil mode
    # a window that would start in the right padding is dropped.
    rounding = math.ceil if ceil_mode else math.floor
    out = rounding((L + before + after - extent) / s) + 1
    if ceil_mode and (out - 1) * s >= L + before:
        out -= 1
    windows = []
    for o in range(out):
        positions = [o * s - before + t * d for t in range(k)]
        windows.append([(p, -before <= p < L + after) for p in positions])
    return windows


def _adaptive_axis(L, out):
    # torch adaptive pooling: bin i covers [floor(i * L / out), ceil((i + 1) * L / out)).
    return [[(p, True) for p in range((i * L) // out, -(-((i + 1) * L) // out))] for i in range(out)]


def axis_windows(spec, spatial):
    rank = len(spatial)
    if spec["op"].startswith("fractional"):
        # fractional_max_pool: the spec lists each dim's regions, [start, stop) pairs.
        return [[[(p, True) for p in range(start, stop)] for start, stop in dim] for dim in spec["regions"]]
    if spec["op"].startswith("segment"):
        # segment ops (rank 1): segment s pools the items whose id is s, in item order.
        return [[[(p, True) for p in range(spatial[0]) if spec["segment_ids"][p] == s]
                 for s in range(spec["num_segments"])]]
    if spec["op"].startswith("adaptive"):
        sizes = _per_axis(spec["output_size"], rank)
        return [_adaptive_axis(L, L if o is None else o) for L, o in zip(spatial, sizes)]
    kernel = _per_axis(spec["kernel_size"], rank)
    stride = _per_axis(spec.get("stride") or spec["kernel_size"], rank)
    dilation = _per_axis(spec.get("dilation", 1), rank)
    pads = _pads(spec, spatial, kernel, stride, dilation)
    return [_sliding_axis(L, k, s, d, b, a, spec.get("ceil_mode", False))
            for L, k, s, d, (b, a) in zip(spatial, kernel, stride, dilation, pads)]


def output_shape(spec, shape):
    """(N, C, *pooled spatial) of ``spec`` over an input of ``shape``. Raises TooLarge."""
    return tuple(shape[:2]) + tuple(len(a) for a in axis_windows(spec, shape[2:]))


def _max_window(values, tie, nan):
    """(output, [(tap number, share of the upstream gradient)])."""
    candidates = [i for i, v in enumerate(values) if not (nan == "ignore" and math.isnan(v))]
    if not candidates:
        return -math.inf, []
    nans = [i for i in candidates if math.isnan(values[i])]
    if nans:
        maxima = nans
    else:
        top = max(values[i] for i in candidates)
        maxima = [i for i in candidates if values[i] == top]
    chosen = maxima[-1] if tie == "last" else maxima[0]
    routes = {"first": [(maxima[0], 1.0)], "last": [(maxima[-1], 1.0)],
              "all": [(i, 1.0) for i in maxima], "split": [(i, 1.0 / len(maxima)) for i in maxima]}[tie]
    return values[chosen], routes


def _avg_window(spec, values, taps_in_padded, g):
    if spec.get("divisor_override"):
        divisor = spec["divisor_override"]
    elif spec["op"].startswith("segment"):
        divisor = max(len(values), 1)   # an empty segment's mean is 0 (SPEC.md)
    elif spec.get("count_include_pad", True) and not spec["op"].startswith("adaptive"):
        divisor = taps_in_padded
    else:
        divisor = len(values)
    if divisor == 0:
        return math.nan, []
    return sum(values) / divisor, [(i, g / divisor) for i in range(len(values))]


def _lp_window(spec, values, taps_in_padded, kernel_volume, g):
    # torch.nn.functional.lp_pool: (sign(a) * relu(|a|) * K) ** (1/p), a = avg_pool(x ** p)
    # counting padding; relu's zero derivative at 0 makes an all-zero window's gradient 0.
    p = spec["norm_type"]
    z = sum(np.float64(v) ** p for v in values) / taps_in_padded * kernel_volume
    dz = z ** (1.0 / p - 1.0) if z != 0 else 0.0
    per = g * dz * kernel_volume / taps_in_padded
    return z ** (1.0 / p), [(i, per * np.float64(v) ** (p - 1.0)) for i, v in enumerate(values)]


def pool(spec: dict, x: np.ndarray, g: np.ndarray, tie="first", nan="propagate"):
    """Forward and backward in float64, before rounding to x's dtype. Raises TooLarge."""
    xs, g = x.astype(np.float64), g.astype(np.float64)
    spatial = x.shape[2:]
    axes = axis_windows(spec, spatial)
    out_shape = tuple(len(a) for a in axes)
    kernel_volume = math.prod(_per_axis(spec.get("kernel_size", 1), len(spatial)))
    y, dx = np.zeros(x.shape[:2] + out_shape), np.zeros(x.shape)
    op = spec["op"]
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for o in itertools.product(*(range(k) for k in out_shape)):
            taps = list(itertools.product(*(axes[d][o[d]] for d in range(len(spatial)))))
            real = [tuple(p for p, _ in tap) for tap in taps
                    if all(0 <= p < L for (p, _), L in zip(tap, spatial))]
            in_padded = sum(all(inside for _, inside in tap) for tap in taps)
            values = [xs[(n, c) + pos] for pos in real]
            gv = g[(n, c) + o]
            with np.errstate(all="ignore"):   # inf - inf and 0 * inf are part of the cases
                if op.endswith("max_pool"):
                    y[(n, c) + o], routes = _max_window(values, tie, nan)
                    routes = [(i, gv * share) for i, share in routes]
                elif op.endswith("avg_pool"):
                    y[(n, c) + o], routes = _avg_window(spec, values, in_padded, gv)
                else:
                    y[(n, c) + o], routes = _lp_window(spec, values, in_padded, kernel_volume, gv)
                for i, w in routes:
                    dx[(n, c) + real[i]] += w
    return y, dx


def _positive_finite_table(dtype):
    """Every non-negative finite value of a 16-bit float type, ascending (bit order = value order)."""
    with np.errstate(invalid="ignore"):
        values = np.arange(1 << 15, dtype=np.uint16).view(dtype).astype(np.float64)
    return values[np.isfinite(values)]


def round_nearest_even(values: np.ndarray, dtype) -> np.ndarray:
    """float64 -> dtype, one correct round-to-nearest-even, by looking values up in the table
    of all values of 16-bit types (no conversion routine is trusted for those)."""
    dtype = np.dtype(dtype)
    if dtype.itemsize != 2:
        return values.astype(dtype)
    table = _positive_finite_table(dtype)
    a = np.abs(values)
    out = np.empty(a.shape)
    for i, v in np.ndenumerate(a):
        if not math.isfinite(v):
            out[i] = v
            continue
        k = int(np.searchsorted(table, v))
        if k < len(table) and table[k] == v:
            out[i] = v
            continue
        below = table[k - 1]
        above = table[k] if k < len(table) else table[-1] + (table[-1] - table[-2])
        middle = (below + above) / 2
        if v < middle or (v == middle and (k - 1) % 2 == 0):
            out[i] = below
        else:
            out[i] = above if k < len(table) else math.inf
    return np.copysign(out, values).astype(dtype)

