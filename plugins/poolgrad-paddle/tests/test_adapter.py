"""The paddle adapter against poolgrad's NumPy reference (never against paddle itself), in this
process: paddle is imported here, as in a worker."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("paddle")

from poolgrad import reference  # noqa: E402
from poolgrad.adapters.base import ERROR, OK, UNSUPPORTED  # noqa: E402
from poolgrad.reference import PoolSpec  # noqa: E402
from poolgrad.reports import synthetic  # noqa: E402
from poolgrad_paddle.adapter import ADAPTER  # noqa: E402

RNG = np.random.default_rng(0)


def spec(**kw):
    return PoolSpec.from_dict(kw)


def probe(s, x):
    """A grad_output of the spec's output shape whose entries are distinct powers of two."""
    shape = reference.forward(s, x).shape
    return (2.0 ** (np.arange(np.prod(shape)) % 20)).reshape(shape).astype(x.dtype)


def conforms(s, x, out):
    g = probe(s, x)
    np.testing.assert_array_equal(out.forward, reference.forward(s, x))
    np.testing.assert_allclose(out.grad_input, reference.backward(s, x, g), rtol=1e-6)


@pytest.mark.parametrize("variant", ["eager", "channels_last", "to_static"])
def test_distinct_values_conform_in_every_layout(variant):
    s = spec(op="max_pool2d", kernel_size=3, stride=2, padding=1)
    x = RNG.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float32)
    out = ADAPTER.run(s, variant, "cpu", x, probe(s, x))
    assert out.status == OK, out.message
    assert out.forward.shape == (2, 3, 4, 3)  # channels-first, whatever the call's layout
    conforms(s, x, out)


def test_a_tie_routes_to_the_first_maximum():
    # The measurement: one 2x2 window with two equal maxima, the gradient on the first.
    s = spec(op="max_pool2d", kernel_size=2)
    x = np.array([[[[1, 1], [0, 0]]]], np.float32)
    out = ADAPTER.run(s, "eager", "cpu", x, np.ones((1, 1, 1, 1), np.float32))
    np.testing.assert_array_equal(out.grad_input, reference.backward(s, x, np.ones((1, 1, 1, 1), np.float32)))
    assert out.grad_input[0, 0, 0, 0] == 1


def test_the_mask_is_the_flat_index_in_each_plane():
    s = spec(op="max_pool3d", kernel_size=2)
    x = RNG.permutation(2 * 2 * 4 * 4 * 4).reshape(2, 2, 4, 4, 4).astype(np.float64)
    out = ADAPTER.run(s, "return_mask", "cpu", x, probe(s, x))
    planes = x.reshape(4, -1)
    picked = np.take_along_axis(planes, out.indices.reshape(4, -1).astype(np.int64), axis=1)
    np.testing.assert_array_equal(picked.reshape(out.forward.shape), out.forward)
    conforms(s, x, out)


def test_avg_exclusive_follows_count_include_pad():
    for include in (True, False):
        s = spec(op="avg_pool1d", kernel_size=3, stride=2, padding=1, count_include_pad=include)
        x = RNG.standard_normal((1, 2, 7)).astype(np.float32)
        out = ADAPTER.run(s, "eager", "cpu", x, probe(s, x))
        np.testing.assert_allclose(out.forward, reference.forward(s, x), rtol=1e-6)


def test_bfloat16_reaches_paddle_and_its_missing_kernel_is_an_error():
    s, x, g = synthetic.tie_case("bfloat16")
    out = ADAPTER.run(PoolSpec.from_dict(s), "eager", "cpu", x, g)
    assert out.status == ERROR and "bfloat16" in out.message and "NotFound" in out.message


def test_to_static_float16_without_a_kernel_is_an_error_as_in_eager():
    # to_static's program builder raises TypeError for a dtype the op has no kernel for: no refusal
    s, x = spec(op="adaptive_max_pool2d", output_size=2, dtype="float16"), np.zeros((1, 1, 4, 4), np.float16)
    out = ADAPTER.run(s, "to_static", "cpu", x, np.ones((1, 1, 2, 2), np.float16))
    assert out.status == ERROR and "max_pool2d_with_index" in out.message and "float16" in out.message


@pytest.mark.parametrize("variant", ["eager", "return_mask", "to_static"])
def test_fractional_max_pool_pools_the_spec_regions_through_random_u(variant):
    # overlapping regions of size 2 in 2-D (kernel_size), and unequal non-overlapping ones in 3-D
    for regions in ([[[0, 2], [1, 3], [3, 5]], [[0, 2], [2, 4], [4, 6]]],
                    [[[0, 1], [1, 2], [2, 3], [3, 5]], [[0, 1], [1, 3]], [[0, 1], [1, 2], [2, 4]]]):
        s = spec(op=f"fractional_max_pool{len(regions)}d", regions=regions)
        x = RNG.standard_normal((2, 3, *[r[-1][1] for r in regions])).astype(np.float32)
        out = ADAPTER.run(s, variant, "cpu", x, probe(s, x))
        assert out.status == OK, out.message
        conforms(s, x, out)


def test_arguments_paddle_refuses_are_unsupported_with_its_message():
    # paddle's API refuses ceil_mode with padding "VALID" (a ValueError before any kernel).
    s = spec(op="max_pool2d", kernel_size=2, padding="VALID", ceil_mode=True)
    x = np.zeros((1, 1, 5, 5), np.float32)
    out = ADAPTER.run(s, "eager", "cpu", x, np.ones((1, 1, 3, 3), np.float32))
    assert out.status == UNSUPPORTED and "VALID" in out.message


def test_a_forward_of_another_shape_comes_back_without_a_gradient():
    # ceil_mode over length 5, k2 s2 p1: paddle keeps a window in the right padding (4 outputs, the spec 3).
    s = spec(op="max_pool1d", kernel_size=2, stride=2, padding=1, ceil_mode=True)
    x = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
    out = ADAPTER.run(s, "eager", "cpu", x, np.ones((1, 1, 3), np.float32))
    assert out.status == OK and out.forward.shape == (1, 1, 4) and out.grad_input is None


def test_double_backward_runs_for_avg_and_max_has_no_rule_an_error():
    s = spec(op="avg_pool2d", kernel_size=2)
    x = RNG.standard_normal((1, 1, 4, 4)).astype(np.float32)
    v = RNG.standard_normal(x.shape).astype(np.float32)
    out = ADAPTER.double_backward(s, "eager", "cpu", x, probe(s, x), v)
    assert out.status == OK, out.message
    # d/dg of sum(dx * v) for a linear pool is the pool of v
    np.testing.assert_allclose(out.grad_grad_output, reference.forward(s, v), rtol=1e-6)
    np.testing.assert_array_equal(out.grad_grad_input, np.zeros_like(x))
    m = spec(op="max_pool2d", kernel_size=2)
    out = ADAPTER.double_backward(m, "eager", "cpu", x, probe(m, x), v)
    assert out.status == ERROR and "Pool op grad grad only supports avgpool" in out.message, out.message


def test_a_fatal_signal_kills_the_process_instead_of_paddles_handler_hanging_it():
    code = "import os, faulthandler; faulthandler.enable(); import poolgrad_paddle.adapter; os.abort()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGABRT
    assert "Fatal Python error: Aborted" in done.stderr and "C++ Traceback" not in done.stderr
