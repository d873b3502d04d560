"""Draft known-divergence entries from a run: ``python -m suite.characterize RESULTS... -o FILE``.

A maintainer auditing a release runs the suite, reads every divergence, then drafts the
expectations that pin this release's behaviour. Each entry's scope is as wide as the records
allow: a whole (target, op, family, dtype) when one claim holds for every record in it —
checked by re-running the reference under the claimed policy, conforming records included —
else the exact case ids. Reasons are drafted from the verdict messages; review them.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys

import numpy as np

from adapters.base import OK, Outcome
from cases import catalogue
from cases.expectations import POLICY_VERDICTS
from reports.records import decode_array, read_results

from .check import claim_holds

SKIP = ("unsupported", "not_installed", "no_device")


def _outcome(rec, case) -> Outcome:
    def arr(key, like):
        a = decode_array(rec[key], case.spec.dtype)
        return a.reshape(like) if a.size == 0 else a
    fwd_shape = (case.input.shape[:2]) + tuple(np.shape(decode_array(rec["expected_forward"], "float64"))[2:])
    return Outcome(OK, forward=arr("forward", fwd_shape), grad_input=arr("grad_input", case.input.shape))


def _claim(rec):
    return (rec["verdict"], json.dumps(rec.get("policy"), sort_keys=True),
            json.dumps(rec.get("forward_policy"), sort_keys=True))


def _holds(claim, rec, case) -> bool:
    verdict, policy, fpolicy = claim[0], json.loads(claim[1]), json.loads(claim[2])
    outcome = _outcome(rec, case) if verdict in POLICY_VERDICTS else None
    return claim_holds(verdict, policy, fpolicy if fpolicy != policy else None, rec["verdict"], case, outcome)


def draft(results: list[dict]) -> list[dict]:
    cases = {c.id: c for c in catalogue()}
    scopes = collections.defaultdict(list)
    for r in results:
        if r["verdict"] in SKIP or r["case_id"] not in cases:
            continue
        scopes[(r["framework"], r["variant"], r["device"], r["op"], r["family"], r["dtype"])].append(r)
    entries = []
    for scope, recs in sorted(scopes.items()):
        divergent = [r for r in recs if r["verdict"] != "conforms"]
        if not divergent:
            continue
        by_claim = collections.defaultdict(list)
        for r in divergent:
            by_claim[_claim(r)].append(r)
        wide = next((c for c in by_claim if all(_holds(c, r, cases[r["case_id"]]) for r in recs)), None)
        if wide is not None:
            entries.append(_entry(scope, wide, by_claim[wide][0], None))
            continue
        for claim, members in sorted(by_claim.items()):
            entries.append(_entry(scope, claim, members[0], sorted(r["case_id"] for r in members)))
    seen = collections.Counter()
    for e in entries:  # per-case entries of one scope may share a drafted id
        seen[e["id"]] += 1
        if seen[e["id"]] > 1:
            e["id"] += f"-{seen[e['id']]}"
    return entries


def _entry(scope, claim, sample, case_ids):
    framework, variant, device, op, family, dtype = scope
    version = sample["framework_version"].split("+")[0]
    e = {"id": "-".join([framework, variant, device, op, family, dtype]),
         "framework": framework, "variants": [variant], "devices": [device], "versions": f">={version}",
         "select": {"op": op, "family": family, "dtype": dtype}, "verdict": claim[0]}
    if case_ids is not None:
        e["select"]["case"] = case_ids
    policy, fpolicy = json.loads(claim[1]), json.loads(claim[2])
    if claim[0] in POLICY_VERDICTS:
        e["policy"] = policy
        if fpolicy != policy:
            e["forward_policy"] = fpolicy
    message = sample["message"]  # "<verdict> [<policy>]: <verdict message>"
    message = message.split("}: ", 1)[-1] if "}: " in message else message.split(": ", 1)[-1]
    e["reason"] = f"observed with {framework} {sample['framework_version']} on {device}: {message}"[:400]
    return e


def to_toml(entries) -> str:
    def val(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + "}"
        return json.dumps(v)
    out = []
    for e in entries:
        out.append("[[divergence]]")
        out.extend(f"{k} = {val(v)}" for k, v in e.items())
        out.append("")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m suite.characterize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="results JSON-lines files of one run")
    p.add_argument("-o", "--output", default="-", help="TOML file to write (default: stdout)")
    args = p.parse_args(argv)
    _, results = read_results(args.results)
    text = to_toml(draft(results))
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
