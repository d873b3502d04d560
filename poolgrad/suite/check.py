"""One (case, target) check: verdict, the findings that explain it, outcome, and the record."""

from __future__ import annotations

import dataclasses

from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import Finding, policy_text
from poolgrad.knowledge.impacts import IMPACT_RANK, at_least
from poolgrad.knowledge.judge import Judgement, judge
from poolgrad.knowledge.machine import Machine
from poolgrad.reference.properties import properties_of_cases
from poolgrad.reports.schema import Result
from poolgrad.verdicts import ad_modes
from poolgrad.verdicts.verdict import json_value

from .call import FrameworkCall, Group
from .observation import Observation


@dataclasses.dataclass
class Checked:
    outcome: str          # pass | expected | behaviour_changed | fail | skipped
    message: str
    record: dict
    judgement: Judgement

    def fails(self, fail_on: str | None = None) -> bool:
        """Whether the test fails on this result: a divergence the findings do not explain, or
        (``--fail-on IMPACT``) one they explain whose impact (the record's: never milder than
        its arrays show) is IMPACT or worse. A finding that states no impact cannot be shown to
        be below the level: it fails."""
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
    o = Observation(case, target, outcomes, mode, call)
    j = judge(knowledge.for_mode(target.framework, target.variant, target.device, version or "", machine, mode), o)
    v = o.verdict
    observed = v.verdict + (f" ({policy_text(v.policy)})" if v.policy and v.verdict != "conforms" else "")
    impact = at_least(worst_impact(j.explained_by), o.observed_and_expected, o.verdict.verdict)
    if j.outcome == "expected":
        message = f"known: {' + '.join(f.id for f in j.explained_by)} ({observed}); impact {impact or 'not stated'}"
    elif j.outcome == "behaviour_changed":
        message = f"behaviour changed: the findings in scope claim {j.claim}; observed {observed}: {v.message}"
    elif j.outcome == "skipped":  # the framework's whole message is the record's framework_message
        message = f"{v.verdict.replace('_', ' ')}: {headline(v.message)}"  # as records.unsupported_results words it
    elif j.outcome == "pass":
        message = v.message
    else:
        message = f"{observed}: {v.message}"
    record = _record(o, version, j, message, duration_s, impact)
    return Checked(j.outcome, message, record, j)


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


def case_fields(case) -> dict:
    """What a case is, the same for every target (reports.schema.CASE_FIELDS)."""
    return Group([case]).fields(case)


def _record(o: Observation, version, j: Judgement, message, duration_s, impact) -> dict:
    first, v, target = o.first, o.verdict, o.target
    fields = o.call.group.fields(o.case)
    # The verdict's fields a record takes.
    vd = {f: json_value(getattr(v, f)) for f in ("policy", "forward_policy", "valid_subgradient", "max_abs_error",
                                                  "max_ulp_error", "differing_cells")}
    # An array that is the reference's is the case's encoding of it.
    arrays = {name: fields[f"expected_{name}"] if name in o.as_expected else o.encoded(name)
              for name in ("forward", "grad_input")}
    modes = {} if o.mode == "backward" else dict(  # a reverse-mode record has no mode (read as "backward")
        mode=o.mode, derivative=o.encoded(ad_modes.DERIVATIVE[o.mode]), grad_grad_input=o.encoded("grad_grad_input"),
        expected_derivative=o.encoded("expected_derivative"))
    return Result(
        **fields, **arrays, **modes,
        framework=target.framework, framework_version=version, variant=target.variant, device=target.device,
        target=target.id, verdict=v.verdict, policy=vd["policy"], forward_policy=vd["forward_policy"],
        valid_subgradient=vd["valid_subgradient"],
        # Each finding's impact travels with its summary (the results' finding record).
        findings=[{**f.summary(), "impact": f.impact} if f.impact else f.summary() for f in j.explained_by],
        impact=impact, contradicts=[f.id for f in j.contradicted],
        # the findings in scope that call this result a race (a release diff compares such
        # results by whether the race is still claimed, not bit for bit: reports/diff.py)
        races=[f.id for f in j.in_scope if f.verdict == "nondeterministic"],
        outcome=j.outcome, as_expected=o.as_expected or None, indices=o.encoded("indices"),
        call_shape=first.info.get("call_shape"), call_properties=sorted(o.others - o.properties),
        max_abs_error=vd["max_abs_error"], max_ulp_error=vd["max_ulp_error"],
        differing_cells=vd["differing_cells"] or [], message=message,
        framework_message=first.message if first.status != OK else None, duration_s=round(duration_s, 4),
    ).to_record()
