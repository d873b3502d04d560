"""The TensorFlow adapter, in-process: expected values come from poolgrad/reference/ (or, for tied/NaN
inputs whose answer is TF's own business, from tf.nn called directly: that checks the adapter
passes TF's results through untouched)."""

import re

import ml_dtypes
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED  # noqa: E402
from poolgrad.adapters.tensorflow.adapter import ADAPTER  # noqa: E402
from poolgrad.reference import PoolSpec, backward, forward  # noqa: E402

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}
RTOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-6, "float64": 1e-12}
# Odd, unequal extents so SAME pads are asymmetric and an axis mix-up changes the shape.
SHAPES = {1: (2, 3, 9), 2: (2, 3, 5, 7), 3: (1, 2, 5, 4, 6)}
SPECS = {
    "max_pool": [dict(kernel_size=3, stride=2, padding="SAME"), dict(kernel_size=2, stride=1)],
    "avg_pool": [dict(kernel_size=2, stride=1), dict(kernel_size=3, stride=2, padding="SAME", count_include_pad=False)],
}


def make_case(spec_dict, shape, dtype="float32", seed=0):
    """Tie-free x (distinct integers, exact even in bfloat16) and a small-integer grad_output."""
    rng = np.random.default_rng(seed)
    spec = PoolSpec.from_dict(spec_dict)
    size = int(np.prod(shape))
    assert size <= 256, "bfloat16 holds integers exactly only up to 256"
    x = (rng.permutation(size).reshape(shape) - size // 2).astype(DTYPES[dtype])
    g = rng.integers(1, 5, forward(spec, x).shape).astype(DTYPES[dtype])
    return spec, x, g


def assert_matches_reference(spec, x, g, outcome, dtype="float32"):
    assert outcome.status == OK, outcome.message
    y, dx = forward(spec, x), backward(spec, x, g)
    assert outcome.forward.dtype == x.dtype and outcome.grad_input.dtype == x.dtype
    assert outcome.forward.shape == y.shape and outcome.grad_input.shape == x.shape
    if spec.is_max:   # routing is exact: integer-valued gradients, tie-free input
        np.testing.assert_array_equal(outcome.forward, y)
        np.testing.assert_array_equal(outcome.grad_input, dx)
    else:
        for got, want in ((outcome.forward, y), (outcome.grad_input, dx)):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL[dtype], atol=RTOL[dtype])


@pytest.mark.parametrize("variant", ["eager", "function", "xla"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("op,which", [(op, i) for op in SPECS for i in range(2)])
def test_variants_match_reference(variant, rank, op, which):
    spec, x, g = make_case({"op": op, **SPECS[op][which]}, SHAPES[rank])
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, variant, "cpu", x, g))


@pytest.mark.parametrize("variant", ["eager", "function", "xla"])
@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_dilation_runs_through_tf_nn_pool(variant, rank, op):
    spec, x, g = make_case({"op": op, "kernel_size": 2, "stride": 1, "dilation": 2}, SHAPES[rank])
    outcome = ADAPTER.run(spec, variant, "cpu", x, g)
    assert outcome.info["api"] == "pool"
    assert_matches_reference(spec, x, g, outcome)


def test_asymmetric_kernel_and_stride_keep_axes_apart():
    spec, x, g = make_case({"op": "max_pool", "kernel_size": [1, 3], "stride": [2, 1]}, SHAPES[2])
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, "eager", "cpu", x, g))


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_channels_last_round_trip_is_identity(rank):
    # A 1-wide max pool is the identity: any transpose mistake shows as a changed array.
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 1}, SHAPES[rank])
    outcome = ADAPTER.run(spec, "eager", "cpu", x, g)
    np.testing.assert_array_equal(outcome.forward, x)
    np.testing.assert_array_equal(outcome.grad_input, g)


# TF 2.21 on CPU has no half/double kernels for the 3-D pooling ops (MaxPool3D never has
# double); those may error, everything else must run and match the reference.
def _may_error(rank, dtype):
    return rank == 3 and dtype in ("float16", "float64")


@pytest.mark.parametrize("variant", ["eager", "xla"])
@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_dtypes(variant, rank, op, dtype):
    spec, x, g = make_case({"op": op, **SPECS[op][0]}, SHAPES[rank], dtype)
    outcome = ADAPTER.run(spec, variant, "cpu", x, g)
    if outcome.status != OK and _may_error(rank, dtype):
        # MaxPool3D's op definition has no float64; the others have no CPU kernel for the
        # dtype: both are errors of a call the user writes.
        assert outcome.status == ERROR and re.match(r"^\w+(Error|Exception): .+", outcome.message, re.S), outcome.message
        return
    assert_matches_reference(spec, x, g, outcome, dtype)
    if dtype == "bfloat16":
        assert outcome.grad_input.dtype == np.dtype(ml_dtypes.bfloat16)


def test_missing_kernel_is_reported_as_the_error_tf_raised():
    spec, x, g = make_case({"op": "avg_pool", "kernel_size": 2}, SHAPES[3], "float64")
    outcome = ADAPTER.run(spec, "eager", "cpu", x, g)
    assert outcome.status == ERROR
    assert outcome.message.startswith("NotFoundError: ") and "DT_DOUBLE" in outcome.message


@pytest.mark.parametrize("variant", ["eager", "function"])
def test_a_dtype_outside_the_op_definition_is_an_error_with_tfs_message(variant):
    # As a missing kernel: the user's call is the spec's, TensorFlow has nothing for its dtype.
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 2}, SHAPES[3], "float64")
    outcome = ADAPTER.run(spec, variant, "cpu", x, g)
    assert outcome.status == ERROR
    assert re.search(r"(InvalidArgument|Type)Error: .*(double|float64)", outcome.message, re.S), outcome.message


def test_with_argmax_matches_reference_and_its_indices_decode_to_the_maxima():
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 2, "stride": 2}, SHAPES[2])
    n, c, h, w = x.shape
    g = np.arange(1, g.size + 1, dtype=x.dtype).reshape(g.shape)   # one id per window
    outcome = ADAPTER.run(spec, "with_argmax", "cpu", x, g)
    assert_matches_reference(spec, x, g, outcome)
    # TF's flat index within one NHWC image: (y*W + x)*C + c; the batch is the array's own.
    flat = outcome.indices.astype(np.int64)
    assert flat.shape == g.shape and flat.max() < h * w * c
    yy, rest = np.divmod(flat, w * c)
    xx, cc = np.divmod(rest, c)
    b = np.broadcast_to(np.arange(n)[:, None, None, None], flat.shape)
    np.testing.assert_array_equal(cc, np.broadcast_to(np.arange(c)[None, :, None, None], flat.shape))
    # Non-overlapping windows: the reference routes window k's id to exactly its argmax.
    dx = backward(spec, x, g)
    np.testing.assert_array_equal(dx[b, cc, yy, xx], g)


@pytest.mark.parametrize("variant,spec_dict,shape,reason", [
    ("eager", {"op": "max_pool", "kernel_size": 2, "ceil_mode": True}, SHAPES[2], "ceil_mode"),
    ("eager", {"op": "lp_pool", "kernel_size": 2, "norm_type": 2}, SHAPES[2], "Lp"),
    ("eager", {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": "SAME"}, SHAPES[2], "excludes padding"),
    ("eager", {"op": "avg_pool", "kernel_size": 2, "divisor_override": 3}, SHAPES[2], "divisor_override"),
    # refused by TF itself, with its own message
    ("eager", {"op": "avg_pool", "kernel_size": 3, "padding": 1, "count_include_pad": False}, SHAPES[2],
     "TypeError: Expected string for argument 'padding'"),
    ("eager", {"op": "max_pool", "kernel_size": 2, "padding": 1}, SHAPES[3], "TypeError: Expected string for argument 'padding'"),
    ("eager", {"op": "max_pool", "kernel_size": 2, "padding": [[2, 0], [0, 0]]}, SHAPES[2],
     "InvalidArgumentError: "),
    ("with_argmax", {"op": "max_pool", "kernel_size": 2, "padding": [[1, 0], [0, 0]]}, SHAPES[2],
     "TypeError: Expected string for argument 'padding'"),
    ("function", {"op": "adaptive_max_pool", "output_size": 2}, SHAPES[2], "adaptive"),
    ("eager", {"op": "max_pool", "kernel_size": 2, "stride": 2, "dilation": 2}, SHAPES[2],
     "ValueError: `strides > 1` not supported in conjunction with `dilation_rate > 1`"),
    ("eager", {"op": "max_pool", "kernel_size": 2, "stride": 1, "dilation": 2, "padding": "SAME"}, SHAPES[2],
     "ValueError: pooling with 'SAME' padding is not implemented for `dilation_rate` > 1"),
    ("with_argmax", {"op": "max_pool", "kernel_size": 2}, SHAPES[3], "2-D"),
    ("with_argmax", {"op": "avg_pool", "kernel_size": 2}, SHAPES[2], "max pooling only"),
])
def test_unsupported_paths_say_why(variant, spec_dict, shape, reason):
    spec, x, g = make_case(spec_dict, shape)
    outcome = ADAPTER.run(spec, variant, "cpu", x, g)
    assert outcome.status == UNSUPPORTED and reason in outcome.message
    assert outcome.forward is None and outcome.grad_input is None


@pytest.mark.parametrize("variant", ["eager", "with_argmax"])
def test_explicit_pads_equal_to_tf_same_run_as_same(variant):
    # SHAPES[2] = 5x7, k3 s2: SAME pads are (1, 1) and (1, 1); explicit padding 1 is that.
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": 1}, SHAPES[2])
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, variant, "cpu", x, g))


def test_count_include_pad_is_fine_when_same_pads_are_zero():
    spec, x, g = make_case({"op": "avg_pool", "kernel_size": 3, "stride": 3, "padding": "SAME"}, (1, 2, 9, 6))
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, "eager", "cpu", x, g))


@pytest.mark.parametrize("rank", [1, 2])
def test_explicit_max_pads_are_passed_where_tf_nn_takes_them(rank):
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 2, "padding": [[1, 0]] * rank}, SHAPES[rank])
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, "eager", "cpu", x, g))
    xla = ADAPTER.run(spec, "xla", "cpu", x, g)   # the XLA bridge refuses them itself
    assert xla.status == UNSUPPORTED
    assert xla.message.startswith("UnimplementedError: XLA does not support pooling ops with explicit padding")


@pytest.mark.parametrize("variant", ["function", "xla"])
def test_traces_are_cached_per_spec_dtype_and_shape(variant):
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 2, "stride": 2}, (3, 2, 6, 4))
    first = ADAPTER.run(spec, variant, "cpu", x, g).info["compiles"]
    again = ADAPTER.run(spec, variant, "cpu", x + 1, g).info["compiles"]
    assert again == first
    _, x2, g2 = make_case({"op": "max_pool", "kernel_size": 2, "stride": 2}, (1, 2, 6, 4))
    assert ADAPTER.run(spec, variant, "cpu", x2, g2).info["compiles"] == first + 1


def _tf_direct(variant, x, g):
    """max_pool2d k2 s1 VALID plus its tape gradient, called on TF directly (channels-last)."""
    def fb(xt, gt):
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = tf.nn.max_pool2d(xt, 2, 1, "VALID")
        return y, tape.gradient(y, xt, output_gradients=gt)
    if variant != "eager":
        fb = tf.function(fb, jit_compile=variant == "xla")
    y, dx = fb(tf.constant(x.transpose(0, 2, 3, 1)), tf.constant(g.transpose(0, 2, 3, 1)))
    return y.numpy().transpose(0, 3, 1, 2), dx.numpy().transpose(0, 3, 1, 2)


@pytest.mark.parametrize("variant", ["eager", "function", "xla"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ties_and_nans_pass_through_untouched(variant, dtype):
    nan, inf = np.nan, np.inf
    x = np.array([[1, 1, 1, nan], [nan, 2, 2, 1], [-0.0, 0.0, -inf, inf], [inf, nan, -inf, -inf]])
    x = np.stack([x, x.T])[None].astype(DTYPES[dtype])   # (1, 2, 4, 4)
    g = (2.0 ** np.arange(18)).reshape(1, 2, 3, 3).astype(DTYPES[dtype])
    spec = PoolSpec.from_dict({"op": "max_pool", "kernel_size": 2, "stride": 1})
    outcome = ADAPTER.run(spec, variant, "cpu", x, g)
    y, dx = _tf_direct(variant, x, g)
    for got, want in ((outcome.forward, y), (outcome.grad_input, dx)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),   # bitwise: -0.0, NaN
                                      np.ascontiguousarray(want).view(np.uint8))


def test_devices_environment_and_version():
    assert ADAPTER.framework == "tensorflow"
    assert ADAPTER.version() == tf.__version__
    assert ADAPTER.devices()[0] == "cpu"
    env = ADAPTER.environment()
    assert env["tensorflow"] == tf.__version__
    assert {"cuda_build", "cudnn_build", "gpu", "onednn"} <= set(env)


@pytest.mark.skipif(bool(tf.config.list_physical_devices("GPU")), reason="a GPU is present")
def test_gpu_without_a_gpu_is_no_device():
    spec, x, g = make_case({"op": "max_pool", "kernel_size": 2}, SHAPES[2])
    outcome = ADAPTER.run(spec, "eager", "gpu", x, g)
    assert outcome.status == NO_DEVICE and outcome.message == "no GPU visible to TensorFlow"
