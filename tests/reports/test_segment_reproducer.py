"""A segment record's reproducer makes the call torch's segment variants make (scatter_reduce into
zeros; PyTorch Geometric's global pool) and reprints the recorded gradient, run as a user runs it."""

from __future__ import annotations

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.reports import synthetic

SPEC = {"op": "segment_max_pool", "segment_ids": [0, 0, 2, 1, 2], "num_segments": 3}


@pytest.mark.parametrize("variant", ["scatter_reduce", "pyg"])
def test_a_segment_reproducer_reprints_the_recorded_gradient(variant, tmp_path):
    if not registry.installed("torch", variant):
        pytest.skip(f"torch's {variant} variant is not installed")
    rng = np.random.default_rng(0)
    x = rng.permutation(10).astype(np.float32).reshape(1, 2, 5)  # distinct: one maximum per segment
    g = rng.integers(1, 8, (1, 2, 3)).astype(np.float32)
    rec = synthetic.result("segment", "segment", SPEC, x, g, framework="torch", variant=variant, run_id="r")
    printed, stderr = synthetic.reprinted(rec, tmp_path)
    assert printed["gradient"]["actual"] == rec["grad_input"], stderr[-2000:]
    assert printed["gradient"]["expected"] == rec["expected_grad_input"]
