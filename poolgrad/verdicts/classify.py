"""classify(): one (case, target) outcome -> Verdict."""

from __future__ import annotations

import numpy as np

from poolgrad.reference import CANONICAL
from poolgrad.reference.api import range_error

from . import indices, tolerances
from .case import CaseReference
from .compare import as_f64, differing_cells, errors, identical, identical_to, same_bits, within
from .explain import explain
from .extended_policies import Policy
from .sums import ANY_ORDER, routes_as
from .verdict import Verdict


def classify(spec, x: np.ndarray, grad_output: np.ndarray, outcome, repeats=(), *,
             reference: CaseReference | None = None, index_layout: str | None = None) -> Verdict:
    """The verdict on ``outcome`` (an adapters.base.Outcome) for the case (spec, x,
    grad_output). ``repeats`` are further outcomes of the same run, for nondeterminism;
    ``reference``: the case's reference (poolgrad/verdicts/case.py), which the suite's batching
    group holds for every target of the case (default: one of this case alone);
    ``index_layout`` how the path writes the indices it returns (poolgrad/verdicts/indices.py), which are
    then judged against its forward and gradient. The verdict depends on the arrays alone: the
    same results always get the same label."""
    if not outcome.ran:
        return Verdict(outcome.status, message=outcome.message or outcome.status)
    for i, again in enumerate(repeats, 1):
        if not again.ran or not (identical(again.forward, outcome.forward)
                                      and identical(again.grad_input, outcome.grad_input)):
            what = again.status if not again.ran else "results differ bitwise"
            return Verdict("nondeterministic", message=f"repeat {i} of the same run: {what}")
    case = reference if reference is not None else CaseReference(spec, x, grad_output)
    for name, got, want in (("forward", outcome.forward, case.expected_forward),
                            ("grad_input", outcome.grad_input, case.expected_grad_input)):
        if got is None or np.shape(got) != want.shape:
            return Verdict("wrong", message=f"{name} has shape {np.shape(got) if got is not None else None}, "
                                            f"expected {want.shape}")
    fingerprint = (outcome.forward.dtype.str, outcome.forward.tobytes(),
                   outcome.grad_input.dtype.str, outcome.grad_input.tobytes())
    if fingerprint not in case.verdicts:
        case.verdicts[fingerprint] = (_max_type(case, outcome.forward, outcome.grad_input) if spec.is_max
                                      else _arithmetic(case, outcome.forward, outcome.grad_input))
    v = Verdict(**case.verdicts[fingerprint])
    if spec.is_max and outcome.indices is not None and index_layout is not None:
        why = indices.disagreement(x, grad_output, outcome.forward, outcome.grad_input, outcome.indices, index_layout)
        if why:
            v.verdict, v.message = "inconsistent_indices", f"{why}; forward and gradient: {v.message}"
    return v


def _differences(case: CaseReference, forward, grad_input, ok_fwd, ok_bwd) -> dict:
    """Error summary against canonical, located in the gradient when it differs."""
    which, got, want, ok = (("grad_input", grad_input, case.expected_grad_input, ok_bwd)
                            if not ok_bwd.all() else
                            ("forward", forward, case.expected_forward, ok_fwd))
    abs_err, ulp_err = errors(got, want, case.x.dtype)
    return {"max_abs_error": float(abs_err.max(initial=0.0)),
            "max_ulp_error": float(ulp_err.max(initial=0.0)),
            "differing_in": which, "differing_cells": differing_cells(ok),
            "differing_count": int((~ok).sum())}


def _describe(diff: dict) -> str:
    return (f"{diff['differing_in']} differs from canonical in {diff['differing_count']} cell(s) "
            f"(max abs {diff['max_abs_error']:.3g}, max {diff['max_ulp_error']:.3g} ulp)")


def _fmt(policy) -> str:
    return ", ".join(f"{k}={v}" for k, v in policy.as_dict().items())


def _max_type(case: CaseReference, forward, grad_input) -> dict:
    ok_fwd = same_bits(forward, case.expected_forward)
    ok_bwd = same_bits(grad_input, case.expected_grad_input)
    if ok_fwd.all() and ok_bwd.all():
        return {"verdict": "conforms", "policy": dict(CANONICAL), "forward_policy": dict(CANONICAL),
                "valid_subgradient": True, "max_abs_error": 0.0, "max_ulp_error": 0.0, "message": "forward and grad_input are the canonical results"}
    diff = _differences(case, forward, grad_input, ok_fwd, ok_bwd)
    if ok_fwd.all() and routes_as(case, Policy(), grad_input):
        # Routing first: the spec's routing, its sums in another order than the spec's (which
        # the findings that claim an order name, bit for bit).
        return {**diff, "verdict": "reordered", "policy": {**CANONICAL, "accumulate": ANY_ORDER},
                "forward_policy": dict(CANONICAL), "valid_subgradient": True,
                "message": f"{_describe(diff)}: routes as the spec, its sums in another order (within the "
                           f"bound of any order in {case.x.dtype.name}: SPEC.md, \"Sums of routed gradients\")"}
    found = explain(case, forward, grad_input)
    reordered = False
    if found.backward is None:
        # Routing first, then the sums: a gradient that routes as a policy and adds its
        # contributions in another order (sums.py) is that policy, its sums in any order.
        same_forward = identical_to(forward)
        loose = explain(case, forward, grad_input, lambda side, got, want, policy: (
            same_forward(want) if side == 0 else routes_as(case, policy, got)))
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


def close(case: CaseReference, side: int, got, want) -> np.ndarray:
    """Elementwise: ``got`` within the op's tolerance of ``want`` (side 0 the forward, 1 the
    gradient), scaled by |want| or, where that fails, by the size of the terms summed, so
    cancellation inside a window (1e3 - 1e3 + 0.3) is not a failure; for lp also within what
    the dtype's range adds (powers in or below the subnormal range: reference.api.range_error),
    and where the dtype cannot resolve a window's power sum, anything a computation in the dtype
    can give there: a forward from 0 to the ceiling, or NaN; any gradient the window reaches."""
    op, dtype = case.spec.op, case.x.dtype
    ok = within(got, want, tolerances.bound(op, dtype, want))
    if not ok.all():
        scale = np.maximum(np.abs(want.astype(np.float64)), np.abs(case.magnitude()[side].astype(np.float64)))
        bound = tolerances.bound(op, dtype, scale)
        if op != "lp_pool":
            return within(got, want, bound)
        ranged = _range(case)
        ok = within(got, want, bound + ranged[side])
        if side == 1:
            return ok | np.isinf(ranged[1])
        value, ceiling = as_f64(got), ranged[2]
        with np.errstate(invalid="ignore"):
            return ok | (~np.isnan(ceiling) & (np.isnan(value) | ((value >= 0) & (value <= ceiling))))
    return ok


def _arithmetic(case: CaseReference, forward, grad_input) -> dict:
    op, dtype = case.spec.op, case.x.dtype
    oks = [close(case, 0, forward, case.expected_forward), close(case, 1, grad_input, case.expected_grad_input)]
    exact_fwd = same_bits(forward, case.expected_forward)
    exact_bwd = same_bits(grad_input, case.expected_grad_input)
    if oks[0].all() and oks[1].all():
        diff = _differences(case, forward, grad_input, exact_fwd, exact_bwd)
        unresolved = _unresolved(case) if diff["differing_count"] else 0
        where = f"; {unresolved} power sum(s) below what {dtype.name} resolves" if unresolved else ""
        return {"verdict": "conforms", "max_abs_error": diff["max_abs_error"],
                "max_ulp_error": diff["max_ulp_error"],
                "message": f"within the {op} tolerance for {dtype.name} "
                           f"(max {diff['max_ulp_error']:.3g} ulp{where})"}
    diff = _differences(case, forward, grad_input, oks[0], oks[1])
    outside = (f"{diff['differing_in']} outside the {op} tolerance in {diff['differing_count']} "
               f"cell(s) (max abs {diff['max_abs_error']:.3g}, max {diff['max_ulp_error']:.3g} ulp)")
    # Sums kept in the dtype (accumulate) are the only policy of avg/lp; matched within tolerance.
    found = explain(case, forward, grad_input, lambda side, got, want, _policy: bool(close(case, side, got, want).all()))
    policies = {"policy": found.backward and found.backward.as_dict(),
                "forward_policy": found.forward and found.forward.as_dict()}
    if found.forward is None or found.backward is None:
        part = "forward" if found.forward is None else "grad_input"
        return {"verdict": "wrong", **diff, **policies, "message": f"{outside}; no policy explains the {part}"}
    how = (f"explained by policy {_fmt(found.backward)}" if found.joint else
           f"forward follows {_fmt(found.forward)}, grad_input follows {_fmt(found.backward)}")
    return {"verdict": "policy", **diff, **policies, "message": f"{outside}; {how}"}


def _unresolved(case: CaseReference) -> int:
    """lp: how many windows' power sums the dtype cannot resolve (close's ceiling is set)."""
    return int((~np.isnan(_range(case)[2])).sum()) if case.spec.op == "lp_pool" else 0


def _range(case: CaseReference) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """lp: reference.api.range_error of the case, once per case."""
    return case.derived("range_error", lambda: range_error(case.spec, case.x, case.grad_output))
