"""How case files, results records and verdicts spell numbers and arrays in JSON, the one home
of it: finite floats as numbers (an array's as the shortest decimal that reads back as the same
value of its dtype), NaN, +-inf and -0.0 as the strings "nan", "inf", "-inf", "-0.0" (JSON has
no NaN or inf, and many JSON tools lose the sign of a zero)."""

from __future__ import annotations

import math

import ml_dtypes  # noqa: F401  (registers bfloat16 with NumPy, by name too)
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


# Below this magnitude an integral float64 is written as a JSON integer ("3", not "3.0"): it
# reads back as the same float, and most values in pooling cases are integral.
_EXACT_INT = 2.0 ** 53


def encode_array(a) -> list:
    """A NumPy array as nested lists; floats use the special strings, integers stay ints. A
    value is written as the shortest decimal that reads back as the same value of its own
    dtype (float32 0.1 as 0.1, not 0.10000000149011612)."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":
        return a.tolist()
    f = _shortest(a)
    out = f.astype(object)
    with np.errstate(invalid="ignore"):
        integral = (np.abs(f) < _EXACT_INT) & (f == np.trunc(f))
    out[integral] = f[integral].astype(np.int64).astype(object)
    out[np.isnan(f)] = "nan"
    out[f == np.inf] = "inf"
    out[f == -np.inf] = "-inf"
    out[(f == 0) & np.signbit(f)] = "-0.0"
    return out.tolist()


def _shortest(a: np.ndarray) -> np.ndarray:
    """``a`` as float64 values whose repr is the shortest decimal that reads back (through
    float64) as ``a``'s bits; a value none of the decimals tried reads back as stays exact."""
    exact = a.astype(np.float64)
    if a.dtype == np.float64 or a.size == 0:
        return exact
    if a.dtype in (np.float32, np.float16):  # NumPy writes these shortest (Dragon4)
        tries = [a.astype(str).astype(np.float64)]
    else:  # ml_dtypes' bfloat16 has no str cast; its 8 significant bits need at most 4 digits
        tries = [np.char.mod(f"%.{digits}g", exact).astype(np.float64) for digits in (4, 3, 2)]
    bits = a.view(f"u{a.itemsize}")
    short = exact
    for t in tries:
        short = np.where(t.astype(a.dtype).view(f"u{a.itemsize}") == bits, t, short)
    return short


def decode_array(nested, dtype) -> np.ndarray:
    """The inverse of encode_array: nested lists (with the special strings) to ``dtype``.

    ``dtype`` may be a name ("bfloat16") or a NumPy dtype. A ragged list or an unknown string
    raises ValueError.
    """
    return to_float64(nested).astype(_dtype(dtype))


def written_values(nested, dtype) -> np.ndarray:
    """The exact float64 values an encoded array stands for, whichever writer wrote it: exact
    float64 reprs (writers before the shortest decimals), or the shortest decimals of the
    case's ``dtype``, or of float32 for an array a framework returned wider than the case."""
    f = to_float64(nested)
    for dtype in (_dtype(dtype), np.dtype(np.float32)):
        with np.errstate(over="ignore"):
            d = f.astype(dtype)
        exact = d.astype(np.float64)
        if np.array_equal(exact, f, equal_nan=True) or encode_array(d) == nested:
            return exact
    return f


def _dtype(dtype) -> np.dtype:
    """A NumPy dtype or its name ("bfloat16" is ml_dtypes', which registers the name)."""
    return np.dtype(dtype)
