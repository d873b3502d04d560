"""suite/check.py: expectations select catalogue cases by family; other cases match by
behaviour; a listed policy is the verdict's explanation when it holds."""

import numpy as np

from adapters.base import OK, Outcome, Target
from cases import make_case
from cases.expectations import _entry
from reference import PoolSpec
from suite.check import check
from verdicts import Policy

TARGET = Target("tensorflow", "eager", "cpu")
SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
TIES = np.array([[[1.0, 1.0, 2.0, 2.0, 0.0, 3.0]]])


def _case(case_id, family):
    return make_case(case_id, family, SPEC, TIES)


def _outcome(case, **policy):
    r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
    return Outcome(OK, forward=r.forward, grad_input=r.grad_input)


def _entries(*claims):
    return [_entry({"id": f"e{i}", "framework": "tensorflow", "select": {"family": "ties_window"},
                    "verdict": "policy", "policy": claim, "reason": f"claim {i}"}, i)
            for i, claim in enumerate(claims)]


def test_catalogue_case_outside_every_entrys_family_fails():
    case = _case("max_pool1d-k2s2-ties_x-float32", "ties_x")
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], _entries({"tie": "last"}), 0.0)
    assert checked.outcome == "fail"
    assert checked.record["policy"]["tie"] == "last"


def test_listed_policy_is_the_explanation_when_it_holds():
    case = _case("max_pool1d-k2s2-ties_window-float32-a", "ties_window")
    # tie=last and a column-major scan agree on a 1-D case; the listed one is what the record says.
    entries = _entries({"tie": "last", "order": "column_major"})
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], entries, 0.0)
    assert checked.outcome == "expected"
    assert checked.record["policy"]["order"] == "column_major"
    assert checked.record["expected"]["id"] == "e0"


def test_listed_policy_that_no_longer_holds_is_behaviour_changed():
    case = _case("max_pool1d-k2s2-ties_window-float32-b", "ties_window")
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="all")], _entries({"tie": "last"}), 0.0)
    assert checked.outcome == "behaviour_changed"
    assert "expected policy" in checked.message and checked.record["policy"]["tie"] == "all"


def test_case_from_a_file_or_fuzzing_matches_the_first_entry_whose_claim_holds():
    case = _case("user-ties", "user")
    entries = _entries({"tie": "all"}, {"tie": "last"})
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], entries, 0.0, from_catalogue=False)
    assert checked.outcome == "expected" and checked.record["expected"]["id"] == "e1"
    unexplained = check(case, TARGET, "2.21.0", [_outcome(case, tie="split")], entries, 0.0,
                        from_catalogue=False)
    assert unexplained.outcome == "fail" and unexplained.record["expected"] is None
