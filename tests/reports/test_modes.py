"""Reports of AD-mode results: a mode dimension in the matrix, fingerprints and drill-downs only
where mode results exist; merge and diff keep a case's modes apart; a mode record's reproducer
prints the derivative that was recorded (the framework called directly, as in
test_reproducer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import repro_runs

from poolgrad.adapters import registry
from poolgrad.reports import html, markdown, reproducer, synthetic
from poolgrad.reports.diff import diff
from poolgrad.reports.merge import merge
from poolgrad.reports.records import decode_array, encode_array
from poolgrad.reports.schema import validate
from reports_recorded import TIE_ID, run_records

HERE = Path(__file__).parent


def mode_record(rec: dict, mode: str, derivative, *, verdict="inconsistent_modes", policy=None, reverse=None) -> dict:
    """``rec`` (a reverse-mode result) as the result of AD mode ``mode`` of the same case and target."""
    return validate({**rec, "mode": mode, "verdict": verdict, "outcome": "fail" if verdict != "conforms" else "pass",
                     "policy": policy, "forward_policy": reverse, "derivative": derivative,
                     "expected_derivative": derivative, "grad_grad_input": None,
                     "message": f"{verdict}: the modes disagree" if verdict != "conforms" else "conforms"})


def with_modes() -> list[dict]:
    records = run_records()
    tf = next(r for r in records if r.get("target") == "tensorflow-eager-cpu" and r.get("case_id") == TIE_ID)
    derivative = [[[[2.0, 2.0], [8.0, 32.0]]]]
    return records + [mode_record(tf, "jvp", derivative, policy={"tie": "first", "nan": "propagate"},
                                  reverse={"tie": "last", "nan": "propagate"}),
                      mode_record(tf, "double_backward", derivative, verdict="conforms")]


def test_old_results_have_no_mode_dimension(tmp_path):
    report = html.write_html(run_records(), tmp_path / "r.html")
    assert report.modes == ["backward"] and "mode" not in report.filters
    assert {row["mode"] for row in report.matrix} == {"backward"}
    assert "<th>mode</th>" not in (tmp_path / "r.html").read_text()


def test_mode_results_get_rows_filters_and_fingerprints_of_their_own(tmp_path):
    report = html.write_html(with_modes(), tmp_path / "r.html")
    assert report.modes == ["backward", "jvp", "double_backward"] and report.filters["mode"] == report.modes
    rows = {(row["family"], row["mode"]): row for row in report.matrix}
    jvp = {c["col"].target: dict(c["counts"]) for c in rows["ties_overlap", "jvp"]["cells"]}
    assert jvp["tensorflow-eager-cpu"] == {"inconsistent_modes": 1}
    backward = {c["col"].target: dict(c["counts"]) for c in rows["ties_overlap", "backward"]["cells"]}
    assert backward["tensorflow-eager-cpu"] == {"policy": 1}   # the reverse mode's row is its own
    fp = {(f["col"].target, f["mode"]): dict(f["backward"]) for f in report.fingerprints}
    assert fp["tensorflow-eager-cpu", "jvp"] == {"nan=propagate, tie=first": 1}
    (d,) = [d for d in report.divergences if d["mode"] == "jvp"]
    assert "reverse mode (nan=propagate, tie=last)" in d["describe"]
    text = (tmp_path / "r.html").read_text()
    assert "<th>mode</th>" in text and 'data-mode="jvp"' in text and "reference jvp" in text
    markdown.write_markdown(with_modes(), tmp_path / "s.md")
    assert "**inconsistent\\_modes** max\\_pool2d-k2s1-ties\\_overlap-float32 (jvp) on tensorflow-eager-cpu" in (tmp_path / "s.md").read_text()


def test_merge_and_diff_keep_a_cases_modes_apart():
    records = with_modes()
    merged = merge([r for r in records if r["record"] == "environment"], [r for r in records if r["record"] == "result"])
    assert merged.conflicts == 0
    assert sum(r["case_id"] == TIE_ID and r["target"] == "tensorflow-eager-cpu" for r in merged.results) == 3
    changed = [r if r.get("mode") != "jvp" else {**r, "derivative": [[[[2.0, 4.0], [8.0, 32.0]]]]} for r in records]
    d = diff((records[:1], records[1:]), (changed[:1], changed[1:]))
    assert [c.line().split(" on ")[0] for c in d.behaviour_changes] == [f"{TIE_ID} [jvp]"]


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_mode_reproducers_reprint_the_recorded_derivative(framework, tmp_path):
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    direct = subprocess.run([sys.executable, str(HERE / "reports_direct_modes.py"), framework],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert direct.returncode == 0, direct.stderr[-2000:]
    spec, x, g = synthetic.tie_case()
    records, paths = {}, []
    for key, derivative in json.loads(direct.stdout.splitlines()[-1]).items():
        variant, mode = key.split()
        rec = synthetic.result(TIE_ID, "ties_overlap", spec, x, g, framework=framework, variant=variant, run_id="r")
        records[key] = mode_record(rec, mode, encode_array(decode_array(derivative, "float32")), verdict="conforms")
        paths.append(tmp_path / f"repro_{variant}_{mode}.py")
        paths[-1].write_text(reproducer.script(records[key]))
    # Away from the checkout, poolgrad not importable; one interpreter for the framework's scripts.
    for (key, rec), out in zip(records.items(), repro_runs.run_together(paths), strict=True):
        mode = rec["mode"]
        printed = reproducer.read_output(out.stdout)[mode]
        assert printed["actual"] == rec["derivative"], f"{key}: {out.stderr[-2000:]}"
        assert out.returncode == (0 if printed["expected"] == printed["actual"] else 1), key
