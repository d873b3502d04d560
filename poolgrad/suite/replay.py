"""A results record back into the case and the outcome it recorded, and judged again with
the knowledge base, exactly as the run judges (suite.check): what the release lanes' history
and ``characterize`` do with results files."""

from __future__ import annotations

import re

import numpy as np

from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.cases.findings import Judgement, Knowledge, Machine
from poolgrad.reference import PoolSpec, output_shape
from poolgrad.reports.records import decode_array
from poolgrad.reports.schema import RAN, mode_of

from .check import check

# Results written before the knowledge base kept a known failure's text only in the
# expectation's reason: "... observed with <framework> <version> on <device>: <message>".
_OLD_REASON = re.compile(r"observed with \S+ \S+ on \S+: (.*)", re.S)


def case_of(rec: dict):
    spec = PoolSpec.from_dict(rec["spec"])
    x, g = decode_array(rec["input"], rec["dtype"]), decode_array(rec["grad_output"], rec["dtype"])
    if x.size == 0:  # an empty list has no shape: the record's, or (older results) the call's
        shape = rec.get("shape") or [0, 1, *rec["call_shape"][2:]]
        x = x.reshape(shape)
        g = g.reshape(shape[:2] + list(output_shape(spec, shape)[2:]))
    return make_case(rec["case_id"], rec["family"], spec, x, g)


def outcome_of(rec: dict, case) -> Outcome:
    if rec["verdict"] in RAN:
        def arr(key, shape):
            a = decode_array(rec[key], rec["dtype"])
            return a.reshape(shape) if a.size == 0 else a
        out_shape = output_shape(case.spec, case.input.shape)
        # Indices are written for the call's channel count: results of runs that flattened
        # cases into single-channel planes carry indices that cannot be read per case.
        call = rec.get("call_shape")
        readable = rec.get("indices") is not None and (not call or call[1] == case.input.shape[1])
        indices = np.asarray(rec["indices"], dtype=np.int64).reshape(out_shape) if readable else None
        # An AD mode's record carries its derivative (and double backward's by the input).
        mode = mode_of(rec)
        derivatives = ({"tangent_output": arr("derivative", out_shape)} if mode == "jvp" else
                       {"grad_grad_output": arr("derivative", out_shape),
                        "grad_grad_input": arr("grad_grad_input", case.input.shape)} if mode == "double_backward" else {})
        return Outcome(OK, forward=arr("forward", out_shape) if rec.get("forward") is not None else None,
                       grad_input=arr("grad_input", case.input.shape), indices=indices, info=_call(rec),
                       **derivatives)
    return Outcome(rec["verdict"], message=framework_message(rec), info=_call(rec))


def _call(rec: dict) -> dict:
    return {"call_shape": rec.get("call_shape"), "call_properties": rec.get("call_properties") or ()}


def framework_message(rec: dict) -> str:
    """The framework's own message of a failed result."""
    if rec.get("framework_message"):
        return rec["framework_message"]
    old = _OLD_REASON.search((rec.get("expected") or {}).get("reason") or "")
    if old:
        return old.group(1)
    message = rec["message"]
    prefix = f"{rec['verdict']}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def judge_record(rec: dict, knowledge: Knowledge, env: dict) -> Judgement:
    """The judgement of a recorded result on the machine ``env`` (an environment record)."""
    case = case_of(rec)
    target = Target(rec["framework"], rec["variant"], rec["device"])
    machine = Machine.from_environment(env)
    return check(case, target, rec["framework_version"], [outcome_of(rec, case)], knowledge, 0.0,
                 machine, mode=mode_of(rec)).judgement
