"""A results record back into the case and the outcome it recorded, and judged again with
the knowledge base, exactly as the run judges (suite.check): what the release lanes' history
and ``characterize`` do with results files."""

from __future__ import annotations

import re

import numpy as np

from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.judge import Judgement
from poolgrad.knowledge.machine import Machine
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
    # Repeats that differed: the record holds one run's arrays, so the verdict is replayed as such.
    if rec["verdict"] in RAN and rec["verdict"] != "nondeterministic":
        def arr(key, shape):  # None where the path returned none (a forward without a gradient)
            if rec.get(key) is None:
                return None
            a = decode_array(rec[key], rec["dtype"])
            # An empty array's shape is not written; one where the spec has elements stays as read.
            return a.reshape(shape) if a.size == 0 and 0 in shape else a
        out_shape = output_shape(case.spec, case.input.shape)
        # Indices are written for the call's channel count: results of runs that flattened
        # cases into single-channel planes carry indices that cannot be read per case.
        call = rec.get("call_shape")
        readable = rec.get("indices") is not None and (not call or call[1] == case.input.shape[1])
        # As written: a path that returned another shape (a with_index path under SAME) is judged on it.
        indices = np.asarray(rec["indices"], dtype=np.int64) if readable else None
        # An AD mode's record carries its derivative (and double backward's by the input).
        mode = mode_of(rec)
        derivatives = ({"tangent_output": arr("derivative", out_shape)} if mode == "jvp" else
                       {"grad_grad_output": arr("derivative", out_shape),
                        "grad_grad_input": arr("grad_grad_input", case.input.shape)} if mode == "double_backward" else {})
        return Outcome(OK, forward=arr("forward", out_shape), grad_input=arr("grad_input", case.input.shape),
                       indices=indices, info=_call(rec),
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


def _checked(rec: dict, knowledge: Knowledge, env: dict):
    case = case_of(rec)
    target = Target(rec["framework"], rec["variant"], rec["device"])
    return check(case, target, rec["framework_version"], [outcome_of(rec, case)], knowledge, rec.get("duration_s") or 0.0,
                 Machine.from_environment(env), mode=mode_of(rec))


def judge_record(rec: dict, knowledge: Knowledge, env: dict) -> Judgement:
    """The judgement of a recorded result on the machine ``env`` (an environment record)."""
    return _checked(rec, knowledge, env).judgement


# What a judgement decides in a record; the rest (verdict, arrays) is the run's.
JUDGED = ("outcome", "message", "findings", "contradicts")


def rejudged(rec: dict, knowledge: Knowledge, env: dict) -> dict:
    """The record as a run with ``knowledge`` would have written it."""
    record = _checked(rec, knowledge, env).record
    return {**rec, **{k: record[k] for k in JUDGED}}


def main(argv=None) -> int:
    """python -m poolgrad.suite.replay RESULTS... -o OUT: judge results again with the knowledge
    base as it is now (findings written since the run, a GPU machine's results before merging
    them into a report), and write them with their environments."""
    import argparse
    import sys

    from poolgrad.knowledge import sources
    from poolgrad.reports.merge import Merged, write_merged
    from poolgrad.reports.records import read_results

    from .machine import completed

    p = argparse.ArgumentParser(prog="python -m poolgrad.suite.replay", description=main.__doc__)
    p.add_argument("results", nargs="+", help="results files (JSON lines, .gz too)")
    p.add_argument("-o", "--output", required=True, help="where to write the results judged again")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    args = p.parse_args(argv)
    knowledge = sources.load(extra=args.findings)
    envs, results = read_results(args.results)
    by_run, this_machine = {e["run_id"]: completed(e) for e in envs}, completed(None)
    again = [rejudged(rec, knowledge, by_run.get(rec["run_id"], this_machine)) for rec in results]
    write_merged(Merged(envs, again), args.output)
    changed = sum(any(new[k] != rec[k] for k in JUDGED) for new, rec in zip(again, results))
    print(f"{args.output}: {len(results)} results, {changed} judged differently", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
