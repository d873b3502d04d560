"""The reference's work for a framework call's cases is done once, stacked along N
(poolgrad/verdicts/case.py; the suite's batching group stacks them, poolgrad/suite/call.py): each
case's rows of every stacked result must be its own result, bit for bit, or stacking would change
verdicts."""

import collections

import pytest

from poolgrad.cases.catalogue import catalogue
from poolgrad.suite import call as suite_call
from poolgrad.suite.call import Group
from poolgrad.verdicts import case as verdict_case
from poolgrad.verdicts.compare import identical


def _calls():
    calls = collections.defaultdict(list)
    for c in catalogue(2):  # two draws: calls of several cases in every family
        calls[c.group_key].append(c)
    return [members for members in calls.values() if len(members) > 1]


CALLS = _calls()


@pytest.mark.parametrize("members", CALLS[::7], ids=lambda ms: ms[0].id)
def test_a_stacked_case_is_its_own_case(members):
    # One kin (the whole stack) and a kin per value family (policies evaluated on its rows).
    for kins in (False, True):
        references = verdict_case.stacked([(c.spec, c.input, c.grad_output, c.id, c.family if kins else None)
                                           for c in members])
        for m in members:
            _same_as_alone(references[m.id], m)


def _same_as_alone(stacked, m):
    """The stacked reference of case ``m`` is its reference alone, bit for bit."""
    alone = verdict_case.CaseReference(m.spec, m.input, m.grad_output)
    assert identical(stacked.expected_forward, alone.expected_forward)
    assert identical(stacked.expected_grad_input, alone.expected_grad_input)
    if not m.spec.is_max:  # a selection has no error scale: compared bit for bit
        assert all(identical(a, b) for a, b in zip(stacked.magnitude(), alone.magnitude()))
    assert stacked.candidates() == alone.candidates()
    for policy in alone.candidates()[:12] + alone.candidates()[-4:]:
        got, want = stacked.result(policy), alone.result(policy)
        assert identical(got.forward, want.forward) and identical(got.grad_input, want.grad_input), policy
        assert got.valid() == want.valid(), policy


def test_one_stack_serves_its_call():
    members = max(CALLS, key=len)
    group = Group(members)
    cases = [group.reference(m) for m in members]
    assert len({id(c._stack) for c in cases}) == 1
    assert len(cases[0]._stack.x) == sum(len(m.input) for m in members)


def test_stacks_are_capped_in_elements(monkeypatch):
    monkeypatch.setattr(suite_call, "STACK_ELEMENTS", 1)
    members = max(CALLS, key=len)
    group = Group(members)
    cases = [group.reference(m) for m in members]
    assert len({id(c._stack) for c in cases}) == len(members)  # each case's input is over the cap
    assert all(identical(c.expected_grad_input,
                         verdict_case.CaseReference(m.spec, m.input, m.grad_output).expected_grad_input)
               for c, m in zip(cases, members))


def test_a_policy_is_evaluated_on_the_rows_of_the_asking_cases_kin():
    members = max((ms for ms in CALLS if len({m.family for m in ms}) > 1), key=len)
    asking = members[-1]
    case = Group(members).reference(asking)
    policy = case.candidates()[1]
    case.result(policy)
    kin_rows = sum(len(m.input) for m in members if m.family == asking.family)
    assert [len(r.forward) for r in case._stack._results.values()] == [kin_rows]
    assert kin_rows < len(case._stack.x)


# Max cases whose policies differ in what decides a selection (flushing, NaN rules and NaN
# ties, signed zeros, the seed, padding's value): two of each kind.
SELECTING = [c for kind in ("subnormal", "nan-several", "signed_zero", "all_neginf", "negative")
             for c in [c for ms in CALLS if ms[0].spec.is_max for c in ms if kind in c.id][::40][:2]]


@pytest.mark.parametrize("m", SELECTING, ids=lambda m: m.id)
def test_policies_sharing_a_stacks_selections_get_their_own_results(m):
    """A stack's policies share the windows' selections (Policy.evaluate's ``selections``):
    every candidate's result through the stack, in the search's order and backwards, is its
    result evaluated alone, bit for bit."""
    for order in (1, -1):
        reference = verdict_case.CaseReference(m.spec, m.input, m.grad_output)
        for policy in reference.candidates()[::order]:
            got, want = reference.result(policy), policy.evaluate(m.spec, m.input, m.grad_output)
            assert identical(got.forward, want.forward) and identical(got.grad_input, want.grad_input), policy
            assert got.valid() == want.valid(), policy
