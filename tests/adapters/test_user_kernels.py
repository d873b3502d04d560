"""Your own kernel as a target (--target module:function): the seeds' two answers run through
the whole suite (the argmax loop is canonical, the mask is named tie=all), and a kernel's
refusal, crash, hang or malformed answer is that case's result."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest

from poolgrad.adapters.base import CRASH, ERROR, OK, TIMEOUT, UNSUPPORTED, Target
from poolgrad.adapters.pool import WorkerPool
from fake_frameworks import SPEC, Options, case
from poolgrad.reference import backward, forward
from poolgrad.reports.records import read_results
from poolgrad.suite import options

ROOT = Path(__file__).parents[2]


def test_the_seeds_answers_are_named_canonical_and_tie_all(tmp_path):
    results = tmp_path / "results.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "poolgrad/conformance", "-q",
         "--target", "my_pooling:argmax_first", "--target", "my_pooling:all_maxima",
         "-k", "max_pool1d and ties and not nan", "--results", str(results), "--junitxml", str(tmp_path / "j.xml")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    checked: dict[str, list] = {}
    for rec in read_results(results)[1]:
        if rec["verdict"] != "unsupported":
            checked.setdefault(rec["target"], []).append(rec)
    first, mask = checked["user-my_pooling.argmax_first-cpu"], checked["user-my_pooling.all_maxima-cpu"]
    assert len(first) == len(mask) >= 20
    assert {(r["verdict"], r["outcome"]) for r in first} == {("conforms", "pass")}
    # Where a window ties, the mask is the tie=all policy; findings never apply to own kernels.
    named = [r for r in mask if r["verdict"] == "policy"]
    assert named and all(r["policy"] == {"tie": "all", "nan": "propagate"} and r["outcome"] == "fail" for r in named)
    assert {r["verdict"] for r in mask} <= {"policy", "conforms"} and not any(r["findings"] for r in mask)
    assert run.returncode == 1 and "tie=all" in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    # JUnit XML: the classname every install shares, and the verdict of a result its outcome
    # does not say (a named policy fails), none where it conforms, and no other property.
    root = ElementTree.parse(tmp_path / "j.xml").getroot()
    # The framework's description went to the results' environment record, not to a test.
    assert not [p for p in root.iter("property") if p.get("name") != "poolgrad"]
    cases = root.iter("testcase")
    verdicts = {c.get("name"): (c.get("classname"), [p.get("value") for p in c.iter("property") if p.get("name") == "poolgrad"])
                for c in cases}
    assert len(verdicts) >= len(first) + len(mask) and {cls for cls, _ in verdicts.values()} == {"poolgrad"}
    assert {v[0] for name, (_, v) in verdicts.items() if "all_maxima" in name and v} == {"fail policy"}
    assert not any(v for name, (_, v) in verdicts.items() if "argmax_first" in name)


KERNELS = '''
    import os, time
    import numpy as np
    from poolgrad.reference import backward, forward, PoolSpec

    def good(spec, x, g):
        s = PoolSpec.from_dict(spec)
        return forward(s, x), backward(s, x, g)

    def refuse(spec, x, g):
        raise NotImplementedError("no 2-D windows here")

    def crash(spec, x, g):
        os.abort()

    def hang(spec, x, g):
        time.sleep(600)

    def one_array(spec, x, g):
        return x

    def flat(spec, x, g):
        return x.ravel(), x.ravel()
'''


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    where = tmp_path_factory.mktemp("kernels")
    (where / "own_kernels.py").write_text(textwrap.dedent(KERNELS))
    sys.path.insert(0, str(where))   # the worker is spawned with this process's sys.path
    p = WorkerPool(start_timeout_s=60)
    yield p
    p.close()
    sys.path.remove(str(where))


def run(pool, function, timeout_s=20.0):
    x, g = case(0)
    [outcome] = pool.run_group(Target("user", f"own_kernels.{function}", "cpu"), SPEC, [x], [g], timeout_s)
    return x, g, outcome


@pytest.mark.parametrize("function, status, says", [
    ("refuse", UNSUPPORTED, "own_kernels.refuse: no 2-D windows here"),
    ("crash", CRASH, "killed by SIGABRT"),
    ("hang", TIMEOUT, "exceeded 3 s"),
    ("one_array", ERROR, "returned ndarray; expected a pair (forward, grad_input)"),
    ("flat", ERROR, "returned forward of shape (32,); expected (N, C, *spatial) with N = 1"),
    ("no_such_function", ERROR, "module 'own_kernels' has no function 'no_such_function'"),
])
def test_a_kernels_failure_is_that_cases_result(pool, function, status, says):
    _, _, outcome = run(pool, function, timeout_s=3.0)
    assert outcome.status == status and says in outcome.message, outcome.message
    x, g, after = run(pool, "good")   # the worker is back for the next case
    assert after.status == OK, after.message
    np.testing.assert_array_equal(after.forward, forward(SPEC, x))
    np.testing.assert_array_equal(after.grad_input, backward(SPEC, x, g))


@pytest.mark.parametrize("value, says", [
    ("my_pooling.argmax_first", "expected module:function"),
    ("my_pooling:argmax-first", "expected module:function"),
    ("poolgrad_no_such_module:f", "module 'poolgrad_no_such_module' is not importable here; put its directory on PYTHONPATH"),
])
def test_a_bad_target_is_a_usage_error_naming_the_fix(value, says):
    with pytest.raises(pytest.UsageError, match="--target") as e:
        options.user_targets([value])
    assert says in str(e.value)


def test_own_kernels_alone_unless_frameworks_are_asked_for():
    alone, _ = options.selected_targets(Options(target=["numpy:mean"]))
    assert [t.id for t in alone] == ["user-numpy.mean-cpu"]
    both, _ = options.selected_targets(Options(frameworks="jax", target=["numpy:mean"]))
    assert {t.framework for t in both} == {"jax", "user"}
