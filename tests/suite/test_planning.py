"""A (case, target) pair its framework has no call for (the framework's plan says why) is no
test item; the run writes its result once per target and reason, read back per case."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from poolgrad.reports.records import read_results

ROOT = Path(__file__).parents[2]


ROW = [0.5, 1, 2, 3, 4, 5, 6]
CASES = {"format": "poolgrad-cases/1", "cases": [
    {"id": f"bins-{bins}-of-7", "family": "random", "op": "adaptive_avg_pool1d", "output_size": bins, "input": [[ROW]]}
    for bins in (7, 3, 2)]}


def test_a_pair_without_a_call_is_no_test_item_and_its_result_is_still_written(tmp_path):
    results, case_file = tmp_path / "r.jsonl", tmp_path / "bins.json"
    case_file.write_text(json.dumps(CASES))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "poolgrad/conformance/test_conformance.py",
         "-q", "-rs", "--frameworks", "tensorflow,jax", "--variants", "eager", "--ad-modes", "none",
         "--case-file", str(case_file), "--results", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    _, recs = read_results(results)
    by_target: dict[str, list] = {}
    for r in recs:
        by_target.setdefault(r["target"], []).append(r)
    tf, jax = by_target["tensorflow-eager-cpu"], by_target["jax-eager-cpu"]
    cases = {r["case_id"] for r in recs}
    # tf.nn has no adaptive pooling: every case is unsupported on it, with the plan's reason
    assert {r["case_id"] for r in tf} == cases and len(tf) == len(cases)
    assert all(r["verdict"] == "unsupported" and r["outcome"] == "skipped" and "no adaptive pooling" in r["message"]
               and r["spec"]["op"] == "adaptive_avg_pool1d" and r["input"] is not None for r in tf)
    # JAX pools uniform bins only: 7 bins of 7 ran; 3 and 2 bins of 7 did not
    ran = [r for r in jax if r["verdict"] != "unsupported"]
    assert [r["case_id"] for r in ran] == ["bins-7-of-7"] and ran[0]["verdict"] == "conforms"
    assert cases == {"bins-7-of-7", "bins-3-of-7", "bins-2-of-7"}  # also those no target has a call for
    assert all("non-uniform bins" in r["framework_message"] for r in jax if r["verdict"] == "unsupported")
    assert len(jax) == len(cases) > len(ran)
    # only the pairs that ran were test items: none was skipped as unsupported
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and not any("unsupported" in line or "adaptive" in line for line in skips), run.stdout[-2000:]


NAN_AND_PLAIN = {"format": "poolgrad-cases/1", "cases": [
    {"id": "plain", "family": "random", "op": "max_pool1d", "kernel_size": 2, "input": [[[0.5, 1, 2, 3, 4, 5]]]},
    {"id": "nan-then-larger", "family": "nan", "op": "max_pool1d", "kernel_size": 2, "stride": 1,
     "input": [[[1, "nan", 3, 2, 5, 4]]]}]}


def test_arrays_equal_to_the_reference_travel_by_name_and_read_back_whole(tmp_path):
    """A worker sends a framework array that equals the reference's as its name (as_expected);
    the results file reads back with the array itself, still named there, and one that differs
    with its values."""
    results, case_file = tmp_path / "r.jsonl", tmp_path / "nan.json"
    case_file.write_text(json.dumps(NAN_AND_PLAIN))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "poolgrad/conformance/test_conformance.py",
         "-q", "--frameworks", "jax", "--variants", "eager,jit", "--ad-modes", "none",
         "--case-file", str(case_file), "--results", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    recs = {(r["case_id"], r["target"]): r for r in read_results(results)[1]}
    assert len(recs) == 4
    for (case_id, _), r in recs.items():
        assert r["forward"] is not None and r["grad_input"] is not None
        if case_id == "plain":
            assert r["verdict"] == "conforms" and r["as_expected"] == ["forward", "grad_input"]
            assert (r["forward"], r["grad_input"]) == (r["expected_forward"], r["expected_grad_input"])
        else:  # XLA's select-and-scatter routes past the NaN (jax-max-nan-gradient-scan)
            assert r["verdict"] != "conforms" and r["grad_input"] != r["expected_grad_input"]
            assert "grad_input" not in (r["as_expected"] or ())


def test_xdist_and_poolgrad_named_by_hand_with_autoload_off_distribute(tmp_path):
    """With PYTEST_DISABLE_PLUGIN_AUTOLOAD (an image's own plugins kept out), `-p xdist.plugin`
    registers xdist under that name: the run still hands its workers the run id and its units."""
    results, case_file = tmp_path / "r.jsonl", tmp_path / "cases.json"
    case_file.write_text(json.dumps(NAN_AND_PLAIN))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "poolgrad.plugin", "-p", "no:cacheprovider",
         "poolgrad/conformance/test_conformance.py", "-q", "-n", "2", "--frameworks", "jax", "--variants", "eager",
         "--ad-modes", "none", "--case-file", str(case_file), "--results", str(results)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "bringing up nodes" in run.stdout and "passed" in run.stdout
    assert {r["case_id"] for r in read_results(results)[1]} == {"plain", "nan-then-larger"}


def _ties(cid, family, row):
    return {"id": cid, "family": family, "op": "max_pool1d", "kernel_size": 2, "stride": 1, "input": [[row]]}


DRAWS = {"format": "poolgrad-cases/1", "cases": [
    _ties("ties", "ties", [1, 0, 3, 2, 5, 4]), _ties("ties~1", "ties", [1, 1, 3, 2, 5, 4]),
    _ties("ties~2", "ties", [0, 1, 2, 3, 4, 5]), _ties("ties~3", "ties", [5, 4, 2, 2, 1, 0]),
    _ties("ties~4", "plain", [0, 1, 1, 3, 4, 5])]}


def test_a_cases_draws_are_checked_in_its_test_each_recorded_and_each_failure_named(tmp_path):
    """Draws (``<id>~<k>``, same family and call) are one test per target; a record each; the
    test fails where a draw fails, naming that draw. The target is the tie=all kernel of
    docs/examples (no finding applies to an own kernel): the draws with a tie fail."""
    results, case_file, junit = (tmp_path / n for n in ("r.jsonl", "draws.json", "j.xml"))
    case_file.write_text(json.dumps(DRAWS))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:cacheprovider", "poolgrad/conformance/test_conformance.py",
         "-q", "-rf", "--target", "my_pooling:all_maxima", "--ad-modes", "none",
         "--case-file", str(case_file), "--results", str(results), "--junitxml", str(junit)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    recs = {r["case_id"]: r for r in read_results(results)[1]}
    assert set(recs) == {"ties", "ties~1", "ties~2", "ties~3", "ties~4"}
    assert {c for c, r in recs.items() if r["outcome"] == "fail"} == {"ties~1", "ties~3", "ties~4"}
    assert all(recs[c]["policy"]["tie"] == "all" for c in ("ties~1", "ties~3", "ties~4"))
    target = "user-my_pooling.all_maxima-cpu"
    failed = sorted(line.split(" ")[1] for line in run.stdout.splitlines() if line.startswith("FAILED"))
    assert failed == [f"poolgrad/conformance/test_conformance.py::test_backward[{c}-{target}]" for c in ("ties", "ties~4")]
    assert f"ties~1 on {target}" in run.stdout and f"ties~3 on {target}" in run.stdout
    assert f"ties~2 on {target}" not in run.stdout and f"ties on {target}" not in run.stdout
    # two tests: the case with its draws ties~1..3, and ties~4 (another family: a case of its own)
    assert sorted(re.findall(r'name="(test_backward\[[^"]*)"', junit.read_text())) == [
        f"test_backward[ties-{target}]", f"test_backward[ties~4-{target}]"]
