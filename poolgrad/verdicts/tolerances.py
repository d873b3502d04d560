"""Per-op, per-dtype tolerances for arithmetic pooling ops, loaded from tolerances.toml."""

from __future__ import annotations

import functools
import pathlib
import tomllib

import ml_dtypes
import numpy as np

from poolgrad.reference.dtypes import dtype_name

_FILE = pathlib.Path(__file__).with_name("tolerances.toml")


@functools.cache
def table() -> dict:
    with _FILE.open("rb") as f:
        return tomllib.load(f)


def bound(op: str, dtype, scale: np.ndarray) -> np.ndarray:
    """The allowed |observed - expected| per element, given the magnitude ``scale``."""
    entry = table()[op][dtype_name(dtype)]
    info = ml_dtypes.finfo(dtype)
    return (entry["atol_tiny"] * float(info.smallest_normal)
            + entry["rtol_eps"] * float(info.eps) * np.abs(np.asarray(scale, dtype=np.float64)))
