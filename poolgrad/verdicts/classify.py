"""classify(): one (case, target) outcome -> Verdict."""

from __future__ import annotations

import numpy as np

from poolgrad.reference import CANONICAL

from . import indices
from .case import CaseReference
from .explain import explain
from .extended_policies import Policy
from .observed import Observed
from .sums import ANY_ORDER, routes_as
from .verdict import Verdict


def classify(observed: Observed, repeats=(), *, index_layout: str | None = None) -> Verdict:
    """The verdict on ``observed`` (an outcome's arrays against its case's reference).
    ``repeats`` are further outcomes of the same run, for nondeterminism; ``index_layout`` how
    the path writes the indices it returns (poolgrad/verdicts/indices.py), which are then
    judged against its forward and gradient. The verdict depends on the arrays alone: the same
    results always get the same label."""
    outcome, case = observed.outcome, observed.reference
    if not outcome.ran:
        return Verdict(outcome.status, message=outcome.message or outcome.status)
    for i, again in enumerate(repeats, 1):
        if not again.ran or not (observed.same_as(0, again.forward) and observed.same_as(1, again.grad_input)):
            what = again.status if not again.ran else "results differ bitwise"
            return Verdict("nondeterministic", message=f"repeat {i} of the same run: {what}")
    if observed.shape_error:
        return Verdict("wrong", message=observed.shape_error)
    if observed.fingerprint not in case.verdicts:  # identical outcomes recur (the targets of a case)
        case.verdicts[observed.fingerprint] = (_max_type if case.spec.is_max else _arithmetic)(observed)
    v = Verdict(**case.verdicts[observed.fingerprint])
    if case.spec.is_max and outcome.indices is not None and index_layout is not None:
        why = indices.disagreement(observed, index_layout)
        if why:
            v.verdict, v.message = "inconsistent_indices", f"{why}; forward and gradient: {v.message}"
    return v


def _describe(diff: dict) -> str:
    return (f"{diff['differing_in']} differs from canonical in {diff['differing_count']} cell(s) "
            f"(max abs {diff['max_abs_error']:.3g}, max {diff['max_ulp_error']:.3g} ulp)")


def _fmt(policy) -> str:
    return ", ".join(f"{k}={v}" for k, v in policy.as_dict().items())


def _max_type(observed: Observed) -> dict:
    case, (ok_fwd, ok_bwd) = observed.reference, observed.exact
    if ok_fwd.all() and ok_bwd.all():
        return {"verdict": "conforms", "policy": dict(CANONICAL), "forward_policy": dict(CANONICAL),
                "valid_subgradient": True, "max_abs_error": 0.0, "max_ulp_error": 0.0, "message": "forward and grad_input are the canonical results"}
    diff = observed.differences(ok_fwd, ok_bwd)
    if ok_fwd.all() and routes_as(observed, Policy()):
        # Routing first: the spec's routing, its sums in another order than the spec's (which
        # the findings that claim an order name, bit for bit).
        return {**diff, "verdict": "reordered", "policy": {**CANONICAL, "accumulate": ANY_ORDER},
                "forward_policy": dict(CANONICAL), "valid_subgradient": True,
                "message": f"{_describe(diff)}: routes as the spec, its sums in another order (within the "
                           f"bound of any order in {case.x.dtype.name}: SPEC.md, \"Sums of routed gradients\")"}
    found = explain(observed)
    reordered = False
    if found.backward is None:
        # Routing first, then the sums: a gradient that routes as a policy and adds its
        # contributions in another order (sums.py) is that policy, its sums in any order.
        loose = explain(observed, lambda side, want, policy: (
            observed.same_as(0, want) if side == 0 else routes_as(observed, policy)))
        if loose.backward is not None:
            found, reordered = loose, True
    if found.forward is None or found.backward is None:
        part = "forward" if found.forward is None else "grad_input"
        return {"verdict": "wrong", **diff,
                "policy": found.backward and found.backward.as_dict(),
                "forward_policy": found.forward and found.forward.as_dict(),
                "message": f"{_describe(diff)}; no policy explains the {part}"}
    valid = bool(case.result(found.backward).valid())
    validity = "a valid subgradient" if valid else "not a valid subgradient"
    policy = found.backward.as_dict()
    if reordered:
        policy["accumulate"] = ANY_ORDER
    out = {**diff, "policy": policy, "forward_policy": found.forward.as_dict(), "valid_subgradient": valid}
    if found.joint:
        return {**out, "verdict": "policy",
                "message": f"{_describe(diff)}; explained by policy {_fmt(found.backward)} ({validity})"}
    verdict = "inconsistent" if found.nan_differs else "policy"
    return {**out, "verdict": verdict,
            "message": f"{_describe(diff)}; forward follows {_fmt(found.forward)}, "
                       f"grad_input follows {_fmt(found.backward)} ({validity})"}


def _arithmetic(observed: Observed) -> dict:
    case = observed.reference
    op, dtype = case.spec.op, case.x.dtype
    oks = [observed.close(0), observed.close(1)]
    if oks[0].all() and oks[1].all():
        diff = observed.differences(*observed.exact)
        unresolved = _unresolved(case) if diff["differing_count"] else 0
        where = f"; {unresolved} power sum(s) below what {dtype.name} resolves" if unresolved else ""
        return {"verdict": "conforms", "max_abs_error": diff["max_abs_error"],
                "max_ulp_error": diff["max_ulp_error"],
                "message": f"within the {op} tolerance for {dtype.name} "
                           f"(max {diff['max_ulp_error']:.3g} ulp{where})"}
    diff = observed.differences(oks[0], oks[1])
    outside = (f"{diff['differing_in']} outside the {op} tolerance in {diff['differing_count']} "
               f"cell(s) (max abs {diff['max_abs_error']:.3g}, max {diff['max_ulp_error']:.3g} ulp)")
    # Sums kept in the dtype (accumulate) are the only policy of avg/lp; matched within tolerance.
    found = explain(observed, lambda side, _want, policy: bool(observed.close(side, policy).all()))
    policies = {"policy": found.backward and found.backward.as_dict(),
                "forward_policy": found.forward and found.forward.as_dict()}
    if found.forward is None or found.backward is None:
        part = "forward" if found.forward is None else "grad_input"
        return {"verdict": "wrong", **diff, **policies, "message": f"{outside}; no policy explains the {part}"}
    how = (f"explained by policy {_fmt(found.backward)}" if found.joint else
           f"forward follows {_fmt(found.forward)}, grad_input follows {_fmt(found.backward)}")
    return {"verdict": "policy", **diff, **policies, "message": f"{outside}; {how}"}


def _unresolved(case: CaseReference) -> int:
    """lp: how many windows' power sums the dtype cannot resolve (Observed.close's ceiling is set)."""
    return int((~np.isnan(case.range_error()[2])).sum()) if case.spec.op == "lp_pool" else 0
