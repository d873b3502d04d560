"""The reproducer of a fractional max pooling record calls the framework on the case's regions:
torch with the derived _random_samples, TensorFlow seeded until FractionalMaxPool draws the
case's sequences. A framework's scripts run in one fresh interpreter (repro_runs.py) on distinct
values (one maximum per region, so every framework conforms); regions pooled wrong would route a power of two elsewhere
and the script would exit 1 naming the cells."""

from __future__ import annotations

import numpy as np
import pytest
import repro_runs

from poolgrad.adapters import registry
from poolgrad.reports import reproducer, synthetic

# Rows: torch's windows of 2 (starts 0, 1, 3, 4 of 6); TensorFlow's overlapping regions of the
# sequences 0, 2, 3, 5, 6 and 0, 2, 4, 6 (each region one past the next start).
TORCH = [[[0, 2], [1, 3], [3, 5], [4, 6]], [[0, 3], [3, 6]]]
TF = [[[0, 3], [2, 4], [3, 6], [5, 6]], [[0, 3], [2, 5], [4, 6]]]
TARGETS = [("torch", "eager", TORCH), ("torch", "return_indices", TORCH), ("tensorflow", "eager", TF)]


@pytest.mark.parametrize("framework", sorted({f for f, _, _ in TARGETS}))
def test_fractional_reproducers_pool_the_cases_regions(framework, tmp_path):
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    x = np.random.default_rng(5).permutation(36).reshape(1, 1, 6, 6).astype(np.float32)
    records, paths = [], []
    for variant, regions in ((v, r) for f, v, r in TARGETS if f == framework):
        spec = {"op": "fractional_max_pool2d", "regions": regions, "dtype": "float32"}
        g = (2.0 ** np.arange(len(regions[0]) * len(regions[1]))).reshape(1, 1, len(regions[0]), -1).astype(np.float32)
        records.append(synthetic.result("frac", "user", spec, x, g, framework=framework, variant=variant, run_id="r"))
        paths.append(tmp_path / f"repro_{framework}_{variant}.py")
        paths[-1].write_text(reproducer.script(records[-1]))
    for rec, out in zip(records, repro_runs.run_together(paths), strict=True):
        printed = reproducer.read_output(out.stdout)
        assert printed["gradient"]["actual"] == rec["expected_grad_input"], rec["target"] + out.stderr[-2000:]
        assert out.returncode == 0, rec["target"] + out.stdout[-2000:] + out.stderr[-2000:]
