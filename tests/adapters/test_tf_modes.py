"""The TensorFlow adapter's AD modes on tiny cases: each equals TF's own transform computed here
(ForwardAccumulator, a tape around a tape), and a failure carries TF's own message."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from poolgrad.adapters.base import ERROR, OK  # noqa: E402
from poolgrad.adapters.tensorflow.adapter import ADAPTER  # noqa: E402
from mode_cases import G, SPEC, T, X  # noqa: E402
from poolgrad.reference import PoolSpec  # noqa: E402


def nwc(a):
    return tf.constant(np.transpose(a, (0, 2, 1)))


def ncw(t):
    return np.transpose(t.numpy(), (0, 2, 1))


def pool(x, padding="VALID"):
    return tf.nn.max_pool1d(x, 2, 1, padding)


@pytest.mark.parametrize("variant", ["eager", "function"])
def test_jvp_is_tfs_own(variant):
    out = ADAPTER.jvp(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    def forward_mode(x, t):
        with tf.autodiff.ForwardAccumulator(x, t) as acc:
            y = pool(x)
        return y, acc.jvp(y)

    # In a graph TF may rewrite the kernels (oneDNN): the same graph as the adapter's variant.
    y, y_t = (tf.function(forward_mode) if variant == "function" else forward_mode)(nwc(X), nwc(T))
    np.testing.assert_array_equal(out.tangent_output, ncw(y_t))
    np.testing.assert_array_equal(out.forward, ncw(y))


@pytest.mark.parametrize("variant", ["eager", "function"])
def test_double_backward_is_tfs_own(variant):
    out = ADAPTER.double_backward(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    def second_order(x, g, v):
        with tf.GradientTape() as outer:
            outer.watch([x, g])
            with tf.GradientTape() as inner:
                inner.watch(x)
                y = pool(x)
            dx = inner.gradient(y, x, output_gradients=g)
        return (dx, *outer.gradient(dx, [g, x], output_gradients=v,
                                    unconnected_gradients=tf.UnconnectedGradients.ZERO))

    # In a graph TF may rewrite the kernels (oneDNN): the same graph as the adapter's variant.
    run = tf.function(second_order) if variant == "function" else second_order
    dx, by_g, by_x = run(nwc(X), nwc(G), nwc(T))
    np.testing.assert_array_equal(out.grad_input, ncw(dx))
    np.testing.assert_array_equal(out.grad_grad_output, ncw(by_g))
    np.testing.assert_array_equal(out.grad_grad_input, ncw(by_x))


def test_a_failing_forward_mode_carries_tfs_message():
    # Explicit padding: MaxPoolGrad takes it, the gradient of MaxPoolGrad does not.
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 1, "padding": [[1, 0]],
                               "dtype": "float32"})
    x = np.array([[[1, 3, 3]]], dtype=np.float32)
    out = ADAPTER.jvp(spec, "eager", "cpu", x, np.ones((1, 1, 3), np.float32), x)
    assert out.status == ERROR
    primal = nwc(x)
    with pytest.raises(Exception) as raised:
        with tf.autodiff.ForwardAccumulator(primal, primal):
            pool(primal, [[0, 0], [1, 0], [0, 0]])
    assert out.message == f"{type(raised.value).__name__}: {raised.value}"
