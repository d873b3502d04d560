"""A finding that calls a path's call undefined (``verdict = "undefined"``: it reads or writes memory
it does not own, so it may hang, crash or return garbage) and scopes it by target, op and dtype
keeps the run from making that call: its results are ``not_run``, naming the finding, until
``--run-undefined`` makes the call, whose result, whatever it is, the finding explains, at an
impact no milder than what happened to the call."""

from __future__ import annotations

import json

from poolgrad.knowledge.impacts import at_least
from poolgrad.reports import records

from test_fail_on import _pytest

UNDEFINED = ('[[finding]]\nid = "all-maxima-undefined"\ntitle = "all_maxima writes past its output"\n'
             'impact = "crash"\nframework = "user"\nops = ["max_pool1d"]\nverdict = "undefined"\n'
             'behaviour = "writes past the output"\nsource = "docs/examples/my_pooling.py: all_maxima"\n'
             'link = "no upstream report"\n')


def _run(tmp_path, *extra, findings=UNDEFINED):
    cases = tmp_path / "ties.json"
    cases.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": [
        {"id": "tied", "family": "ties", "op": "max_pool1d", "kernel_size": 2, "input": [[[1, 1, 0, 2]]]},
        {"id": "untied2d", "family": "user", "op": "max_pool2d", "kernel_size": 2, "input": [[[[1, 1], [0, 2]]]]}]}))
    own = tmp_path / "findings.toml"
    own.write_text(findings)
    results = tmp_path / "r.jsonl"
    done = _pytest(["--target", "my_pooling:all_maxima", "--case-file", str(cases), "--findings", str(own),
                    "--results", str(results), *extra], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    return {r["case_id"]: r for r in records.read_results([results])[1]}


def test_an_undefined_call_is_not_made_and_its_result_says_so(tmp_path):
    got = _run(tmp_path)
    tied = got["tied"]
    assert (tied["verdict"], tied["outcome"], tied["call_shape"]) == ("not_run", "skipped", None)
    assert tied["message"].startswith("not run: all-maxima-undefined: all_maxima writes past its output")
    assert "--run-undefined" in tied["message"]
    ran = got["untied2d"]  # out of the finding's scope (its ops): called
    assert (ran["verdict"], ran["outcome"]) == ("conforms", "pass") and ran["call_shape"] == [1, 1, 2, 2]


def test_run_undefined_makes_the_call_and_the_finding_explains_what_it_returned(tmp_path):
    tied = _run(tmp_path, "--run-undefined")["tied"]
    assert (tied["verdict"], tied["outcome"]) == ("policy", "expected")
    assert [f["id"] for f in tied["findings"]] == ["all-maxima-undefined"] and tied["impact"] == "crash"


def test_an_undefined_claim_scoped_by_the_case_explains_the_call_made(tmp_path):
    """Scoped by a case property (asked once a case is known), the claim cannot keep the run from
    making the call: the call is made, and the claim explains what it returned."""
    scoped = UNDEFINED.replace('ops = ["max_pool1d"]\n', 'ops = ["max_pool1d"]\nwhen = ["ties"]\n')
    assert scoped != UNDEFINED
    tied = _run(tmp_path, findings=scoped)["tied"]
    assert (tied["verdict"], tied["outcome"]) == ("policy", "expected")
    assert [f["id"] for f in tied["findings"]] == ["all-maxima-undefined"]


def test_an_undefined_result_is_at_least_what_happened_to_its_call():
    assert at_least("gradient_misrouted", [], "crash") == "crash"
    assert at_least("gradient_misrouted", [], "timeout") == "crash"
    assert at_least("valid_subgradient", [], "error") == "error"
    assert at_least("crash", [], "error") == "crash"
    assert at_least("gradient_misrouted", [], "policy") == "gradient_misrouted"
    assert at_least(None, [], "crash") is None  # a finding that rates nothing is not rated here


def test_a_replay_judges_a_call_not_made_as_the_run_did(tmp_path):
    """Nothing was observed, so no finding explains it: judged again (history, replay), the record
    stays skipped, in the run's words."""
    from poolgrad.knowledge import sources
    from poolgrad.suite.machine import completed
    from poolgrad.suite.replay import JUDGED, rejudged

    tied = _run(tmp_path)["tied"]
    own = tmp_path / "findings.toml"
    again = rejudged(tied, sources.load(extra=[str(own)]), completed(None))
    assert {k: again[k] for k in JUDGED} == {k: tied[k] for k in JUDGED}
