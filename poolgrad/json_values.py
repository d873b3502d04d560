"""How case files (and results records) spell numbers in JSON: finite floats as numbers
(repr of the float64 value), NaN, +-inf and -0.0 as the strings "nan", "inf", "-inf", "-0.0"
(JSON has no NaN or inf, and many JSON tools lose the sign of a zero)."""

from __future__ import annotations

import math

import numpy as np

SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "-0.0": -0.0}


def float_to_json(v: float) -> float | str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0 and math.copysign(1.0, v) < 0:
        return "-0.0"
    return v


def shape_of(nested) -> tuple[int, ...]:
    """The shape a nested list claims by its first items (raggedness is checked elsewhere)."""
    shape = []
    while isinstance(nested, list):
        shape.append(len(nested))
        if not nested:
            break
        nested = nested[0]
    return tuple(shape)


def to_float64(nested) -> np.ndarray:
    """A nested list of numbers and SPECIAL strings as a float64 array, in a few vectorized
    passes (case files hold millions of values); ValueError where it is not one: ragged, a
    value neither a number nor a SPECIAL string (bool included), an integer beyond float64."""
    obj = np.array(nested, dtype=object)
    if obj.shape != shape_of(nested):
        raise ValueError("ragged nested list: every row must have the same length")
    flat = obj.ravel()
    if not set(map(type, flat)) <= {int, float, str}:
        bad = next(v for v in flat if type(v) not in (int, float, str))
        raise ValueError(f"{bad!r} in an array is not a number")
    is_str = np.fromiter(map(str.__instancecheck__, flat), bool, flat.size)
    out = np.empty(flat.shape, np.float64)
    for i in np.flatnonzero(is_str):
        if flat[i] not in SPECIAL:
            raise ValueError(f"unknown value {flat[i]!r} in an array; allowed strings: {', '.join(SPECIAL)}")
        out[i] = SPECIAL[flat[i]]
    try:
        out[~is_str] = flat[~is_str].astype(np.float64)
    except OverflowError:
        raise ValueError("an integer in an array is too large for float64") from None
    return out.reshape(obj.shape)
