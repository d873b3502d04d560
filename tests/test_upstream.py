"""python -m poolgrad.upstream: a draft report per finding whose first python block is a
standalone reproducer: run alone in an empty directory it exits 1 on the pinned stack while the
behaviour holds, and 0 on a case the framework handles as the spec does."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest

from poolgrad import upstream
from poolgrad.adapters import registry
from poolgrad.cases import findings, semantics
from poolgrad.cases.case_file import load_case_file
from poolgrad.reports import reproducer

KB = findings.load()
BY_ID = {f.id: f for f in KB}
# One unreported CPU finding of each framework, each with its example.
UNREPORTED = ["torch-max-last-nan-wins", "tf-cpu-maxpoolgrad-nan-first-tap", "jax-max-neginf-window-padding-wins",
              "paddle-cpu-max-nan-fold", "mlx-max-grad-split", "tinygrad-max-grad-split"]
STDLIB = {"base64", "json", "math", "os", "sys", "zlib"}


def first_python_block(markdown: str) -> str:
    return re.search(r"^```python\n(.*?)^```$", markdown, re.S | re.M)[1]


def run_alone(script: str, tmp_path) -> subprocess.CompletedProcess:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    (empty / "repro.py").write_text(script)
    return subprocess.run([sys.executable, "repro.py"], cwd=empty, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})  # nothing of poolgrad importable


@pytest.mark.parametrize("finding_id", UNREPORTED)
def test_the_drafts_reproducer_exits_1_while_the_behaviour_holds(finding_id, tmp_path, capsys):
    f = BY_ID[finding_id]
    if not registry.installed(f.framework):
        pytest.skip(f"{f.framework} is not installed")
    assert not semantics.reported(f) and f.example is not None
    assert upstream.main([finding_id]) == 0
    draft = capsys.readouterr().out
    assert draft.count("```python") >= 1 and f.title in draft and f.source in draft
    assert registry.installed_version(f.framework) in draft  # the environment measured
    script = first_python_block(draft)
    imported = {a.name.split(".")[0] for node in ast.walk(ast.parse(script)) if isinstance(node, ast.Import)
                for a in node.names} | {node.module.split(".")[0] for node in ast.walk(ast.parse(script))
                                        if isinstance(node, ast.ImportFrom)}
    assert imported - STDLIB == {"numpy", registry.get(f.framework).import_name}
    out = run_alone(script, tmp_path)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    printed = reproducer.read_output(out.stdout)
    assert any("differ" in p and p["expected"] != p["actual"] for p in printed.values()), out.stdout


def test_run_puts_the_reproducers_output_in_the_draft(capsys):
    f = BY_ID["jax-max-neginf-window-padding-wins"]
    if not registry.installed(f.framework):
        pytest.skip("jax is not installed")
    assert upstream.main([f.id, "--run"]) == 0
    draft = capsys.readouterr().out
    output = re.search(r"^Its output here \(exit status (\S+)\):\n\n```\n(.*?)^```$", draft, re.S | re.M)
    assert output[1] == "1" and "cells differ" in output[2] and "the divergence holds" in output[2]
    assert draft.index("```python") < output.start()  # the reproducer stays the first block


def test_the_same_reproducer_exits_0_on_a_case_the_framework_handles_canonically(tmp_path):
    f = BY_ID["torch-max-last-nan-wins"]
    if not registry.installed(f.framework):
        pytest.skip("torch is not installed")
    # The example's spec with one NaN per window: no window has several, so torch follows the spec.
    example = json.loads(f.example.read_text())
    example["cases"] = [{**example["cases"][0], "id": "one-nan", "input": [[[[1, "nan", 3, 2, "nan", 0]], [[5, 4, 4, "nan", 1, 2]]]]}]
    path = tmp_path / "one_nan.json"
    path.write_text(json.dumps(example))
    case = load_case_file(path)[0]
    script = reproducer.script(upstream.record(f, case, upstream.target_of(f, case)))
    out = run_alone(script, tmp_path)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "the framework gives the spec's result" in out.stdout


def test_write_drafts_every_finding_without_a_report(tmp_path, capsys):
    own = ["torch", "tensorflow", "jax"]
    knowledge = findings.load()  # as main reads it, not as at import (the files may have changed since)
    status = upstream.main(["--write", str(tmp_path), *(a for fw in own for a in ("--framework", fw))])
    written = {p.stem for p in tmp_path.glob("*.md")}
    unreported = {f.id for f in knowledge if f.framework in own and not semantics.reported(f)}
    refused = {line.split("'")[1] for line in capsys.readouterr().err.splitlines() if line.startswith("no draft")}
    # Every unreported finding is drafted, or named on stderr (only for want of an example).
    assert written | refused == unreported and not written & refused
    assert all(f.example is None for f in knowledge if f.id in refused)
    assert status == (1 if refused else 0)
    assert all(first_python_block((tmp_path / f"{i}.md").read_text()) for i in written)


def test_a_finding_without_an_example_is_refused_by_name(tmp_path):
    fid = "no-example"
    (tmp_path / "mine.toml").write_text(f'''[[finding]]
id = "{fid}"
title = "A finding of my own"
impact = "valid_subgradient"
framework = "torch"
ops = ["max_pool*"]
when = ["ties"]
policy = {{tie = "last"}}
behaviour = "The kernel keeps the last of tied maxima, which this entry says only to test the drafts of reports."
source = "my_kernel.cpp"
upstream = []
''')
    knowledge = findings.load(extra=[tmp_path / "mine.toml"])
    with pytest.raises(upstream.NoDraft, match=f"{fid!r} has no example case file .*'example'"):
        upstream.draft(knowledge, next(f for f in knowledge if f.id == fid))
