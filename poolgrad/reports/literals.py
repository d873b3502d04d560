"""Arrays and call arguments as Python code a person reads: the literals of an upstream draft's
reproducer."""

from __future__ import annotations

import pprint
import textwrap

import numpy as np

from poolgrad.cases.shrink import SMALL

WIDTH = 100  # characters per line of prose and of the reproducer's literals


def compact(value):
    """A tuple of one repeated value as that value (frameworks take a scalar for every axis)."""
    if isinstance(value, (tuple, list)) and value and all(v == value[0] for v in value):
        return compact(value[0])
    return value


def call_args(call: dict, positional=(), defaults=None, scalars: bool = True) -> str:
    """A planner's keyword arguments as a user writes them: ``positional`` first by position,
    the others by keyword, those equal to their ``defaults`` left out, and (``scalars``: where
    the framework takes one value for every axis) each axis' equal values as one. Values are
    numbers, strings and tuples of them (repr is their code)."""
    defaults = defaults or {}
    shown = compact if scalars else (lambda v: v)
    out = [repr(shown(call[k])) for k in positional if k in call]
    out += [f"{k}={shown(v)!r}" for k, v in call.items()
            if k not in positional and not (k in defaults and compact(defaults[k]) == compact(v))]
    return ", ".join(out)


def literal(a: np.ndarray, indent: int = 0, repeats: bool = True) -> str:
    """An array as Python code: a nested list wrapped to WIDTH (floats exact: every value of the
    case dtypes is exact in float64; NaN and infinities by the names ``nan`` and ``inf``); for a
    large array, ``np.resize`` of the shortest run of values it repeats (the routing probe: by
    its formula), or ``np.reshape`` of its values in one flat list (fewer lines)."""
    a = np.asarray(a, dtype=np.float64)
    if a.size <= SMALL:
        return pprint.pformat(a.tolist(), width=WIDTH - indent, compact=True).replace("\n", "\n" + " " * indent)
    period = _period(a.ravel()) if repeats else a.size
    run = a.ravel()[:period]
    if period < a.size and np.array_equal(run, np.ldexp(1.0, np.arange(period))):
        return f"np.resize(np.ldexp(1.0, np.arange({period})), {a.shape})"
    if period <= a.size // 2:
        return f"np.resize({literal(run, indent + 10, repeats=False)}, {a.shape})"
    odd = _one_odd_element(a.ravel())
    if odd is not None:  # a tie's whole share on one element of a constant plane
        i, value, fill = odd
        return f"np.where(np.arange({a.size}).reshape({a.shape}) == {i}, {value!r}, {fill!r})"
    flat = textwrap.fill(", ".join(map(repr, a.ravel().tolist())), WIDTH - indent - 12, break_long_words=False)
    return f"np.reshape([{flat}], {a.shape})".replace("\n", "\n" + " " * (indent + 12))


def _one_odd_element(flat: np.ndarray) -> tuple[int, float, float] | None:
    """(index, value, fill) where every element but one holds the same bits, else None."""
    values, where, counts = np.unique(flat.view(np.int64), return_inverse=True, return_counts=True)
    if len(values) != 2 or counts.min() != 1 or counts.max() == 1:
        return None
    i = int(np.flatnonzero(where == counts.argmin())[0])
    return i, float(flat[i]), float(flat[np.flatnonzero(where == counts.argmax())[0]])


def _period(flat: np.ndarray) -> int:
    """The shortest run whose repetition is ``flat``, bit for bit."""
    bits = flat.view(np.int64)
    return next(p for p in range(1, bits.size + 1) if np.array_equal(bits[p:], bits[:bits.size - p]))


def dict_code(items: dict[str, str]) -> str:
    """A dict of code values as code: one line where it fits in WIDTH, else one line per key."""
    one = "{" + ", ".join(f"{k!r}: {v}" for k, v in items.items()) + "}"
    if len(one) + 11 <= WIDTH and "\n" not in one:
        return one
    return "{\n" + "".join(f"    {k!r}: {v},\n" for k, v in items.items()) + "}"
