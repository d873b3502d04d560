"""Hypothesis strategies for the reference's tests: pooling specs as case-file dicts, and
inputs with a controlled share of ties, NaN, +-inf and -0.0."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

OPS = ("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool")
DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32,
          "float64": np.float64}
SPECIALS = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0])


def _per_axis(draw, rank, values, scalar_ok=True):
    """One value for every axis, or a per-axis list (which may differ by axis)."""
    if scalar_ok and draw(st.booleans()):
        return draw(values)
    return [draw(values) for _ in range(rank)]


@st.composite
def specs(draw, op, rank, spatial):
    """A spec dict for ``op`` over ``spatial``; it may not fit (kernel larger than input)."""
    d = {"op": op}
    if op == "fractional_max_pool":  # any regions: overlapping, gaps, unordered, one element
        d["regions"] = [draw(st.lists(st.integers(0, L - 1).flatmap(
            lambda start, L=L: st.tuples(st.just(start), st.integers(start + 1, L)).map(list)),
            min_size=1, max_size=4)) for L in spatial]
        return d
    if op.startswith("segment"):  # rank 1: any ids, sorted or not, empty segments
        d["num_segments"] = draw(st.integers(1, spatial[0] + 2))
        d["segment_ids"] = draw(st.lists(st.integers(0, d["num_segments"] - 1), min_size=spatial[0],
                                         max_size=spatial[0]))
        return d
    if op.startswith("adaptive"):
        sizes = st.integers(1, max(spatial) + 2) | st.none()
        d["output_size"] = _per_axis(draw, rank, sizes, scalar_ok=False)
        return d
    big = 3 if rank == 3 else 4
    d["kernel_size"] = _per_axis(draw, rank, st.integers(1, big))
    stride = draw(st.none() | st.just(1) | st.integers(1, 3))
    d["stride"] = stride if stride is None else _per_axis(draw, rank, st.integers(1, 3))
    d["dilation"] = _per_axis(draw, rank, st.integers(1, 2))
    kind = draw(st.sampled_from(["int", "per_axis", "pairs", "SAME", "VALID"]))
    if kind in ("SAME", "VALID"):
        d["padding"] = kind
    elif kind == "pairs":
        d["padding"] = [[draw(st.integers(0, 3)), draw(st.integers(0, 3))] for _ in range(rank)]
    else:
        d["padding"] = _per_axis(draw, rank, st.integers(0, 2), scalar_ok=kind == "int")
    if kind != "SAME":
        d["ceil_mode"] = draw(st.booleans())
    if op == "avg_pool":
        d["count_include_pad"] = draw(st.booleans())
        d["divisor_override"] = draw(st.none() | st.integers(1, 5))
    if op == "lp_pool":
        d["norm_type"] = draw(st.sampled_from([1, 2, 3, 1.5, 0.5]))
    return d


@st.composite
def shapes(draw, rank=None):
    rank = draw(st.integers(1, 3)) if rank is None else rank
    longest = {1: 9, 2: 6, 3: 4}[rank]
    spatial = tuple(draw(st.integers(1, longest)) for _ in range(rank))
    return (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + spatial


@st.composite
def inputs(draw, shape, dtype, specials=True):
    """An input where about ``tie_share`` of the elements come from a pool of 3 values (ties)
    and ``special_share`` are NaN, +-inf or signed zeros; the rest are distinct-ish normals."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    tie_share = draw(st.sampled_from([0.0, 0.3, 0.8]))
    special_share = draw(st.sampled_from([0.0, 0.1, 0.3])) if specials else 0.0
    x = rng.standard_normal(shape) * 2
    tied = rng.random(shape) < tie_share
    x[tied] = rng.choice([-1.0, 0.5, 2.0], size=int(tied.sum()))
    special = rng.random(shape) < special_share
    x[special] = rng.choice(SPECIALS, size=int(special.sum()))
    return x.astype(DTYPES[dtype])


def routing_probe(rng, shape, dtype):
    """Upstream gradient of small distinct-ish integers: every sum of them is exact."""
    return rng.integers(1, 9, size=shape).astype(DTYPES[dtype])
