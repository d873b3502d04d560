"""Each plugin distribution's own tests (plugins/<name>/tests) run in the test command, each in
a process of its own: a plugin's tests import its framework, and frameworks do not share one
process (importing paddle after torch's extensions segfaults)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PLUGINS = sorted(p for p in (Path(__file__).parents[1] / "plugins").glob("*/tests") if p.is_dir())


@pytest.mark.parametrize("tests", PLUGINS, ids=lambda p: p.parent.name)
def test_the_plugins_own_tests_pass(tests):
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-q", str(tests)],
                         cwd=tests.parent, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-1000:]
