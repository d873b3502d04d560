"""How case files (and results records) spell numbers in JSON: finite floats as numbers
(repr of the float64 value), NaN, +-inf and -0.0 as the strings "nan", "inf", "-inf", "-0.0"
(JSON has no NaN or inf, and many JSON tools lose the sign of a zero)."""

from __future__ import annotations

import math

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
