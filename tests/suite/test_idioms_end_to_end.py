"""Pooling as users write it, through a real conformance run (one pytest process, the frameworks in
their workers): on a global-max tie each framework's reduction routes by tie=split and a finding
names it, and Keras's own expectations about GlobalMaxPooling2D hold for the layer itself on every
backend."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.reference import PoolSpec, forward
from poolgrad.reports.records import read_results

ROOT = Path(__file__).parents[2]
FRAMEWORKS = ("torch", "tensorflow", "jax")
if not all(registry.installed(f, "keras") for f in FRAMEWORKS):
    pytest.skip("needs torch, tensorflow, jax and keras", allow_module_level=True)

# The new target of each framework that reduces a plane to its maximum, and the finding naming it.
SPLIT = {"torch-amax-cpu": "torch-amax-ties-split", "tensorflow-reduce-cpu": "tf-reduce-max-ties-split",
         "jax-reduce-cpu": "jax-reduce-max-ties-split"}
# Keras's test suite (keras/src/layers/pooling/global_max_pooling_test.py,
# GlobalMaxPoolingCorrectnessTest.test_global_max_pooling2d): this input, in each data format.
KERAS_INPUT = np.arange(96, dtype=np.float32).reshape((2, 3, 4, 4))


def keras_expectation(data_format: str) -> np.ndarray:
    """Keras's own expected output, np_global_max_pool2d with keepdims, channels-first."""
    axes = [1, 2] if data_format == "channels_last" else [2, 3]
    expected = np.apply_over_axes(np.max, KERAS_INPUT, axes)
    return np.transpose(expected, (0, 3, 1, 2)) if data_format == "channels_last" else expected


def case(cid, family, x):
    return {"id": cid, "family": family, "op": "adaptive_max_pool2d", "output_size": 1, "dtype": "float32",
            "input": np.asarray(x).tolist()}


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("idioms")
    cases = tmp / "cases.json"
    cases.write_text(json.dumps({"format": "poolgrad-cases/1", "cases": [
        case("global-tie", "ties_window", [[[[1, 3], [3, 0]]]]),
        # channels_last: Keras reads (2, 3, 4, 4) as N, H, W, C; the case is channels-first
        case("keras-gmp2d-channels_last", "random", np.transpose(KERAS_INPUT, (0, 3, 1, 2))),
        case("keras-gmp2d-channels_first", "random", KERAS_INPUT)]}))
    results = tmp / "results.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "poolgrad", "-p", "no:xdist", "-p", "no:cacheprovider",
                          "--case-file", str(cases), "--frameworks", ",".join(FRAMEWORKS), "--devices", "cpu",
                          "--variants", "amax,reduce,keras_global,keras_global_cf", "--ad-modes", "none",
                          "--results", str(results), "-k", "test_backward"],
                         cwd=tmp, capture_output=True, text=True, timeout=600, env={**os.environ})
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    print(run.stdout.splitlines()[-1])
    return {(rec["case_id"], rec["target"]): rec for rec in read_results(results)[1]}


def test_on_a_global_max_tie_each_framework_has_a_target_that_splits_named_by_a_finding(records):
    for target, finding in SPLIT.items():
        rec = records[("global-tie", target)]
        assert rec["verdict"] == "policy" and rec["policy"]["tie"] == "split", rec
        assert rec["outcome"] == "expected" and finding in [f["id"] for f in rec["findings"]], rec
        assert rec["grad_input"] == [[[[0, 0.5], [0.5, 0]]]], rec  # the two maxima share the gradient


def test_keras_expectations_about_global_max_pooling_2d_hold_for_the_layer_on_every_backend(records):
    spec = PoolSpec.from_dict({"op": "adaptive_max_pool2d", "output_size": 1})
    for data_format in ("channels_last", "channels_first"):
        cid = f"keras-gmp2d-{data_format}"
        x = KERAS_INPUT if data_format == "channels_first" else np.transpose(KERAS_INPUT, (0, 3, 1, 2))
        # Keras's expectation is the spec's global max: the case checks exactly what Keras's test does
        np.testing.assert_array_equal(keras_expectation(data_format), forward(spec, x))
        for framework in FRAMEWORKS:
            for variant in ("keras_global", "keras_global_cf"):
                rec = records[(cid, f"{framework}-{variant}-cpu")]
                assert rec["verdict"] == "conforms" and rec["outcome"] == "pass", rec
