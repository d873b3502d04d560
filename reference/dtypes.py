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


def round_to(values: np.ndarray, dtype) -> np.ndarray:
    """Round float64 accumulations once to ``dtype`` (round-to-nearest-even)."""
    return np.asarray(values).astype(dtype)
