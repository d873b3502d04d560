"""One (case, target) check: verdict, the findings that explain it, outcome, and the record."""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

from poolgrad import verdicts
from poolgrad.adapters import registry
from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import Finding, policy_text
from poolgrad.knowledge.impacts import IMPACT_RANK, at_least
from poolgrad.knowledge.judge import Judgement, judge
from poolgrad.knowledge.machine import Machine
from poolgrad.reference.properties import properties_of_cases
from poolgrad.json_values import encode_array
from poolgrad.verdicts import ad_modes, tolerances
from poolgrad.verdicts.sums import routes_as
from poolgrad.verdicts.classify import close
from poolgrad.verdicts.compare import identical, within
from poolgrad.verdicts.verdict import json_value

from .call import FrameworkCall, Group, op_name


@dataclasses.dataclass
class Checked:
    outcome: str          # pass | expected | behaviour_changed | fail | skipped
    message: str
    record: dict
    judgement: Judgement

    def fails(self, fail_on: str | None = None) -> bool:
        """Whether the test fails on this result: a divergence the findings do not explain, or
        (``--fail-on IMPACT``) one they explain whose impact (worst_impact) is IMPACT or worse.
        A finding that states no impact cannot be shown to be below the level: it fails."""
        if self.outcome in ("fail", "behaviour_changed"):
            return True
        if fail_on is None or self.outcome != "expected":
            return False
        impact = self.record["impact"]
        return impact is None or IMPACT_RANK[impact] >= IMPACT_RANK[fail_on]


def worst_impact(findings: list[Finding]) -> str | None:
    """The worst impact of ``findings`` (IMPACTS orders them), None where one states none."""
    if not findings or any(not f.impact for f in findings):
        return None
    return max((f.impact for f in findings), key=IMPACT_RANK.__getitem__)


def check(case, target: Target, version: str, outcomes: list[Outcome], knowledge: Knowledge,
          duration_s: float, machine: Machine = Machine(), mode: str = "backward",
          call: FrameworkCall | None = None) -> Checked:
    """``mode``: the derivative checked, "backward" or an AD mode (verdicts.ad_modes.MODES);
    ``call``: the framework call the case ran in (by default a call of the case alone)."""
    call = FrameworkCall.alone(target, case) if call is None else call
    first, repeats = outcomes[0], outcomes[1:]
    # The verdict and its policy come from the arrays alone (the policy search's canonical
    # choice), whatever the knowledge base says: one behaviour, one label.
    fw = registry.FRAMEWORKS.get(target.framework)
    ref = call.reference(case)
    if mode == "backward":
        v = verdicts.classify(case.spec, case.input, case.grad_output, first, repeats=repeats, reference=ref,
                              index_layout=fw.index_layouts.get(target.variant) if fw else None)
    else:
        v = ad_modes.classify_mode(mode, case.spec, case.input, case.grad_output, first, reference=ref)

    observed_bits = []

    def holds(forward: dict, gradient: dict) -> bool:
        if first.status != OK:
            return False
        # Every target whose arrays are these gets the same answer (most conform): once per case.
        if not observed_bits:
            observed_bits.append(tuple(a if a is None else (a.dtype.str, a.shape, a.tobytes()) for a in (
                first.forward, first.grad_input, None if mode == "backward" else ad_modes.derivative(mode, first))))
        key = ("holds", mode, observed_bits[0], tuple(sorted(forward.items())), tuple(sorted(gradient.items())))
        return ref.derived(key, lambda: _holds(ref, case, first, mode, forward, gradient))

    candidates = knowledge.for_mode(target.framework, target.variant, target.device, version or "", machine, mode)
    # What the other cases of the framework call were, for kernels that write across cases; a
    # replayed record brings them along (call_properties).
    others = frozenset(first.info.get("call_properties") or ()).union(call.others(case))
    properties = call.group.properties(case)
    shape = first.info.get("call_shape") or case.input.shape
    j = judge(candidates, op_name(case), case.spec.dtype, properties, v.verdict, v.message, holds,
              math.prod(shape), lambda: properties | others,
              lambda impact: impact != "rounding" or case.spec.is_max or mode != "backward"
              or first.status != OK or _rounding_only(ref, first))
    observed = v.verdict + (f" ({policy_text(v.policy)})" if v.policy and v.verdict != "conforms" else "")
    pairs = [(first.forward, ref.expected_forward)]
    if mode == "backward":
        pairs.append((first.grad_input, ref.expected_grad_input))
    else:
        expected_derivative = ad_modes.expected(mode, case.spec, case.input, case.grad_output, reference=ref)
        pairs.append((ad_modes.derivative(mode, first), expected_derivative))
    impact = at_least(worst_impact(j.explained_by), pairs)
    if j.outcome == "expected":
        message = f"known: {' + '.join(f.id for f in j.explained_by)} ({observed}); impact {impact or 'not stated'}"
    elif j.outcome == "behaviour_changed":
        message = f"behaviour changed: the findings in scope claim {j.claim}; observed {observed}: {v.message}"
    elif j.outcome == "skipped":  # the framework's whole message is the record's framework_message
        message = f"{v.verdict}: {headline(v.message)}"
    elif j.outcome == "pass":
        message = v.message
    else:
        message = f"{observed}: {v.message}"
    # The reference's results are the case's, whatever the target did (written once per case).
    v.expected_forward, v.expected_grad_input = ref.expected_forward, ref.expected_grad_input
    record = _record(case, call.group.fields(case), target, version, first, v, j, message, duration_s,
                     sorted(others - properties), impact, ref)
    if mode != "backward":  # a reverse-mode record has no mode field (read as "backward")
        record["mode"] = mode
        record.update(derivative=_arr(ad_modes.derivative(mode, first)), grad_grad_input=_arr(first.grad_grad_input),
                      expected_derivative=_arr(expected_derivative))
    return Checked(j.outcome, message, record, j)


def _holds(ref, case, first: Outcome, mode: str, forward: dict, gradient: dict) -> bool:
    """Whether ``first`` is the reference's result under the (partial) policies ``forward`` and
    ``gradient`` (knowledge.judge)."""
    fp, gp = verdicts.Policy(**forward), verdicts.Policy(**gradient)
    if not case.spec.is_max:  # avg/lp: within the op's tolerance, as the policy search matches them
        return mode == "backward" and all(
            got is not None and np.shape(got) == want.shape and bool(close(ref, side, got, want).all())
            for side, got, want in (
                (0, first.forward, ref.result(fp).forward), (1, first.grad_input, ref.result(gp).grad_input)))
    # The observed arrays as each claim compares them (Policy.compared: a zero's sign left open).
    if mode != "backward":  # forward: the mode's policy, gradient: the reverse mode's (Finding.in_mode)
        return (identical(fp.compared(ad_modes.policy_jvp(ref, fp)), fp.compared(ad_modes.derivative(mode, first)))
                and identical(ref.result(gp).grad_input, gp.compared(first.grad_input)))
    # A claim's routing holds whatever order the sums took, unless it claims the order
    # (accumulate): then bit for bit (verdicts/sums.py).
    return identical(ref.result(fp).forward, fp.compared(first.forward)) and routes_as(ref, gp, gp.compared(first.grad_input))


def _rounding_only(ref, first: Outcome) -> bool:
    """avg/lp: whether the arrays differ from the reference's by no more than rounding can make
    of them: the same infinities and NaNs, and every other element within the op's tolerance in
    a lower precision (float32 for float64 results, bfloat16, the coarsest kernels compute in,
    for the others)."""
    coarse = np.dtype(np.float32) if ref.x.dtype == np.float64 else np.dtype(ml_dtypes.bfloat16)
    for side, (got, want) in enumerate(((first.forward, ref.expected_forward), (first.grad_input, ref.expected_grad_input))):
        if got is None or np.shape(got) != want.shape:
            return False
        scale = np.maximum(np.abs(want.astype(np.float64)), np.abs(ref.magnitude()[side].astype(np.float64)))
        if not within(got, want, tolerances.bound(ref.spec.op, coarse, scale)).all():
            return False
    return True


def case_properties(case) -> frozenset[str]:
    """The case's properties (poolgrad/reference/properties.py)."""
    return properties_of_cases(case.spec, [case.input])[0]


def headline(text: str, limit: int = 240) -> str:
    """A framework message in one line: its first line, and its last where the first only
    announces what follows ("in user code:" above a traceback)."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    if not lines:
        return ""
    head = f"{lines[0]} … {lines[-1]}" if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return head if len(head) <= limit else head[:limit - 1] + "…"


def _arr(a, expected=None, encoded=None, ref=None) -> list | None:
    """A framework's array, sharing the case's encoding ``encoded`` of ``expected`` where the
    bits are the same (the record then names it as the reference's), and otherwise the
    encoding of the same bits by another target of the case (``ref``, its CaseReference)."""
    if a is None:
        return None
    raw = a.tobytes()
    if expected is not None and a.dtype == expected.dtype and a.shape == expected.shape and raw == expected.tobytes():
        return encoded
    if ref is None:
        return encode_array(a)
    return ref.derived(("encoded", a.dtype, a.shape, raw), lambda: encode_array(a))


def case_fields(case) -> dict:
    """What a case is, the same for every target (reports.schema.CASE_FIELDS)."""
    return Group([case]).fields(case)


def _record(case, fields, target, version, outcome, v, j: Judgement, message, duration_s, call_properties,
            impact, ref) -> dict:
    # The verdict's fields a record takes (its expected arrays are the case's, encoded once).
    vd = {f: json_value(getattr(v, f)) for f in ("policy", "forward_policy", "valid_subgradient", "max_abs_error",
                                                  "max_ulp_error", "differing_cells")}
    return {
        "record": "result",
        **fields,
        "framework": target.framework,
        "framework_version": version,
        "variant": target.variant,
        "device": target.device,
        "target": target.id,
        "verdict": v.verdict,
        "policy": vd.get("policy"),
        "forward_policy": vd.get("forward_policy"),
        "valid_subgradient": vd.get("valid_subgradient"),
        # Each finding's impact travels with its summary (the results' finding record).
        "findings": [{**f.summary(), "impact": f.impact} if f.impact else f.summary() for f in j.explained_by],
        "impact": impact,
        "contradicts": [f.id for f in j.contradicted],
        # the findings in scope that call this result a race (a release diff compares such
        # results by whether the race is still claimed, not bit for bit: reports/diff.py)
        "races": [f.id for f in j.in_scope if f.verdict == "nondeterministic"],
        "outcome": j.outcome,
        "forward": _arr(outcome.forward, v.expected_forward, fields["expected_forward"], ref),
        "grad_input": _arr(outcome.grad_input, v.expected_grad_input, fields["expected_grad_input"], ref),
        "indices": _arr(outcome.indices),
        "call_shape": outcome.info.get("call_shape"),
        "call_properties": call_properties,
        "max_abs_error": vd.get("max_abs_error"),
        "max_ulp_error": vd.get("max_ulp_error"),
        "differing_cells": vd.get("differing_cells") or [],
        "message": message,
        "framework_message": outcome.message if outcome.status != OK else None,
        "duration_s": round(duration_s, 4),
    }
