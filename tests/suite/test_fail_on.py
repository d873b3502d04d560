"""``--fail-on IMPACT``: a result the findings explain passes as expected unless their worst
impact is IMPACT or worse; a divergence they do not explain fails whatever the level. The
impact is in the failure's message, the results record and the HTML report's drill-down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from poolgrad.adapters.base import OK, Outcome, Target
from poolgrad.cases import make_case
from poolgrad.knowledge.base import Knowledge
from poolgrad.knowledge.impacts import IMPACTS
from poolgrad.knowledge.schema import FindingsError, parse_finding
from poolgrad.reference import PoolSpec
from poolgrad.reports import html, records
from poolgrad.suite.check import check, worst_impact
from poolgrad.verdicts import Policy

ROOT = Path(__file__).parents[2]
TARGET = Target("tensorflow", "eager", "cpu")
SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
# A tie in the first window and two NaNs in the second.
TIES_AND_NANS = np.array([[[1.0, 1.0, np.nan, np.nan, 0.0, 3.0]]])
TIE_LAST = {"id": "tie-last", "when": ["ties"], "policy": {"tie": "last"}, "impact": "valid_subgradient"}
NAN_LAST = {"id": "nan-last", "when": ["nan_several"], "policy": {"nan_tie": "last"}, "impact": "nan_semantics"}


def _kb(*entries):
    base = {"framework": "tensorflow", "behaviour": "what it does", "source": "kernel.cc: f",
            "link": "no upstream report"}
    return Knowledge(parse_finding({"title": e["id"], **base, **e}, i) for i, e in enumerate(entries))


def _checked(kb, **policy):
    case = make_case(f"fail-on-{sorted(policy.items())}", "user", SPEC, TIES_AND_NANS)
    r = Policy(**policy).evaluate(case.spec, case.input, case.grad_output)
    return check(case, TARGET, "2.21.0", [Outcome(OK, forward=r.forward, grad_input=r.grad_input)], kb, 0.0)


def test_the_worst_impact_of_the_explaining_findings_decides():
    checked = _checked(_kb(TIE_LAST, NAN_LAST), tie="last", nan_tie="last")
    assert checked.outcome == "expected" and checked.record["impact"] == "nan_semantics"
    assert not checked.fails(None)  # the default: a known behaviour passes
    failing = [level for level in IMPACTS if checked.fails(level)]
    assert failing == ["valid_subgradient", "rounding", "nan_semantics"]
    assert "impact nan_semantics" in checked.message


def test_one_finding_alone_gives_its_own_impact():
    checked = _checked(_kb(TIE_LAST), tie="last")
    assert [f.id for f in checked.judgement.explained_by] == ["tie-last"]
    assert checked.record["impact"] == "valid_subgradient"
    assert checked.fails("valid_subgradient") and not checked.fails("rounding")
    assert checked.record["findings"] == [{"id": "tie-last", "title": "tie-last", "link": "no upstream report",
                                           "impact": "valid_subgradient"}]


def test_the_impact_is_never_milder_than_the_arrays_show():
    # A failure claim of a tie order credited where the NaN of the second window vanished from
    # the forward: whatever the claim says, the result is at least nan_semantics.
    tie_wrong = {**TIE_LAST, "id": "tie-order", "when": ["ties"], "verdict": "wrong"}
    del tie_wrong["policy"]
    case = make_case("fail-on-nan-vanished", "user", SPEC, TIES_AND_NANS)
    r = Policy(tie="last", nan="ignore").evaluate(case.spec, case.input, case.grad_output)
    assert not np.isnan(r.forward).any()
    checked = check(case, TARGET, "2.21.0", [Outcome(OK, forward=r.forward, grad_input=r.grad_input)],
                    _kb(tie_wrong), 0.0)
    assert [f.id for f in checked.judgement.explained_by] == ["tie-order"]
    assert checked.record["impact"] == "nan_semantics" and "impact nan_semantics" in checked.message
    assert checked.fails("nan_semantics") and not checked.fails("gradient_lost")
    # The same claim where the arrays keep every NaN keeps its own impact.
    kept = _checked(_kb(tie_wrong), tie="last")
    assert kept.record["impact"] == "valid_subgradient"


def test_an_unexplained_divergence_fails_at_every_level():
    checked = _checked(_kb(TIE_LAST), tie="all")
    assert checked.outcome == "behaviour_changed" and checked.record["impact"] is None
    assert checked.fails(None) and all(checked.fails(level) for level in IMPACTS)


def test_a_conforming_result_never_fails():
    checked = _checked(_kb(TIE_LAST))
    assert checked.outcome == "pass" and not any(checked.fails(level) for level in (None, *IMPACTS))


def test_a_finding_without_impact_is_not_below_any_level():
    no_impact = {k: v for k, v in TIE_LAST.items() if k != "impact"}
    checked = _checked(_kb(no_impact), tie="last")
    assert worst_impact(checked.judgement.explained_by) is None and checked.record["impact"] is None
    assert not checked.fails(None) and checked.fails("crash")
    assert "impact not stated" in checked.message


def test_an_unknown_impact_is_refused_with_the_allowed_values():
    with pytest.raises(FindingsError, match="'tie-last'.*'impact'.*harmless.*valid_subgradient, rounding"):
        _kb({**TIE_LAST, "impact": "harmless"})


def test_the_record_and_the_report_show_the_impact(tmp_path):
    checked = _checked(_kb(TIE_LAST, NAN_LAST), tie="last", nan_tie="last")
    path = tmp_path / "results.jsonl"
    with path.open("w") as fh:
        writer = records.ResultsWriter(fh)
        writer.write({**checked.record, "run_id": "r"})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {(r["id"], r.get("impact")) for r in lines if r.get("record") == "finding"} == {
        ("tie-last", "valid_subgradient"), ("nan-last", "nan_semantics")}
    _, (result,) = records.read_results(path)
    assert result["impact"] == "nan_semantics"
    page = html.render(html.model.build([path]))
    assert "impact <b class=\"impact\">valid_subgradient</b>" in page
    assert f"<b class=\"impact\">nan_semantics</b>: {IMPACTS['nan_semantics']}" in page


def _pytest(args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "poolgrad", *args, "-p", "no:xdist",
                           "-p", "no:cacheprovider", "-rf"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_fail_on_in_a_run(tmp_path):
    """my_pooling.all_maxima routes a tie to every maximum: a finding of the user's own explains
    it (impact gradient_misrouted); --fail-on fails the run at that level or below only."""
    cases = tmp_path / "ties.json"
    cases.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": [
        {"id": "tied", "family": "ties", "op": "max_pool1d", "kernel_size": 2, "input": [[[1, 1, 0, 2]]]}]}))
    own = tmp_path / "findings.toml"
    own.write_text('[[finding]]\nid = "all-maxima-tie-all"\ntitle = "every tied maximum gets the gradient"\n'
                   'impact = "gradient_misrouted"\nframework = "user"\nwhen = ["ties"]\n'
                   'gradient = {tie = "all"}\nbehaviour = "routes a tie to every maximum"\n'
                   'source = "docs/examples/my_pooling.py: all_maxima"\nlink = "no upstream report"\n')
    run = ["--target", "my_pooling:all_maxima", "--case-file", str(cases), "--findings", str(own),
           "-k", "test_backward", "--results", str(tmp_path / "r.jsonl")]
    assert _pytest(run, tmp_path).returncode == 0
    assert _pytest([*run, "--fail-on", "wrong_forward"], tmp_path).returncode == 0
    failed = _pytest([*run, "--fail-on", "gradient_lost"], tmp_path)
    assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr[-2000:]
    assert ("tied on user-my_pooling.all_maxima-cpu: known: all-maxima-tie-all (policy (tie=all, nan=propagate)); impact "
            "gradient_misrouted, which fails under --fail-on gradient_lost") in failed.stdout, failed.stdout[-3000:]
    assert "--fail-on gradient_lost" in next(line for line in failed.stdout.splitlines() if line.startswith("rerun: "))
    refused = _pytest([*run, "--fail-on", "bad"], tmp_path)
    assert refused.returncode == 4 and "valid_subgradient" in refused.stderr
