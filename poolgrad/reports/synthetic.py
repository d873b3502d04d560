"""Synthetic but realistic results records, for the project's tests, the plugins' tests and the
scale benchmark (in the package so that the plugins, installed apart, reach it too).

Gradients come from the reference under a chosen policy (never from a framework), so a record
says "this target behaves like tie=last" exactly as a real run would. The framework versions are
the caller's; where it gives none, every framework is at VERSION.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from poolgrad.adapters import registry
from poolgrad.reference import PoolSpec, backward, forward
from poolgrad.reference.dtypes import DTYPES

from . import reproducer
from .records import encode_array
from .schema import SCHEMA

VERSION = "1.0.0"


def environment(run_id: str, *, shard=None, versions=None, switches=None, date="2026-01-01T00:00:00+00:00") -> dict:
    """``versions``: framework -> version (default: every registered framework at VERSION)."""
    versions = versions or dict.fromkeys(registry.FRAMEWORKS, VERSION)
    return {"record": "environment", "schema": SCHEMA, "run_id": run_id, "shard": shard,
            "suite_version": "0.1.0", "suite_commit": "0123456789abcdef0123456789abcdef01234567",
            "date": date, "python": "3.11.2", "numpy": "2.4.6", "platform": "Linux-x86_64",
            "cpu": "Synthetic CPU @ 2.0GHz",
            "frameworks": {name: {"version": v, "devices": ["cpu"], "environment": {}} for name, v in versions.items()},
            "env_switches": dict(switches or {})}


def _cells(a: np.ndarray, b: np.ndarray) -> list[list[int]]:
    same = (a.view(np.uint8).reshape(*a.shape, -1) == b.view(np.uint8).reshape(*b.shape, -1)).all(-1)
    return [list(map(int, i)) for i in np.argwhere(~same)[:64]]


def result(case_id: str, family: str, spec: dict, x: np.ndarray, g: np.ndarray, *, framework: str,
           variant: str, run_id: str, device: str = "cpu", version: str | None = None,
           tie: str = "first", nan: str = "propagate", grad_input: np.ndarray | None = None,
           verdict: str | None = None, findings: list | None = None, outcome: str | None = None,
           message: str = "") -> dict:
    """One result record; the framework's gradient is the reference's under (tie, nan) unless
    ``grad_input`` is given. The verdict is inferred unless given."""
    ps = PoolSpec.from_dict(spec)
    ref = backward(ps, x, g)
    got = backward(ps, x, g, tie=tie, nan=nan) if grad_input is None else grad_input
    cells = _cells(ref, got)
    if verdict is None:
        verdict = "conforms" if not cells else "policy"
    policy = {"tie": tie, "nan": nan} if ps.is_max and verdict in ("conforms", "policy") else None
    if outcome is None:
        outcome = "expected" if findings else ("pass" if verdict == "conforms" else "fail")
    fwd = forward(ps, x)
    return {
        "record": "result", "run_id": run_id, "case_id": case_id, "family": family,
        "op": f"{ps.op}{x.ndim - 2}d", "spec": ps.to_dict(), "dtype": ps.dtype or str(x.dtype),
        "framework": framework, "framework_version": version or VERSION, "variant": variant,
        "device": device, "target": f"{framework}-{variant}-{device}", "verdict": verdict,
        "policy": policy, "forward_policy": policy, "valid_subgradient": None if policy is None else True,
        "findings": findings or [], "contradicts": [], "outcome": outcome,
        "input": encode_array(x), "grad_output": encode_array(g), "forward": encode_array(fwd),
        "expected_forward": encode_array(fwd), "grad_input": encode_array(got),
        "expected_grad_input": encode_array(ref), "indices": None,
        "as_expected": ["forward", *([] if cells else ["grad_input"])],
        "max_abs_error": float(np.nanmax(np.abs(ref.astype(np.float64) - got.astype(np.float64)), initial=0.0)),
        "max_ulp_error": None, "differing_cells": cells, "message": message or verdict, "duration_s": 0.001,
    }


def tie_case(dtype: str = "float32"):
    """max_pool2d k2 s1 over a 3x3 input with ties inside and across windows; routing probe."""
    x = np.array([[[[1, 3, 3], [3, 0, 2], [1, 1, -0.0]]]], dtype=DTYPES[dtype])
    g = np.array([[[[1, 2], [4, 8]]]], dtype=DTYPES[dtype])
    return {"op": "max_pool2d", "kernel_size": 2, "stride": 1, "dtype": dtype}, x, g


def reprinted(rec: dict, directory: Path) -> tuple[dict, str]:
    """(what the record's reproducer script prints, its stderr), the script run as a user runs it:
    ``python repro.py`` in ``directory``."""
    path = Path(directory) / "repro.py"
    path.write_text(reproducer.script(rec))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=directory)
    return reproducer.read_output(done.stdout), done.stderr
