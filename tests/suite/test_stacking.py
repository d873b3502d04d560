"""A stacked case is the case alone (poolgrad/suite/call.py): a framework record keeps the cases
its path can write across out of stacks, and each stack's sampled case is run alone and compared."""

import dataclasses

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import CRASH, OK, Outcome, Target
from poolgrad.adapters.framework import Framework, Unstacked
from poolgrad.adapters.pool import ONE_THREAD_ENV, WorkerPool
from poolgrad.cases.model import make_case
from poolgrad.reference.spec import PoolSpec
from poolgrad.suite.call import FrameworkCall, Group, differs_alone
from poolgrad.suite.runner import GroupRunner

SPEC = PoolSpec("max_pool", kernel_size=2, dtype="float64")
FINE = make_case("fine", "t", SPEC, [[[1.0, 2.0]]])
OTHER = make_case("other", "t", SPEC, [[[4.0, 3.0]]])
WRITER = make_case("writer", "t", SPEC, [[[-np.inf, -np.inf]]])  # its one window has no number
NAN_WRITER = make_case("nan-writer", "t", SPEC, [[[np.nan, -np.inf]]])
RULE = Unstacked(("mask",), ("max_pool*",), ("no_finite_window", "nan"))  # both must hold


def test_a_declared_case_runs_alone_and_the_others_stack(monkeypatch):
    monkeypatch.setitem(registry.FRAMEWORKS, "fw", Framework("fw", "m", "m", (), ("mask", "plain"), unstacked=(RULE,)))
    cases = (FINE, NAN_WRITER, WRITER, OTHER)
    together, alone = FrameworkCall(Target("fw", "mask", "cpu"), cases, Group(cases)).parts()
    assert (together.cases, [c.cases for c in alone]) == ((FINE, WRITER, OTHER), [(NAN_WRITER,)])
    assert {id(c.group) for c in alone} == {id(together.group)}  # one group: its reference work is shared
    plain = FrameworkCall(Target("fw", "plain", "cpu"), cases, Group(cases))
    assert plain.parts() == (plain, [])


def test_a_misspelt_property_is_refused():
    with pytest.raises(ValueError, match="no_finite_windows"):
        Unstacked(("mask",), ("max_pool*",), ("no_finite_windows",))


def test_differs_alone_compares_bits_but_not_nan_payloads():
    case = make_case("pair", "t", SPEC, [[[1.0, np.nan]]])
    ref = FrameworkCall.alone(Target("fw", "mask", "cpu"), case).reference(case)
    y, a = np.array([[[np.nan]]]), np.array([[[1.0, np.nan]]])
    payload = y.copy()
    payload.view(np.uint64)[...] |= 1
    assert differs_alone(Outcome(OK, forward=y, grad_input=a), Outcome(OK, forward=payload, grad_input=a), ref) == ""
    assert differs_alone(Outcome(OK, forward=y, grad_input=a), Outcome(OK, forward=y, grad_input=-a), ref) == \
        "grad_input differ from the case alone"
    assert differs_alone(Outcome(OK, forward=y, grad_input=np.array([[[-0.0, np.nan]]])),
                         Outcome(OK, forward=y, grad_input=np.array([[[0.0, np.nan]]])), ref)
    assert differs_alone(Outcome(OK, forward=y), Outcome(CRASH, message="SIGABRT"), ref).startswith(
        "ok stacked, crash alone")


def test_differs_alone_takes_a_sum_rounded_in_another_order_for_the_same():
    """CUDA's adaptive average pooling adds overlapping bins' shares with atomics: the last bit of
    a gradient changes from call to call, stacked or alone. Another case's values are a write."""
    spec = PoolSpec("adaptive_avg_pool", output_size=3, dtype="float32")
    case = make_case("bins", "t", spec, np.linspace(-1, 1, 20, dtype=np.float32).reshape(1, 2, 10))
    ref = FrameworkCall.alone(Target("fw", "mask", "cpu"), case).reference(case)
    y, g = ref.expected_forward, ref.expected_grad_input
    last_bit = np.nextafter(g, np.float32(np.inf))
    assert differs_alone(Outcome(OK, forward=y, grad_input=g), Outcome(OK, forward=y, grad_input=last_bit), ref) == ""
    assert differs_alone(Outcome(OK, forward=y, grad_input=g + 0.5), Outcome(OK, forward=y, grad_input=g), ref) == \
        "grad_input differ from the case alone"


def test_filled_repeats_the_case_to_the_stacks_planes():
    call = FrameworkCall(Target("fw", "mask", "cpu"), (FINE, OTHER, WRITER), Group((FINE, OTHER, WRITER)))
    x, g = call.filled(OTHER)
    assert x.shape == (3, 1, 2) and (x == OTHER.input[0]).all() and (g == OTHER.grad_output[0]).all()


@pytest.fixture(scope="module")
def paddle_pool():
    if not registry.installed("paddle"):
        pytest.skip("PaddlePaddle is not installed")
    pool = WorkerPool(env=ONE_THREAD_ENV)
    yield pool
    pool.close()


def test_paddle_mask_minus_one_is_caught_stacked_and_kept_out_of_stacks(paddle_pool, monkeypatch):
    """PaddlePaddle's return_mask gives the writer's window mask -1, and its gradient lands on the
    element before its plane: stacked after FINE, on FINE's last element."""
    target = Target("paddle", "return_mask", "cpu")
    declared = registry.FRAMEWORKS["paddle"]
    assert any(rule.holds(frozenset({"no_finite_window"})) for rule in declared.unstacking("return_mask", "max_pool1d"))

    def run(fw):
        monkeypatch.setitem(registry.FRAMEWORKS, "paddle", fw)
        runner = GroupRunner(paddle_pool, timeout_s=120)
        for case in (FINE, WRITER):
            runner.register(case, target)
        return {case.id: runner.run(case, target) for case in (FINE, WRITER)}

    # Without the declaration the two stack, and the sampled case run alone differs.
    undeclared = run(dataclasses.replace(declared, unstacked=()))
    flagged = [i for i, (_, outcomes) in undeclared.items() if outcomes[0].info.get("stacked")]
    assert len(flagged) == 1, {i: o[0].info for i, o in undeclared.items()}
    # With it the writer runs alone: FINE's gradient is its own, its window's maximum.
    declared_runs = run(declared)
    assert [declared_runs[c.id][0].cases for c in (FINE, WRITER)] == [(FINE,), (WRITER,)]
    fine = declared_runs["fine"][1][0]
    assert fine.status == OK and not fine.info.get("stacked")
    assert fine.grad_input.tolist() == [[[0.0, float(FINE.grad_output[0, 0, 0])]]]
