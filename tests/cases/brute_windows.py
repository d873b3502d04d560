"""Windows by plain loops over output positions, independent of cases.windows, so that the
family checks do not trust the code they check."""

from __future__ import annotations

import itertools
import math

from poolgrad.reference import resolve


def _axis_windows(spec, geom, a, length):
    """Per output position along axis ``a``: the input positions of its taps (None = padding)."""
    if spec.is_segment:  # segment s: the items whose id is s, in item order
        return [[p for p in range(length) if spec.segment_ids[p] == s] for s in range(spec.num_segments)]
    if spec.regions is not None:  # the spec lists them
        return [list(range(start, stop)) for start, stop in spec.regions[a]]
    if spec.is_adaptive:
        out = geom.out_shape[a]
        return [[p for p in range(i * length // out, -(-(i + 1) * length // out))] for i in range(out)]
    k, s, d, before = geom.kernel_size[a], geom.stride[a], geom.dilation[a], geom.pads[a][0]
    return [[p if 0 <= p < length else None for p in (o * s + t * d - before for t in range(k))]
            for o in range(geom.out_shape[a])]


def windows(spec, spatial_shape):
    """Every window as a list of flat indices (None for a tap outside the input), in
    row-major window order and row-major tap order."""
    geom = resolve(spec, (1, 1, *spatial_shape))
    per_axis = [_axis_windows(spec, geom, a, n) for a, n in enumerate(spatial_shape)]
    strides = [math.prod(spatial_shape[a + 1:]) for a in range(len(spatial_shape))]
    out = []
    for combo in itertools.product(*per_axis):
        taps = []
        for coords in itertools.product(*combo):
            inside = all(c is not None for c in coords)
            taps.append(sum(c * st for c, st in zip(coords, strides)) if inside else None)
        out.append(taps)
    return out
