"""The judge: the outcome of one (case, target) result, which claims of the findings in scope
explain it, and which of them takes the credit."""

from __future__ import annotations

import dataclasses
import itertools

from .finding import Finding
from .impacts import IMPACT_RANK, IMPACTS


@dataclasses.dataclass
class Judgement:
    outcome: str                     # pass | expected | behaviour_changed | fail | skipped
    explained_by: list[Finding]
    in_scope: list[Finding]
    contradicted: list[Finding]      # in scope, and their claim does not hold here

    @property
    def claim(self) -> str:
        return " + ".join(f"{f.id} ({f.claim_text()})" for f in self.in_scope)


# No call was made (not_run: a finding calls it undefined and --run-undefined was not given), so
# nothing was observed that a finding could explain.
SKIPPED_VERDICTS = ("unsupported", "not_installed", "no_device", "not_run")


def judge(candidates: list[Finding], observation) -> Judgement:
    """The outcome of one result. ``candidates``: the findings of its target
    (Knowledge.for_target); ``observation``: the result (poolgrad/suite/observation.py), which
    says what the case and its framework call are (op, dtype, properties, call_elements,
    call_properties), what the verdict engine calls it (verdict) and answers the claims'
    questions: ``holds(forward_policy, gradient_policy)``, whether the result equals the
    reference under those (partial) policies, ``policies_apply``, whether a policy claim can be
    checked there at all (out of scope where not), and ``shows_no_more_than(impact)``, whether
    its arrays are no worse than ``impact`` says (a verdict claim checks nothing else, so a result
    off by more than rounding is never credited to a rounding finding)."""
    o = observation
    verdict, properties, elements, call_properties = o.verdict.verdict, o.properties, o.call_elements, lambda: o.call_properties
    scope = [f for f in candidates if (o.policies_apply or not f.claims_policy)
             and f.in_scope(o.op, o.dtype, properties, elements, call_properties)]
    if verdict in SKIPPED_VERDICTS and not any(f.verdict == verdict for f in scope):
        return Judgement("skipped", [], scope, [])
    if verdict == "reordered":
        # Sums in another order than the spec's: the findings that claim that order, bit for
        # bit (verdicts/sums.py), explain it; otherwise it passes as the spec's routing.
        explained = _credited([f for f in scope if f.claims_policy and "accumulate" in f.gradient], o)
        if explained:
            return Judgement("expected", explained, scope, [])
    if verdict in ("conforms", "reordered"):
        # Canonical behaviour never fails, nor canonical routing whose sums another order
        # rounded; a finding that predicted otherwise is reported.
        return Judgement("pass", [], scope, [f for f in scope if not _claim_holds([f], o)])
    explained = (_credited([f for f in scope if f.claims_policy], o)
                 or _credited([f for f in scope if not f.claims_policy and o.shows_no_more_than(f.impact)],
                              o, compose=False))
    if explained:
        return Judgement("expected", explained, scope, [])
    if verdict in SKIPPED_VERDICTS:
        return Judgement("skipped", [], scope, [])
    return Judgement("behaviour_changed" if scope else "fail", [], scope, scope)


def _credited(findings: list[Finding], observation, compose: bool = True) -> list[Finding]:
    """The claims that take the credit for a result ([] where none explains it). Policy claims
    compose: the largest set whose claims hold together explains it (a smaller set where a wider
    finding's trigger changed nothing); a failure claim stands alone. Among the sets of that size
    that hold, the most specific wins, then the worst impact; never the order of the files."""
    for r in range(len(findings), 0, -1) if compose else (1,):
        holding = [list(c) for c in itertools.combinations(findings, r) if _claim_holds(list(c), observation)]
        if holding:
            return min(holding, key=_credit_order)
    return []


def _credit_order(findings: list[Finding]) -> tuple:
    """Most specific first, then worst impact (an unstated one ranks worst), then by id."""
    worst = max(IMPACT_RANK.get(f.impact, len(IMPACTS)) for f in findings)
    return -sum(f.specificity for f in findings), -worst, sorted(f.id for f in findings)


def _claim_holds(findings: list[Finding], observation) -> bool:
    verdict = observation.verdict.verdict
    if not all(f.claims_policy for f in findings):
        return all(f.matches_failure(verdict, observation.verdict.message) for f in findings)
    if verdict not in ("conforms", "reordered", "policy", "inconsistent", "inconsistent_modes", "wrong"):
        return False
    forward, gradient = {}, {}
    for f in findings:
        forward.update(f.forward)
        gradient.update(f.gradient)
    return observation.holds(forward, gradient)
