"""The JAX adapter's AD modes on tiny cases: each equals JAX's own transform computed here
(jax.jvp, the VJP of the VJP), and a missing rule is an error with JAX's own message."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax import lax  # noqa: E402

from poolgrad.adapters.base import ERROR, OK  # noqa: E402
from poolgrad.adapters.jax.adapter import ADAPTER  # noqa: E402
from mode_cases import G, SPEC, T, X  # noqa: E402
from poolgrad.reference import PoolSpec  # noqa: E402


def pool(x):
    return lax.reduce_window(x, -np.inf, lax.max, (1, 1, 2), (1, 1, 1), ((0, 0),) * 3)


@pytest.mark.parametrize("variant", ["eager", "jit"])
def test_jvp_is_jaxs_own(variant):
    out = ADAPTER.jvp(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    y, y_t = jax.jvp(pool, (X,), (T,))
    np.testing.assert_array_equal(out.tangent_output, np.asarray(y_t))
    np.testing.assert_array_equal(out.forward, np.asarray(y))
    np.testing.assert_array_equal(out.grad_input, np.asarray(jax.vjp(pool, X)[1](G)[0]))


@pytest.mark.parametrize("variant", ["eager", "jit"])
def test_double_backward_is_jaxs_own(variant):
    out = ADAPTER.double_backward(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    dx, vjp = jax.vjp(lambda x, g: jax.vjp(pool, x)[1](g)[0], X, G)
    by_x, by_g = vjp(T)
    np.testing.assert_array_equal(out.grad_input, np.asarray(dx))
    np.testing.assert_array_equal(out.grad_grad_output, np.asarray(by_g))
    np.testing.assert_array_equal(out.grad_grad_input, np.asarray(by_x))


def test_a_missing_rule_is_an_error_with_jaxs_message():
    # The VJP of a dilated max reduce_window has no rule (select_and_scatter has no dilation).
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "dilation": 2, "dtype": "float32"})
    x = np.arange(8, dtype=np.float32).reshape(1, 1, 8)
    out = ADAPTER.double_backward(spec, "eager", "cpu", x, np.ones((1, 1, 3), np.float32), x)
    assert out.status == ERROR
    with pytest.raises(Exception) as raised:
        jax.vjp(lambda a: lax.reduce_window(a, -np.inf, lax.max, (1, 1, 2), (1, 1, 2), ((0, 0),) * 3,
                                            window_dilation=(1, 1, 2)), x)[1](np.ones((1, 1, 3), np.float32))
    assert out.message == f"{type(raised.value).__name__}: {raised.value}"
