"""--fuzz N: hypothesis-generated specs and inputs with a controlled tie density.

Inputs are drawn from a small pool of values, so ties are common by construction; the pool
size (``distinct``) is the tie-density knob, and NaN, ±inf and -0.0 join it with small
probability. A divergence that no expectation covers fails the hypothesis test, which then
shrinks it to a minimal case; that case is written as a poolgrad-cases/1 file.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

from poolgrad.reference import PoolSpec, SpecError, resolve

SPECIALS = (float("nan"), float("inf"), float("-inf"), -0.0)


@st.composite
def fractional_regions(draw, length: int) -> list[list[int]]:
    """One dim's regions as the frameworks draw them: windows of one size whose starts follow
    the interval formula for a random sample (SPEC.md, "Fractional regions"), or a partition of the input
    (steps floor(L / out) and one more, in random order), its regions overlapping by one or not."""
    kind = draw(st.sampled_from(("fixed_size", "partition", "overlapping")))
    if kind == "fixed_size":
        k = draw(st.integers(1, min(3, length)))
        out = draw(st.integers(1, length - k + 1))
        u = draw(st.floats(0, 1, exclude_max=True))
        alpha = (length - k) / (out - 1) if out > 1 else 0.0
        starts = [int((i + u) * alpha) - int(u * alpha) for i in range(out - 1)] + [length - k]
        return [[s, s + k] for s in starts]
    out = draw(st.integers(1, length))
    steps = draw(st.permutations([length // out + (i < length % out) for i in range(out)]))
    bounds = [sum(steps[:i]) for i in range(out + 1)]
    extra = kind == "overlapping"
    return [[a, min(b + extra, length)] for a, b in zip(bounds, bounds[1:])]


@st.composite
def specs(draw):
    op = draw(st.sampled_from(("max_pool", "avg_pool", "lp_pool", "adaptive_max_pool", "adaptive_avg_pool",
                               "fractional_max_pool")))
    rank = draw(st.integers(2 if op == "fractional_max_pool" else 1, 3))
    spatial = tuple(draw(st.lists(st.integers(1, 6 if rank < 3 else 4), min_size=rank, max_size=rank)))
    d = {"op": f"{op}{rank}d", "dtype": draw(st.sampled_from(("float16", "bfloat16", "float32", "float64")))}
    if op == "fractional_max_pool":
        d["regions"] = [draw(fractional_regions(n)) for n in spatial]
    elif op.startswith("adaptive"):
        d["output_size"] = [draw(st.integers(1, s + 1)) for s in spatial]
    else:
        k = draw(st.integers(1, 3))
        d["kernel_size"] = k
        d["stride"] = draw(st.integers(1, 3))
        d["padding"] = draw(st.one_of(st.integers(0, k // 2), st.sampled_from(("SAME", "VALID"))))
        if d["padding"] != "SAME":
            d["ceil_mode"] = draw(st.booleans())
        if op == "max_pool":
            d["dilation"] = draw(st.sampled_from((1, 1, 2)))
        if op == "avg_pool":
            d["count_include_pad"] = draw(st.booleans())
        if op == "lp_pool":
            d["norm_type"] = draw(st.sampled_from((1.0, 2.0, 3.0)))
            d["padding"] = 0
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    shape = (n, c, *spatial)
    try:
        resolve(PoolSpec.from_dict(d), shape)
    except SpecError:
        assume(False)
    return d, shape


@st.composite
def fuzz_cases(draw, tie_distinct=3, special_p=0.1):
    d, shape = draw(specs())
    size = int(np.prod(shape))
    pool = [float(v) for v in range(tie_distinct)]
    # Each element is special with probability special_p; the roll shrinks towards 0, so a
    # shrunk case keeps only the specials the divergence needs.
    element = st.tuples(st.integers(0, 999), st.sampled_from(pool), st.sampled_from(SPECIALS)).map(
        lambda t: t[2] if t[0] >= 1000 * (1 - special_p) else t[1])
    values = draw(st.lists(element, min_size=size, max_size=size))
    return d, np.array(values, dtype=np.float64).reshape(shape)
