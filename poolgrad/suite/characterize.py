"""Propose findings from a run: ``python -m poolgrad.suite.characterize RESULTS...``.

Prints the results no finding of the knowledge base explains, grouped into candidate
findings: one per framework and observed claim (the policy the verdict search named, or the
failure's exception type), generalized across the variants, ops and dtypes where that one
claim holds for all of them, with the case properties every member shares as the scope to
start from. It writes nothing: a finding is knowledge a person writes up (what the kernel does
and why, from its source; the upstream report) in the framework's findings.toml (poolgrad/adapters/<framework>/).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys

from poolgrad.knowledge import sources
from poolgrad.reference import CANONICAL
from poolgrad.reports.records import read_results

from .machine import completed
from .check import case_properties
from .replay import case_of, framework_message, judge_record

UNEXPLAINED = ("fail", "behaviour_changed")


def _departure(policy: dict | None) -> dict:
    """The keys of a policy that differ from the canonical one."""
    return {k: v for k, v in (policy or {}).items() if CANONICAL.get(k) != v}


def claim_of(rec: dict) -> tuple:
    if rec["verdict"] in ("policy", "inconsistent"):
        fwd, grad = _departure(rec.get("forward_policy")), _departure(rec.get("policy"))
        return ("policy", tuple(sorted(fwd.items())), tuple(sorted(grad.items())))
    if rec["verdict"] in ("error", "crash", "timeout"):
        message = framework_message(rec)
        kind = message.split(":", 1)[0] if rec["verdict"] == "error" else rec["verdict"]
        # The message's first line, numbers and paths blanked, is what a pattern would match.
        first = re.sub(r"(/\S+)|\d+", "…", message.split(":", 1)[-1].strip().splitlines()[0] if message else "")
        return (rec["verdict"], kind, first[:120])
    return (rec["verdict"],)


def propose(envs: list[dict], results: list[dict], knowledge) -> tuple[list[dict], collections.Counter]:
    """(candidate findings, how many results each finding in scope did not explain)."""
    env = completed(envs[-1] if envs else None)
    groups = collections.defaultdict(list)
    contradicted = collections.Counter()
    for rec in results:
        j = judge_record(rec, knowledge, env)
        contradicted.update(f.id for f in j.contradicted)
        if j.outcome in UNEXPLAINED:
            groups[(rec["framework"], claim_of(rec))].append((rec, j))
    proposals = []
    for (framework, claim), members in sorted(groups.items(), key=lambda g: (g[0][0], -len(g[1]))):
        props = None
        for rec, _ in members:
            p = case_properties(case_of(rec))
            props = p if props is None else props & p
        recs = [r for r, _ in members]
        proposals.append({
            "framework": framework, "claim": claim, "results": len(recs),
            "variants": sorted({r["variant"] for r in recs}), "devices": sorted({r["device"] for r in recs}),
            "ops": sorted({r["op"] for r in recs}), "dtypes": sorted({r["dtype"] for r in recs}),
            "versions": sorted({r["framework_version"] for r in recs}),
            "when": sorted(props or ()),
            "in_scope_but_not_holding": sorted({f.id for _, j in members for f in j.contradicted}),
            "examples": [r["case_id"] for r in recs[:3]],
            "message": recs[0]["message"][:300],
        })
    return proposals, contradicted


def format_proposal(p: dict) -> str:
    claim = p["claim"]
    if claim[0] == "policy":
        what = f"forward {dict(claim[1]) or 'canonical'}, gradient {dict(claim[2]) or 'canonical'}"
    elif len(claim) > 1:
        what = f"{claim[0]}: {claim[1]}: {claim[2]}"
    else:
        what = claim[0]
    lines = [f"## {p['framework']}: {what}  ({p['results']} results)",
             f"   variants {', '.join(p['variants'])}; devices {', '.join(p['devices'])}; versions {', '.join(p['versions'])}",
             f"   ops {', '.join(p['ops'])}",
             f"   dtypes {', '.join(p['dtypes'])}",
             f"   case properties all of them share (a start for `when`): {', '.join(p['when']) or '(none)'}"]
    if p["in_scope_but_not_holding"]:
        lines.append(f"   findings in scope that do not explain them: {', '.join(p['in_scope_but_not_holding'])}")
    lines.append(f"   e.g. {', '.join(p['examples'])}")
    lines.append(f"   {p['message']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m poolgrad.suite.characterize", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="results JSON-lines files of one run")
    p.add_argument("--findings", action="append", default=[], metavar="PATH", help="a findings file of your own, added to the installed frameworks' knowledge base (repeatable)")
    args = p.parse_args(argv)
    envs, results = read_results(args.results)
    proposals, contradicted = propose(envs, results, sources.load(extra=args.findings))
    if contradicted:
        print("findings whose scope holds results they do not explain (scope too wide, or the behaviour "
              "changed): " + ", ".join(f"{k} ({n})" for k, n in sorted(contradicted.items())) + "\n")
    if not proposals:
        print(f"every divergence of {len(results)} results is explained by a finding")
        return 0
    print(f"{sum(p['results'] for p in proposals)} results no finding explains, "
          f"in {len(proposals)} candidate findings (review, then write them up in {args.findings}):\n")
    print("\n\n".join(format_proposal(p) for p in proposals))
    return 0


if __name__ == "__main__":
    sys.exit(main())
