"""The JAX adapter, in process: results against the NumPy reference on tie-free inputs, and
pass-through (equal to calling JAX directly) where JAX's own tie/NaN behaviour is the answer."""

import ml_dtypes
import numpy as np
import pytest

jax = pytest.importorskip("jax")

from jax import lax  # noqa: E402

from poolgrad.adapters import base  # noqa: E402
from poolgrad.adapters.jax.adapter import ADAPTER  # noqa: E402
from poolgrad.reference import PoolSpec, backward, forward, output_shape  # noqa: E402

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
# Relative tolerance for sums and powers computed in the dtype (the reference rounds once).
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}
VARIANTS = ("eager", "jit")  # poolgrad's own reduce_window calls; the flax variant is tested below

OPS = {
    "max_pool": {"op": "max_pool", "kernel_size": 2, "stride": 1},
    "avg_pool": {"op": "avg_pool", "kernel_size": 2, "stride": 1, "padding": 1},
    "lp_pool": {"op": "lp_pool", "kernel_size": 2, "norm_type": 2},
    "adaptive_max_pool": {"op": "adaptive_max_pool", "output_size": 2},
    "adaptive_avg_pool": {"op": "adaptive_avg_pool", "output_size": 2},
}
SHAPES = {1: (2, 2, 6), 2: (1, 2, 4, 6), 3: (1, 2, 4, 4, 2)}


def tie_free(shape, dtype):
    """Distinct small integers: exact in every dtype, so max windows have no ties."""
    n = int(np.prod(shape))
    return (np.random.default_rng(n).permutation(n) - n // 2).reshape(shape).astype(dtype)


def probe(shape, dtype):
    """Distinct positive integers as grad_output: max routing sums stay exact."""
    return (np.arange(int(np.prod(shape))) + 1).reshape(shape).astype(dtype)


def reference_spec(spec, shape):
    """Uniform adaptive bins are the sliding window with kernel = stride = L / out (PyTorch's
    bins start at i*L/out and end at (i+1)*L/out); reference.forward does not yet take
    adaptive_avg_pool, so adaptive cases are checked against that identity."""
    if not spec.is_adaptive:
        return spec
    out = output_shape(spec, shape)[2:]
    kernel = [length // o for length, o in zip(shape[2:], out)]
    return PoolSpec.from_dict({"op": spec.op.removeprefix("adaptive_"), "kernel_size": kernel})


def check_against_reference(spec_dict, shape, dtype_name, variant):
    dtype = DTYPES[dtype_name]
    spec = PoolSpec.from_dict(spec_dict)
    x = tie_free(shape, dtype)
    g = probe(output_shape(spec, shape), dtype)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    assert out.status == base.OK, out.message
    assert out.forward.dtype == x.dtype and out.grad_input.dtype == x.dtype
    ref = reference_spec(spec, shape)
    want_y, want_dx = forward(ref, x), backward(ref, x, g)
    assert out.forward.shape == want_y.shape and out.grad_input.shape == want_dx.shape
    if spec.is_max:  # routing of tie-free windows with integer gradients is exact
        np.testing.assert_array_equal(out.forward, want_y)
        np.testing.assert_array_equal(out.grad_input, want_dx)
        return
    rtol = RTOL[dtype_name]
    for got, want in ((out.forward, want_y), (out.grad_input, want_dx)):
        want = want.astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=rtol * np.abs(want).max())


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("rank", SHAPES)
def test_every_op_and_rank(variant, op, rank):
    check_against_reference(OPS[op], SHAPES[rank], "float64", variant)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["max_pool", "avg_pool", "lp_pool"])
def test_dtypes(variant, dtype, op):
    check_against_reference(OPS[op], SHAPES[2], dtype, variant)


GEOMETRY = {
    "asymmetric_pad_max": {"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": [[1, 0], [0, 2]]},
    "asymmetric_pad_avg": {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": [[1, 0], [0, 2]],
                           "count_include_pad": False},
    "ceil_max": {"op": "max_pool", "kernel_size": 2, "stride": 2, "ceil_mode": True},
    "ceil_pad_max": {"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    "ceil_avg_include_pad": {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    "ceil_avg_exclude_pad": {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                             "count_include_pad": False},
    "ceil_lp_clipped": {"op": "lp_pool", "kernel_size": 2, "stride": 2, "ceil_mode": True, "norm_type": 4},
    "dilation_avg": {"op": "avg_pool", "kernel_size": 2, "dilation": [2, 1], "padding": 1},
    "dilation_lp": {"op": "lp_pool", "kernel_size": 2, "stride": 1, "dilation": 2, "norm_type": 2},
    "divisor_override": {"op": "avg_pool", "kernel_size": 3, "padding": 1, "divisor_override": 5},
    # ceil_mode drops the window that would start in the bottom padding: no window reads it
    "unread_pad_avg": {"op": "avg_pool", "kernel_size": [1, 3], "stride": 1, "padding": [[0, 1], [0, 1]],
                       "ceil_mode": True},
    "same": {"op": "max_pool", "kernel_size": 2, "stride": 2, "padding": "SAME"},
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", GEOMETRY)
def test_geometry(variant, case):
    # 5 x 7: odd lengths give ceil_mode a partial last window on both axes.
    check_against_reference(GEOMETRY[case], (1, 2, 5, 7), "float64", variant)


def direct_max_pool(x, g, k, s, pads=0, d=1):
    """max pooling and its VJP by calling JAX in the test: what the adapter must pass through."""
    rank = x.ndim - 2
    pool = lambda v: lax.reduce_window(v, np.asarray(-np.inf, v.dtype), lax.max, (1, 1) + (k,) * rank,
                                       (1, 1) + (s,) * rank, ((0, 0),) * 2 + ((pads, pads),) * rank,
                                       window_dilation=(1, 1) + (d,) * rank)
    y, vjp = jax.vjp(pool, x)
    return np.asarray(y), np.asarray(vjp(g)[0])


PASS_THROUGH = {
    "ties": [3, 1, 3, 3, 2, 3, 0, 3],
    "nans": [1, np.nan, 3, np.nan, 5, np.nan, 0, 2],
    "signed_zeros_infs": [0.0, -0.0, -0.0, 0.0, np.inf, np.inf, -np.inf, -np.inf],
}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("case", PASS_THROUGH)
def test_ties_and_nans_pass_through(variant, dtype, case):
    x = np.array(PASS_THROUGH[case], dtype=DTYPES[dtype]).reshape(1, 1, 8)
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 3, "stride": 1, "padding": 1})
    g = probe((1, 1, 8), x.dtype)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    want_y, want_dx = direct_max_pool(x, g, k=3, s=1, pads=1)
    assert out.status == base.OK, out.message
    # Bitwise, so signed zeros and NaNs count.
    assert out.forward.tobytes() == want_y.tobytes() and out.grad_input.tobytes() == want_dx.tobytes()


@pytest.mark.parametrize("variant", VARIANTS)
def test_dilated_max_pool_is_what_jax_does(variant):
    """jax 0.10 has no VJP for dilated max windows; the adapter must report exactly what JAX did."""
    x = tie_free((1, 1, 7), np.float32)
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "dilation": 2})
    g = probe(output_shape(spec, x.shape), np.float32)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    try:
        want_y, want_dx = direct_max_pool(x, g, k=2, s=2, d=2)
    except Exception as e:
        assert out.status == base.ERROR and out.message.startswith(f"{type(e).__name__}: ")
        return
    assert out.status == base.OK
    np.testing.assert_array_equal(out.grad_input, want_dx)


@pytest.mark.parametrize("variant", VARIANTS)
def test_lp_gradient_of_a_zero_window_is_passed_through(variant):
    x = np.array([[[0.0, 0.0, 1.0, 2.0]]])
    g = np.ones((1, 1, 2))
    out = ADAPTER.run(PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 2, "norm_type": 2}), variant, "cpu", x, g)
    _, vjp = jax.vjp(lambda v: lax.reduce_window(v ** 2.0, 0.0, lax.add, (1, 1, 2), (1, 1, 2), "VALID") ** 0.5, x)
    assert out.status == base.OK
    np.testing.assert_array_equal(out.grad_input, np.asarray(vjp(g)[0]))  # NaN where the window sums to 0


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("op", ["adaptive_max_pool", "adaptive_avg_pool"])
def test_non_uniform_adaptive_is_unsupported(variant, op):
    spec = PoolSpec.from_dict({"op": op, "output_size": [2, 4]})
    out = ADAPTER.run(spec, variant, "cpu", tie_free((1, 1, 4, 6), np.float32), np.ones((1, 1, 2, 4), np.float32))
    assert out.status == base.UNSUPPORTED
    assert "non-uniform bins" in out.message


def test_jit_reuses_one_trace_per_spec():
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 1, "padding": [[0, 1]]})
    x, g = tie_free((3, 2, 5), np.float32), probe((3, 2, 5), np.float32)
    first = ADAPTER.run(spec, "jit", "cpu", x, g).info["compiles"]
    again = ADAPTER.run(spec, "jit", "cpu", x + 1, g).info["compiles"]
    other = ADAPTER.run(PoolSpec.from_dict({"op": "max_pool", "kernel_size": 3, "stride": 1, "padding": 1}),
                        "jit", "cpu", x, g).info["compiles"]
    assert again == first and other == first + 1


def test_jax_exceptions_become_errors():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 2})
    out = ADAPTER.run(spec, "eager", "cpu", np.ones((1, 1, 4)), np.ones((1, 1, 3)))  # wrong grad shape
    assert out.status == base.ERROR and out.message.split(":")[0].endswith("Error")


def test_devices_and_environment():
    assert ADAPTER.devices()[0] == "cpu"
    assert ADAPTER.version() == jax.__version__
    env = ADAPTER.environment()
    assert env["jax"] == jax.__version__ and "cpu" in env["devices"]


def test_gpu_without_a_gpu_is_no_device():
    if "gpu" in ADAPTER.devices():
        pytest.skip("a GPU is visible to JAX")
    x = np.ones((1, 1, 4), np.float32)
    out = ADAPTER.run(PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2}), "jit", "gpu", x, np.ones((1, 1, 2), np.float32))
    assert out.status == base.NO_DEVICE and "no GPU" in out.message


@pytest.mark.parametrize("variant,spec", [
    ("eager", {"op": "avg_pool2d", "kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True}),
    ("eager", {"op": "avg_pool2d", "kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
    ("eager", {"op": "lp_pool1d", "kernel_size": 2, "stride": 2, "ceil_mode": True, "norm_type": 2}),
    ("flax", {"op": "avg_pool2d", "kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}),
])
def test_divisors_and_scales_are_jaxs_own(monkeypatch, variant, spec):
    """The adapter counts a window's elements with JAX (a reduce_window over ones) or leaves it
    to flax, never with the reference: with the reference's counting disabled the results are
    still the spec's."""
    if variant == "flax":
        pytest.importorskip("flax")
    import poolgrad.reference.geometry
    spec = PoolSpec.from_dict({**spec, "dtype": "float64"})
    x = tie_free((1, 1, 5) if spec.op == "lp_pool" else (1, 1, 5, 5), np.float64)
    y_ref = forward(spec, x)
    g = np.ones(y_ref.shape)
    dx_ref = backward(spec, x, g)

    def refuse(*_):
        raise AssertionError("the adapter asked the reference for window counts")
    monkeypatch.setattr(poolgrad.reference.geometry.Geometry, "window_counts", refuse)
    monkeypatch.setattr(poolgrad.reference.geometry, "window_volume", refuse)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    assert out.status == base.OK, out.message
    np.testing.assert_allclose(out.forward, y_ref, rtol=1e-12)
    np.testing.assert_allclose(out.grad_input, dx_ref, rtol=1e-12)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype,side", [("float16", 64), ("bfloat16", 32)])
def test_counts_of_large_windows_are_exact_in_half_precision(variant, dtype, side):
    """A window of more taps than the dtype counts exactly (2048 in float16, 256 in bfloat16)
    divides by its size, as jnp.ones' float32 counts and flax's do: the gradient of a global
    average over 4096 or 1024 elements is g / taps, not g / 2048 or g / 256."""
    spec = PoolSpec.from_dict({"op": "adaptive_avg_pool2d", "output_size": 1, "dtype": dtype})
    x = np.ones((1, 1, side, side), DTYPES[dtype])
    g = np.ones((1, 1, 1, 1), DTYPES[dtype])
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    assert out.status == base.OK, out.message
    assert np.all(out.grad_input.astype(np.float64) == 1.0 / side ** 2)


# -- flax: flax.linen's own pooling, called as flax users call it ---------------------------

FLAX_SPECS = {
    "max_same": ({"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": "SAME"}, (2, 3, 5, 7)),
    "max_pairs_1d": ({"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": [[2, 0]]}, (2, 3, 9)),
    "avg_include_pad": ({"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1}, (1, 2, 5, 7)),
    "avg_exclude_pad_3d": ({"op": "avg_pool", "kernel_size": 2, "padding": [[1, 0], [0, 1], [1, 1]],
                            "count_include_pad": False}, (1, 2, 3, 4, 5)),
    "avg_same_exclude_pad": ({"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": "SAME",
                              "count_include_pad": False}, (1, 2, 6, 5)),
    "adaptive_avg": ({"op": "adaptive_avg_pool", "output_size": [2, 1]}, (1, 2, 4, 6)),
}


def direct_flax(spec_dict, x, g):
    """The same pooling with flax called in the test, NHWC, jitted, as a flax user writes it
    (64-bit types only for float64 cases)."""
    from flax import linen
    rank = x.ndim - 2
    if spec_dict["op"] == "adaptive_avg_pool":
        window = tuple(length // o for length, o in zip(x.shape[2:], spec_dict["output_size"]))
        pool = lambda v: linen.avg_pool(v, window, strides=window)
    else:
        k, padding = spec_dict["kernel_size"], spec_dict["padding"]
        if isinstance(padding, int):
            padding = [(padding, padding)] * rank
        kwargs = {"strides": (spec_dict.get("stride", k),) * rank, "padding": padding}
        if spec_dict["op"] == "avg_pool":
            pool = lambda v: linen.avg_pool(v, (k,) * rank, count_include_pad=spec_dict.get(
                "count_include_pad", True), **kwargs)
        else:
            pool = lambda v: linen.max_pool(v, (k,) * rank, **kwargs)

    @jax.jit
    def forward_backward(v, t):
        y, vjp = jax.vjp(pool, v)
        return y, vjp(t.astype(y.dtype))[0]
    with jax.enable_x64(x.dtype == np.float64):
        y, dx = forward_backward(np.moveaxis(x, 1, -1), np.moveaxis(g, 1, -1))
    return np.moveaxis(np.asarray(y), -1, 1), np.moveaxis(np.asarray(dx), -1, 1)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", FLAX_SPECS)
def test_flax_results_are_flaxs_own(case, dtype):
    pytest.importorskip("flax")
    spec_dict, shape = FLAX_SPECS[case]
    x = tie_free(shape, DTYPES[dtype])
    g = probe(output_shape(PoolSpec.from_dict(spec_dict), shape), x.dtype)
    out = ADAPTER.run(PoolSpec.from_dict(spec_dict), "flax", "cpu", x, g)
    assert out.status == base.OK, out.message
    want_y, want_dx = direct_flax(spec_dict, x, g)
    for got, want in ((out.forward, want_y), (out.grad_input, want_dx)):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("case", FLAX_SPECS)
def test_flax_matches_the_reference(case):
    pytest.importorskip("flax")
    check_against_reference(FLAX_SPECS[case][0], FLAX_SPECS[case][1], "float64", "flax")


def test_flax_count_include_pad_changes_exactly_the_padded_windows():
    """flax's own count_include_pad: divided by the window's size or by its real elements, the
    border windows differ as the reference says and the inner ones agree."""
    pytest.importorskip("flax")
    shape = (1, 2, 5, 6)
    x = tie_free(shape, np.float64)
    ys = {}
    for include in (True, False):
        spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 3, "stride": 1, "padding": 1,
                                   "count_include_pad": include})
        out = ADAPTER.run(spec, "flax", "cpu", x, np.ones(output_shape(spec, shape)))
        assert out.status == base.OK, out.message
        np.testing.assert_allclose(out.forward, forward(spec, x), rtol=1e-12, atol=1e-12)
        ys[include] = (out.forward, forward(spec, x))
    differs = ~np.isclose(ys[True][0], ys[False][0], rtol=1e-12, atol=0)
    np.testing.assert_array_equal(differs, ~np.isclose(ys[True][1], ys[False][1], rtol=1e-12, atol=0))
    assert differs[..., 0, :].any() and not differs[..., 1:-1, 1:-1].any()


@pytest.mark.parametrize("spec,reason", [
    ({"op": "lp_pool", "kernel_size": 2, "norm_type": 2}, "no Lp pooling"),
    ({"op": "max_pool", "kernel_size": 2, "ceil_mode": True}, "no ceil_mode"),
    ({"op": "max_pool", "kernel_size": 2, "dilation": 2}, "no dilation"),
    ({"op": "avg_pool", "kernel_size": 2, "divisor_override": 3}, "no divisor_override"),
    ({"op": "adaptive_max_pool", "output_size": [2, 4]}, "non-uniform bins"),
])
def test_flax_has_no_argument_for(spec, reason):
    pytest.importorskip("flax")
    x = tie_free((1, 1, 4, 6), np.float32)
    out = ADAPTER.run(PoolSpec.from_dict(spec), "flax", "cpu", x, np.ones((1, 1, 2, 3), np.float32))
    assert out.status == base.UNSUPPORTED and reason in out.message


def test_flax_missing_is_not_installed(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "flax", None)  # import flax raises ImportError
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": [1, 3]})  # a spec no other test jits
    out = ADAPTER.run(spec, "flax", "cpu", np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 3, 1), np.float32))
    assert out.status == base.NOT_INSTALLED and "flax" in out.message



def _zero_stride(*_):
    """A pooling call whose arguments JAX refuses while tracing (no spec makes one: every
    catalogue spec is a call JAX accepts)."""
    return lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 1, 2), (1, 1, 0), "VALID")


@pytest.mark.parametrize("variant", ("eager", "jit", "flax"))
def test_refused_arguments_are_unsupported_with_jaxs_message(monkeypatch, variant):
    import poolgrad.adapters.jax.adapter as jax_adapter
    monkeypatch.setattr(jax_adapter, "_pool_fn", _zero_stride)
    monkeypatch.setattr(jax_adapter, "_flax_pool_fn", _zero_stride)
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": [5]})  # a spec no other test jits
    x = tie_free((1, 1, 5), np.float32)
    with pytest.raises(Exception) as raised:
        _zero_stride(spec, x.shape)(x)
    out = ADAPTER.run(spec, variant, "cpu", x, np.ones((1, 1, 1), np.float32))
    assert out.status == base.UNSUPPORTED
    assert out.message == f"{raised.type.__name__}: {raised.value}"
