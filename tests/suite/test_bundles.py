"""Bundles (Framework.bundles): several batching groups of a target in one worker call, their
groups in one work unit, each case's outcome its own."""

import collections

import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import Target
from poolgrad.adapters.framework import Framework
from poolgrad.adapters.pool import WorkerPool
from poolgrad.cases import catalogue
from poolgrad.cases.model import make_case
from poolgrad.reference import backward, forward
from poolgrad.reference.spec import PoolSpec
from poolgrad.suite import scheduling
from poolgrad.suite.runner import GroupRunner

BUNDLED = Target("fakeb", "compiled", "cpu")
SPECS = [PoolSpec("max_pool", kernel_size=2, dtype="float64"), PoolSpec("avg_pool", kernel_size=2, dtype="float64"),
         PoolSpec("max_pool", kernel_size=2, stride=1, dtype="float32")]
CASES = [make_case(f"g{i}-{j}", "t", spec, np.arange(j, j + 8, dtype=spec.dtype).reshape(1, 2, 4) * (-1) ** j)
         for i, spec in enumerate(SPECS) for j in range(3)]


@pytest.fixture
def bundling_pool(monkeypatch):
    monkeypatch.setitem(registry.FRAMEWORKS, "fakeb", Framework(
        "fakeb", "poolgrad.adapters.fake_adapter", "numpy", ("numpy",), ("eager", "compiled"), bundles={"compiled": 8}))
    pool = WorkerPool(start_timeout_s=60)
    yield pool
    pool.close()


@pytest.mark.parametrize("unit", ["u", None])
def test_a_units_groups_run_as_one_bundle_and_each_case_gets_its_own_outcome(bundling_pool, unit):
    runner = GroupRunner(bundling_pool, timeout_s=20)
    for case in CASES:
        runner.register(case, BUNDLED, unit)
    runs = {case.id: runner.run(case, BUNDLED) for case in CASES}
    for case in CASES:
        call, [outcome] = runs[case.id]
        assert len(call.cases) == 3 and outcome.info["call_shape"] == [3, 2, 4]
        assert not outcome.info.get("stacked")
        np.testing.assert_array_equal(outcome.forward, forward(case.spec, case.input))
        np.testing.assert_array_equal(outcome.grad_input, backward(case.spec, case.input, case.grad_output))
    # Bundled: the three groups in one call, their sampled cases alone in one more; else two per group.
    assert bundling_pool.workers()["fakeb"].served == (2 if unit else 6)
    assert {runs[c.id][1][0].info.get("bundle") for c in CASES} == ({3} if unit else {None})


def test_a_bundling_targets_groups_share_units_of_its_bundle_size_whatever_the_order():
    cases = catalogue()
    compile_, eager = Target("torch", "compile", "cpu"), Target("torch", "eager", "cpu")
    units = scheduling.units(cases, [eager, compile_], registry.unsupported)
    assert units == scheduling.units(cases[::-1], [compile_, eager], registry.unsupported)
    groups = collections.defaultdict(set)
    for case in cases:
        groups[units[case.id]].add(scheduling.unit_name(case))
    compiled = sorted({scheduling.unit_name(c) for c in cases if registry.unsupported(compile_, c.spec, c.input.shape) is None})
    size = registry.get("torch").bundles["compile"]
    chunks = [set(compiled[i:i + size]) for i in range(0, len(compiled), size)]
    bundled = [names for unit, names in groups.items() if names & set(compiled)]
    assert sorted(map(sorted, bundled)) == sorted(map(sorted, chunks)) and size > 1
    assert all(unit.startswith(min(names)) for unit, names in groups.items())
    assert scheduling.units(cases, [eager], registry.unsupported) == {c.id: scheduling.unit_name(c) for c in cases}
