"""A results file starts with the run's environment record (what is known before any worker
ran), so a run killed early keeps its machine facts; the end of the run writes it again,
completed, and readers count the run once, by its last record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from poolgrad.reports.records import iter_file, read_results

ROOT = Path(__file__).parents[2]
CASES = {"format": "poolgrad-cases/1", "cases": [
    {"id": "one-window", "op": "max_pool1d", "kernel_size": 2, "input": [[[1, 3]]]}]}


def test_the_environment_is_the_first_record_and_the_run_counts_once(tmp_path):
    results, case_file = tmp_path / "r.jsonl", tmp_path / "c.json"
    case_file.write_text(json.dumps(CASES))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "poolgrad/conformance/test_conformance.py",
         "-q", "--frameworks", "jax", "--variants", "eager", "--ad-modes", "none", "--case-file", str(case_file),
         "--results", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = list(iter_file(results))
    first, last = lines[0], [r for r in lines if r["record"] == "environment"][-1]
    assert first["record"] == "environment" and first["cpu"] and first["frameworks"]["jax"]["version"]
    assert first["run_id"] == last["run_id"] and last is not lines[0]
    assert last["frameworks"]["jax"]["devices"] == ["cpu"]  # what the worker reported
    envs, recs = read_results(results)
    assert envs == [last] and {r["case_id"] for r in recs} == {"one-window"}


def test_a_runs_own_reports_are_those_its_results_file_builds(tmp_path):
    # Results travel against their case (records.against_case) and are written as they come;
    # the reports a run writes itself restore them from its cases, as a reader of the file does
    # (the HTML report shows a divergence's arrays: my_pooling.all_maxima routes a tie to both).
    from poolgrad.reports import html
    results, case_file, own = tmp_path / "r.jsonl", tmp_path / "c.json", tmp_path / "own.html"
    case_file.write_text(json.dumps({**CASES, "cases": [
        *CASES["cases"], {"id": "tie", "family": "ties", "op": "max_pool1d", "kernel_size": 2, "stride": 1,
                          "input": [[[2, 2, 1]]]}]}))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "poolgrad/conformance/test_conformance.py",
         "-q", "--frameworks", "jax", "--variants", "eager,jit", "--target", "my_pooling:all_maxima", "--ad-modes", "none",
         "--case-file", str(case_file), "--results", str(results), "--report-html", str(own)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])})
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]  # the tie's divergence fails
    html.write_html([results], tmp_path / "from-file.html")
    assert own.read_text() == (tmp_path / "from-file.html").read_text()
    assert ">1 unexplained failure<" in own.read_text()
