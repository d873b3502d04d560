"""Verdicts on the AD modes (verdicts.ad_modes), from outcomes fabricated under known policies:
a mode that selects like its reverse mode, one that selects otherwise (inconsistent_modes,
naming both policies), a tangent that no selection gives (the dot-product identity), and the
arithmetic ops by tolerance."""

import math

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.adapters.base import OK, Outcome
from verdict_cases import case
from poolgrad.verdicts import Policy
from poolgrad.verdicts.ad_modes import classify_mode, direction

NAN = math.nan
INF = math.inf
K3 = {"op": "max_pool", "kernel_size": 3}


def jvp_outcome(spec, x, g, mode_policy: Policy, reverse_policy: Policy) -> Outcome:
    """A framework whose forward mode follows one policy and whose reverse mode another."""
    reverse = reverse_policy.evaluate(spec, x, g)
    return Outcome(OK, forward=reverse.forward, grad_input=reverse.grad_input,
                   tangent_output=mode_policy.jvp(spec, x, direction(spec, x)))


def double_backward_outcome(spec, x, g, mode_policy: Policy, reverse_policy: Policy) -> Outcome:
    # For max-type ops d/d grad_output of sum(dX * v) is the jvp along v; d/dx is 0.
    return Outcome(OK, grad_input=reverse_policy.evaluate(spec, x, g).grad_input,
                   grad_grad_output=mode_policy.jvp(spec, x, direction(spec, x)),
                   grad_grad_input=np.zeros_like(x))


BUILD = {"jvp": jvp_outcome, "double_backward": double_backward_outcome}


@pytest.mark.parametrize("mode", BUILD)
def test_canonical_modes_conform(mode):
    spec, x, g = case(K3, [NAN, 1, 3, 2, 2, -INF])
    v = classify_mode(mode, spec, x, g, BUILD[mode](spec, x, g, Policy(), Policy()))
    assert v.verdict == "conforms", v.message


@pytest.mark.parametrize("mode", BUILD)
def test_a_mode_that_selects_like_its_reverse_mode_is_named_by_its_policy(mode):
    spec, x, g = case(K3, [1, 3, 3, 2, 2, 0])
    last = Policy(tie="last")
    v = classify_mode(mode, spec, x, g, BUILD[mode](spec, x, g, last, last))
    assert (v.verdict, v.policy, v.forward_policy) == ("policy", last.as_dict(), last.as_dict())


@pytest.mark.parametrize("mode", BUILD)
def test_a_mode_that_selects_otherwise_than_its_reverse_mode_is_inconsistent_naming_both(mode):
    # Window 1: the reverse mode routes to the NaN (canonical), the mode skips it for the 3.
    spec, x, g = case(K3, [1, NAN, 3, 2, 5, 0])
    v = classify_mode(mode, spec, x, g, BUILD[mode](spec, x, g, Policy(nan="ignore"), Policy()))
    assert v.verdict == "inconsistent_modes"
    assert v.policy == {"tie": "first", "nan": "ignore"}
    assert v.forward_policy == {"tie": "first", "nan": "propagate"}
    assert "nan=ignore" in v.message and "nan=propagate" in v.message


@pytest.mark.parametrize("mode", BUILD)
def test_a_gradient_sum_rounded_in_the_dtype_is_no_inconsistency(mode):
    """Both windows select the 5, whose gradient 2048 + 1 is no float16 number: the reverse mode's
    rounded sum breaks the exact dot product, though both modes select alike."""
    spec, x, _ = case({"op": "max_pool", "kernel_size": 2, "stride": 1}, [0, 5, 0], "float16")
    g = np.array([[[2048.0, 1.0]]], dtype=np.float16)
    for reverse in (Policy(), Policy(accumulate="dtype")):
        v = classify_mode(mode, spec, x, g, BUILD[mode](spec, x, g, Policy(), reverse))
        assert v.verdict == "conforms", v.message


def test_a_tangent_no_selection_gives_fails_the_dot_product_identity():
    spec, x, g = case(K3, [4, 1, 3, 2, 5, 0])
    outcome = jvp_outcome(spec, x, g, Policy(), Policy())
    outcome.tangent_output = outcome.tangent_output.copy()
    outcome.tangent_output[0, 0, 0] *= 3  # no element of the window carries this tangent
    v = classify_mode("jvp", spec, x, g, outcome)
    assert v.verdict == "inconsistent_modes" and v.policy is None
    assert "jvp follows no policy" in v.message


def test_a_double_backward_by_the_input_other_than_zero_is_wrong():
    spec, x, g = case(K3, [4, 1, 3, 2, 5, 0])
    outcome = double_backward_outcome(spec, x, g, Policy(), Policy())
    outcome.grad_grad_input = np.ones_like(x)
    v = classify_mode("double_backward", spec, x, g, outcome)
    assert (v.verdict, v.differing_in) == ("wrong", "grad_grad_input")


def test_a_missing_derivative_is_wrong_naming_the_array():
    spec, x, g = case(K3, [4, 1, 3, 2, 5, 0])
    outcome = jvp_outcome(spec, x, g, Policy(), Policy())
    outcome.tangent_output = None
    v = classify_mode("jvp", spec, x, g, outcome)
    assert v.verdict == "wrong" and v.message.startswith("tangent_output has shape None")


@pytest.mark.parametrize("scale,verdict", [(1.0, "conforms"), (1.01, "wrong")])
def test_avg_pool_modes_are_judged_by_tolerance(scale, verdict):
    spec, x, g = case({"op": "avg_pool", "kernel_size": 2}, [1.5, 2.25, -3.0, 0.5])
    t = direction(spec, x)
    outcome = Outcome(OK, forward=reference.forward(spec, x), grad_input=reference.backward(spec, x, g),
                      tangent_output=(reference.jvp(spec, x, t) * scale).astype(x.dtype))
    assert classify_mode("jvp", spec, x, g, outcome).verdict == verdict


@pytest.mark.parametrize("cell,verdict", [(5, "conforms"), (0, "wrong")])
def test_an_lp_tangent_is_not_checked_where_a_product_of_its_formula_passes_the_dtypes_range(cell, verdict):
    """float16 lp p=2 along the probe: the last window [40, 1] meets t = 1024, and pow's
    derivative 2 * 40 * 1024 passes 65504 though the tangent, about 1024, does not: an inf there
    is one the dtype can give. The first window [1, 1] keeps every product in range."""
    spec, x, g = case({"op": "lp_pool", "kernel_size": 2, "norm_type": 2}, [1.0] * 10 + [40.0, 1.0], dtype="float16")
    tangent = reference.jvp(spec, x, direction(spec, x))
    tangent[0, 0, cell] = np.inf
    outcome = Outcome(OK, forward=reference.forward(spec, x), grad_input=reference.backward(spec, x, g),
                      tangent_output=tangent)
    result = classify_mode("jvp", spec, x, g, outcome)
    assert result.verdict == verdict
    assert ("1 element(s) past float16's range not checked" in result.message) == (verdict == "conforms")


def test_init_neg_inf_selects_nothing_in_a_window_whose_maximum_is_neg_inf():
    # The second window holds only -inf: seeded at -inf (ties kept), it selects nothing.
    spec, x, g = case({"op": "max_pool", "kernel_size": 2}, [1, 2, -INF, -INF])
    t = direction(spec, x)
    seeded, canonical = Policy(init="-inf").jvp(spec, x, t), Policy().jvp(spec, x, t)
    assert seeded[0, 0, 0] == canonical[0, 0, 0] == t[0, 0, 1]
    assert (seeded[0, 0, 1], canonical[0, 0, 1]) == (0, t[0, 0, 2])
    assert Policy(init="-inf").evaluate(spec, x, g).grad_input[0, 0, 2] == 0
