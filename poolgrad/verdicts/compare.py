"""How an observed array is compared with an expected one: bit for bit (selections and max
routing), in units in the last place of the case dtype, or within a tolerance (tolerances.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

MAX_CELLS = 64  # differing cells listed in a verdict; the count is always reported
_BITS = {np.dtype(t): np.dtype(f"u{np.dtype(t).itemsize}")
         for t in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64)}


def as_f64(a) -> np.ndarray:
    """Every case dtype widens exactly to float64 (signed zeros and NaN-ness kept)."""
    return np.asarray(a).astype(np.float64)


def same_bits(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise identity up to NaN payload: equal values with equal signs (so -0.0 is not
    +0.0), or both NaN. A framework's NaN sign/payload is not a policy anyone can rely on."""
    if (isinstance(actual, np.ndarray) and isinstance(expected, np.ndarray) and actual.dtype == expected.dtype
            and actual.shape == expected.shape and actual.dtype in _BITS):
        # One dtype: equal value and sign is equal bits (the policy search compares this way
        # tens of times per case), so no widening.
        bits = _BITS[actual.dtype]
        return (actual.view(bits) == expected.view(bits)) | (np.isnan(actual) & np.isnan(expected))
    a, e = as_f64(actual), as_f64(expected)
    return ((a == e) & (np.signbit(a) == np.signbit(e))) | (np.isnan(a) & np.isnan(e))


def identical(actual, expected) -> bool:
    if actual is None or expected is None:
        return actual is expected
    return np.shape(actual) == np.shape(expected) and bool(same_bits(actual, expected).all())


def identical_to(observed):
    """``identical(observed, ·)`` for comparing one observed array with many (the policy
    search): its bytes and NaN-ness are found once, and an expected array of its dtype and
    shape matches where its bytes are the same, or, where ``observed`` has a NaN (whose
    payload may differ), as identical() decides."""
    if not (isinstance(observed, np.ndarray) and observed.dtype in _BITS):
        return lambda expected: identical(observed, expected)
    raw, has_nan = observed.tobytes(), None  # has_nan: found on the first bytes that differ

    def matches(expected) -> bool:
        nonlocal has_nan
        if (isinstance(expected, np.ndarray) and expected.dtype == observed.dtype
                and expected.shape == observed.shape):
            if expected.tobytes() == raw:
                return True
            if has_nan is None:
                has_nan = bool(np.isnan(observed).any())
            if not has_nan:  # without a NaN in observed, identical means the same bits everywhere
                return False
        return identical(observed, expected)
    return matches


def ulp_of(values: np.ndarray, dtype) -> np.ndarray:
    """The spacing of ``dtype`` at each value (the smallest subnormal at and near zero)."""
    info = ml_dtypes.finfo(dtype)
    v = np.abs(as_f64(values))
    _, exp = np.frexp(np.where(np.isfinite(v) & (v > 0), v, 1.0))
    ulp = np.maximum(np.ldexp(1.0, exp - 1 - info.nmant), float(info.smallest_subnormal))
    return np.where(v == 0, float(info.smallest_subnormal), ulp)


def errors(actual, expected, dtype, same: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(absolute error, error in ulps of ``dtype``) per element; 0 where the bits agree, inf
    where one side is non-finite and the other is not the same value. ``same``:
    same_bits(actual, expected) where the caller has it."""
    a, e = as_f64(actual), as_f64(expected)
    if same is None:
        same = same_bits(a, e)
    with np.errstate(invalid="ignore", over="ignore"):
        abs_err = np.where(same, 0.0, np.abs(a - e))
    abs_err = np.where(~same & ~np.isfinite(abs_err), np.inf, abs_err)
    # -0.0 against +0.0 differs by 0 in value but is a different selection: count it as 1 ulp
    abs_err = np.where(~same & (abs_err == 0), float(ml_dtypes.finfo(dtype).smallest_subnormal), abs_err)
    with np.errstate(over="ignore"):  # a float64 error in ulps of the smallest subnormal is inf
        return abs_err, abs_err / ulp_of(e, dtype)


def differing_cells(ok: np.ndarray) -> list[tuple[int, ...]]:
    """Indices (row-major order) of the first MAX_CELLS elements where ``ok`` is False."""
    bad = np.argwhere(~ok)[:MAX_CELLS]
    return [tuple(int(i) for i in row) for row in bad]


def within(actual, expected, bound: np.ndarray) -> np.ndarray:
    """Elementwise: bits agree, or |actual - expected| <= bound (non-finite must agree)."""
    a, e = as_f64(actual), as_f64(expected)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - e) <= bound
    return same_bits(a, e) | (close & np.isfinite(a) & np.isfinite(e))
