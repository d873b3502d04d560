"""The reproducer of every idiom variant (global reductions, reshape, patch extraction, Keras's
global layers) prints exactly the gradient its adapter returned: the record is made from the
adapter's own outcome (through the worker pool, as the suite runs it) and a framework's scripts
run in one fresh interpreter, away from the checkout, where poolgrad cannot be imported
(repro_runs.py)."""

from __future__ import annotations

import numpy as np
import pytest
import repro_runs

from poolgrad.adapters import registry
from poolgrad.adapters.base import OK, Target
from poolgrad.adapters.pool import WorkerPool
from poolgrad.reference import PoolSpec, forward
from poolgrad.reference.dtypes import DTYPES
from poolgrad.reports import reproducer, synthetic
from poolgrad.reports.records import decode_array

GLOBAL_MAX = {"op": "adaptive_max_pool2d", "output_size": 1}
GLOBAL_AVG = {"op": "adaptive_avg_pool2d", "output_size": 1}
TILES = {"op": "max_pool2d", "kernel_size": 2}
OVERLAP = {"op": "max_pool2d", "kernel_size": 2, "stride": 1}
SAME_AVG = {"op": "avg_pool2d", "kernel_size": 3, "stride": 2, "padding": "SAME"}
# (framework, variant, spec, dtype): the template branches, each once, except torch's and
# TensorFlow's reshape (a reshape before the reduction the other branches run); the keras variants
# on one backend each
CALLS = [("torch", "amax", GLOBAL_MAX, "bfloat16"), ("torch", "max_dim", GLOBAL_MAX, "float32"),
         ("torch", "unfold", OVERLAP, "bfloat16"),
         ("tensorflow", "reduce_xla", GLOBAL_AVG, "float16"), ("tensorflow", "patches", SAME_AVG, "float32"),
         ("jax", "reduce_jit", GLOBAL_MAX, "bfloat16"), ("jax", "reshape", TILES, "float32"),
         ("jax", "patches", OVERLAP, "float32"),
         ("tensorflow", "keras_global_cf", GLOBAL_MAX, "float32"), ("torch", "keras_global", GLOBAL_MAX, "float32")]
# Ties in every window of both channels: the scripts must reproduce the split, not a tie=first answer.
X = np.array([[[[1, 3, 3, 1], [3, 0, 2, 3], [1, 1, 0, 2], [2, 0, 2, 1]],
               [[0, 2, 4, 4], [2, 1, 0, 1], [3, 3, 1, 0], [0, 1, 2, 3]]]], dtype=np.float64)


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(start_timeout_s=300)
    yield p
    p.close()


def record(pool, framework, variant, spec_dict, dtype, batched):
    spec = PoolSpec.from_dict({**spec_dict, "dtype": dtype})
    x = X.astype(DTYPES[dtype])
    g = (np.arange(forward(spec, x).size).reshape(forward(spec, x).shape) % 5 + 1).astype(x.dtype)
    [outcome] = pool.run_group(Target(framework, variant, "cpu"), spec, [x], [g], 300.0)
    assert outcome.status == OK, outcome.message
    rec = synthetic.result(f"{variant}-case", "ties_window", spec.to_dict(), x, g, framework=framework,
                           variant=variant, run_id="idioms", grad_input=outcome.grad_input)
    if batched:  # as if stacked with other cases: the script rebuilds a call of that shape
        rec["call_shape"] = [3 * x.shape[0] * x.shape[1] + 1, 1, *x.shape[2:]]
    return rec


@pytest.mark.parametrize("framework", sorted({f for f, *_ in CALLS}))
def test_idiom_reproducers_reprint_their_adapters_gradient(pool, framework, tmp_path):
    calls = [(variant, spec, dtype) for f, variant, spec, dtype in CALLS
             if f == framework and registry.installed(framework, variant)]
    if not calls:
        pytest.skip(f"no idiom variant of {framework} is installed")
    records, paths = [], []
    for variant, spec, dtype in calls:
        records.append(record(pool, framework, variant, spec, dtype,
                              batched=variant in ("amax", "reshape", "patches", "keras_global")))
        paths.append(tmp_path / f"repro_{variant}.py")
        paths[-1].write_text(reproducer.script(records[-1]))
    for (variant, spec, dtype), rec, out in zip(calls, records, repro_runs.run_together(paths), strict=True):
        printed = reproducer.read_output(out.stdout)
        assert printed["gradient"]["actual"] == rec["grad_input"], variant + out.stdout[-2000:] + out.stderr[-2000:]
        # Exit 1 while the framework's result is not the spec's
        assert out.returncode == (0 if rec["verdict"] == "conforms" else 1), variant + out.stderr[-2000:]
        recorded = decode_array(rec["grad_input"], dtype)
        if spec["op"].startswith("adaptive_max") and variant != "max_dim":  # tied maxima share: the split reached it
            assert np.count_nonzero(recorded[0, 0]) > 1, variant
