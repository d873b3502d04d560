"""Recorded results for the reports tests: realistic records built with the reference
(reports.synthetic), written as JSON-lines files the way the pytest plugin writes them."""

from __future__ import annotations

import numpy as np

from poolgrad.reports import synthetic
from poolgrad.reports.records import write_record

TIE_ID = "max_pool2d-k2s1-ties_overlap-float32"
XSS_ID = "<img src=x onerror=alert(1)>"
# (framework, variant, tie policy it is recorded as following)
TARGETS = [("torch", "eager", "first"), ("torch", "compile", "first"), ("tensorflow", "eager", "last"),
           ("tensorflow", "xla", "last"), ("jax", "eager", "all"), ("jax", "jit", "all")]
# Their frameworks' versions (the diffs' tests change one of them).
VERSIONS = {"torch": "2.13.0+cpu", "tensorflow": "2.21.0", "jax": "0.10.2"}


TF_FINDING = {"id": "tf-tie-last", "title": "TF CPU MaxPoolGrad routes ties to the last maximum",
              "link": "no upstream report"}


def run_records(run_id="run-a", *, versions=None, tf_known=True) -> list[dict]:
    """One run: environment plus tie, random and injected-id cases on six targets."""
    versions = versions or VERSIONS
    spec, x, g = synthetic.tie_case()
    rng = np.random.default_rng(0)
    rx = rng.permutation(16).astype(np.float32).reshape(1, 1, 4, 4)
    rg = np.array([[[[1, 2], [4, 8]]]], np.float32)
    avg = {"op": "avg_pool2d", "kernel_size": 2, "stride": 2, "dtype": "float32"}
    recs = [synthetic.environment(run_id, versions=versions)]
    for fw, variant, tie in TARGETS:
        common = {"framework": fw, "variant": variant, "run_id": run_id, "version": versions[fw]}
        findings = [TF_FINDING] if fw == "tensorflow" and tf_known else None
        recs.append(synthetic.result(TIE_ID, "ties_overlap", spec, x, g, tie=tie, findings=findings, **common))
        recs.append(synthetic.result("max_pool2d-k2s2-random-float32", "random", {**spec, "stride": 2}, rx, rg, **common))
        recs.append(synthetic.result("avg_pool2d-k2s2-random-float32", "random", avg, rx, rg, **common))
    recs.append(synthetic.result(XSS_ID, "ties_overlap", spec, x, g, framework="jax", variant="eager",
                                 run_id=run_id, version=versions["jax"], tie="split"))
    return recs


def write(path, records):
    with open(path, "w") as fh:
        for rec in records:
            write_record(fh, rec)
    return path

