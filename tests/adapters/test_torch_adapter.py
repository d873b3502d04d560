"""The torch adapter, in process: every variant, op, rank and dtype against the NumPy reference,
the not-expressible paths, the compile cache, and pass-through of torch's own tie/NaN answers."""

import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from poolgrad.adapters.base import ERROR, NO_DEVICE, OK, UNSUPPORTED  # noqa: E402
from poolgrad.adapters.torch.adapter import ADAPTER  # noqa: E402
from poolgrad.reference import PoolSpec, backward, forward  # noqa: E402

DTYPES = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
          "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}
# Relative tolerance for avg/lp: a few ulps of the dtype (max ops are compared exactly).
RTOL = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}
# At most 256 elements, so that distinct multiples of 1/128 in [-1, 1) are exact in bfloat16.
SHAPES = {1: (2, 3, 10), 2: (2, 2, 6, 5), 3: (1, 2, 5, 4, 6)}
SPECS = {
    "max_pool": {"op": "max_pool", "kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2},
    "max_pool_ceil": {"op": "max_pool", "kernel_size": 2, "stride": 2, "ceil_mode": True},
    "avg_pool": {"op": "avg_pool", "kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    "avg_pool_ceil": {"op": "avg_pool", "kernel_size": 2, "stride": 2, "ceil_mode": True, "padding": 1},
    "lp_pool": {"op": "lp_pool", "kernel_size": 3, "stride": 2, "norm_type": 2, "ceil_mode": True},
    "lp_pool_p3": {"op": "lp_pool", "kernel_size": 2, "norm_type": 3},
    "adaptive_max_pool": {"op": "adaptive_max_pool", "output_size": 3},
    "adaptive_avg_pool": {"op": "adaptive_avg_pool", "output_size": 4},
}
EAGER_VARIANTS = ("eager", "channels_last", "module", "return_indices")


def distinct_input(rank, dtype, seed=0):
    """Tie-free: every element of the batch is a different multiple of 1/128."""
    shape = SHAPES[rank]
    n = int(np.prod(shape))
    values = (np.random.default_rng(seed).permutation(n) - n // 2) / 128.0
    return values.reshape(shape).astype(DTYPES[dtype])


def probe_grad(spec, x, seed=1):
    """Small distinct-ish integers: exact in every dtype, so max routing compares exactly."""
    y = forward(spec, x)
    return np.random.default_rng(seed).integers(1, 8, size=y.shape).astype(x.dtype)


def assert_matches_reference(spec, x, g, out, dtype):
    assert out.status == OK, out.message
    assert out.forward.dtype == x.dtype and out.grad_input.dtype == x.dtype
    want_y, want_dx = forward(spec, x), backward(spec, x, g)
    assert out.forward.shape == want_y.shape and out.grad_input.shape == x.shape
    if spec.is_max:
        np.testing.assert_array_equal(out.forward, want_y)
        np.testing.assert_array_equal(out.grad_input, want_dx)
    else:
        for got, want in ((out.forward, want_y), (out.grad_input, want_dx)):
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                       rtol=RTOL[dtype], atol=RTOL[dtype])


def expected_indices(x, y):
    """torch's index from the reference forward: on tie-free input each output value occurs
    exactly once in its (n, c) plane, and the index is its flat spatial position."""
    planes = x.reshape(x.shape[:2] + (-1,)).astype(np.float64)
    outs = y.reshape(y.shape[:2] + (-1,)).astype(np.float64)
    hits = planes[:, :, None, :] == outs[:, :, :, None]
    assert (hits.sum(axis=-1) == 1).all()
    return hits.argmax(axis=-1).reshape(y.shape)


def lacks_cpu_kernel(op, rank, dtype):
    """torch 2.13 on CPU: avg_pool3d (which lp_pool3d calls) has no float16/bfloat16 kernel,
    in either memory format."""
    return op in ("avg_pool", "lp_pool") and rank == 3 and dtype in ("float16", "bfloat16")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rank", (1, 2, 3))
@pytest.mark.parametrize("name", SPECS)
@pytest.mark.parametrize("variant", EAGER_VARIANTS)
def test_variant_matches_reference(variant, name, rank, dtype):
    spec = PoolSpec.from_dict(SPECS[name])
    x = distinct_input(rank, dtype)
    g = probe_grad(spec, x)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    if variant == "channels_last" and rank == 1:
        assert out.status == UNSUPPORTED and "1-D" in out.message
        return
    if variant == "return_indices" and not spec.is_max:
        assert out.status == UNSUPPORTED and "indices" in out.message
        return
    if lacks_cpu_kernel(spec.op, rank, dtype):  # torch accepts the call: an error, not a refusal
        assert out.status == ERROR and "not implemented for" in out.message
        return
    assert_matches_reference(spec, x, g, out, dtype)
    if variant == "return_indices":
        assert out.indices.dtype == np.int64
        np.testing.assert_array_equal(out.indices, expected_indices(x, forward(spec, x)))
    else:
        assert out.indices is None
    if variant == "channels_last":
        # torch really ran in channels-last memory (every 2-D op keeps the format in its output;
        # in 3-D only max_pool does), and the arrays came back channels-first.
        assert out.info["output_channels_last"] is (rank == 2 or spec.op == "max_pool")
        assert out.forward.flags.c_contiguous and out.grad_input.flags.c_contiguous


# No window clipped by ceil_mode here: inductor's avg/lp backward divides such a window by the
# full kernel (torch 2.13), a torch divergence that the conformance run reports, not this test.
COMPILE_SUBSET = [("max_pool", 2, "float32"), ("avg_pool_ceil", 3, "bfloat16"),
                  ("lp_pool_p3", 1, "float16"), ("adaptive_avg_pool", 2, "float64")]


@pytest.mark.parametrize("name,rank,dtype", COMPILE_SUBSET)
def test_compile_matches_reference(name, rank, dtype):
    spec = PoolSpec.from_dict(SPECS[name])
    x = distinct_input(rank, dtype)
    g = probe_grad(spec, x)
    out = ADAPTER.run(spec, "compile", "cpu", x, g)
    assert_matches_reference(spec, x, g, out, dtype)
    assert out.info["compiles"] >= 1


def test_compile_reuses_its_cache_for_the_same_spec():
    spec = PoolSpec.from_dict(SPECS["max_pool"])
    x = distinct_input(2, "float32", seed=5)
    g = probe_grad(spec, x)
    first = ADAPTER.run(spec, "compile", "cpu", x, g)
    again = ADAPTER.run(spec, "compile", "cpu", distinct_input(2, "float32", seed=6), g)
    assert first.status == again.status == OK
    assert again.info["compiles"] == first.info["compiles"]
    stride_one = PoolSpec.from_dict({**SPECS["max_pool"], "stride": 1})
    other = ADAPTER.run(stride_one, "compile", "cpu", x, probe_grad(stride_one, x))
    assert other.status == OK, other.message
    assert other.info["compiles"] > again.info["compiles"]


def test_a_compile_bundle_gives_each_member_its_bits_alone_from_one_compilation():
    """run_bundle: each member's arrays are those it gets in a call of its own, bit for bit; a
    member with no call (refused by torch, not expressible) gets run's answer without joining;
    a second call of the same shapes reuses the bundle's compiled function."""
    specs = [PoolSpec.from_dict(d) for d in (SPECS["max_pool_ceil"], SPECS["avg_pool"], REFUSED[1][0],
                                             {"op": "max_pool", "kernel_size": 3, "padding": [[0, 1]]})]
    xs = [distinct_input(2, "float32", seed=9), distinct_input(1, "bfloat16", seed=10), distinct_input(1, "float32"),
          distinct_input(1, "float32")]
    gs = [probe_grad(specs[0], xs[0]), probe_grad(specs[1], xs[1]), np.ones((2, 3, 1), np.float32), np.ones((2, 3, 1), np.float32)]
    bundled = ADAPTER.run_bundle(specs, "compile", "cpu", xs, gs)
    alone = [ADAPTER.run(*member[:1], "compile", "cpu", *member[1:]) for member in zip(specs, xs, gs)]
    assert [o.status for o in bundled] == [o.status for o in alone] == [OK, OK, UNSUPPORTED, UNSUPPORTED]
    for b, a in zip(bundled, alone):
        assert b.message == a.message
        for name in ("forward", "grad_input"):
            assert (getattr(b, name) is None) == (getattr(a, name) is None)
            if getattr(a, name) is not None:
                assert getattr(b, name).dtype == getattr(a, name).dtype
                assert getattr(b, name).tobytes() == getattr(a, name).tobytes()
    again = ADAPTER.run_bundle(specs, "compile", "cpu", [xs[0] * 2, *xs[1:]], gs)
    assert again[0].info["compiles"] == alone[1].info["compiles"]
    np.testing.assert_array_equal(again[0].forward, bundled[0].forward * 2)


NOT_EXPRESSIBLE = [
    ({"op": "max_pool", "kernel_size": 3, "padding": [[0, 1]]}, 1, "asymmetric"),
    ({"op": "avg_pool", "kernel_size": 2, "stride": 1, "padding": "SAME"}, 2, "SAME"),
    ({"op": "avg_pool", "kernel_size": 2, "dilation": 2}, 2, "dilation"),
    ({"op": "lp_pool", "kernel_size": 2, "dilation": 2, "norm_type": 2}, 1, "dilation"),
    ({"op": "lp_pool", "kernel_size": 2, "padding": 1, "norm_type": 2}, 2, "padding"),
    ({"op": "avg_pool", "kernel_size": 2, "divisor_override": 3}, 1, "divisor_override"),
]


@pytest.mark.parametrize("variant", ("eager", "compile", "module"))
@pytest.mark.parametrize("spec_dict,rank,reason", NOT_EXPRESSIBLE)
def test_not_expressible_is_unsupported_with_reason(spec_dict, rank, reason, variant):
    spec = PoolSpec.from_dict(spec_dict)
    x = distinct_input(rank, "float32")
    out = ADAPTER.run(spec, variant, "cpu", x, np.ones_like(forward(spec, x)))
    assert out.status == UNSUPPORTED
    assert reason in out.message


# Specs torch has arguments for and refuses itself: unsupported, with what torch raised.
REFUSED = [
    ({"op": "max_pool", "kernel_size": 3, "padding": 2}, 2),
    ({"op": "max_pool", "kernel_size": 3, "padding": 2}, 1),
    ({"op": "avg_pool", "kernel_size": 3, "padding": 2}, 2),
    # torch bounds 3-D padding by the kernel, not the dilated window (pad 2 <= 4 // 2 is refused)
    ({"op": "max_pool", "kernel_size": 2, "dilation": 3, "padding": 2}, 3),
]


@pytest.mark.parametrize("variant", ("eager", "compile", "module", "channels_last"))
@pytest.mark.parametrize("spec_dict,rank", REFUSED)
def test_refused_arguments_are_unsupported_with_torchs_message(spec_dict, rank, variant):
    if variant == "channels_last" and rank == 1:
        pytest.skip("channels_last has no 1-D form")
    spec = PoolSpec.from_dict(spec_dict)
    x = distinct_input(rank, "float32")
    kw = {"kernel_size": spec.kernel_size, "padding": spec.padding, "dilation": spec.dilation}
    if spec.op == "avg_pool":
        del kw["dilation"]
    with pytest.raises(Exception) as raised:  # torch called directly
        getattr(F, f"{spec.op}{rank}d")(torch.from_numpy(x), **kw)
    y = np.ones((x.shape[0], x.shape[1]) + (1,) * rank, np.float32)
    out = ADAPTER.run(spec, variant, "cpu", x, y)
    assert out.status == UNSUPPORTED
    assert out.message == f"{raised.type.__name__}: {raised.value}"


def test_same_padding_that_resolves_symmetric_runs():
    spec = PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 3, "stride": 1, "padding": "SAME"})
    x = distinct_input(2, "float64")  # lengths 6 and 5: SAME pads (1, 1) on both axes
    g = probe_grad(spec, x)
    assert_matches_reference(spec, x, g, ADAPTER.run(spec, "eager", "cpu", x, g), "float64")


def test_torch_exception_is_error_with_its_type_and_text():
    spec = PoolSpec.from_dict(SPECS["avg_pool"])
    x = distinct_input(2, "float32")
    wrong = np.ones((1, 1, 1, 1), np.float32)
    out = ADAPTER.run(spec, "eager", "cpu", x, wrong)
    assert out.status == ERROR
    assert out.message.startswith("RuntimeError: ") and len(out.message) > len("RuntimeError: ")


def test_gpu_without_cuda_is_no_device():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    spec = PoolSpec.from_dict(SPECS["max_pool"])
    x = distinct_input(2, "float32")
    out = ADAPTER.run(spec, "eager", "gpu", x, probe_grad(spec, x))
    assert out.status == NO_DEVICE and out.message == "no CUDA device present"
    assert ADAPTER.devices() == ["cpu"]


def test_unknown_variant_is_refused():
    spec = PoolSpec.from_dict(SPECS["max_pool"])
    x = distinct_input(2, "float32")
    with pytest.raises(ValueError, match="unknown torch variant"):
        ADAPTER.run(spec, "xla", "cpu", x, probe_grad(spec, x))


def test_version_and_environment():
    assert ADAPTER.version() == torch.__version__
    env = ADAPTER.environment()
    assert env["torch"] == torch.__version__ and env["allow_tf32"] is False
    assert {"cuda", "cudnn", "gpu_name", "deterministic_algorithms", "num_threads"} <= set(env)


# Ties, NaN (one and several per window), signed zeros and infinities: whatever torch answers,
# the adapter must hand back unchanged. Compared with torch called directly (in float32, where
# the test can build the tensors without the adapter's conversions).
SPECIAL = np.array([[[3, 3, 1, 2, np.nan, 5, np.nan, 2, -0.0, 0.0, -1, np.inf,
                      np.inf, 1, -np.inf, -np.inf, np.nan, np.nan, np.nan, np.nan]]], np.float32)
DIRECT = [("max_pool", {"op": "max_pool", "kernel_size": 2, "stride": 2}, F.max_pool2d,
           {"kernel_size": (2, 2), "stride": (2, 2)}),
          ("adaptive_max_pool", {"op": "adaptive_max_pool", "output_size": 2}, F.adaptive_max_pool2d,
           {"output_size": (2, 2)}),
          ("avg_pool", {"op": "avg_pool", "kernel_size": 2}, F.avg_pool2d, {"kernel_size": (2, 2)}),
          ("lp_pool", {"op": "lp_pool", "kernel_size": 2, "norm_type": 2}, F.lp_pool2d,
           {"kernel_size": (2, 2), "norm_type": 2.0})]


@pytest.mark.parametrize("variant", ("eager", "channels_last", "module"))
@pytest.mark.parametrize("name,spec_dict,fn,kwargs", DIRECT, ids=[d[0] for d in DIRECT])
def test_special_values_pass_through_untouched(name, spec_dict, fn, kwargs, variant):
    x = SPECIAL.reshape(1, 1, 4, 5)
    spec = PoolSpec.from_dict(spec_dict)
    g = np.arange(1, 1 + int(np.prod(forward(spec, x).shape)), dtype=np.float32).reshape(forward(spec, x).shape)
    out = ADAPTER.run(spec, variant, "cpu", x, g)
    xt = torch.tensor(x, requires_grad=True)
    y = fn(xt, **kwargs)
    y.backward(torch.tensor(g))
    assert out.status == OK, out.message
    np.testing.assert_array_equal(out.forward, y.detach().numpy())
    np.testing.assert_array_equal(out.grad_input, xt.grad.numpy())
    # signed zeros included
    assert np.array_equal(np.signbit(out.forward), np.signbit(y.detach().numpy()))
