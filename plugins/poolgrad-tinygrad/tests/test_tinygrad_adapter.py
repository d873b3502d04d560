"""The adapter runs tinygrad's pools as tinygrad users call them, checked against the NumPy
reference (never against tinygrad). tinygrad lowers every new kernel in Python (seconds each,
cached per process): these tests make few calls, each covering several things."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("tinygrad")

from poolgrad.adapters.base import OK  # noqa: E402
from poolgrad.reference import PoolSpec, backward, forward  # noqa: E402
from poolgrad_tinygrad.adapter import ADAPTER  # noqa: E402


def distinct(shape, dtype):
    """Distinct values (at most 256: exact in bfloat16 too), so no tie rule matters."""
    assert np.prod(shape) <= 256
    return (np.random.default_rng(0).permutation(np.prod(shape)).reshape(shape) / 4 - 10).astype(dtype)


def probe(shape, dtype):
    return (2.0 ** (np.arange(np.prod(shape)) % 7)).reshape(shape).astype(dtype)


def run(spec, variant, x, g):
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    assert out.status == OK, out.message
    return out


@pytest.mark.parametrize("variant", ["eager", "jit"])
@pytest.mark.parametrize("spec", [
    # asymmetric padding, dilation and a ceil_mode window, 2-D with channels
    {"op": "max_pool", "kernel_size": [3, 2], "stride": 2, "padding": [[1, 0], [0, 1]], "dilation": [1, 2], "ceil_mode": True},
    {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
], ids=["max", "avg"])
def test_forward_and_gradient_are_the_references_on_distinct_values(variant, spec):
    spec = PoolSpec.from_dict(spec)
    x = distinct((2, 3, 7, 6), np.float32)
    y = forward(spec, x)
    g = probe(y.shape, np.float32)
    out = run(spec, variant, x, g)
    np.testing.assert_allclose(out.forward, y, rtol=1e-6)
    np.testing.assert_allclose(out.grad_input, backward(spec, x, g), rtol=1e-6)


def test_a_tie_splits_the_gradient_and_float64_stays_float64():
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 2})
    x = np.array([[[[1, 3], [3, 2]], [[5, 5], [5, 5]]]], np.float64)
    g = np.array([[[[2]], [[8]]]], np.float64)
    out = run(spec, "eager", x, g)
    assert out.grad_input.dtype == np.float64
    np.testing.assert_array_equal(out.grad_input, backward(spec, x, g, tie="split"))
    assert not np.array_equal(out.grad_input, backward(spec, x, g))


def users_gradient(x: np.ndarray, g: np.ndarray, pool) -> np.ndarray:
    """What a user writes: the pool, y.backward(g), then x.grad (tinygrad's own idiom: the expected
    bits are the user's, not a reference's)."""
    from tinygrad import Tensor
    xt = Tensor(x)
    pool(xt).backward(Tensor(g))
    return xt.grad.numpy()


def test_the_gradient_is_what_backward_leaves_in_x_grad_and_what_tensor_gradient_returns():
    # a 3-way tie whose share rounds (5 * (1/3) is 1 ulp above 5 / 3 in float32) and an average
    # whose windows' gradients nearly cancel (float64 sums of 1e8 and -1e8 + a fraction)
    ties = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 3, "stride": 3})
    x1, g1 = np.array([[[4, 4, 4, 1, 2, 3]]], np.float32), np.array([[[5, 7]]], np.float32)
    avg = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 3, "stride": 1, "padding": 1, "count_include_pad": False})
    x2 = distinct((1, 1, 4, 5), np.float64)
    g2 = np.where(np.arange(20).reshape(1, 1, 4, 5) % 2, 1e8, -1e8 + 1 / 3)
    for spec, x, g, pool in [
        (ties, x1, g1, lambda t: t.max_pool2d(kernel_size=(3,), stride=(3,))),
        (avg, x2, g2, lambda t: t.avg_pool2d(kernel_size=(3, 3), stride=1, padding=1, count_include_pad=False)),
    ]:
        users = users_gradient(x, g, pool)
        for variant in ("eager", "gradient"):
            assert run(spec, variant, x, g).grad_input.tobytes() == users.tobytes(), variant
    third = np.float32(1) / np.float32(3)  # the split share is g * (1 / count), rounded twice
    np.testing.assert_array_equal(run(ties, "eager", x1, g1).grad_input, [[[5 * third] * 3 + [0, 0, 7]]])
    assert 5 * third != np.float32(5) / np.float32(3)


def test_jit_captures_once_per_spec_and_shape():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 2})
    x, g = distinct((1, 1, 6), np.float32), probe((1, 1, 3), np.float32)
    first = run(spec, "jit", x, g).info["compiles"]
    again = run(spec, "jit", x + 1, g)  # the captured graph, on new values
    assert again.info["compiles"] == first
    np.testing.assert_allclose(again.forward, forward(spec, x + 1), rtol=1e-6)


def test_bfloat16_comes_back_as_bfloat16_or_as_the_compilers_refusal():
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 2})
    x, g = distinct((1, 1, 4), ml_dtypes.bfloat16), probe((1, 1, 2), ml_dtypes.bfloat16)
    out = ADAPTER.run(spec, "eager", "cpu", x, g)
    if out.status == OK:
        assert out.grad_input.dtype == ml_dtypes.bfloat16
        np.testing.assert_array_equal(out.grad_input, backward(spec, x, g))
    else:  # clang before 15 has no __bf16 for x86 (tinygrad-cpu-bf16-clang-refuses)
        assert out.status == "error" and "clang" in out.message
