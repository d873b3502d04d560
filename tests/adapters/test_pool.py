"""WorkerPool: warm workers, batched calls split back per case, describe, real frameworks."""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import ERROR, OK, Target
from poolgrad.adapters.fake_adapter import RAISE
from poolgrad.adapters.pool import SHARED_GPU_ENV, WorkerPool, shared_gpu_env
from fake_frameworks import SPEC, case, fake, fake_pool
from poolgrad.reference import PoolSpec, backward, forward

CPU = Target("fake", "compiled", "cpu")


@pytest.fixture(scope="module")
def pool():
    with fake_pool(fake("fake")) as p:
        yield p


def run(pool, cases):
    return pool.run_group(CPU, SPEC, [x for x, _ in cases], [g for _, g in cases], 20.0)


def test_same_spec_cases_run_as_one_call_and_split_back(pool):
    cases = [case(0, n=1), case(1, n=2), case(2, n=1)]  # batch sizes may differ: stacked along N
    outcomes = run(pool, cases)
    for outcome, (x, g) in zip(outcomes, cases):
        assert outcome.status == OK, outcome.message
        np.testing.assert_array_equal(outcome.forward, forward(SPEC, x))
        np.testing.assert_array_equal(outcome.grad_input, backward(SPEC, x, g))
    calls = {o.info["calls"] for o in outcomes}
    assert len(calls) == 1
    assert {tuple(o.info["call_shape"]) for o in outcomes} == {(4, 2, 4, 4)}
    [after] = run(pool, [case(3)])
    assert after.info["calls"] == calls.pop() + 1


def test_cases_of_different_shapes_or_dtypes_get_separate_calls_in_order(pool):
    x16, g16 = case(4, dtype=np.float16)
    wide = (np.zeros((1, 2, 6, 6), np.float32), np.ones((1, 2, 3, 3), np.float32))
    cases = [case(5), (x16, g16), wide, case(6)]
    outcomes = run(pool, cases)
    assert [o.status for o in outcomes] == [OK] * 4
    assert len({o.info["calls"] for o in outcomes}) == 3
    assert outcomes[0].info["calls"] == outcomes[3].info["calls"]
    assert [o.forward.shape for o in outcomes] == [(1, 2, 2, 2), (1, 2, 2, 2), (1, 2, 3, 3), (1, 2, 2, 2)]
    assert outcomes[1].forward.dtype == np.float16


WIDE = PoolSpec.from_dict({"op": "avg_pool2d", "kernel_size": 3, "stride": 1})


def _bundle(cases_of_groups):
    return [(spec, [x for x, _ in cases], [g for _, g in cases]) for spec, cases in cases_of_groups]


def test_a_bundle_is_one_call_whose_members_get_what_they_get_alone(pool):
    members = _bundle([(SPEC, [case(20), case(21, n=2)]), (WIDE, [case(22)]), (SPEC, [case(23, dtype=np.float16)])])
    bundled = pool.run_bundle(CPU, members, 20.0)
    alone = [pool.run_group(CPU, *member, 20.0) for member in members]
    assert len({o.info["calls"] for outcomes in bundled for o in outcomes}) == 1
    for (spec, xs, _), got, expected in zip(members, bundled, alone):
        assert [o.info["call_shape"] for o in got] == [o.info["call_shape"] for o in expected]
        assert {o.info["bundle"] for o in got} == {3}
        for g, e in zip(got, expected):
            assert g.status == e.status == OK
            for name in ("forward", "grad_input"):
                assert getattr(g, name).dtype == getattr(e, name).dtype
                assert getattr(g, name).tobytes() == getattr(e, name).tobytes()


def test_a_member_that_fails_the_bundle_fails_alone_and_the_others_run_by_themselves(pool):
    members = _bundle([(SPEC, [case(24), case(25)]), (SPEC, [case(26, sentinel=RAISE), case(27)]), (WIDE, [case(28)])])
    bundled = pool.run_bundle(CPU, members, 20.0)
    statuses = [[o.status for o in outcomes] for outcomes in bundled]
    assert statuses == [[OK, OK], [ERROR, OK], [OK]]  # the stack's own fallback: case by case
    assert "sentinel" in bundled[1][0].message
    for (spec, xs, gs), outcomes in zip(members, bundled):
        assert not any("bundle" in o.info for o in outcomes)
        for x, g, o in zip(xs, gs, outcomes):
            if o.ran:
                np.testing.assert_array_equal(o.grad_input, backward(spec, x, g))


def test_bfloat16_survives_the_trip_bit_for_bit(pool):
    x, g = case(7, dtype=ml_dtypes.bfloat16)
    [outcome] = run(pool, [(x, g)])
    assert outcome.forward.dtype == ml_dtypes.bfloat16
    assert outcome.grad_input.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(outcome.forward.view(np.uint16), forward(SPEC, x).view(np.uint16))
    np.testing.assert_array_equal(outcome.grad_input.view(np.uint16), backward(SPEC, x, g).view(np.uint16))


def test_describe_is_cached_and_the_worker_stays_warm(pool):
    desc = pool.describe("fake")
    assert desc["status"] == OK
    assert (desc["version"], desc["devices"], desc["variants"]) == ("0.0", ["cpu"], ["eager", "compiled"])
    assert desc["startup_s"] > 0
    assert pool.describe("fake") is desc
    pids = {o.info["pid"] for o in run(pool, [case(8)]) + run(pool, [case(9)])}
    assert pids == {desc["environment"]["pid"]}
    assert pool.workers()["fake"].starts == 1


def test_env_reaches_the_worker_before_its_framework_loads():
    with fake_pool(fake("fake"), env={"OMP_NUM_THREADS": "1"}) as p:
        assert p.describe("fake")["environment"]["OMP_NUM_THREADS"] == "1"


def test_workers_share_a_gpu_unless_the_user_said_otherwise(monkeypatch):
    for name in SHARED_GPU_ENV:
        monkeypatch.delenv(name, raising=False)
    assert shared_gpu_env() == SHARED_GPU_ENV
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "true")   # the user's choice wins
    assert "XLA_PYTHON_CLIENT_PREALLOCATE" not in shared_gpu_env()
    assert shared_gpu_env()["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"


def test_close_stops_every_worker():
    with fake_pool(fake("fake")) as p:
        p.describe("fake")
        worker = p.workers()["fake"]
        assert worker.alive
        p.close()
        assert not worker.alive


@pytest.fixture(scope="module")
def real_pool():
    p = WorkerPool()
    yield p
    p.close()


@pytest.mark.parametrize("framework", ["torch", "tensorflow", "jax"])
def test_real_framework_worker_reports_its_version_and_cpu(real_pool, framework):
    if not registry.installed(framework):
        pytest.skip(f"{framework} is not installed")
    module = registry.FRAMEWORKS[framework].module
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} does not exist yet")
    desc = real_pool.describe(framework)
    assert desc["status"] == OK, desc["message"]
    assert desc["version"] == registry.installed_version(framework)
    assert "cpu" in desc["devices"]
