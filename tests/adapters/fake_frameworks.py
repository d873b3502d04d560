"""Pools over the test-only "fake" framework (poolgrad/adapters/fake_adapter.py), shared by the pool tests."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.pool import WorkerPool
from poolgrad.reference import PoolSpec

SPEC = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 2})


def fake(name: str, import_name: str = "numpy") -> registry.Framework:
    """A registry entry whose worker runs the fake adapter; installed iff import_name imports."""
    return registry.Framework(name, "poolgrad.adapters.fake_adapter", import_name, (import_name,), ("eager", "compiled"))


@contextlib.contextmanager
def fake_pool(*frameworks: registry.Framework, env: dict[str, str] | None = None):
    """A WorkerPool that also knows ``frameworks``, registered only while the block runs."""
    with pytest.MonkeyPatch.context() as mp:
        for fw in frameworks:
            mp.setitem(registry.FRAMEWORKS, fw.name, fw)
        pool = WorkerPool(start_timeout_s=60, env=env)
        try:
            yield pool
        finally:
            pool.close()


def case(seed: int, dtype=np.float32, n: int = 1, sentinel: float | None = None):
    """(x, grad_output) for SPEC on a (n, 2, 4, 4) input; sentinel goes into x[0, 0, 0, 0]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2, 4, 4)).astype(dtype)
    if sentinel is not None:
        x[0, 0, 0, 0] = sentinel
    g = rng.integers(1, 8, (n, 2, 2, 2)).astype(dtype)
    return x, g


# What a separate package's entry point names (tests/adapters/test_registry.py).
PLUGIN = fake("plugin")


class Options:
    """The options suite.options.selected_targets reads, as a pytest config gives them."""

    def __init__(self, **given):
        self.given = {"frameworks": None, "variants": None, "devices": "cpu", "target": [], **given}

    def getoption(self, name):
        return self.given[name]

