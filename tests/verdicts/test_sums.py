"""Max-type gradients are judged by routing, then by summation (SPEC.md, "Sums of routed
gradients"): a realistic upstream gradient routed as the spec and summed in another order passes
as ``reordered``; a contribution dropped or misplaced still fails; a policy's routing with sums
in another order is that policy. The framework here is this file's own loop, in NumPy."""

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec
from poolgrad.reference.dtypes import round_to
from poolgrad.verdicts import Policy
from poolgrad.verdicts.case import CaseReference
from poolgrad.verdicts.sums import _reach, _routed
from verdict_cases import classify, routes_as

SPEC = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 3, "stride": 2, "padding": 1, "dtype": "float32"})


def _case(seed=3):
    """Post-ReLU input (zero plateaus: ties) and a random-normal upstream gradient."""
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.standard_normal((2, 3, 9, 9)), 0).astype(np.float32)
    g = rng.standard_normal(reference.output_shape(SPEC, x.shape)).astype(np.float32)
    return x, g


def _loop(x, g, last=False, drop=None, seed=0):
    """Each window's gradient to its first (or last) maximum, row-major; the contributions
    reaching an element added in float32 in a random order. ``drop``: a window whose
    contribution is lost."""
    rng = np.random.default_rng(seed)
    n, c, h, w = x.shape
    oh, ow = g.shape[2:]
    parts: dict = {}
    for b in range(n):
        for ch in range(c):
            for i in range(oh):
                for j in range(ow):
                    best, at = -np.inf, None
                    for di in range(3):
                        for dj in range(3):
                            r, q = 2 * i - 1 + di, 2 * j - 1 + dj
                            if 0 <= r < h and 0 <= q < w and (x[b, ch, r, q] > best or (last and x[b, ch, r, q] == best)):
                                best, at = x[b, ch, r, q], (b, ch, r, q)
                    if (b, ch, i, j) != drop:
                        parts.setdefault(at, []).append(g[b, ch, i, j])
    grad = np.zeros_like(x)
    for at, terms in parts.items():
        total = np.float32(0)
        for t in rng.permutation(np.array(terms, dtype=np.float32)):
            total = np.float32(total + t)
        grad[at] = total
    return reference.forward(SPEC, x), grad


def test_the_spec_routing_summed_in_another_order_is_reordered():
    x, g = _case()
    fwd, grad = _loop(x, g)
    assert not np.array_equal(grad, reference.backward(SPEC, x, g))  # the order shows
    v = classify(SPEC, x, g, Outcome(OK, fwd, grad))
    assert v.verdict == "reordered", v.message
    assert v.policy == {"tie": "first", "nan": "propagate", "accumulate": "any"}


def test_tie_last_summed_in_another_order_is_that_policy():
    x, g = _case()
    fwd, grad = _loop(x, g, last=True)
    v = classify(SPEC, x, g, Outcome(OK, fwd, grad))
    assert v.verdict == "policy" and v.policy["tie"] == "last" and v.policy["accumulate"] == "any", v.message


@pytest.mark.parametrize("seed", [1, 2])
def test_a_lost_contribution_is_wrong_whatever_the_order(seed):
    x, g = _case()
    # an element that receives contributions from several windows: drop one of them
    fwd, grad = _loop(x, g, drop=(0, 1, 2, 2), seed=seed)
    v = classify(SPEC, x, g, Outcome(OK, fwd, grad))
    assert v.verdict == "wrong", v.message


def test_a_claimed_order_is_matched_bit_for_bit():
    x, g = _case()
    _, grad = _loop(x, g)
    case = CaseReference(SPEC, x, g)
    assert routes_as(case, Policy(), grad)
    assert not routes_as(case, Policy(accumulate="dtype"), grad)
    assert routes_as(case, Policy(accumulate="dtype"), case.result(Policy(accumulate="dtype")).grad_input)


def test_a_finding_that_claims_the_order_explains_a_reordered_result_bit_for_bit():
    """A kernel that adds one output axis at a time in float32 is what accumulate = "dtype_per_axis"
    names: the finding explains it (expected); the same routing summed in a random order passes
    as reordered, the finding in scope but not claiming it."""
    from poolgrad.knowledge.base import Knowledge
    from poolgrad.knowledge.schema import parse_finding
    from poolgrad.cases import make_case
    from poolgrad.adapters.base import Target
    from poolgrad.suite.check import check
    x, g = _case()
    kb = Knowledge([parse_finding({"id": "sums-in-dtype", "title": "sums in float32", "framework": "otherfw",
                              "gradient": {"accumulate": "dtype_per_axis"}, "behaviour": "b", "source": "s", "upstream": []}, 0)])
    case = make_case("realistic", "realistic", SPEC, x, g)
    target = Target("otherfw", "eager", "cpu")
    in_order = Outcome(OK, reference.forward(SPEC, x), reference.backward(SPEC, x, g, accumulate="dtype_per_axis"))
    shuffled = Outcome(OK, *_loop(x, g, seed=5))
    assert check(case, target, "1.0", [in_order], kb, 0.0).outcome == "expected"
    assert check(case, target, "1.0", [shuffled], kb, 0.0).outcome == "pass"


def test_a_split_share_rounded_before_its_sum_routes_as_split_and_a_moved_share_does_not():
    """tie = "split" where a kernel computes a k-way tie's share as g * (1 / k) in the dtype (the
    reciprocal rounded first): an ulp off g / k, within the split bound; the same share given
    to an element outside the tie is still not split's routing."""
    spec = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 3, "stride": 3, "dtype": "float32"})
    x = np.zeros((1, 1, 6), np.float32)                     # two windows, each a 3-way tie of zeros
    g = np.array([[[0.54251707, 0.1]]], np.float32)
    third = np.float32(1) / np.float32(3)
    shares = np.repeat(g * third, 3, axis=-1).astype(np.float32)
    case = CaseReference(spec, x, g)
    exact = case.result(Policy(tie="split")).grad_input
    assert not np.array_equal(shares, exact)                # the reciprocal's rounding shows
    assert routes_as(case, Policy(tie="split"), shares)
    moved = shares.copy()
    moved[0, 0, 2], moved[0, 0, 3] = 0, moved[0, 0, 3] + moved[0, 0, 2]   # a share into the next window
    assert not routes_as(case, Policy(tie="split"), moved)


@pytest.mark.parametrize("fields, shape, dtype", [
    ({"op": "max_pool2d", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}, (1, 2, 6, 5), "float16"),
    ({"op": "max_pool1d", "kernel_size": 3, "stride": 1, "dilation": 2}, (1, 2, 9), "bfloat16"),
    ({"op": "adaptive_max_pool2d", "output_size": [3, 2]}, (1, 2, 7, 5), "float64"),
    ({"op": "fractional_max_pool2d", "regions": [[[0, 3], [2, 5]], [[0, 2], [1, 4]]]}, (1, 2, 5, 4), "float16"),
    ({"op": "segment_max_pool", "num_segments": 3, "segment_ids": [0, 0, 2, 2, 2, 0]}, (2, 2, 6), "bfloat16"),
    ({"op": "roi_pool", "boxes": [[0, 0, 0, 4, 3], [0, 1, 1, 3, 3]], "output_size": 2}, (1, 2, 5, 5), "float64"),
])
def test_no_policy_routes_more_than_the_windows_that_read_an_element(fields, shape, dtype):
    """routes_as rejects a policy where the elements that differ are off by more than every
    window reading them could round to (sums._reach), before evaluating the policy's own
    routing: sound only if no candidate routes more contributions, or larger ones, anywhere
    (each base rule alone and with each modifier: a policy's routing is theirs composed)."""
    spec = PoolSpec.from_dict({**fields, "dtype": dtype})
    rng = np.random.default_rng(7)
    # ties, signed zeros, a NaN, a -inf and a subnormal: every modifier is a candidate
    x = rng.integers(-2, 3, shape).astype(np.float64)
    x.flat[[0, 3, 5, 7]] = [np.nan, -0.0, -np.inf, 1e-40 if dtype == "float64" else 1e-7]
    x = round_to(x, np.dtype(dtype))
    g = round_to(rng.standard_normal(reference.output_shape(spec, shape)) * 1e3, np.dtype(dtype))
    case = CaseReference(spec, x, g)
    policies = [p for p in case.candidates() if p.complexity <= 1]
    assert len(policies) > 20
    for policy in policies:
        reads, reach = _reach(case, policy.padding is not None)
        count, size = _routed(case, policy)
        assert (count <= reads).all() and (size <= reach).all(), policy
