"""The policy search: which policies reproduce an outcome's forward and gradient."""

from __future__ import annotations

import dataclasses

from .extended_policies import Policy


@dataclasses.dataclass
class Explanation:
    forward: Policy | None    # simplest policy whose forward matches
    backward: Policy | None   # simplest policy whose gradient matches
    joint: bool               # one policy explains both (then forward is backward)

    @property
    def nan_differs(self) -> bool:
        f, b = self.forward, self.backward
        return (f.nan, f.nan_tie) != (b.nan, b.nan_tie)


def explain(observed, matches=None) -> Explanation:
    """Search the candidates simplest first (a deterministic order that depends on the case
    alone); the first policy matching both wins, else the simplest match of each half (each
    may be None). Where several policies coincide on a case, this order is the canonical
    choice among them. ``observed``: the outcome's arrays against the case's reference
    (verdicts.observed.Observed). ``matches(side, policy_result, policy)`` (side 0 forward, 1
    gradient) decides whether the observed side matches: bit for bit by default; a tolerance
    for arithmetic ops, the routing with sums in any order for max-type gradients (classify)."""
    case = observed.reference
    if matches is None:
        matches = lambda side, want, _policy: observed.same_as(side, want)  # noqa: E731
    fwd = bwd = None
    for policy in case.candidates():
        r = case.result(policy)
        f_ok = matches(0, r.forward, policy)
        # Once a gradient matched, another only matters with its forward (a joint match): the
        # gradient's comparison, the costly one where its sums are matched in any order, is
        # skipped for the others.
        if not (f_ok or bwd is None):
            continue
        b_ok = matches(1, r.grad_input, policy)
        if f_ok and b_ok:
            return Explanation(policy, policy, True)
        fwd = fwd or (policy if f_ok else None)
        bwd = bwd or (policy if b_ok else None)
    return Explanation(fwd, bwd, False)
