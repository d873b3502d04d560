"""fractional_max_pool: max pooling over pooling regions the case states explicitly.

Fractional max pooling (Graham, arXiv:1412.6071) draws its regions at random, and each
framework encodes the draw its own way (SPEC.md, "Fractional regions", says what the
encodings stand for). The spec holds no encoding but the regions themselves: ``regions``
has one list per spatial dim of ``[start, stop)`` pairs, the input elements
``start <= i < stop`` along that dim; the pooling region of output ``(o_1, ..., o_r)`` is
the product of region ``o_d`` of every dim d. Each framework's ``plan`` derives its own
encoding from them, or says why it has none.

Forward and backward are max_pool's (max_pool.py: the same selection, tie and NaN policies):
the geometry (geometry.resolve) turns the regions into per-axis windows of varying length,
as adaptive bins are, and nothing else about the op differs.
"""

from __future__ import annotations

import numpy as np

from .errors import SpecError

_SHAPE = "one list per spatial dim of [start, stop) pairs, e.g. [[[0, 2], [2, 3]], [[0, 1], [1, 3]]]"


def _int(v) -> int | None:
    if isinstance(v, bool) or not (isinstance(v, int) or isinstance(v, float) and v.is_integer()):
        return None
    return int(v)


def parse_regions(value) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The spec's ``regions`` in canonical form (tuples), checked as far as the spec alone
    allows: 1-3 dims, each a non-empty list of pairs ``0 <= start < stop``."""
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
        raise SpecError("regions", f"must be {_SHAPE} (1 to 3 dims), got {value!r}")
    dims = []
    for d, regions in enumerate(value):
        if not isinstance(regions, (list, tuple)) or not regions:
            raise SpecError("regions", f"dim {d} must be a non-empty list of [start, stop) pairs, got {regions!r}")
        pairs = []
        for i, pair in enumerate(regions):
            bounds = [_int(b) for b in pair] if isinstance(pair, (list, tuple)) and len(pair) == 2 else None
            if bounds is None or None in bounds:
                raise SpecError("regions", f"dim {d} region {i} must be a pair of integers [start, stop), got {pair!r}")
            start, stop = bounds
            if not 0 <= start < stop:
                raise SpecError("regions", f"dim {d} region {i} is [{start}, {stop}): a region needs "
                                "0 <= start < stop (stop is exclusive, so [3, 4) is the one element 3)")
            pairs.append((start, stop))
        dims.append(tuple(pairs))
    return tuple(dims)


def region_bounds(regions, spatial: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
    """(starts, stops) per spatial dim, checked against the input's spatial shape."""
    if len(regions) != len(spatial):
        raise SpecError("regions", f"has {len(regions)} dims of regions but the input has {len(spatial)} "
                        f"spatial dims (shape {spatial}); give one list of regions per spatial dim")
    out = []
    for d, (dim, length) in enumerate(zip(regions, spatial)):
        bounds = np.array(dim, dtype=np.int64).reshape(-1, 2)
        beyond = np.flatnonzero(bounds[:, 1] > length)
        if beyond.size:
            i = int(beyond[0])
            raise SpecError("regions", f"dim {d} region {i} is [{dim[i][0]}, {dim[i][1]}) but the input has "
                            f"length {length} there; stops are exclusive and at most the length")
        out.append((bounds[:, 0], bounds[:, 1]))
    return out
