"""segment_max_pool and segment_avg_pool: pooling by segment ids, as graph and point-cloud
networks pool (global max and mean pooling over nodes, scatter reductions, segment_max functions).

The case's input is ``(N, C, L)``: L items along the pooled axis, N·C features each (the
adapters lay it out as the frameworks' ``(items, features)`` data). The spec states
``segment_ids``, one id per item (sorted or not), and ``num_segments``: output ``(N, C,
num_segments)``, output ``s`` pooling the items whose id is ``s``. A segment may be empty.

Forward and backward are max_pool's and avg_pool's (the same selection, tie and NaN policies):
the geometry (geometry.resolve) turns the ids into one window per segment whose taps are the
segment's items in item order, so ``tie = first`` is the segment's first maximum in item order.
An empty segment is a window with no element: segment_max_pool outputs -inf there (the max of
nothing, what the selection gives a window with no candidate), segment_avg_pool 0 (its divisor
is the segment's size, at least 1); neither sends any gradient.
"""

from __future__ import annotations

import numpy as np

from .errors import SpecError


def _int(v) -> int | None:
    if isinstance(v, bool) or not (isinstance(v, (int, np.integer)) or isinstance(v, float) and v.is_integer()):
        return None
    return int(v)


def parse_num_segments(value) -> int:
    n = _int(value)
    if n is None or n < 1:
        raise SpecError("num_segments", f"must be a positive integer (the number of outputs), got {value!r}")
    return n


def parse_segment_ids(value, num_segments: int) -> tuple[int, ...]:
    """The spec's ``segment_ids`` as a tuple: one integer per item, ``0 <= id < num_segments``."""
    if not isinstance(value, (list, tuple)) or not value:
        raise SpecError("segment_ids", f"must be a non-empty list of integers, one segment id per item of the "
                        f"pooled axis, e.g. [0, 0, 2, 1], got {value!r}")
    ids = []
    for i, v in enumerate(value):
        s = _int(v)
        if s is None:
            raise SpecError("segment_ids", f"item {i} has id {v!r}: ids are integers")
        if not 0 <= s < num_segments:
            raise SpecError("segment_ids", f"item {i} has id {s} but num_segments is {num_segments}: ids are "
                            f"0 <= id < num_segments (raise num_segments or fix the id)")
        ids.append(s)
    return tuple(ids)


def members(segment_ids, num_segments: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(positions, in_segment), each (num_segments, largest segment's size): the items of
    every segment in item order, checked against the input's length along the pooled axis.
    Positions past a segment's size are 0 and outside it."""
    if len(segment_ids) != length:
        raise SpecError("segment_ids", f"has {len(segment_ids)} ids but the input has {length} items along its "
                        "pooled (last) axis; give one id per item")
    ids = np.asarray(segment_ids, dtype=np.int64)
    counts = np.bincount(ids, minlength=num_segments)
    order = np.argsort(ids, kind="stable")
    slot = np.arange(length) - np.repeat(np.cumsum(counts) - counts, counts)
    positions = np.zeros((num_segments, int(counts.max())), dtype=np.int64)
    positions[ids[order], slot] = order
    return positions, np.arange(positions.shape[1])[None, :] < counts[:, None]


def is_sorted(segment_ids) -> bool:
    return bool(np.all(np.diff(np.asarray(segment_ids)) >= 0))
