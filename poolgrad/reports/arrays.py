"""Encoded arrays as small tables for the report: 2-D slices of (N, C, *spatial), capped, with
marked cells. Values are shown short, a marked cell's exact value kept for a tooltip."""

from __future__ import annotations

import itertools

import numpy as np

from poolgrad.json_values import shape_of

MAX_SLICES = 2      # (n, c[, depth]) slices shown per array: those with marked cells first
MAX_SIDE = 24       # rows and columns shown per slice


def short(v) -> str:
    if v is None:
        return "pad"
    if isinstance(v, str):
        return v
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.6g}"


def exact(v) -> str:
    return "padding (not part of the input)" if v is None else (v if isinstance(v, str) else repr(v))


def at(nested, index):
    for i in index:
        nested = nested[i]
    return nested


def tables(nested, marks=frozenset()) -> dict:
    """{"shape", "slices": [{"label", "rows": [[{"text", "title", "mark"}]]}], "truncated"}.

    ``nested`` is (N, C, *spatial); 1-D spatial gives one-row slices, 3-D gives one slice per depth.
    ``marks`` holds full indices (n, c, *spatial) to highlight.
    """
    shape = shape_of(nested)
    if len(shape) < 3:
        return {"shape": shape, "slices": [], "truncated": False}
    lead = shape[:-2] if len(shape) > 3 else shape[:-1]
    rows_n, cols_n = (shape[-2], shape[-1]) if len(shape) > 3 else (1, shape[-1])
    heads = list(itertools.product(*map(range, lead)))
    marked = {tuple(m[:len(lead)]) for m in marks}
    heads.sort(key=lambda head: head not in marked)   # stable: in order within each group
    slices, truncated = [], rows_n > MAX_SIDE or cols_n > MAX_SIDE or len(heads) > MAX_SLICES
    for head in heads[:MAX_SLICES]:
        label = ", ".join(f"{name}={i}" for name, i in zip(("n", "c", "d"), head))
        rows = []
        for r in range(min(rows_n, MAX_SIDE)):
            row = []
            for c in range(min(cols_n, MAX_SIDE)):
                index = (*head, r, c) if len(shape) > 3 else (*head, c)
                v = at(nested, index)
                row.append({"text": short(v), "title": exact(v), "mark": index in marks})
            rows.append(row)
        slices.append({"label": label, "rows": rows})
    return {"shape": shape, "slices": slices, "truncated": truncated}


def differing(a, b) -> set[tuple]:
    """Indices where two encoded arrays of one shape differ bit for bit (-0.0 vs 0.0 included)."""
    if a is None or b is None or shape_of(a) != shape_of(b):
        return set()
    x, y = np.array(a, dtype=object), np.array(b, dtype=object)
    if not x.size:
        return set()
    same = np.vectorize(lambda p, q: type(p) is type(q) and p == q, otypes=[bool])(x, y)
    return {tuple(int(i) for i in idx) for idx in np.argwhere(~same)}
