"""poolgrad/suite/check.py with the knowledge base: findings select by what the case is, compose, and
never change the label a result gets."""

import numpy as np
import pytest

from poolgrad.adapters.base import ERROR, OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.machine import Machine
from poolgrad.knowledge.schema import FindingsError, parse_finding
from poolgrad.reference import PoolSpec
from poolgrad.suite.check import check
from poolgrad.verdicts import Policy
from poolgrad.verdicts.ad_modes import direction

TARGET = Target("tensorflow", "eager", "cpu")
SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
TIES = np.array([[[1.0, 1.0, 2.0, 2.0, 0.0, 3.0]]])
NANS = np.array([[[np.nan, 1.0, np.nan, np.nan, 0.0, 3.0]]])


def _case(values, case_id=None, spec=SPEC):
    # verdicts cache a case's reference results by id: one id, one case
    return make_case(case_id or f"user-{np.asarray(values).tobytes().hex()}", "user", spec, values)


def _outcome(case, **policy):
    r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
    return Outcome(OK, forward=r.forward, grad_input=r.grad_input)


def _kb(*entries):
    base = {"framework": "tensorflow", "behaviour": "what it does", "source": "kernel.cc: f",
            "link": "no upstream report"}
    return Knowledge(parse_finding({"title": e["id"], **base, **e}, i) for i, e in enumerate(entries))


TIE_LAST = {"id": "tie-last", "when": ["ties"], "policy": {"tie": "last"}}
NAN_LAST = {"id": "nan-last", "when": ["nan_several"], "policy": {"nan_tie": "last"}}


def test_a_finding_explains_a_case_by_its_properties_not_its_family():
    case = _case(TIES, "anything at all")
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], _kb(TIE_LAST), 0.0)
    assert checked.outcome == "expected"
    assert [f["id"] for f in checked.record["findings"]] == ["tie-last"]


def test_a_divergence_with_no_finding_in_scope_fails():
    case = _case(TIES)
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], _kb(NAN_LAST), 0.0)
    assert checked.outcome == "fail" and checked.record["findings"] == []


def test_a_finding_in_scope_that_does_not_explain_is_behaviour_changed():
    case = _case(TIES)
    checked = check(case, TARGET, "2.21.0", [_outcome(case, tie="all")], _kb(TIE_LAST), 0.0)
    assert checked.outcome == "behaviour_changed"
    assert "tie-last" in checked.message and checked.record["contradicts"] == ["tie-last"]


def test_findings_in_scope_compose():
    """A window with ties and several NaNs: neither finding alone explains the routing."""
    both = np.array([[[np.nan, np.nan, 2.0, 2.0, 0.0, 3.0]]])
    case = _case(both)
    nan_first = {"id": "nan-first", "when": ["nan_several"], "policy": {"nan_tie": "first"}}
    outcome = _outcome(case, tie="last", nan_tie="first")
    assert check(case, TARGET, "2.21.0", [outcome], _kb(TIE_LAST), 0.0).outcome == "behaviour_changed"
    assert check(case, TARGET, "2.21.0", [outcome], _kb(nan_first), 0.0).outcome == "behaviour_changed"
    checked = check(case, TARGET, "2.21.0", [outcome], _kb(TIE_LAST, nan_first), 0.0)
    assert checked.outcome == "expected"
    assert {f["id"] for f in checked.record["findings"]} == {"tie-last", "nan-first"}


def test_the_label_is_the_same_with_and_without_findings():
    case = _case(NANS)
    outcome = _outcome(case, nan_tie="last")
    with_kb = check(case, TARGET, "2.21.0", [outcome], _kb(NAN_LAST), 0.0).record
    without = check(case, TARGET, "2.21.0", [outcome], _kb(), 0.0).record
    assert (with_kb["verdict"], with_kb["policy"], with_kb["forward_policy"]) == \
           (without["verdict"], without["policy"], without["forward_policy"])
    assert with_kb["outcome"] == "expected" and without["outcome"] == "fail"


def test_a_conforming_result_passes_and_names_the_finding_it_contradicts():
    case = _case(TIES)
    checked = check(case, TARGET, "2.21.0", [_outcome(case)], _kb(TIE_LAST), 0.0)
    assert checked.outcome == "pass" and checked.record["contradicts"] == ["tie-last"]
    # where the claim coincides with canonical (no ties), nothing is contradicted
    plain = _case(np.array([[[1.0, 2.0, 3.0, 0.0]]]))
    assert check(plain, TARGET, "2.21.0", [_outcome(plain)], _kb(TIE_LAST), 0.0).record["contradicts"] == []


def test_error_claims_match_type_and_message():
    case = _case(TIES)
    kb = _kb({"id": "no-kernel", "verdict": "error",
              "error": {"type": ["NotFoundError", "InvalidArgumentError"], "message": "DT_HALF"}})
    hit = Outcome(ERROR, message="NotFoundError: Could not find device for node MaxPool3D[T=DT_HALF]")
    other = Outcome(ERROR, message="NotFoundError: something else")
    assert check(case, TARGET, "2.21.0", [hit], kb, 0.0).outcome == "expected"
    assert check(case, TARGET, "2.21.0", [other], kb, 0.0).outcome == "behaviour_changed"
    assert check(case, TARGET, "2.21.0", [other], kb, 0.0).record["framework_message"].startswith("NotFoundError")


def test_a_nondeterministic_claim_holds_for_racing_repeats_any_single_run_and_a_conforming_one():
    case = _case(TIES)
    gpu = Target("tensorflow", "eager", "gpu")
    kb = _kb({"id": "atomics", "verdict": "nondeterministic", "devices": ["gpu"]})
    racing = [_outcome(case), _outcome(case, tie="last")]
    repeated = check(case, gpu, "2.21.0", racing, kb, 0.0)
    assert (repeated.record["verdict"], repeated.outcome) == ("nondeterministic", "expected")
    assert check(case, gpu, "2.21.0", [_outcome(case, tie="last")], kb, 0.0).outcome == "expected"
    conforming = check(case, gpu, "2.21.0", [_outcome(case)], kb, 0.0)
    assert conforming.outcome == "pass" and not conforming.record["contradicts"]
    assert check(case, TARGET, "2.21.0", racing, kb, 0.0).outcome == "fail"       # the cpu is out of its scope
    wrong = _kb({"id": "no-rule", "verdict": "wrong", "devices": ["gpu"]})
    assert check(case, gpu, "2.21.0", racing, wrong, 0.0).outcome == "behaviour_changed"


def test_scope_by_release_variant_and_machine():
    case = _case(TIES)
    outcome = [_outcome(case, tie="last")]
    isa = _kb({**TIE_LAST, "kernel_features": ["avx512_bf16"], "variants": ["eager"]})
    cpu = frozenset({"avx2", "avx512f", "avx512_bf16"})
    with_bf16 = Machine(cpu)
    assert check(case, TARGET, "2.21.0", outcome, isa, 0.0, with_bf16).outcome == "expected"
    assert check(case, TARGET, "2.21.0", outcome, isa, 0.0, Machine(frozenset({"avx2"}))).outcome == "fail"
    capped = Machine.of(cpu, {"tensorflow": {"ONEDNN_MAX_CPU_ISA": "AVX2"}})  # TensorFlow's kernels may use avx2 only
    assert check(case, TARGET, "2.21.0", outcome, isa, 0.0, capped).outcome == "fail"
    assert check(case, Target("tensorflow", "xla", "cpu"), "2.21.0", outcome, isa, 0.0, with_bf16).outcome == "fail"
    on = _kb({**TIE_LAST, "machine": {"onednn": True}})
    for environment, outcome_there in (({"onednn": True}, "expected"), ({"onednn": False}, "fail"), ({}, "fail")):
        machine = Machine.of(cpu, {"tensorflow": environment})
        assert check(case, TARGET, "2.21.0", outcome, on, 0.0, machine).outcome == outcome_there


def test_a_dtype_in_scope_on_some_cpus_only():
    """dtype_cpu_features: float16 is in scope where the CPU has the feature, float32 everywhere."""
    half = PoolSpec.from_dict({**SPEC.to_dict(), "dtype": "float16"})
    kb = _kb({**TIE_LAST, "dtypes": ["float32", "float16"], "dtype_cpu_features": {"float16": ["avx512_fp16|amx_fp16"]}})
    with_fp16, without = Machine(frozenset({"avx512f", "avx512_fp16"})), Machine(frozenset({"avx512f"}))
    for spec, machine, outcome in ((SPEC, without, "expected"), (half, with_fp16, "expected"), (half, without, "fail")):
        case = _case(TIES, f"ties-{spec.dtype}", spec)
        assert check(case, TARGET, "2.21.0", [_outcome(case, tie="last")], kb, 0.0, machine).outcome == outcome


@pytest.mark.parametrize("entry, field", [
    ({"id": "x", "policy": {"tie": "last"}, "dtypes": ["float32"], "dtype_cpu_features": {"float16": ["f16c"]}},
     "dtype_cpu_features"),
    ({"id": "x", "when": ["several_nans"], "policy": {"tie": "last"}}, "when"),
    ({"id": "x", "policy": {"tie_rule": "last"}}, "policy"),
    ({"id": "x"}, "verdict"),
    ({"id": "x", "policy": {"tie": "last"}, "link": "see the forum"}, "link"),
    ({"id": "x", "verdict": "error", "error": {"type": "E", "message": "("}}, "error.message"),
    ({"id": "x", "modes": ["jvp"], "gradient": {"nan": "scan"}}, "gradient"),
    ({"id": "x", "policy": {"tie": "last"}, "kernel_features": [1]}, "kernel_features"),
    ({"id": "x", "policy": {"tie": "last"}, "machine": ["onednn"]}, "machine"),
    ({"id": "x", "policy": {"tie": "last"}, "machine": {"onednn": 1}}, "machine"),
    ({"id": "x", "policy": {"tie": "last"}, "machine": {"mkl": True}}, "machine': 'tensorflow' declares no fact 'mkl'"),
])
def test_a_bad_finding_is_refused_naming_the_field(entry, field):
    with pytest.raises(FindingsError, match=field):
        _kb(entry)


# -- AD modes: a record holds the mode's derivative and the reverse-mode gradient of one call.
# Window [2, nan]: canonical selects the NaN, first_tap and ignore the 2; window [nan, 3]:
# canonical and first_tap the NaN, ignore the 3.
MODE_NANS = np.array([[[2.0, np.nan, np.nan, 3.0, 0.0, 1.0]]])
MODE_SKIPS_NAN = {"id": "mode-skips-nan", "modes": ["jvp"], "forward": {"nan": "ignore"}}


def _mode_outcome(case, mode_policy: dict, reverse_policy: dict) -> Outcome:
    r = Policy(**reverse_policy).evaluate(case.spec, case.input, case.grad_output)
    return Outcome(OK, forward=r.forward, grad_input=r.grad_input,
                   tangent_output=Policy(**mode_policy).jvp(case.spec, case.input, direction(case.spec, case.input)))


def test_a_mode_records_reverse_policy_comes_from_the_reverse_mode_findings():
    """The mode skips NaN, the gradient of the same call lets a first-tap NaN win: the mode's
    finding claims the mode, the reverse-mode finding (which lists only "backward") the gradient."""
    case = _case(MODE_NANS)
    grad_first_tap = {"id": "grad-first-tap", "when": ["nan"], "forward": {"nan": "ignore"},
                      "gradient": {"nan": "first_tap"}}
    outcome = [_mode_outcome(case, {"nan": "ignore"}, {"nan": "first_tap"})]
    checked = check(case, TARGET, "2.21.0", outcome, _kb(MODE_SKIPS_NAN, grad_first_tap), 0.0, mode="jvp")
    assert checked.record["verdict"] == "inconsistent_modes"
    assert checked.outcome == "expected", checked.message
    assert {f["id"] for f in checked.record["findings"]} == {"mode-skips-nan", "grad-first-tap"}
    alone = check(case, TARGET, "2.21.0", outcome, _kb(MODE_SKIPS_NAN), 0.0, mode="jvp")
    assert alone.outcome == "behaviour_changed"


def test_a_reverse_mode_findings_forward_claim_is_not_the_modes_policy():
    """A finding of the reverse mode that lists the mode too: the mode follows its gradient's
    selection; its forward claim is about the forward pass."""
    case = _case(MODE_NANS)
    both = {"id": "first-tap", "modes": ["backward", "jvp"], "when": ["nan"], "forward": {"nan": "ignore"},
            "gradient": {"nan": "first_tap"}}
    outcome = [_mode_outcome(case, {"nan": "first_tap"}, {"nan": "first_tap"})]
    checked = check(case, TARGET, "2.21.0", outcome, _kb(both), 0.0, mode="jvp")
    assert checked.outcome == "expected", checked.message
    skipping = [_mode_outcome(case, {"nan": "ignore"}, {"nan": "first_tap"})]
    assert check(case, TARGET, "2.21.0", skipping, _kb(both), 0.0, mode="jvp").outcome == "behaviour_changed"


def test_a_mode_record_is_judged_only_by_claims_on_it():
    """A forward-pass claim, and a failure claim of the reverse mode only, say nothing about a
    mode record: no finding is in scope, the divergence fails."""
    case = _case(MODE_NANS)
    forward_only = {"id": "forward-skips", "when": ["nan"], "forward": {"nan": "ignore"}}
    outcome = [_mode_outcome(case, {"nan": "ignore"}, {})]
    checked = check(case, TARGET, "2.21.0", outcome, _kb(forward_only), 0.0, mode="jvp")
    assert checked.outcome == "fail" and checked.judgement.in_scope == []
    failing = [Outcome(ERROR, message="InvalidArgumentError: no kernel")]
    error = {"id": "no-kernel", "verdict": "error", "error": {"type": "InvalidArgumentError", "message": "kernel"}}
    assert check(case, TARGET, "2.21.0", failing, _kb(error), 0.0, mode="jvp").outcome == "fail"
    in_modes = {**error, "modes": ["backward", "jvp"]}
    assert check(case, TARGET, "2.21.0", failing, _kb(in_modes), 0.0, mode="jvp").outcome == "expected"


def test_an_arithmetic_ops_policy_claim_says_nothing_in_an_ad_mode():
    """The spec has no AD mode of avg's or lp's policies: a reverse-mode finding that sums in the
    dtype is out of scope of an avg tangent, which fails (or passes) on its own arrays, and is not
    reported as contradicted; a failure claim that lists the mode still explains it."""
    spec = PoolSpec.from_dict({"op": "avg_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
    case = _case(np.array([[[1.0, 2.0, 3.0, 4.0]]], dtype=np.float32), spec=spec)
    in_dtype = {"id": "sums-in-dtype", "ops": ["avg_pool*"], "policy": {"accumulate": "dtype"}}
    r = Policy().evaluate(spec, case.input, case.grad_output)
    wrong_tangent = [Outcome(OK, forward=r.forward, grad_input=r.grad_input, tangent_output=np.full((1, 1, 2), np.nan, np.float32))]
    checked = check(case, TARGET, "2.21.0", wrong_tangent, _kb(in_dtype), 0.0, mode="jvp")
    assert checked.outcome == "fail" and checked.judgement.in_scope == [] and checked.judgement.contradicted == []
    assert check(case, TARGET, "2.21.0", wrong_tangent, _kb(in_dtype), 0.0).judgement.in_scope != []  # backward: in scope
    nan_tangent = {"id": "nan-tangent", "ops": ["avg_pool*"], "modes": ["jvp"], "verdict": "wrong"}
    assert check(case, TARGET, "2.21.0", wrong_tangent, _kb(in_dtype, nan_tangent), 0.0, mode="jvp").outcome == "expected"


def test_a_skip_reason_is_one_line_of_the_framework_message():
    from poolgrad.suite.check import headline
    traced = "in user code:\n\n    File \"x.py\", line 3, in f  *\n        y = pool(x)\n\n    TypeError: Expected string for argument 'padding'\n"
    assert headline(traced) == "in user code: … TypeError: Expected string for argument 'padding'"
    assert headline("pad should be at most half of effective kernel size\nmore") == \
        "pad should be at most half of effective kernel size"
    assert len(headline("x" * 1000)) == 240


def test_a_forward_of_another_shape_is_judged_not_raised_where_an_arithmetic_finding_is_in_scope():
    """paddle's ceil_mode keeps a window that starts in the padding: its forward has another
    shape. With a policy finding in scope for the op, the claim is checked against the
    reference's arrays, and arrays of other shapes do not hold it (they raised before)."""
    spec = PoolSpec.from_dict({"op": "avg_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
    case = make_case("avg", "plain", spec, np.array([[[1.0, 2.0, 3.0, 4.0]]]))
    kb = Knowledge([parse_finding({"id": "avg-in-dtype", "title": "sums in the dtype", "framework": "tensorflow",
                              "policy": {"accumulate": "dtype"}, "behaviour": "b", "source": "s", "upstream": []}, 0)])
    odd = Outcome(OK, forward=np.zeros((1, 1, 3), np.float32), grad_input=np.zeros((1, 1, 4), np.float32))
    checked = check(case, TARGET, "2.21.0", [odd], kb, 0.0)
    assert (checked.outcome, checked.record["verdict"]) == ("behaviour_changed", "wrong")


def _wrong(case):
    # a forward that no policy gives: every output doubled
    r = Policy().evaluate(case.spec, case.input, case.grad_output)
    return Outcome(OK, forward=r.forward * 2, grad_input=r.grad_input)


@pytest.mark.parametrize("order", [1, -1])
def test_the_most_specific_claim_takes_the_credit_whatever_the_file_order(order):
    wide = {"id": "wide", "verdict": "wrong", "impact": "rounding"}
    narrow = {"id": "narrow", "verdict": "wrong", "impact": "rounding", "when": ["ties"]}
    case = _case(TIES)
    checked = check(case, TARGET, "2.21.0", [_wrong(case)], _kb(*[wide, narrow][::order]), 0.0)
    assert checked.record["verdict"] == "wrong" and checked.outcome == "expected"
    assert [f["id"] for f in checked.record["findings"]] == ["narrow"]


@pytest.mark.parametrize("order", [1, -1])
def test_among_claims_as_specific_the_worst_impact_takes_the_credit(order):
    mild = {"id": "mild", "verdict": "wrong", "impact": "rounding", "dtypes": ["float32"]}
    bad = {"id": "bad", "verdict": "wrong", "impact": "wrong_forward", "when": ["ties"]}
    case = _case(TIES)
    checked = check(case, TARGET, "2.21.0", [_wrong(case)], _kb(*[mild, bad][::order]), 0.0)
    assert [f["id"] for f in checked.record["findings"]] == ["bad"] and checked.record["impact"] == "wrong_forward"



AVG64 = PoolSpec.from_dict({"op": "avg_pool1d", "kernel_size": 3, "stride": 3, "dtype": "float64"})
SCALE_IN_F32 = {"id": "scale-in-float32", "verdict": "wrong", "impact": "rounding", "dtypes": ["float64"]}


def test_a_rounding_claim_explains_what_rounding_can_do_and_nothing_more():
    case = _case(np.array([[[0.1, 0.7, 0.3, 1.9, 2.3, 5.1]]]), spec=AVG64)
    r = Policy().evaluate(case.spec, case.input, case.grad_output)
    # the window's share 1/3 rounded to float32, as a kernel that scales in float32 computes it
    rounded = Outcome(OK, forward=r.forward, grad_input=np.repeat(case.grad_output * np.float64(np.float32(1 / 3)), 3, axis=-1))
    divisor = Outcome(OK, forward=r.forward * 3 / 2, grad_input=r.grad_input)  # a window divided by 2, not 3
    assert check(case, TARGET, "2.21.0", [rounded], _kb(SCALE_IN_F32), 0.0).outcome == "expected"
    assert check(case, TARGET, "2.21.0", [divisor], _kb(SCALE_IN_F32), 0.0).outcome == "behaviour_changed"
    wrong_forward = {"id": "divisor", "verdict": "wrong", "impact": "wrong_forward"}
    checked = check(case, TARGET, "2.21.0", [divisor], _kb(SCALE_IN_F32, wrong_forward), 0.0)
    assert [f["id"] for f in checked.record["findings"]] == ["divisor"]
