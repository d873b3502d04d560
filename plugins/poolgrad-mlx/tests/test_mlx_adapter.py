"""The adapter runs mlx.nn's layers as MLX users call them: checked against the NumPy reference
(never against MLX), in every rank, dtype and variant, channels and non-square inputs included
(the layers are channels-last; the adapter transposes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("mlx.core")

from poolgrad.adapters.base import OK  # noqa: E402
from poolgrad.reference import PoolSpec, backward, forward, jvp  # noqa: E402
from poolgrad_mlx.adapter import ADAPTER  # noqa: E402

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def distinct(shape, dtype, seed=0):
    """Distinct values, exact in every dtype (at most 256 of them: bfloat16 has 8 significant
    bits): no ties, so every tie rule gives the same answer."""
    assert np.prod(shape) <= 256
    values = np.random.default_rng(seed).permutation(np.prod(shape)).reshape(shape) / 4 - 10
    return values.astype(DTYPES[dtype])


def probe(shape, dtype):
    """Powers of two: every sum of them a framework forms is exact."""
    return (2.0 ** (np.arange(np.prod(shape)) % 7)).reshape(shape).astype(DTYPES[dtype])


def run(spec, variant, x, g, method="run", *extra):
    out = getattr(ADAPTER, method)(spec, variant, "cpu", x, g, *extra)
    assert out.status == OK, out.message
    return out


@pytest.mark.parametrize("variant", ["eager", "compile"])
@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_forward_and_gradient_are_the_references_on_distinct_values(variant, op, rank, dtype):
    spec = PoolSpec.from_dict({"op": op, "kernel_size": 3, "stride": 2, "padding": 1, "dtype": dtype})
    shape = {1: (2, 3, 7), 2: (2, 3, 7, 5), 3: (1, 2, 5, 4, 3)}[rank]
    x = distinct(shape, dtype)
    y = forward(spec, x)
    g = probe(y.shape, dtype)
    out = run(spec, variant, x, g)
    assert out.forward.dtype == x.dtype and out.grad_input.dtype == x.dtype  # no silent float32
    tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(dtype, 1e-6)
    np.testing.assert_allclose(out.forward.astype(np.float64), y.astype(np.float64), rtol=tol, atol=tol)
    np.testing.assert_allclose(out.grad_input.astype(np.float64), backward(spec, x, g).astype(np.float64),
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("variant", ["eager", "compile"])
def test_a_tie_splits_the_gradient(variant):
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 2})
    x = np.array([[[[1, 3], [3, 2]], [[5, 5], [5, 5]]]], np.float32)  # two and four maxima
    g = np.array([[[[2]], [[8]]]], np.float32)
    out = run(spec, variant, x, g)
    np.testing.assert_array_equal(out.grad_input, backward(spec, x, g, tie="split"))
    assert not np.array_equal(out.grad_input, backward(spec, x, g))


@pytest.mark.parametrize("variant", ["eager", "compile"])
def test_ad_modes_on_distinct_values(variant):
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 3, "stride": 1, "padding": 1})
    x = distinct((1, 2, 5, 4), "float32")
    g, t = probe((1, 2, 5, 4), "float32"), distinct((1, 2, 5, 4), "float32", seed=1)
    out = run(spec, variant, x, g, "jvp", t)
    np.testing.assert_array_equal(out.tangent_output, jvp(spec, x, t))
    np.testing.assert_array_equal(out.grad_input, backward(spec, x, g))
    out = run(spec, variant, x, g, "double_backward", t)
    np.testing.assert_array_equal(out.grad_grad_output, jvp(spec, x, t))  # the transpose of the backward
    np.testing.assert_array_equal(out.grad_grad_input, np.zeros_like(x))  # a selection is piecewise constant


def test_compile_compiles_once_per_spec_and_shape():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 2})
    x = distinct((1, 1, 6), "float32")
    before = run(spec, "compile", x, probe((1, 1, 3), "float32")).info["compiles"]
    assert run(spec, "compile", x, probe((1, 1, 3), "float32")).info["compiles"] == before
    assert run(spec, "compile", distinct((1, 1, 8), "float32"), probe((1, 1, 4), "float32")).info["compiles"] == before + 1


def test_gpu_without_a_gpu_is_no_device():
    import mlx.core as mx
    if mx.is_available(mx.gpu):
        pytest.skip("this machine has an MLX GPU")
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2})
    assert ADAPTER.run(spec, "eager", "gpu", distinct((1, 1, 4), "float32"), probe((1, 1, 2), "float32")).status == "no_device"
