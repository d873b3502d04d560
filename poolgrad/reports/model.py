"""What a report shows, computed once from results, shared by the HTML and Markdown writers:
environment, op x family matrix against targets, interop score, policy fingerprints,
divergence drill-downs and (optionally) the diff against a baseline."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict

from . import arrays, reproducer, windows
from .diff import Diff, describe, diff, policy_text
from .merge import merge
from .records import load
from .schema import MODES, NOT_RUN, VERDICTS, case_label, is_divergence, mode_of

# Worst first: a cell takes the colour of its worst verdict.
SEVERITY = ("crash", "wrong", "inconsistent", "inconsistent_indices", "inconsistent_modes", "nondeterministic", "error",
            "timeout", "policy",
            "reordered", "unsupported", "no_device", "not_installed", "conforms")
OUTCOME_ORDER = ("behaviour_changed", "fail", "expected", "pass", "skipped")
# Drill-downs carry arrays and a script; past this many, divergences are listed without them.
MAX_DRILLDOWNS = 500


@dataclasses.dataclass(frozen=True, order=True)
class Column:
    framework: str
    version: str
    variant: str
    device: str

    @property
    def target(self) -> str:
        return f"{self.framework}-{self.variant}-{self.device}"


def column_of(rec: dict) -> Column:
    return Column(rec["framework"], rec["framework_version"], rec["variant"], rec["device"])


def _cells(results, rows, columns):
    counts = defaultdict(Counter)
    for r in results:
        counts[_row(r), column_of(r)][r["verdict"]] += 1
    matrix = []
    for row in rows:
        cells = []
        for col in columns:
            c = counts.get((row, col), Counter())
            ordered = [(v, c[v]) for v in SEVERITY if c[v]]
            cells.append({"col": col, "counts": ordered, "worst": ordered[0][0] if ordered else "none",
                          "divergent": sum(n for v, n in ordered if v not in ("conforms", "reordered", *NOT_RUN))})
        matrix.append({"op": row[0], "family": row[1], "mode": MODES[row[2]], "cells": cells})
    return matrix


def _row(rec: dict) -> tuple:
    """A matrix row: op, family and the derivative checked (the reverse mode first)."""
    return rec["op"], rec["family"], MODES.index(mode_of(rec))


def _signature(rec: dict):
    """Two targets agree on a case when they follow the same policies (or both conform)."""
    if rec["verdict"] in ("conforms", "policy"):
        return rec["verdict"], json.dumps(rec.get("policy"), sort_keys=True), json.dumps(rec.get("forward_policy"), sort_keys=True)
    return id(rec)  # an error or a wrong gradient agrees with nothing


def interop(results) -> dict:
    by_case = defaultdict(list)
    for r in results:
        if r["verdict"] not in NOT_RUN:
            by_case[case_label(r)].append(r)
    n = len(by_case)
    spec = sum(all(r["verdict"] == "conforms" for r in rs) for rs in by_case.values())
    agree = sum(len({_signature(r) for r in rs}) == 1 for rs in by_case.values())
    return {"cases": n, "spec": spec, "agree": agree,
            "spec_share": spec / n if n else None, "agree_share": agree / n if n else None}


def fingerprints(results, columns) -> list[dict]:
    """Per target and derivative checked, the policies seen: ``backward`` the checked
    derivative's (the reverse mode's, or the AD mode's), ``forward`` the forward's (in an AD
    mode: the reverse mode's of the same call)."""
    seen = defaultdict(lambda: (Counter(), Counter()))
    for r in results:
        backward, forward = seen[column_of(r), MODES.index(mode_of(r))]
        if r.get("policy"):
            backward[policy_text(r["policy"])] += 1
        if r.get("forward_policy"):
            forward[policy_text(r["forward_policy"])] += 1
    return [{"col": col, "mode": MODES[mode], "backward": b.most_common(), "forward": f.most_common()}
            for (col, mode), (b, f) in sorted(seen.items()) if b or f]


def _marks(cells) -> set[tuple]:
    return {tuple(c) for c in cells or () if isinstance(c, list)}


def drilldown(rec: dict) -> dict:
    grad_marks = _marks(rec.get("differing_cells")) or arrays.differing(rec.get("grad_input"), rec.get("expected_grad_input"))
    fwd_marks = arrays.differing(rec.get("forward"), rec.get("expected_forward"))
    # An AD mode's derivative (output-shaped) against the reference's, where the record has it.
    mode_marks = arrays.differing(rec.get("derivative"), rec.get("expected_derivative"))
    views = {"input": arrays.tables(rec["input"], grad_marks) if rec.get("input") is not None else None,
             "grad_output": arrays.tables(rec["grad_output"]) if rec.get("grad_output") is not None else None}
    for name, marks in (("expected_grad_input", grad_marks), ("grad_input", grad_marks),
                        ("expected_forward", fwd_marks), ("forward", fwd_marks),
                        ("expected_derivative", mode_marks), ("derivative", mode_marks)):
        views[name] = arrays.tables(rec[name], marks) if rec.get(name) is not None else None
    wins = windows.touching(rec["spec"], rec["input"], sorted(grad_marks)) if rec.get("input") and grad_marks else []
    for w in wins:
        g = rec.get("grad_output")
        w["grad"] = arrays.short(arrays.at(g, w["out"])) if g is not None else "?"
        w["table"] = arrays.tables(w["window"], w["marks"])
    return {"views": views, "windows": wins, "script": reproducer.safe_script(rec),
            "n_grad_marks": len(grad_marks)}


@dataclasses.dataclass
class Report:
    environments: list[dict]
    columns: list[Column]
    matrix: list[dict]
    verdict_totals: list[tuple[str, int]]
    outcome_totals: list[tuple[str, int]]
    interop: dict
    fingerprints: list[dict]
    divergences: list[dict]
    diff: Diff | None
    filters: dict
    total: int
    semantics: list[dict]   # the semantics pages: id, title, html
    modes: list[str]   # the derivatives the results checked: ["backward"] unless AD modes ran


def semantics() -> list[dict]:
    """The semantics pages (poolgrad/cases/semantics.py: the overview by kind of case and one page
    per framework), as HTML fragments for the report."""
    from poolgrad.cases import findings, semantics as sem
    return sem.html_pages(findings.load())


def build(source, baseline=None, *, details: bool = True) -> Report:
    """The report model; ``details=False`` skips drill-downs (arrays, windows, scripts)."""
    merged = merge(*load(source), keep_timing=True)
    results = merged.results
    columns = sorted({column_of(r) for r in results})
    rows = sorted({_row(r) for r in results})
    modes = [m for m in MODES if any(mode_of(r) == m for r in results)] or ["backward"]
    divergent = sorted((r for r in results if is_divergence(r)),
                       key=lambda r: (OUTCOME_ORDER.index(r["outcome"]), SEVERITY.index(r["verdict"])))
    divergences = []
    for i, r in enumerate(divergent):
        item = {"rec": r, "anchor": f"d{i}", "describe": describe(r), "policy": policy_text(r.get("policy")),
                "forward_policy": policy_text(r.get("forward_policy")), "mode": mode_of(r),
                "text": " ".join((case_label(r), r["target"], r["message"])).lower()}
        item["detail"] = drilldown(r) if details and i < MAX_DRILLDOWNS else None
        divergences.append(item)
    verdicts = Counter(r["verdict"] for r in results)
    outcomes = Counter(r["outcome"] for r in results)
    filters = {"framework": sorted({c.framework for c in columns}), "variant": sorted({c.variant for c in columns}),
               "device": sorted({c.device for c in columns}), "op": sorted({r[0] for r in rows}),
               "verdict": [v for v in VERDICTS if verdicts[v]]}
    if modes != ["backward"]:
        filters["mode"] = modes
    return Report(
        environments=merged.environments, columns=columns, matrix=_cells(results, rows, columns),
        verdict_totals=[(v, verdicts[v]) for v in SEVERITY if verdicts[v]],
        outcome_totals=[(o, outcomes[o]) for o in OUTCOME_ORDER if outcomes[o]],
        interop=interop(results), fingerprints=fingerprints(results, columns), divergences=divergences,
        diff=None if baseline is None else diff(load(baseline), (merged.environments, results)),
        filters=filters, total=len(results), semantics=semantics(), modes=modes)
