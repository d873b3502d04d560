"""Where the reference's sums are accumulated (SPEC.md, "Dtypes and rounding", and the policy
``accumulate`` in "Verdicts and tolerances").

The spec sums in float64 and rounds once (``accumulate=None``). The other accumulations are
policies: every sum kept in the input dtype, each addition rounded to it (so float16
2048 + 1 + 1 + 1 stays 2048, and a float16 window of four 40000s sums to inf), in a stated
order. ``"dtype"``: a window's taps in window order (forward sums), and the windows reaching
one input element in output-position order (row-major over the output).
``"dtype_axis1_reversed"``: the same with the second output axis visited backwards, the others
in order (a 1-D output's only axis backwards); forward window sums keep window order.
``"dtype_per_axis"``: one output axis at a time, last axis first: the windows of one output
row that reach an element, then those row sums over the rows, and so on outwards.
``"rounded_sum"``: avg's window sum in float64, rounded once to the input dtype, then divided
(a half sum accumulated in float32 and cast back before the division); every other sum is the
spec's. Which framework paths add in which order is what their findings say.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .dtypes import round_to
from .errors import SpecError

ACCUMULATIONS = (None, "dtype", "dtype_axis1_reversed", "dtype_per_axis", "rounded_sum")
F64 = np.dtype(np.float64)
# The scatter order rides on the accumulator dtype's metadata, so that every sum of the
# reference takes one ``acc`` argument (np.dtype compares equal whatever its metadata).
_REVERSED = {"scatter_order": "reversed"}
_PER_AXIS = {"scatter_order": "per_axis"}


def check(accumulate) -> None:
    if accumulate not in ACCUMULATIONS:
        raise SpecError("accumulate", f"unknown accumulation {accumulate!r}; allowed: None (float64, one "
                                      f"rounding), 'dtype' (every addition rounded to the input dtype, output "
                                      f"positions in order), 'dtype_axis1_reversed' (the same, the second output axis backwards), "
                                      f"'dtype_per_axis' (one output axis at a time, last axis first) or 'rounded_sum' (avg's "
                                      f"window sum rounded to the input dtype before the division)")


def acc_dtype(accumulate, dtype) -> np.dtype:
    """The dtype the sums are kept in (its metadata says the scatter order, or the dtype an avg
    window sum is rounded to)."""
    if accumulate is None:
        return F64
    if accumulate == "rounded_sum":
        return np.dtype(np.float64, metadata={"sum_rounded_to": np.dtype(dtype)})
    order = {"dtype_axis1_reversed": _REVERSED, "dtype_per_axis": _PER_AXIS}.get(accumulate)
    return np.dtype(dtype, metadata=order) if order else np.dtype(dtype)


def rounded_sum(sums: np.ndarray, acc: np.dtype) -> np.ndarray:
    """Window sums (float64) as the division sees them: rounded to the input dtype under
    ``"rounded_sum"``, as they are otherwise."""
    to = (acc.metadata or {}).get("sum_rounded_to")
    if to is None:
        return sums
    with np.errstate(over="ignore"):  # a sum past the dtype's range is inf: that is the point
        return round_to(sums, to).astype(np.float64)


def terms(values: np.ndarray, acc: np.dtype) -> np.ndarray:
    """Summands as the accumulator sees them: rounded once to ``acc`` (under these policies each
    term, x ** p or g / divisor, is itself a value of the dtype)."""
    if acc == F64:
        return values
    with np.errstate(over="ignore", invalid="ignore"):
        return round_to(np.asarray(values, dtype=np.float64), acc)


def scatter_add(size: int, flat_index: np.ndarray, values: np.ndarray, acc: np.dtype,
                taps: bool = False) -> np.ndarray:
    """Float64 array of ``size``: ``values`` added at ``flat_index`` (both shaped (N, C, *output
    axes), then a taps axis if ``taps``), in the arrays' C order (the second output axis, or a
    1-D output's only one, backwards where ``acc`` says so) and in ``acc``, each addition
    rounded to it."""
    if acc == F64:
        return np.bincount(flat_index.ravel(), weights=values.ravel(), minlength=size)
    if acc.metadata == _PER_AXIS:
        return _scatter_per_axis(size, flat_index, terms(values, acc), acc)
    if acc.metadata == _REVERSED:
        axis = 2 + int(flat_index.ndim - 2 - taps > 1)
        flat_index, values = np.flip(flat_index, axis), np.flip(values, axis)
    out = np.zeros(size, dtype=acc)
    with np.errstate(over="ignore", invalid="ignore"):
        np.add.at(out, flat_index.ravel(), terms(values.ravel(), acc))
    return out.astype(np.float64)


def _scatter_per_axis(size: int, flat_index: np.ndarray, values: np.ndarray, acc: np.dtype) -> np.ndarray:
    """scatter_add for ``"dtype_per_axis"``: ``flat_index`` is shaped (N, C, *output axes[,
    taps]); the terms reaching one element are added over the last axis first (in its order),
    those sums over the axis before, and so on up to (N, C), each addition rounded to ``acc``."""
    prefix = np.arange(flat_index.size, dtype=np.int64)
    target, value = flat_index.ravel().astype(np.int64), values.ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        for extent in reversed(flat_index.shape[2:]):
            prefix //= extent
            # unique keys come out sorted, so the next axis still sees its terms in output order
            keys, group = np.unique(prefix * size + target, return_inverse=True)
            sums = np.zeros(keys.size, dtype=acc)
            np.add.at(sums, group.ravel(), value)
            prefix, target, value = keys // size, keys % size, sums
        out = np.zeros(size, dtype=acc)
        np.add.at(out, target, value)
    return out.astype(np.float64)


def scatter_taps(plan, shape, per_tap, acc: np.dtype) -> np.ndarray:
    """Gradient w.r.t. the padded input of ``shape``: ``per_tap[t]`` (an output-shaped array)
    added at tap ``t`` of every window, in output-position order."""
    out_shape = plan.out_shape(shape)
    values = np.empty(out_shape + (len(per_tap),), dtype=np.result_type(*per_tap))
    for t, v in enumerate(per_tap):
        values[..., t] = v
    return scatter_add(math.prod(shape), plan.tap_index(shape), values, acc, taps=True).reshape(shape)


def routed_sums_exact(plan, padded_shape, dtype, g: np.ndarray) -> bool:
    """Whether every sum a max-type backward can form is exact in ``dtype``, whatever the
    routing and the order: a subset of the gradients of the windows sharing an input element
    adds up to a multiple of their common power-of-two quantum no larger than all of them
    together, so it is exact when that total is finite in the dtype and at most 2 ** precision
    quanta. (The routing probe passes; large + small gradients do not.) ``g``: the upstream
    gradient in ``dtype``; ``padded_shape``: the shape of the padded input."""
    g = np.abs(np.asarray(g, dtype=np.float64))
    if not np.isfinite(g).all():
        return False
    nonzero = g[g != 0]
    if nonzero.size == 0:
        return True
    info = ml_dtypes.finfo(dtype)
    mant, exp = np.frexp(nonzero)
    units = (mant * 2.0 ** 53).astype(np.int64)
    quantum = float(np.min(np.ldexp((units & -units).astype(np.float64), exp - 53)))
    reach = scatter_taps(plan, padded_shape, [g if valid is None else np.where(valid, g, 0.0)
                                              for _, valid in plan.taps], F64)
    total = float(reach.max(initial=0.0))
    return total <= float(info.max) and total <= 2.0 ** (info.nmant + 1) * quantum
