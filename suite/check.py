"""One (case, target) check: verdict, expectation, outcome, and the results record."""

from __future__ import annotations

import dataclasses

import verdicts
from adapters.base import Outcome, Target
from cases import expectations as expectations_mod
from reports.records import encode_array

SKIPPED_VERDICTS = ("unsupported", "not_installed", "no_device")


@dataclasses.dataclass
class Checked:
    outcome: str          # pass | expected | behaviour_changed | fail | skipped
    message: str
    record: dict


def op_name(case) -> str:
    return f"{case.spec.op}{case.input.ndim - 2}d"


def claim_holds(claimed: str, policy, forward_policy, observed: str, case, outcome: Outcome) -> bool:
    """Whether an expectation's claim (a verdict, with policies for policy-type verdicts) holds
    for a case whose observed verdict is ``observed``."""
    if claimed in expectations_mod.POLICY_VERDICTS:
        # A policy claim is about behaviour, not labels: it holds when the framework's results
        # equal the reference under the claimed policies, also where they coincide with canonical.
        return observed in ("conforms", "policy", "inconsistent") and verdicts.explained_by(
            policy, case.spec, case.input, case.grad_output, outcome,
            forward_policy=forward_policy, cache_key=case.id)
    return observed == claimed


def check(case, target: Target, version: str, outcomes: list[Outcome], entries, duration_s: float,
          *, from_catalogue: bool = True) -> Checked:
    """``from_catalogue``: the case is the catalogue's, so entries select it by family and id.
    Other cases (a --case-file, fuzzing) match an entry in scope by behaviour: the first whose
    claim holds for the divergence observed."""
    first, repeats = outcomes[0], outcomes[1:]
    scope = dict(framework=target.framework, variant=target.variant, device=target.device,
                 version=version or "", op=op_name(case), dtype=case.spec.dtype)
    entry = (expectations_mod.find(entries, **scope, family=case.family, case_id=case.id)
             if from_catalogue else None)
    # A listed policy is tried before the policy search: the common case of a known divergence
    # that still holds then costs two reference evaluations instead of a search.
    hint = ((entry.policy, entry.forward_policy)
            if entry is not None and entry.verdict in expectations_mod.POLICY_VERDICTS and entry.policy
            else None)
    v = verdicts.classify(case.spec, case.input, case.grad_output, first, repeats=repeats,
                          cache_key=case.id, hint=hint)
    if not from_catalogue and v.verdict not in ("conforms", *SKIPPED_VERDICTS):
        entry = next((e for e in expectations_mod.in_scope(entries, **scope)
                      if claim_holds(e.verdict, e.policy, e.forward_policy, v.verdict, case, first)), None)
    observed = f"{v.verdict}" + (f" {v.policy}" if v.policy else "")
    if entry is not None and v.verdict in SKIPPED_VERDICTS and entry.verdict != v.verdict:
        # Not expressible / not present is the adapter's or the machine's answer, not the
        # framework's behaviour: a wide entry cannot have observed it change.
        entry = None
    if entry is not None:
        expected = f"{entry.verdict}" + (f" {entry.policy}" if entry.policy else "")
        if claim_holds(entry.verdict, entry.policy, entry.forward_policy, v.verdict, case, first):
            outcome, message = "expected", f"known divergence {entry.id}: {entry.reason}"
        else:
            outcome = "behaviour_changed"
            message = (f"behaviour changed: expected {expected} ({entry.id}), observed {observed}: {v.message}")
    elif v.verdict in SKIPPED_VERDICTS:
        outcome, message = "skipped", f"{v.verdict}: {v.message}"
    elif v.verdict == "conforms":
        outcome, message = "pass", v.message
    else:
        outcome, message = "fail", f"{observed}: {v.message}"
    return Checked(outcome, message, _record(case, target, version, first, v, entry, outcome, message, duration_s))


def _arr(a):
    return None if a is None else encode_array(a)


def _record(case, target, version, outcome, v, entry, status, message, duration_s) -> dict:
    vd = v.to_dict()
    return {
        "record": "result",
        "case_id": case.id,
        "family": case.family,
        "op": op_name(case),
        "spec": case.spec.to_dict(),
        "dtype": case.spec.dtype,
        "framework": target.framework,
        "framework_version": version,
        "variant": target.variant,
        "device": target.device,
        "target": target.id,
        "verdict": v.verdict,
        "policy": vd.get("policy"),
        "forward_policy": vd.get("forward_policy"),
        "valid_subgradient": vd.get("valid_subgradient"),
        "expected": None if entry is None else entry.to_dict(),
        "outcome": status,
        "input": _arr(case.input),
        "grad_output": _arr(case.grad_output),
        "forward": _arr(outcome.forward),
        "expected_forward": _arr(v.expected_forward),
        "grad_input": _arr(outcome.grad_input),
        "expected_grad_input": _arr(v.expected_grad_input),
        "indices": _arr(outcome.indices),
        "call_shape": outcome.info.get("call_shape"),
        "max_abs_error": vd.get("max_abs_error"),
        "max_ulp_error": vd.get("max_ulp_error"),
        "differing_cells": vd.get("differing_cells") or [],
        "message": message,
        "duration_s": round(duration_s, 6),
    }
