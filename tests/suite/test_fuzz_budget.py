"""The fuzz runs clean in the test command: a fixed-seed budget per core target (the eager path
of each of poolgrad's frameworks), so what it finds is a finding or a fixed bug, and a run that
fails here fails the same way again (hypothesis's seed is fixed, its database off)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
CORE = [fw for fw in ("torch", "tensorflow", "jax") if importlib.util.find_spec(fw) is not None]
EXAMPLES = 20  # per target: about 10 s each on 2 cores


@pytest.mark.skipif(not CORE, reason="none of torch, tensorflow, jax is installed")
def test_a_fixed_seed_fuzz_of_every_core_target_finds_nothing_unexplained(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "poolgrad/conformance/test_fuzz.py",
         "-q", "--fuzz", str(EXAMPLES), "--hypothesis-seed", "0", "--frameworks", ",".join(CORE), "--variants", "eager",
         "--fuzz-out", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert f"{len(CORE)} passed" in run.stdout, run.stdout[-2000:]
    assert not list(tmp_path.iterdir()), "the fuzz wrote a minimal case of a divergence"
