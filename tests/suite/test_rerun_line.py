"""A failing conformance test ends with the command that reruns it alone (and its case file):
run as printed, that command selects exactly that test, which fails again the same way."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _pytest(args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "docs" / "examples"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", *args, "-p", "no:xdist", "-p", "no:cacheprovider", "-rf"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_a_failure_names_the_command_that_reruns_it(tmp_path):
    # all_maxima routes a tie to every maximum (tie=all): a failure on the tied case only.
    cases = tmp_path / "ties.json"
    cases.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": [
        {"id": "tied", "family": "ties", "op": "max_pool1d", "kernel_size": 2, "input": [[[1, 1, 0, 2]]]},
        {"id": "untied", "family": "ties", "op": "max_pool1d", "kernel_size": 2, "input": [[[1, 3, 0, 2]]]}]}))
    first = _pytest(["pytest", "--pyargs", "poolgrad", "--target", "my_pooling:all_maxima", "--case-file", str(cases),
                     "-k", "test_backward"], tmp_path)
    assert first.returncode == 1, first.stdout[-3000:] + first.stderr[-2000:]
    # With CI set, pytest's short summary repeats the whole message, rerun line included.
    lines = sorted({line for line in first.stdout.splitlines() if line.startswith("rerun: ")})
    assert len(lines) == 1, first.stdout[-3000:]
    command = shlex.split(lines[0].removeprefix("rerun: "))
    assert command[:3] == ["pytest", "--pyargs", "poolgrad"] and "--case-file" in command
    assert command[command.index("-k") + 1] == "test_backward[tied-user-my_pooling.all_maxima-cpu]"
    assert command[command.index("--case-file") + 1] == str(cases)
    # From another directory: the case file's path is absolute, poolgrad found by --pyargs.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = _pytest(command, elsewhere)
    assert again.returncode == 1 and "1 failed" in again.stdout and "passed" not in again.stdout, again.stdout[-3000:]
    assert lines[0] in again.stdout and "tie=all" in again.stdout
