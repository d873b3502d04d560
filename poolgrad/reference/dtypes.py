"""The floating dtypes the suite knows, by name, and how values are rounded into them."""

import ml_dtypes
import numpy as np

from .errors import SpecError

DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


def dtype_from_name(name, field="dtype") -> np.dtype:
    if isinstance(name, np.dtype) or (isinstance(name, type) and issubclass(name, np.generic)):
        name = np.dtype(name).name
    if name not in DTYPES:
        raise SpecError(field, f"unknown dtype {name!r}; allowed: {', '.join(DTYPES)}")
    return DTYPES[name]


def dtype_name(dtype) -> str:
    dtype = np.dtype(dtype)
    for name, known in DTYPES.items():
        if known == dtype:
            return name
    raise SpecError("dtype", f"unsupported array dtype {dtype}; allowed: {', '.join(DTYPES)}")


def work_dtype(dtype) -> np.dtype:
    """Dtype in which values of ``dtype`` are compared: exact, and fast in NumPy.

    float16 and bfloat16 widen exactly to float32, so comparisons (ties, signed zeros,
    subnormals) are unchanged while NumPy runs its native float32 loops.
    """
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def _float32_round_to_odd(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded toward zero, the last bit set when inexact ("round to odd").

    ml_dtypes converts float64 to bfloat16 through float32 with two round-to-nearest steps,
    which double-rounds (1 + 2**-8 + 2**-30 becomes 1, not 1 + 2**-7). Rounding to odd first
    keeps the sticky information, so the second, nearest-even step is the correct single
    rounding (float32 carries more than bfloat16's 8 + 2 significand bits).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        away = np.abs(f.astype(np.float64)) > np.abs(x)
        f = np.where(away, np.nextafter(f, np.float32(0)), f)
        inexact = (f.astype(np.float64) != x) & ~np.isnan(x)
    return (f.view(np.uint32) | inexact.astype(np.uint32)).view(np.float32)


def round_to(values: np.ndarray, dtype) -> np.ndarray:
    """Round float64 values once to ``dtype`` (round-to-nearest-even, a single rounding).
    A value past the dtype's range rounds to an infinity of its sign, as IEEE 754 defines
    (the spec's result where a sum or a norm overflows): an expected outcome, not a warning."""
    values = np.asarray(values)
    if np.dtype(dtype) == DTYPES["bfloat16"] and values.dtype == np.float64:
        values = _float32_round_to_odd(values)
    with np.errstate(over="ignore"):
        return values.astype(dtype)
