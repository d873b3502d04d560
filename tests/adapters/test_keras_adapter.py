"""The keras variant of every backend, through the worker pool (Keras fixes its backend per
process, so this test process imports none): the layers match the reference on tie-free
inputs, each backend's Keras runs in a worker of its own, and what Keras has no argument for
is unsupported with the reason."""

from __future__ import annotations

import importlib.util

import ml_dtypes
import numpy as np
import pytest

from poolgrad.adapters import registry
from poolgrad.adapters.base import NOT_INSTALLED, OK, UNSUPPORTED, Target
from poolgrad.adapters.pool import WorkerPool
from fake_frameworks import fake, fake_pool
from poolgrad.reference import PoolSpec, backward, forward

BACKENDS = [b for b in ("tensorflow", "jax", "torch")
            if registry.installed(b, "keras")]
if not BACKENDS:
    pytest.skip("keras or every backend is missing", allow_module_level=True)
SHAPES = {1: (2, 3, 9), 2: (2, 3, 5, 7), 3: (1, 2, 5, 4, 6)}   # odd extents: SAME pads are asymmetric


@pytest.fixture(scope="module")
def pool():
    p = WorkerPool(start_timeout_s=300)
    yield p
    p.close()


def run(pool, backend, spec_dict, shape, dtype=np.float32, seed=0):
    """Distinct integers (exact in bfloat16 up to 256) and a small-integer grad_output."""
    rng = np.random.default_rng(seed)
    spec = PoolSpec.from_dict(spec_dict)
    x = (rng.permutation(int(np.prod(shape))).reshape(shape) - 40).astype(dtype)
    g = rng.integers(1, 5, forward(spec, x).shape).astype(dtype)
    [outcome] = pool.run_group(Target(backend, "keras", "cpu"), spec, [x], [g], 120.0)
    return spec, x, g, outcome


LAYERS = [{"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": "SAME"},
          {"op": "max_pool", "kernel_size": 2, "stride": 1},
          {"op": "avg_pool", "kernel_size": 2, "stride": 1},
          {"op": "avg_pool", "kernel_size": 3, "stride": 1, "padding": "SAME", "count_include_pad": False},
          {"op": "adaptive_max_pool", "output_size": 3},
          {"op": "adaptive_avg_pool", "output_size": 2}]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("layer", LAYERS, ids=lambda d: "-".join(map(str, d.values())))
def test_layers_match_the_reference(pool, backend, rank, layer):
    spec, x, g, outcome = run(pool, backend, layer, SHAPES[rank])
    assert outcome.status == OK, outcome.message
    assert outcome.info["layer"].endswith(f"{rank}D")
    assert outcome.forward.dtype == x.dtype and outcome.grad_input.shape == x.shape
    np.testing.assert_allclose(outcome.forward, forward(spec, x), rtol=1e-6)
    np.testing.assert_allclose(outcome.grad_input, backward(spec, x, g), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_the_case_dtype_is_the_layers_dtype(pool, backend, dtype):
    spec, x, g, outcome = run(pool, backend, {"op": "max_pool", "kernel_size": 2}, SHAPES[2], dtype)
    if outcome.status != OK:   # a backend without a kernel for the dtype says so in its own words
        assert outcome.status in ("error", "unsupported") and "Error" in outcome.message
        return
    assert outcome.forward.dtype == np.dtype(dtype) and outcome.grad_input.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(outcome.grad_input, backward(spec, x, g))


@pytest.mark.parametrize("spec_dict, reason", [
    ({"op": "lp_pool", "kernel_size": 2, "norm_type": 2}, "no lp_pool layer"),
    ({"op": "max_pool", "kernel_size": 2, "ceil_mode": True}, "ceil_mode"),
    ({"op": "max_pool", "kernel_size": 2, "stride": 1, "dilation": 2}, "dilation"),
    ({"op": "avg_pool", "kernel_size": 2, "divisor_override": 3}, "divisor_override"),
    ({"op": "max_pool", "kernel_size": 2, "padding": [[1, 0], [0, 1]]}, "neither 'same' nor 'valid'"),
    ({"op": "avg_pool", "kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": True}, "excludes padding"),
])
def test_what_keras_has_no_argument_for_is_unsupported_with_the_reason(pool, spec_dict, reason):
    for backend in BACKENDS:
        _, _, _, outcome = run(pool, backend, spec_dict, SHAPES[2])
        assert outcome.status == UNSUPPORTED and reason in outcome.message, (backend, outcome.message)


def test_each_backend_runs_in_a_keras_worker_of_its_own(pool):
    for backend in BACKENDS:
        run(pool, backend, {"op": "max_pool", "kernel_size": 2}, SHAPES[1])
        desc = pool.describe(backend, "keras")
        assert desc["status"] == OK and desc["environment"]["keras_backend"] == backend
        assert desc["version"] == registry.installed_version(backend)   # a keras target is its backend's
    assert {f"{b}-keras" for b in BACKENDS} <= set(pool.workers())
    assert not set(BACKENDS) & set(pool.workers())   # the backends' own workers were not needed


def test_a_variant_whose_worker_needs_a_missing_module_is_not_installed():
    missing = "poolgrad_no_such_module"
    assert importlib.util.find_spec(missing) is None
    fw = fake("fake_keras")
    fw = registry.Framework(fw.name, fw.module, fw.import_name, fw.distributions, fw.variants,
                            workers={"compiled": registry.WorkerSpec("fake-extra", fw.module, {}, missing)})
    spec = PoolSpec.from_dict({"op": "max_pool2d", "kernel_size": 2})
    x = np.zeros((1, 1, 2, 2), np.float32)
    with fake_pool(fw) as p:
        [absent] = p.run_group(Target(fw.name, "compiled", "cpu"), spec, [x], [x[..., :1, :1]], 20.0)
        [present] = p.run_group(Target(fw.name, "eager", "cpu"), spec, [x], [x[..., :1, :1]], 20.0)
    assert absent.status == NOT_INSTALLED and missing in absent.message
    assert present.status == OK
