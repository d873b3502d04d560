"""Equal maxima: inside a window, across overlapping windows, at window borders, +inf."""

from __future__ import annotations

import numpy as np

from .base import TOP, Context, flat_planes, pick, place_per_window


def window(ctx: Context):
    """Variant "2" / "3": that many random taps of a window share its maximum; "all": every
    real tap does. One such window per disjoint window of each plane."""
    n = None if ctx.variant == "all" else int(ctx.variant)

    def put(plane, taps, k):
        plane[taps if n is None else pick(ctx, taps, n)] = TOP + k
    return place_per_window(ctx, ctx.distinct(), put, min_taps=n or 2)


def overlap(ctx: Context):
    """Two windows W, W' that overlap: one maximum in W and W', one in W' only and one in W
    only, all equal. So W' (and W) has a tie whose winner is also read by the other window."""
    x = ctx.distinct()
    if x.size == 0:
        return x
    rows = [set(r[r >= 0].tolist()) for r in ctx.windows]
    placed = False
    for plane in flat_planes(x):
        used: set = set()
        for k, w in enumerate(ctx.rng.permutation(len(rows))):
            if rows[w] & used:
                continue
            partners = [v for v in range(len(rows)) if rows[w] & rows[v] and rows[v] - rows[w]
                        and rows[w] - rows[v] and not rows[v] & used]
            if not partners:
                continue
            other = rows[partners[ctx.rng.integers(len(partners))]]
            cells = [sorted(part)[ctx.rng.integers(len(part))]
                     for part in (rows[w] & other, other - rows[w], rows[w] - other)]
            plane[cells] = TOP + k
            used |= rows[w] | other
            placed = True
    return x if placed else None


def _on_input_border(ctx: Context):
    """Per flat spatial index: is the element on the edge of the input (next to padding)?"""
    coords = np.indices(ctx.shape[2:]).reshape(len(ctx.shape) - 2, -1)
    lengths = np.array(ctx.shape[2:])[:, None]
    return ((coords == 0) | (coords == lengths - 1)).any(axis=0)


def border(ctx: Context):
    """Variant "edges": a window's first and last real taps tie for its maximum.
    "pad_adjacent": in windows that reach into padding, two real taps tie for the maximum,
    both next to the padding where the window has two such taps (one on rank 1)."""
    if ctx.variant == "edges":
        def put(plane, taps, k):
            plane[[taps[0], taps[-1]]] = TOP + k
        return place_per_window(ctx, ctx.distinct(), put, min_taps=2)
    edge = _on_input_border(ctx)

    def put_edge(plane, taps, k):
        at_edge = pick(ctx, taps[edge[taps]], min(2, int(edge[taps].sum())))
        others = np.setdiff1d(taps, at_edge)
        plane[np.concatenate([at_edge, pick(ctx, others, 2 - len(at_edge))])] = TOP + k
    return place_per_window(ctx, ctx.distinct(), put_edge, min_taps=2,
                            where=lambda row: (row < 0).any() and edge[row[row >= 0]].any())


def inf(ctx: Context):
    """Two random taps of a window are +inf."""
    def put(plane, taps, k):
        plane[pick(ctx, taps, 2)] = np.inf
    return place_per_window(ctx, ctx.distinct(), put, min_taps=2)
