"""The accumulation generators make sums that are inexact in the case's dtype: each sum is
computed both ways here with plain NumPy scalars (added one by one in the dtype, in output
or window order, against the float64 sum rounded once), over brute-force windows."""

from __future__ import annotations

import numpy as np
import pytest

from brute_windows import windows
from poolgrad.cases.families import Context, generate
from poolgrad.cases.model import make_case
from poolgrad.reference import PoolSpec
from poolgrad.reference.dtypes import dtype_from_name, round_to

DTYPES = ["float16", "bfloat16", "float32"]
ROUTED = [  # (op, geometry, input shape): overlapping windows, three or more per element
    ("max_pool1d", {"kernel_size": 3, "stride": 1}, (1, 2, 8)),
    ("max_pool2d", {"kernel_size": 3, "stride": 1, "padding": 1}, (1, 2, 6, 6)),
    ("max_pool3d", {"kernel_size": 3, "stride": 1}, (1, 2, 4, 4, 4)),
    ("adaptive_max_pool2d", {"output_size": 5}, (1, 2, 3, 3)),
    ("avg_pool2d", {"kernel_size": 3, "stride": 1}, (1, 2, 6, 6)),
    ("adaptive_avg_pool1d", {"output_size": 7}, (1, 2, 4)),
]
SUMS = [  # (op, geometry, input shape, variant)
    ("avg_pool2d", {"kernel_size": 2, "stride": 2}, (1, 2, 6, 6), "overflow"),
    ("avg_pool1d", {"kernel_size": 3, "stride": 1, "padding": 1}, (1, 2, 8), "overflow"),
    ("lp_pool2d", {"kernel_size": 2, "stride": 2, "norm_type": 2}, (1, 2, 6, 6), "overflow"),
    ("lp_pool1d", {"kernel_size": 3, "stride": 3, "norm_type": 3}, (1, 2, 9), "overflow"),
    ("avg_pool2d", {"kernel_size": 5, "stride": 5}, (1, 2, 5, 5), "large_small"),
    ("adaptive_avg_pool2d", {"output_size": 2}, (1, 2, 6, 6), "large_small"),
]


def build(generator, op, geometry, dtype, shape, variant, seed=0):
    spec = PoolSpec.from_dict({"op": op, **geometry, "dtype": dtype})
    source = generate(generator, Context(np.random.default_rng(seed), spec, shape, variant))
    if source is None:
        return None
    x, g = source if isinstance(source, tuple) else (source, None)
    return make_case("c", "accumulation", spec, x, g)


def both_ways(terms, dtype):
    """(the terms added one by one in ``dtype``, their float64 sum rounded once)."""
    total = dtype.type(0)
    with np.errstate(over="ignore"):  # the overflow families' sums reach inf in the dtype: their point
        for t in terms:
            total = dtype.type(total + dtype.type(t))
    return float(total), float(round_to(np.array(float(np.sum(np.array(terms, dtype=np.float64)))), dtype))


def real_windows(case):
    """Per plane: (plane values, [real taps of each window in output order])."""
    wins = [[t for t in w if t is not None] for w in windows(case.spec, case.input.shape[2:])]
    n = case.input.shape[0] * case.input.shape[1]
    return zip(case.input.astype(np.float64).reshape(n, -1), case.grad_output.astype(np.float64).reshape(n, -1),
               [wins] * n)


def routed_sums(case):
    """Per input element of a max-type case, the gradients it receives in output order: every
    window's gradient goes to its (unique) maximum."""
    for plane, grad, wins in real_windows(case):
        received = [[] for _ in plane]
        for w, taps in enumerate(wins):
            values = plane[taps]
            assert not np.isnan(values).any(), "no NaN: only accumulation is at stake"
            assert (values == values.max()).sum() == 1, "no ties: only accumulation is at stake"
            received[taps[int(np.argmax(values))]].append(grad[w])
        yield from received


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["large_small", "chain"])
@pytest.mark.parametrize("op,geometry,shape", ROUTED)
def test_routed_sums_are_inexact_in_the_dtype(op, geometry, shape, variant, dtype):
    case = build("accumulation.routed", op, geometry, dtype, shape, variant)
    if case is None:  # 1-D k3s1 has three windows per element, a chain needs six; avg has no chain
        assert variant == "chain" and (op == "max_pool1d" or "avg" in op)
        return
    np_dtype = dtype_from_name(dtype)
    if case.spec.is_max:
        assert sum(np.not_equal(*both_ways(terms, np_dtype)) for terms in routed_sums(case)) > 0
    else:
        assert_avg_terms_inexact(case, np_dtype)


def assert_avg_terms_inexact(case, dtype):
    """avg: every real element of a window receives g / divisor, a term the generator makes
    exact in the dtype; some element's sum of them is inexact."""
    wins = [[t for t in w if t is not None] for w in windows(case.spec, case.input.shape[2:])]
    g = case.grad_output.astype(np.float64).reshape(-1, len(wins))
    inexact = 0
    for grad in g:
        received = [[] for _ in range(int(np.prod(case.input.shape[2:])))]
        for w, taps in enumerate(wins):
            term = grad[w] / len(taps)  # count_include_pad over a geometry without padding
            assert float(dtype.type(term)) == term, "the generator makes each term exact"
            for t in taps:
                received[t].append(term)
        inexact += sum(np.not_equal(*both_ways(r, dtype)) for r in received if r)
    assert inexact > 0


def test_routed_needs_three_windows_per_element():
    assert build("accumulation.routed", "max_pool1d", {"kernel_size": 2, "stride": 1}, "float16",
                 (1, 2, 8), "large_small") is None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op,geometry,shape,variant", SUMS)
def test_window_sums_are_inexact_in_the_dtype(op, geometry, shape, variant, dtype):
    case = build("accumulation.window_sums", op, geometry, dtype, shape, variant)
    np_dtype = dtype_from_name(dtype)
    p = case.spec.norm_type or 1.0
    overflowed = inexact = 0
    for plane, _, wins in real_windows(case):
        assert not np.isnan(plane).any()
        for taps in wins:
            terms = [float(np_dtype.type(v ** p)) for v in plane[taps]]
            assert all(np.isfinite(terms)), "each term is finite in the dtype"
            in_dtype, once = both_ways(terms, np_dtype)
            inexact += in_dtype != once
            if variant == "overflow":
                overflowed += np.isinf(in_dtype)
                # the mean (avg) or the p-norm (lp) of the window is finite in the dtype
                exact = float(np.sum(np.array(terms)))
                mean = exact / len(taps) if op.startswith("avg") else exact ** (1 / p)
                assert np.isfinite(float(round_to(np.array(mean), np_dtype)))
    # overflow: the float64 sum rounded to the dtype overflows too; the mean (norm) does not
    assert overflowed > 0 if variant == "overflow" else inexact > 0
