"""The torch adapter's AD modes on tiny cases: each equals torch's own transform computed here
(torch.func.jvp, autograd.grad with create_graph), and a missing rule is an error with
torch's own message."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

from poolgrad.adapters.base import ERROR, OK  # noqa: E402
from poolgrad.adapters.torch.adapter import ADAPTER  # noqa: E402
from mode_cases import G, SPEC, T, X  # noqa: E402


def pool(x):
    return F.max_pool1d(x, 2, 1)


@pytest.mark.parametrize("variant", ["eager", "module", "return_indices"])
def test_jvp_is_torchs_own(variant):
    out = ADAPTER.jvp(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    y, y_t = torch.func.jvp(pool, (torch.from_numpy(X),), (torch.from_numpy(T),))
    np.testing.assert_array_equal(out.tangent_output, y_t.numpy())
    np.testing.assert_array_equal(out.forward, y.numpy())


@pytest.mark.parametrize("variant", ["eager", "module"])
def test_double_backward_is_torchs_own(variant):
    out = ADAPTER.double_backward(SPEC, variant, "cpu", X, G, T)
    assert out.status == OK, out.message
    x, g = torch.tensor(X, requires_grad=True), torch.tensor(G, requires_grad=True)
    (dx,) = torch.autograd.grad(pool(x), x, g, create_graph=True)
    by_g, by_x = torch.autograd.grad(dx, (g, x), torch.from_numpy(T), allow_unused=True, materialize_grads=True)
    np.testing.assert_array_equal(out.grad_input, dx.detach().numpy())
    np.testing.assert_array_equal(out.grad_grad_output, by_g.numpy())
    np.testing.assert_array_equal(out.grad_grad_input, by_x.numpy())


def test_compiled_double_backward_is_an_error_with_torchs_message():
    out = ADAPTER.double_backward(SPEC, "compile", "cpu", X, G, T)
    assert out.status == ERROR
    # AOTAutograd's own refusal, as torch raised it.
    assert out.message.startswith("RuntimeError: ") and "double backward" in out.message, out.message
