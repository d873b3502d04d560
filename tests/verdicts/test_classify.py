"""Each verdict kind, from outcomes fabricated under a known policy. Expected routings in
the extended-policy tests are derived by hand in the comments (g = 1, 2, 4, ... per window)."""

import json
import math

import numpy as np
import pytest

from poolgrad.adapters.base import OK, Outcome, STATUSES
from verdict_cases import case, classify, outcome, under

NAN = math.nan
INF = math.inf
S = 1.401298464324817e-45  # the smallest float32 subnormal
K2 = {"op": "max_pool", "kernel_size": 2}
K4 = {"op": "max_pool", "kernel_size": 4}


@pytest.mark.parametrize("status", [s for s in STATUSES if s != OK])
def test_non_ok_status_is_the_verdict(status):
    spec, x, g = case(K2, [1, 2])
    v = classify(spec, x, g, Outcome(status, message="why"))
    assert (v.verdict, v.message) == (status, "why")


def test_canonical_outcome_conforms():
    spec, x, g = case(K2, [1, 1, NAN, 3, -0.0, 0.0])
    v = classify(spec, x, g, under(spec, x, g))
    assert (v.verdict, v.policy, v.valid_subgradient) == ("conforms", {"tie": "first", "nan": "propagate"}, True)


@pytest.mark.parametrize("tie,nan,valid", [("last", "propagate", True), ("first", "ignore", True),
                                           ("split", "propagate", True), ("all", "propagate", False)])
def test_reference_policy_is_named(tie, nan, valid):
    spec, x, g = case(K2, [1, 1, NAN, 3, 5, 2])
    v = classify(spec, x, g, under(spec, x, g, tie=tie, nan=nan))
    assert (v.verdict, v.policy, v.valid_subgradient) == ("policy", {"tie": tie, "nan": nan}, valid)


def test_invented_routing_is_wrong_with_cells():
    spec, x, g = case(K2, [1, 3, 5, 2])
    v = classify(spec, x, g, outcome(spec, x, [3, 5], [1, 0, 2, 0]))  # window 0 routed to its non-max
    assert v.verdict == "wrong"
    assert v.differing_in == "grad_input" and v.differing_cells == [(0, 0, 0), (0, 0, 1)]
    assert v.max_abs_error == 1.0
    assert json.dumps(v.to_dict())


def test_forward_ignores_nan_backward_propagates_is_inconsistent():
    spec, x, g = case(K2, [NAN, 1, 2, 3])
    fabricated = Outcome(OK, under(spec, x, g, nan="ignore").forward, under(spec, x, g).grad_input)
    v = classify(spec, x, g, fabricated)
    assert v.verdict == "inconsistent"
    assert v.forward_policy == {"tie": "first", "nan": "ignore"}
    assert v.policy == {"tie": "first", "nan": "propagate"}


def test_repeats_that_differ_are_nondeterministic():
    spec, x, g = case(K2, [1, 1])
    first, other = under(spec, x, g), under(spec, x, g, tie="last")
    assert classify(spec, x, g, first, repeats=[first, other]).verdict == "nondeterministic"
    assert classify(spec, x, g, first, repeats=[first]).verdict == "conforms"


EXTENDED = [
    # PyTorch CPU: numeric ties go first, the last NaN wins: [1,1] -> tap 0, [nan,nan] -> tap 1
    (K2, [1, 1, NAN, NAN], [1, NAN], [1, 0, 0, 2], "policy",
     {"tie": "first", "nan": "propagate", "nan_tie": "last"}, True),
    # TF CPU MaxPoolGrad: a NaN wins only as the window's first tap: [nan,1] -> 0, [2,nan] -> 2
    (K2, [NAN, 1, 2, NAN], [NAN, 2], [1, 0, 2, 0], "policy", {"tie": "first", "nan": "first_tap"}, True),
    # oneDNN: NaN compares as -inf: [nan,nan] -> tap 0 with value -inf, [1,nan] -> 1
    (K2, [NAN, NAN, 1, NAN], [-INF, 1], [1, 0, 2, 0], "policy", {"tie": "first", "nan": "as_neg_inf"}, True),
    # XLA select GE: 5, then nan (5 >= nan fails), then 1 (nan >= 1 fails) -> tap 2, not a max;
    # the forward still propagates NaN
    ({"op": "max_pool", "kernel_size": 3}, [5, NAN, 1], [NAN], [0, 0, 1], "inconsistent",
     {"tie": "first", "nan": "scan"}, False),
    # flush to zero: [0, S, 3S, 2S] all compare as 0 -> tap 0, forward 0
    (K4, [0, S, 3 * S, 2 * S], [0], [1, 0, 0, 0], "policy", {"tie": "first", "nan": "propagate", "ftz": True}, False),
    # padding -inf participates: [pad,-inf,-inf] selects the pad and drops g=1
    ({"op": "max_pool", "kernel_size": 3, "stride": 1, "padding": 1}, [-INF, -INF, -INF], [-INF] * 3,
     [2, 4, 0], "policy", {"tie": "first", "nan": "propagate", "padding": "-inf"}, False),
    # JAX's VJP pads ceil_mode's overhang with -inf too: [3, nan, overhang] scans 3, nan, then the
    # overhang (nan >= -inf fails), which drops g=2; [1, 2, 3] -> tap 2
    ({"op": "max_pool", "kernel_size": 3, "ceil_mode": True}, [1, 2, 3, 3, NAN], [3, NAN], [0, 0, 1, 0, 0],
     "inconsistent", {"tie": "first", "nan": "scan", "padding": "-inf"}, False),
    # padding 0 participates: [0,-1] -> pad (0), [-1,-2] -> -1, [-2,0] -> pad
    ({"op": "max_pool", "kernel_size": 2, "stride": 1, "padding": 1}, [-1, -2], [0, -1, 0], [2, 0],
     "policy", {"tie": "first", "nan": "propagate", "padding": "0"}, False),
    # Eigen forward: the running max starts at lowest, so an all -inf window gives lowest
    (K2, [-INF, -INF], [-3.4028234663852886e38], [1, 0], "policy",
     {"tie": "first", "nan": "propagate", "init": "lowest"}, True),
]


@pytest.mark.parametrize("spec_dict,row,fwd,grad,verdict,policy,valid", EXTENDED)
def test_extended_policy_is_recognised(spec_dict, row, fwd, grad, verdict, policy, valid):
    spec, x, g = case(spec_dict, row)
    v = classify(spec, x, g, outcome(spec, x, fwd, grad))
    assert (v.verdict, v.policy, v.valid_subgradient) == (verdict, policy, valid)


def test_column_major_order_is_recognised():
    # maxima at (0,1), (1,0), (1,2): row-major first is (0,1), last is (1,2); column-major
    # visits (0,0), (1,0) first
    spec, x, g = case({"op": "max_pool", "kernel_size": [2, 3]}, [[1, 2, 1], [2, 1, 2]])
    v = classify(spec, x, g, outcome(spec, x, [2], [[0, 0, 0], [1, 0, 0]]))
    assert v.verdict == "policy" and v.policy == {"tie": "first", "nan": "propagate", "order": "column_major"}


def test_signed_zero_ordering_in_forward_only():
    # [-0, +0, -0]: first and last select -0; an IEEE-2019 maximum gives +0; gradient to tap 0
    spec, x, g = case({"op": "max_pool", "kernel_size": 3}, [-0.0, 0.0, -0.0])
    v = classify(spec, x, g, outcome(spec, x, [0.0], [1, 0, 0]))
    assert v.verdict == "policy"
    assert v.forward_policy == {"tie": "first", "nan": "propagate", "signed_zero": "ordered"}
    assert v.policy == {"tie": "first", "nan": "propagate"}


AVG = {"op": "avg_pool", "kernel_size": 3}


def test_avg_of_flushed_subnormals_is_named_ftz():
    # three subnormals summing past the smallest normal: a flush-to-zero CPU averages them to 0
    tiny = 0.9 * 1.1754943508222875e-38
    spec, x, g = case({**AVG, "divisor_override": 1}, [tiny, tiny, tiny])
    v = classify(spec, x, g, Outcome(OK, np.zeros(1, np.float32).reshape(1, 1, 1), under(spec, x, g).grad_input))
    assert v.verdict == "policy" and v.policy == {"tie": "first", "nan": "propagate", "ftz": True}


def test_avg_within_tolerance_conforms_outside_is_wrong():
    spec, x, g = case(AVG, [0.1, 0.2, 0.7, 1e3, -1e3, 0.3])
    exact = under(spec, x, g)
    one_ulp = Outcome(OK, np.nextafter(exact.forward, np.float32(INF)), exact.grad_input)
    v = classify(spec, x, g, one_ulp)
    assert v.verdict == "conforms" and v.valid_subgradient is None
    off = exact.grad_input.copy()
    off[0, 0, 4] *= np.float32(1.01)
    v = classify(spec, x, g, Outcome(OK, exact.forward, off))
    assert v.verdict == "wrong" and v.differing_cells == [(0, 0, 4)]


def test_avg_cancellation_uses_term_size():
    # window 2 sums 1e3 - 1e3 + 0.3: an error of a few ulps of 1e3 is rounding, not a bug
    spec, x, g = case(AVG, [0.1, 0.2, 0.7, 1e3, -1e3, 0.3])
    exact = under(spec, x, g)
    fwd = exact.forward.copy()
    fwd[0, 0, 1] += np.float32(2e-5)
    assert classify(spec, x, g, Outcome(OK, fwd, exact.grad_input)).verdict == "conforms"


def test_wrong_shape_is_wrong():
    spec, x, g = case(K2, [1, 2, 3, 4])
    v = classify(spec, x, g, Outcome(OK, np.zeros((1, 1, 3), np.float32), x))
    assert v.verdict == "wrong" and "shape" in v.message
