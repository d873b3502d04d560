"""What a framework plugin's own tests check of its registration, the same for every plugin:
the entry point names the package's ``FRAMEWORK``, the record's schedule names only its own
variants, and reading the record and planning every variant import no framework (the pytest
process collects with them)."""

from __future__ import annotations

import importlib
import subprocess
import sys

from . import registry
from .framework import Framework


def assert_registered(name: str, package: str) -> Framework:
    """The record registered as ``name`` is ``package``'s ``FRAMEWORK``, planned by it; returns it."""
    record = registry.get(name)
    assert record is importlib.import_module(package).FRAMEWORK, f"entry point {name!r} names another record"
    assert record.planner == package and record.name == name
    assert set(record.costs) <= set(record.variants), f"costs of variants {name} has not: {record.costs}"
    assert all(set(v) <= set(record.variants) for v in record.ad_modes.values()), record.ad_modes
    return record


def assert_planning_imports_no_framework(name: str, spec: dict, shape: tuple) -> None:
    """In a fresh process: read ``name``'s record and plan ``spec`` on ``shape`` for each of its
    variants; the framework (its ``import_name``) stays unimported."""
    code = ("import importlib, sys; from poolgrad.adapters import registry; from poolgrad.reference import PoolSpec; "
            f"fw = registry.get({name!r}); "
            f"[importlib.import_module(fw.worker(v).planner).plan(PoolSpec.from_dict({spec!r}), v, {tuple(shape)!r}) "
            "for v in fw.variants]; print(fw.import_name in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "False", f"reading {name}'s record and planning imported {name}"
