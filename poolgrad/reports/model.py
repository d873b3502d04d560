"""What a report shows, computed once from results, shared by the HTML and Markdown writers:
first the answer to "is my framework OK?" (results, unexplained failures with their rerun
lines, the findings the run hit by impact), then the op x family matrix against targets, interop
score, policy fingerprints, drill-downs and (optionally) the diff against a baseline."""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from collections import Counter, defaultdict

import ml_dtypes

from poolgrad.adapters.base import Target
from poolgrad.cases.model import _DRAW
from poolgrad.knowledge.impacts import IMPACT_RANK
from poolgrad.reference import DTYPES

from . import arrays, reproducer, windows
from .diff import Diff, describe, diff, policy_text
from .merge import merge
from .records import load
from .schema import MODES, NOT_RUN, VERDICTS, case_label, mode_of

# Worst first: a cell takes the colour of its worst verdict.
SEVERITY = ("crash", "wrong", "inconsistent", "inconsistent_indices", "inconsistent_modes", "nondeterministic", "error",
            "timeout", "policy",
            "reordered", "not_run", "unsupported", "no_device", "not_installed", "conforms")
OUTCOME_ORDER = ("behaviour_changed", "fail", "expected", "pass", "skipped")
UNEXPLAINED = ("behaviour_changed", "fail")
# A matrix cell's text: its results by outcome, in words (unexplained failures first).
CELL_LABELS = {"behaviour_changed": "fail", "fail": "fail", "expected": "known", "pass": "ok", "skipped": "skip"}
# Drill-downs carry arrays and a script (tens of kB each): the unexplained failures get them up to
# this many, and each finding hit one (arrays only), its first example, so a report stays small.
MAX_DRILLDOWNS = 10
# Unexplained failures listed (with their rerun lines) at most; the results file has them all.
MAX_LISTED = 200
# Matrix rows in the order users reach for the ops; ranks 1d, 2d, 3d within an op.
OP_ORDER = ("max_pool", "avg_pool", "adaptive_avg_pool", "adaptive_max_pool", "lp_pool", "fractional_max_pool")
# A test runs a case and its draws (<id>~<k>): the test function by the derivative checked.
TEST_FUNCTIONS = {"backward": "test_backward", "jvp": "test_jvp", "double_backward": "test_double_backward"}


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
    """Matrix rows; each cell counts verdicts (its tooltip) and outcomes (its text and colour).
    ``run``: whether any cell of the row ran."""
    counts, outcomes = defaultdict(Counter), defaultdict(Counter)
    for r in results:
        counts[_row(r), column_of(r)][r["verdict"]] += 1
        outcomes[_row(r), column_of(r)][CELL_LABELS[r["outcome"]]] += 1
    matrix = []
    for row in rows:
        cells = []
        for col in columns:
            c, o = counts.get((row, col), Counter()), outcomes.get((row, col), Counter())
            ordered = [(v, c[v]) for v in SEVERITY if c[v]]
            cells.append({"col": col, "counts": ordered, "worst": ordered[0][0] if ordered else "none",
                          "divergent": sum(n for v, n in ordered if v not in ("conforms", "reordered", *NOT_RUN)),
                          "outcomes": [(label, o[label]) for label in dict.fromkeys(CELL_LABELS.values()) if o[label]]})
            cells[-1]["tone"] = cells[-1]["outcomes"][0][0] if o else "none"   # its colour: the worst outcome
        matrix.append({"op": row[0], "family": row[1], "mode": MODES[row[2]], "cells": cells,
                       "run": any(c["worst"] not in (*NOT_RUN, "none") for c in cells)})
    return matrix


def by_op(matrix) -> list[dict]:
    """The matrix summed to op x framework (every family, mode and target of a framework in one
    cell): what a pull request comment has room for. Ops in the matrix's order."""
    sums: dict[str, dict[str, Counter]] = {}
    for row in matrix:
        for cell in row["cells"]:
            sums.setdefault(row["op"], {}).setdefault(cell["col"].framework, Counter()).update(dict(cell["outcomes"]))
    labels = list(dict.fromkeys(CELL_LABELS.values()))
    return [{"op": op, "cells": {fw: [(label, c[label]) for label in labels if c[label]] for fw, c in cells.items()}}
            for op, cells in sums.items()]


def _row(rec: dict) -> tuple:
    """A matrix row: op, family and the derivative checked (the reverse mode first)."""
    return rec["op"], rec["family"], MODES.index(mode_of(rec))


def _row_order(row: tuple) -> tuple:
    op, family, mode = row
    base, _, rank = op.rpartition("_pool")
    name = f"{base}_pool" if base else op
    return (OP_ORDER.index(name) if name in OP_ORDER else len(OP_ORDER), name, rank, family, mode)


def rerun_line(rec: dict, case_ids=frozenset()) -> str:
    """The command that reruns the test that made ``rec`` (a draw's test is its case's)."""
    m = _DRAW.fullmatch(rec["case_id"])
    case = m["stem"] if m and m["stem"] in case_ids else rec["case_id"]
    name = f"{TEST_FUNCTIONS[mode_of(rec)]}[{case}-{rec['target']}]"
    return shlex.join(Target(rec["framework"], rec["variant"], rec["device"]).rerun_args(name))


def error_text(rec: dict) -> str:
    """max abs / ulp error as people read them. An ulp distance of 2^mantissa bits or more means
    the values differ by their own magnitude (against 0 or a subnormal it reaches 1e48): no
    rounding gives it, so the text says that instead of the number."""
    err, ulp = rec.get("max_abs_error"), rec.get("max_ulp_error")
    if err is None:
        return ""
    text = f"max abs error {err:.4g}" if isinstance(err, (int, float)) else f"max abs error {err}"
    if isinstance(ulp, str) or (isinstance(ulp, float) and not math.isfinite(ulp)):
        return text + "; an inf or NaN differs"
    if ulp is None:
        return text
    mantissa = ml_dtypes.finfo(DTYPES[rec["dtype"]]).nmant
    return text + (f"; over 2^{mantissa} ulp: the values differ in magnitude, not by rounding"
                   if ulp >= 2 ** mantissa else f"; {ulp:.4g} ulp")


def upstream_status(finding: dict) -> dict:
    """{"status": fixed | reported | no report yet, "refs": the report and fix references}."""
    refs = [u for u in finding.get("upstream") or () if u["type"] in ("report", "fix")]
    fixed = any(u["type"] == "fix" and u.get("state", "").startswith("merged") for u in refs)
    status = "fix merged" if fixed else "reported" if any(u["type"] == "report" for u in refs) else "no report yet"
    return {"status": status, "refs": refs}


def impact_rank(impact: str | None) -> int:
    """Higher is worse (IMPACTS runs harmless to worst); a finding without impact ranks lowest."""
    return IMPACT_RANK.get(impact, -1)


def findings_hit(results) -> list[dict]:
    """The findings that explained results of this run, worst impact first, then most results."""
    hit: dict[str, dict] = {}
    for r in results:
        for f in r.get("findings") or ():
            h = hit.setdefault(f["id"], {"finding": f, "count": 0, "example": r, "paths": Counter(),
                                         "dtypes": Counter(), "devices": Counter(), "ops": Counter()})
            h["count"] += 1
            for key, value in (("paths", f"{r['framework']} {r['variant']}"), ("dtypes", r["dtype"]),
                               ("devices", r["device"]), ("ops", r["op"])):
                h[key][value] += 1
    out = []
    for fid, h in hit.items():
        f = h["finding"]
        out.append({**h, "id": fid, "title": f.get("title", ""), "impact": f.get("impact"),
                    "anchor": f"finding-{fid}", **upstream_status(f),
                    **{k: sorted(h[k]) for k in ("paths", "dtypes", "devices", "ops")}})
    return sorted(out, key=lambda h: (-impact_rank(h["impact"]), -h["count"], h["id"]))


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


def drilldown(rec: dict, script: bool = True) -> dict:
    """Arrays with the differing cells marked, the windows that read them and (``script``) the
    reproducer."""
    grad_marks = _marks(rec.get("differing_cells")) or arrays.differing(rec.get("grad_input"), rec.get("expected_grad_input"))
    fwd_marks = arrays.differing(rec.get("forward"), rec.get("expected_forward"))
    # An AD mode's derivative (output-shaped) against the reference's, where the record has it.
    mode_marks = arrays.differing(rec.get("derivative"), rec.get("expected_derivative"))
    views = {"input": arrays.tables(rec["input"], grad_marks) if rec.get("input") is not None else None,
             "grad_output": arrays.tables(rec["grad_output"]) if rec.get("grad_output") is not None else None}
    same = []   # the framework's arrays equal to the reference's: said in words, not shown twice
    for name, marks in (("grad_input", grad_marks), ("forward", fwd_marks), ("derivative", mode_marks)):
        for shown in (f"expected_{name}", name):
            views[shown] = arrays.tables(rec[shown], marks) if rec.get(shown) is not None else None
        if views[name] is not None and not marks and rec[name] == rec.get(f"expected_{name}"):
            views[name] = None
            same.append(name)
    wins = windows.touching(rec["spec"], rec["input"], sorted(grad_marks)) if rec.get("input") and grad_marks else []
    for w in wins:
        g = rec.get("grad_output")
        w["grad"] = arrays.short(arrays.at(g, w["out"])) if g is not None else "?"
        w["table"] = arrays.tables(w["window"], w["marks"])
    return {"views": views, "windows": wins, "script": reproducer.safe_script(rec) if script else None,
            "n_grad_marks": len(grad_marks), "same": same}


@dataclasses.dataclass
class Report:
    headline: dict   # total, ran, unexplained, findings (distinct findings hit), explained, worst_impact
                     # (or None), versions ("framework version" of the targets), date (the latest run's)
    findings: list[dict]   # findings_hit, each with "item": its first example's drill-down
    unexplained: list[dict]   # the unexplained failures listed (MAX_LISTED at most), with rerun lines
    environments: list[dict]
    columns: list[Column]
    matrix: list[dict]
    verdict_totals: list[tuple[str, int]]
    outcome_totals: list[tuple[str, int]]
    interop: dict
    fingerprints: list[dict]
    divergences: list[dict]   # the results the report details: unexplained listed, then finding examples
    diff: Diff | None
    filters: dict
    total: int
    semantics: list[dict]   # the semantics pages: id, title, html
    modes: list[str]   # the derivatives the results checked: ["backward"] unless AD modes ran


def semantics(frameworks) -> list[dict]:
    """The semantics pages (semantics.py: the overview by kind of case and one page
    per framework), as HTML fragments for the report: the overview and the run's frameworks'."""
    from poolgrad.knowledge import sources

    from . import semantics as sem
    return [p for p in sem.html_pages(sources.load())
            if not p["id"].startswith("framework-") or p["id"].removeprefix("framework-") in frameworks]


def _item(rec: dict, anchor: str, case_ids, details: bool, script: bool = True) -> dict:
    return {"rec": rec, "anchor": anchor, "describe": describe(rec), "policy": policy_text(rec.get("policy")),
            "forward_policy": policy_text(rec.get("forward_policy")), "mode": mode_of(rec),
            "errors": error_text(rec), "rerun": rerun_line(rec, case_ids),
            "text": " ".join((case_label(rec), rec["target"], rec["message"])).lower(),
            "detail": drilldown(rec, script) if details else None}


def build(source, baseline=None, *, details: bool = True) -> Report:
    """The report model; ``details=False`` skips drill-downs (arrays, windows, scripts)."""
    merged = merge(*load(source), keep_timing=True)
    results = merged.results
    columns = sorted({column_of(r) for r in results})
    rows = sorted({_row(r) for r in results}, key=_row_order)
    modes = [m for m in MODES if any(mode_of(r) == m for r in results)] or ["backward"]
    case_ids = {r["case_id"] for r in results}
    verdicts = Counter(r["verdict"] for r in results)
    outcomes = Counter(r["outcome"] for r in results)
    failed = sorted((r for r in results if r["outcome"] in UNEXPLAINED),
                    key=lambda r: (OUTCOME_ORDER.index(r["outcome"]), SEVERITY.index(r["verdict"])))
    unexplained = [_item(r, f"u{i}", case_ids, details and i < MAX_DRILLDOWNS) for i, r in enumerate(failed[:MAX_LISTED])]
    hit = findings_hit(results)
    for h in hit:
        # An example's arrays show the behaviour; its reproducer is python -m poolgrad.upstream's.
        h["item"] = _item(h["example"], f"e-{h['id']}", case_ids, details, script=False)
    filters = {"framework": sorted({c.framework for c in columns}), "variant": sorted({c.variant for c in columns}),
               "device": sorted({c.device for c in columns}), "op": sorted({r[0] for r in rows}, key=lambda op: _row_order((op, "", 0))),
               "verdict": [v for v in VERDICTS if verdicts[v]]}
    if modes != ["backward"]:
        filters["mode"] = modes
    headline = {"total": len(results), "unexplained": len(failed), "findings": len(hit), "explained": outcomes["expected"],
                "worst_impact": hit[0]["impact"] if hit else None,
                "ran": sum(n for v, n in verdicts.items() if v not in NOT_RUN),
                "versions": list(dict.fromkeys(f"{c.framework} {c.version}" for c in columns)),
                "date": max((e["date"][:10] for e in merged.environments), default="")}
    return Report(
        headline=headline, findings=hit, unexplained=unexplained,
        environments=merged.environments, columns=columns, matrix=_cells(results, rows, columns),
        verdict_totals=[(v, verdicts[v]) for v in SEVERITY if verdicts[v]],
        outcome_totals=[(o, outcomes[o]) for o in OUTCOME_ORDER if outcomes[o]],
        interop=interop(results), fingerprints=fingerprints(results, columns),
        divergences=[*unexplained, *(h["item"] for h in hit)],
        diff=None if baseline is None else diff(load(baseline), (merged.environments, results)),
        filters=filters, total=len(results), semantics=semantics(filters["framework"]), modes=modes)
