"""Segment pooling as the frameworks take it (pure: imports no framework).

A segment case's input is ``(N, C, L)``: L items of N·C features (SPEC.md, segment_max_pool).
The frameworks' segment functions (scatter reductions, segment_max and its kin) reduce the leading axis of
``(items, features)`` data, so the adapters hand them ``x`` as ``(L, N·C)`` and read their
``(num_segments, N·C)`` output, and the gradient, back as planes: a layout, never a value
change. Segment ops run only in a framework's segment variants, and those variants run nothing
else (:func:`refuse`), so their test ids name the function users call.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from poolgrad.reference.segment_pool import is_sorted

from .base import ARRAY_FIELDS, Outcome, Plan, Unsupported

REDUCTIONS = {"segment_max_pool": "max", "segment_avg_pool": "mean"}


@dataclasses.dataclass(frozen=True)
class Segments(Plan):
    """One segment call (hashable: part of a trace cache's key)."""

    api: str                  # the framework's function, e.g. "unsorted_segment_max", "scatter_reduce"
    reduce: str               # "max" | "mean"
    segment_ids: tuple
    num_segments: int
    sorted: bool              # the ids are in increasing order (indices_are_sorted where an API takes it)


def refuse(spec, variant: str, variants: tuple[str, ...]) -> Unsupported | None:
    """Why ``variant`` does not run ``spec`` (segment ops run in ``variants`` only, and those run
    nothing else), or None."""
    if spec.is_segment and variant not in variants:
        return Unsupported(f"{variant}: {spec.op} runs in the segment variants ({', '.join(variants)})")
    if variant in variants and not spec.is_segment:
        return Unsupported(f"{variant} pools by segment ids only (segment_max_pool, segment_avg_pool)")
    return None


def call(spec, api: str) -> Segments:
    """The Segments of ``spec`` through the framework function ``api``; ``{reduce}`` in it is
    the reduction's name (``unsorted_segment_{reduce}`` -> ``unsorted_segment_max``)."""
    reduce = REDUCTIONS[spec.op]
    return Segments(api.format(reduce=reduce), reduce, spec.segment_ids, spec.num_segments,
                    is_sorted(spec.segment_ids))


def trailing_empty(spec) -> int:
    """How many segments after the largest id are empty: APIs whose output ends at the largest
    id (the sorted-ids segment functions) cannot output them."""
    return spec.num_segments - 1 - max(spec.segment_ids)


def items(a: np.ndarray) -> np.ndarray:
    """``(N, C, L)`` planes -> ``(L, N·C)`` data (item-major, as the frameworks reduce it)."""
    return np.ascontiguousarray(a.reshape(-1, a.shape[-1]).T)


def planes(a: np.ndarray, n: int, c: int) -> np.ndarray:
    """``(L, N·C)`` data (or ``(num_segments, N·C)``) -> ``(N, C, L)`` planes: :func:`items` undone."""
    return np.ascontiguousarray(a.T.reshape(n, c, a.shape[0]))


def as_planes(outcome: Outcome, n: int, c: int) -> Outcome:
    """An outcome of ``(items, features)`` data with its arrays as ``(N, C, ...)`` planes."""
    return dataclasses.replace(outcome, **{k: planes(getattr(outcome, k), n, c) for k in ARRAY_FIELDS
                                           if getattr(outcome, k) is not None})
