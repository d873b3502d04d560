"""Write every finding's example from the results of conformance runs.

    python scripts/examples.py RESULTS... [--only ID,ID] [--write]

RESULTS are results files (``pytest poolgrad/conformance --results FILE``, one framework at a
time, narrowed with -k; ``observations/gpu-h100-2026-11-26/catalogue.jsonl.gz`` for the GPU
findings). For each finding, among the cases whose result it explained in its example's mode
(poolgrad.cases.examples.mode_of) on every target of the results where the case is in its
scope, the one with the fewest input elements becomes its example: ``examples/<id>.json``
beside its findings file (poolgrad.cases.examples.relative_path), with the ``example = `` line
added after the finding's ``impact`` where it is missing; an example written by hand (its
description does not name a catalogue case) is kept. A finding whose scope needs a larger
framework call (min_call_elements) gets the case repeated along N; one that needs another
case in the call (when_call) gets the smallest such case of the same call beside it.
Without --write it prints what it would write. Findings with no such case are listed.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import re
import sys
import tomllib
from pathlib import Path

import numpy as np

from poolgrad.cases import make_case, write_case_file
from poolgrad.cases.examples import mode_of, needs, relative_path
from poolgrad.knowledge import sources
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.finding import Finding
from poolgrad.knowledge.machine import Machine
from poolgrad.knowledge.scope import features_hold
from poolgrad.reports.records import read_results
from poolgrad.reports.schema import mode_of as record_mode
from poolgrad.suite.call import op_name
from poolgrad.suite.check import case_properties
from poolgrad.suite.machine import completed
from poolgrad.suite.replay import case_of, judge_record


class Seen:
    """What the results say of each (finding, case, mode): the targets where the case was in
    the finding's scope and those whose result it explained, and the records."""

    def __init__(self):
        self.explained = collections.defaultdict(set)
        self.in_scope = collections.defaultdict(set)
        self.records = collections.defaultdict(list)  # (case_id, mode) -> its results
        self.calls = collections.defaultdict(set)     # (target, group) -> case ids
        self.cases: dict = {}
        self.envs: dict = {}


def scan(paths, knowledge, only=None) -> Seen:
    """``only``: finding ids; the results of the cases none of them explained are passed over."""
    seen = Seen()
    for path in paths:
        envs, results = read_results([path])
        if only:
            shown = {r["case_id"] for r in results if only & {f["id"] for f in r.get("findings") or ()}}
            results = [r for r in results if r["case_id"] in shown]
        seen.envs.update((e["run_id"], completed(e)) for e in envs)
        for rec in results:
            if rec["outcome"] == "skipped" or rec.get("input") is None:
                continue
            key = (rec["case_id"], record_mode(rec))
            case = seen.cases.get(rec["case_id"]) or seen.cases.setdefault(rec["case_id"], case_of(rec))
            props = case_properties(case)
            others = frozenset(rec.get("call_properties") or ())
            seen.calls[rec["target"], group_of(rec)].add(rec["case_id"])
            seen.records[key].append(rec)
            explained = {f["id"] for f in rec.get("findings") or ()}
            machine = Machine.from_environment(seen.envs.get(rec.get("run_id")) or completed(None))
            for f in knowledge.for_mode(rec["framework"], rec["variant"], rec["device"], rec["framework_version"],
                                        machine, key[1]):
                if f.in_scope(op_name(case), case.spec.dtype, props, math.prod(rec.get("call_shape") or rec["shape"]),
                              lambda: props | others):
                    seen.in_scope[f.id, key].add(rec["target"])
                    if f.id in explained:
                        seen.explained[f.id, key].add(rec["target"])
    return seen


def group_of(rec: dict) -> tuple:
    """A result's batching group (cases.model.Case.group_key, less the empty-batch flag)."""
    return json.dumps(rec["spec"], sort_keys=True), tuple(rec["shape"][1:])


def shows(f: Finding, rec: dict, seen: Seen, without: Knowledge) -> bool:
    """Whether the result needs ``f`` to be explained (poolgrad.cases.examples.needs: a finding
    whose claim changes nothing there is explained along with others)."""
    return needs(f, judge_record(rec, without, seen.envs.get(rec.get("run_id")) or completed(None)))


def choose(f: Finding, seen: Seen, knowledge: Knowledge, tries: int = 200):
    """(case id, targets it shows ``f`` on, targets where it is in scope and not explained), or
    None: the case with the fewest elements that shows ``f`` on every target that explained
    it, those explained wherever in scope first; where none needs it any more, the smallest it
    explained."""
    mode = mode_of(f)
    options = sorted((len(seen.in_scope[fid, key] - targets), seen.cases[key[0]].input.size, key[0], targets)
                     for (fid, key), targets in seen.explained.items() if fid == f.id and key[1] == mode)
    without = Knowledge([g for g in knowledge if g.id != f.id], knowledge.history)
    for _, _, case_id, targets in options[:tries]:
        recs = [r for r in seen.records[case_id, mode] if r["target"] in targets]
        if all(shows(f, r, seen, without) for r in recs):
            return case_id, sorted(targets), sorted(seen.in_scope[f.id, (case_id, mode)] - targets)
    if options:  # explained when it ran, needed by none today (a summation order the spec now accepts)
        _, _, case_id, targets = min(options, key=lambda o: (not seen.cases[o[2]].family.startswith("accumulation"), o[:3]))
        print(f"{f.id}: no result needs it as judged today; the smallest it explained", file=sys.stderr)
        return case_id, sorted(targets), sorted(seen.in_scope[f.id, (case_id, mode)] - targets)
    return None


def example_cases(f: Finding, case_id: str, targets, seen: Seen):
    """The example's cases, named after the finding (ids unique among all examples: the
    verdicts cache a case's reference results by its id)."""
    case = seen.cases[case_id]
    x, g = case.input, case.grad_output
    if f.min_call_elements > x.size:  # the call the behaviour needs: the case repeated along N
        reps = math.ceil(f.min_call_elements / max(x.size, 1))
        x, g = np.concatenate([x] * reps), np.concatenate([g] * reps)
    cases = [make_case(f.id, case.family, case.spec, x, g)]
    if f.when_call and not features_hold(f.when_call, case_properties(case)):
        partners = [seen.cases[c] for c in seen.calls[targets[0], group_of(seen.records[case_id, mode_of(f)][0])]
                    if c in seen.cases and features_hold(f.when_call, case_properties(seen.cases[c]))]
        other = min(partners, key=lambda c: (c.input.size, c.id))
        cases.append(make_case(f"{f.id}-beside", other.family, other.spec, other.input, other.grad_output))
    return cases


# What the description of an example this script wrote says; an example written by hand (a
# smaller case made to show the behaviour) has none and is left as it is.
GENERATED = "Catalogue case"


def finding_files() -> dict[str, Path]:
    """Each finding's findings file."""
    return {raw["id"]: path for path in sources.framework_files()
            for raw in tomllib.loads(path.read_text()).get("finding", [])}


def add_example_line(path: Path, fid: str) -> None:
    """``example = "examples/<id>.json"`` after the finding's ``impact`` line (or its title),
    where the finding has none: one small edit, the file re-read right before it."""
    text = path.read_text()
    start = re.search(rf'^id = "{re.escape(fid)}"\n', text, re.M).start()
    end = text.find("[[finding]]", start)
    block = text[start:end if end != -1 else len(text)]
    if re.search(r"^example = ", block, re.M):
        return
    anchor = re.search(r"^impact = .*\n", block, re.M) or re.search(r"^title = .*\n", block, re.M)
    at = start + anchor.end()
    path.write_text(text[:at] + f'example = "{relative_path(fid)}"\n' + text[at:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+")
    ap.add_argument("--only", default=None, help="comma list of finding ids")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args(argv)
    knowledge = sources.load()
    only = set(args.only.split(",")) if args.only else None
    seen = scan(args.results, knowledge, only)
    files = finding_files()
    missing = []
    for f in knowledge:
        if only and f.id not in only:
            continue
        chosen = choose(f, seen, knowledge)
        if chosen is None:
            missing.append(f.id)
            continue
        case_id, targets, missed = chosen
        cases = example_cases(f, case_id, targets, seen)
        rec = next(r for r in seen.records[case_id, mode_of(f)] if r["target"] in targets)
        out = files[f.id].parent / relative_path(f.id)
        about = (f"{f.id}: {f.title}. {GENERATED} {case_id}, {mode_of(f)}: shown on {', '.join(targets)} "
                 f"({rec['framework']} {rec['framework_version']}).")
        print(f"{f.id}: {case_id} ({sum(c.input.size for c in cases)} elements) on {', '.join(targets)}"
              + (f"; in scope but not shown on {', '.join(missed)}" if missed else ""))
        if args.write and (not out.exists() or GENERATED in json.loads(out.read_text()).get("description", "")):
            out.parent.mkdir(exist_ok=True)
            write_case_file(cases, out, about)
            add_example_line(files[f.id], f.id)
    if missing:
        print(f"no case in these results for: {', '.join(missing)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
