"""The policy search: which policies reproduce an outcome's forward and gradient."""

from __future__ import annotations

import dataclasses

from .case import Case
from .compare import identical
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


def explain(case: Case, forward, grad_input, hint: tuple[dict, dict | None] | None = None) -> Explanation:
    """Search the candidates simplest first; the first policy matching both wins, else the
    simplest match of each half (each may be None).

    ``hint`` (backward policy, forward policy or None for the same), typically a known
    divergence's claim, is tried first: when it explains both halves it is the answer and the
    search is skipped (a listed divergence is then described in the terms it was listed in)."""
    if hint is not None:
        bwd, fwd = Policy(**hint[0]), Policy(**(hint[1] or hint[0]))
        if (identical(case.result(fwd).forward, forward)
                and identical(case.result(bwd).grad_input, grad_input)):
            return Explanation(fwd, bwd, fwd == bwd)
    fwd = bwd = None
    for policy in case.candidates():
        r = case.result(policy)
        f_ok = identical(r.forward, forward)
        b_ok = identical(r.grad_input, grad_input)
        if f_ok and b_ok:
            return Explanation(policy, policy, True)
        fwd = fwd or (policy if f_ok else None)
        bwd = bwd or (policy if b_ok else None)
    return Explanation(fwd, bwd, False)


def explained_by(policy: dict, spec, x, grad_output, outcome, *, forward_policy: dict | None = None,
                 cache_key=None) -> bool:
    """Whether ``outcome`` equals the reference under the named policy (backward) and
    ``forward_policy`` (forward; default the same): the test of an expectation's claim,
    which holds also where the policy coincides with the canonical one."""
    from .case import case_for
    case = case_for(spec, x, grad_output, cache_key)
    bwd = case.result(Policy(**policy))
    fwd = case.result(Policy(**(forward_policy or policy)))
    return identical(fwd.forward, outcome.forward) and identical(bwd.grad_input, outcome.grad_input)
