"""The accumulation policy: sums kept in the input dtype, in output-position order, explain
kernels that add in float16/bfloat16, and only where float64 accumulation does not. Expected
arrays are derived by hand in the comments."""

import math

import numpy as np

from poolgrad.adapters.base import OK, Outcome
from verdict_cases import case, classify, outcome, routes_as, under
from poolgrad.verdicts.case import CaseReference
from poolgrad.verdicts.claims import holds
from poolgrad.verdicts.extended_policies import Policy, features
from poolgrad.verdicts.observed import Observed

K3S1 = {"op": "max_pool", "kernel_size": 3, "stride": 1}
ROW = [0, 1, 5, 2, 0, 0]  # windows [0 1 5] [1 5 2] [5 2 0] [2 0 0]: 5 wins three, 2 the last


def with_grad(spec, x, values):
    return np.asarray(values, dtype=np.float64).reshape(1, 1, -1).astype(x.dtype)


def test_float16_large_then_small_is_named():
    spec, x, _ = case(K3S1, ROW, "float16")
    g = with_grad(spec, x, [2048, 1, 1, 1])
    # float16 in output order: 2048 + 1 = 2049 rounds to 2048 (ties to even), + 1 again 2048;
    # float64: 2050, exact in float16. The last window's 1 goes to the 2.
    got = outcome(spec, x, [5, 5, 5, 2], [0, 0, 2048, 1, 0, 0])
    v = classify(spec, x, g, got)
    # the spec's routing, its sums in another order: reordered; a finding that claims
    # accumulate = "dtype" names the order, bit for bit (verdicts/sums.py)
    assert (v.verdict, v.policy) == ("reordered", {"tie": "first", "nan": "propagate", "accumulate": "any"})
    assert v.valid_subgradient
    assert routes_as(CaseReference(spec, x, g), Policy(accumulate="dtype"), got.grad_input)
    assert not routes_as(CaseReference(spec, x, g), Policy(accumulate="dtype_axis1_reversed"), got.grad_input + 0)


def test_bfloat16_large_then_small_is_named():
    spec, x, _ = case(K3S1, ROW, "bfloat16")
    g = with_grad(spec, x, [256, 1, 1, 1])
    # bfloat16 (8 significant bits): 256 + 1 + 1 stays 256; float64 258 is exact.
    got = outcome(spec, x, [5, 5, 5, 2], [0, 0, 256, 1, 0, 0])
    v = classify(spec, x, g, got)
    assert v.verdict == "reordered" and v.policy["accumulate"] == "any"
    assert routes_as(CaseReference(spec, x, g), Policy(accumulate="dtype"), got.grad_input)


def test_the_order_is_output_order_or_its_reverse():
    spec, x, _ = case(K3S1, ROW, "float16")
    g = with_grad(spec, x, [1, 1, 2048, 1])
    # in output order 1 + 1 + 2048 = 2050 is exact: float64 explains it, no policy needed
    v = classify(spec, x, g, outcome(spec, x, [5, 5, 5, 2], [0, 0, 2050, 1, 0, 0]))
    assert v.verdict == "conforms"
    # 2048 + 1 + 1 (last output first) is oneDNN's order
    got = outcome(spec, x, [5, 5, 5, 2], [0, 0, 2048, 1, 0, 0])
    assert classify(spec, x, g, got).verdict == "reordered"
    assert routes_as(CaseReference(spec, x, g), Policy(accumulate="dtype_axis1_reversed"), got.grad_input)
    assert not routes_as(CaseReference(spec, x, g), Policy(accumulate="dtype"), got.grad_input)
    # a sum further from 2050 than any order of float16 additions can put it (2 * eps * 2050 + one
    # ulp, 6) is no routing of the spec's
    v = classify(spec, x, g, outcome(spec, x, [5, 5, 5, 2], [0, 0, 2060, 1, 0, 0]))
    assert v.verdict == "wrong"


def test_float64_accumulation_is_preferred_where_both_agree():
    spec, x, _ = case(K3S1, ROW, "float16")
    g = with_grad(spec, x, [2048, 2, 2, 1])  # 2048 + 2 + 2 is exact in float16
    v = classify(spec, x, g, under(spec, x, g))
    assert v.verdict == "conforms"


def test_features_gate_accumulation_on_inexact_sums_only():
    spec, x, probe = case(K3S1, ROW, "float16")
    assert not features(spec, x, probe)["accumulate"]          # the routing probe is exact
    assert features(spec, x, with_grad(spec, x, [2048, 1, 1, 1]))["accumulate"]
    spec64, x64, _ = case(K3S1, ROW, "float64")
    assert not features(spec64, x64, with_grad(spec64, x64, [2048, 1, 1, 1]))["accumulate"]
    searched = CaseReference(spec, x, probe).candidates()
    assert all(p.accumulate is None for p in searched)


def test_avg_sum_that_overflows_in_float16_is_named():
    spec, x, g = case({"op": "avg_pool", "kernel_size": 4}, [40000, 40000, 40000, 40000], "float16")
    # float16: 40000 + 40000 = 80000 > 65504 is inf, and inf / 4 stays inf; float64: 40000
    v = classify(spec, x, g, outcome(spec, x, [math.inf], under(spec, x, g).grad_input))
    assert (v.verdict, v.forward_policy["accumulate"], v.policy["accumulate"]) == ("policy", "dtype", "dtype")
    assert v.valid_subgradient is None
    v = classify(spec, x, g, outcome(spec, x, [20000], under(spec, x, g).grad_input))
    assert v.verdict == "wrong"


def test_avg_search_is_skipped_where_sums_are_exact():
    spec, x, g = case({"op": "avg_pool", "kernel_size": 2}, [1, 2, 3, 4], "float16")
    assert not features(spec, x, g)["accumulate"]
    assert CaseReference(spec, x, g).candidates() == (CaseReference(spec, x, g).candidates()[0],)
    assert classify(spec, x, g, Outcome(OK, *[np.full_like(a, 7) for a in (
        under(spec, x, g).forward, x)])).verdict == "wrong"


def test_a_claim_of_sums_in_the_dtype_takes_either_side_of_an_order_decided_overflow():
    """float16 [40000, -40000, 40000]: window order gives 0 + 40000 (no overflow), another order
    (40000 + 40000 first) inf. Under a claim of sums in the dtype both are explained, and so is
    the spec's mean; a finite value off the mean is not, nor is anything without the claim."""
    spec, x, g = case({"op": "avg_pool", "kernel_size": 3}, [40000, -40000, 40000], "float16")
    grad = under(spec, x, g).grad_input
    ref = CaseReference(spec, x, g)

    def explained(forward, policy):
        return holds(Observed(ref, outcome(spec, x, [forward], grad)), "backward", policy, policy)
    for forward in (math.inf, math.nan, 13336):   # 40000 / 3 = 13333.3 is 13336 in float16
        assert explained(forward, {"accumulate": "dtype"})
    assert not explained(12000, {"accumulate": "dtype"})
    assert not explained(math.inf, {})
