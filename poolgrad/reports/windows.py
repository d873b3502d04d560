"""The pooling windows that read a differing input cell, from the reference's geometry: what a
reader needs to see to understand one routing decision."""

from __future__ import annotations

import itertools

import numpy as np

from poolgrad.reference import PoolSpec, SpecError, resolve

from .arrays import at, shape_of

MAX_WINDOWS = 4


def touching(spec: dict, nested_input, cells) -> list[dict]:
    """Windows (output positions) whose taps read any of ``cells`` (n, c, *spatial).

    Each: {"out": (n, c, *o), "window": nested (1, 1, *taps) of input values, None for padding,
    "marks": tap indices that are differing cells}. Empty when the spec cannot be resolved.
    """
    shape = shape_of(nested_input)
    try:
        geom = resolve(PoolSpec.from_dict(spec), shape)
    except (SpecError, TypeError, ValueError):
        return []
    found: dict[tuple, None] = {}
    for cell in cells:
        if len(cell) != len(shape):
            continue
        n, c, *pos = cell
        per_axis = [np.flatnonzero(((ax.positions == p) & ax.in_window).any(axis=1)) for ax, p in zip(geom.axes, pos)]
        for o in itertools.product(*per_axis):
            found.setdefault((n, c, *map(int, o)), None)
            if len(found) == MAX_WINDOWS:
                break
    wanted = {tuple(cell) for cell in cells}
    return [_window(geom, nested_input, out, wanted) for out in list(found)[:MAX_WINDOWS]]


def _window(geom, nested_input, out, wanted) -> dict:
    n, c, *o = out
    taps = [ax.positions[oi][ax.in_window[oi]] for ax, oi in zip(geom.axes, o)]
    lengths = [ax.length for ax in geom.axes]

    def value(pos):
        inside = all(0 <= p < L for p, L in zip(pos, lengths))
        return at(nested_input, (n, c, *pos)) if inside else None

    def build(axis, prefix):
        if axis == len(taps):
            return value(prefix)
        return [build(axis + 1, (*prefix, int(p))) for p in taps[axis]]

    marks = {(0, 0, *t) for t in itertools.product(*map(range, map(len, taps)))
             if (n, c, *(int(taps[a][i]) for a, i in enumerate(t))) in wanted}
    reads = ", ".join(f"{int(t[0])}..{int(t[-1])}" if len(t) else "-" for t in taps)
    return {"out": out, "window": [[build(0, ())]], "marks": marks, "reads": reads}
