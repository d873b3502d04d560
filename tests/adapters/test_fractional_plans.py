"""How torch and TensorFlow are told a case's fractional regions: pure arithmetic on the
planners' answers (no framework imported), each checked against the framework's own rule as
its kernel source states it (torch's generate_intervals, TensorFlow's FractionalMaxPool loop)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poolgrad.adapters import tensorflow as tf_plan
from poolgrad.adapters import torch as torch_plan
from poolgrad.adapters.base import Unsupported
from poolgrad.cases.geometry_classes import fractional_regions
from poolgrad.reference import PoolSpec
from poolgrad.suite.fuzz import fractional_regions as drawn_regions

DTYPES = ("float16", "bfloat16", "float32", "float64")


def _spec(regions, dtype="float32"):
    return PoolSpec.from_dict({"op": f"fractional_max_pool{len(regions)}d", "regions": regions, "dtype": dtype})


def _torch_windows(kw, shape):
    """The windows torch pools with the plan's arguments, per spatial dim: generate_intervals
    (aten/src/ATen/native/FractionalMaxPooling.h) in float64, the sample of each dim read where
    the kernel reads it (2-D: W then H; 3-D: T, H, W)."""
    rank = len(shape) - 2
    samples = kw["_random_samples"][::-1] if rank == 2 else kw["_random_samples"]
    out = []
    for u, length, k, n in zip(samples, shape[2:], kw["kernel_size"], kw["output_size"]):
        alpha = (length - k) / (n - 1) if n > 1 else 0.0
        starts = [int((i + u) * alpha) - int(u * alpha) for i in range(n - 1)] + [length - k]
        out.append([[s, s + k] for s in starts])
    return out


@pytest.mark.parametrize("shape", [(1, 2, 7, 7), (1, 1, 6, 6), (2, 1, 7, 4), (1, 1, 5, 3, 4), (1, 1, 4, 4, 4)])
def test_torch_samples_give_the_catalogues_windows(shape):
    regions = [fractional_regions("fixed_size", n) for n in shape[2:]]
    kw = torch_plan.plan(_spec(regions, "float64"), "eager", shape)
    assert 0 <= min(kw["_random_samples"]) and max(kw["_random_samples"]) < 1
    assert _torch_windows(kw, shape) == regions


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(DTYPES))
def test_torch_samples_reproduce_every_start_sequence_the_formula_gives(data, dtype):
    """Starts made by torch's formula from any sample are derived back to a sample that gives
    them, in the dtype torch computes them in (the input's)."""
    length = data.draw(st.integers(2, 12))
    kernel = data.draw(st.integers(1, length - 1))
    out = data.draw(st.integers(1, length - kernel + 1))
    u = data.draw(st.floats(0, 1, exclude_max=True))
    starts = torch_plan.torch_intervals(u, length, out, kernel, dtype)
    regions = [[[s, s + kernel] for s in starts], [[0, length]]]
    kw = torch_plan.plan(_spec(regions, dtype), "return_indices", (1, 1, length, length))
    assert kw["return_indices"] is True
    found = kw["_random_samples"][1]   # H's sample: 2-D samples are (W, H)
    assert torch_plan.torch_intervals(found, length, out, kernel, dtype) == starts
    if dtype == "float64":
        assert _torch_windows(kw, (1, 1, length, length)) == regions


@pytest.mark.parametrize("regions, why", [
    ([[[0, 2], [2, 5]], [[0, 6]]], "one window size"),                 # sizes 2 and 3
    ([[[0, 2], [1, 3]], [[0, 6]]], "no _random_samples value"),        # last start not at L - 2
    ([[[0, 2], [1, 3], [3, 5], [4, 6]], [[0, 6]]], None),              # reachable: the control
    ([[[0, 2], [0, 2], [2, 4], [4, 6]], [[0, 6]]], "no _random_samples value"),  # a start repeated
    ([[[0, 2]] * 3 + [[4, 6]], [[0, 6]]], "no _random_samples value"),
    ([[[0, 5], [0, 5], [1, 6]], [[0, 6]]], "output + kernel - 1 > input"),
])
def test_torch_says_which_regions_it_cannot_draw(regions, why):
    kw = torch_plan.plan(_spec(regions), "eager", (1, 1, 6, 6))
    if why is None:
        assert _torch_windows(kw, (1, 1, 6, 6)) == regions
    else:
        assert isinstance(kw, Unsupported) and why in kw.reason


def test_torch_runs_fractional_eager_and_with_indices_only():
    spec = _spec([fractional_regions("fixed_size", 6)] * 2)
    assert isinstance(torch_plan.plan(spec, "compile", (1, 1, 6, 6)), Unsupported)
    assert isinstance(torch_plan.plan(_spec([fractional_regions("fixed_size", 6)]), "eager", (1, 1, 6)), Unsupported)


def _tf_regions(call, shape):
    """The regions TensorFlow's FractionalMaxPool pools for the plan's sequences
    (fractional_max_pool_op.cc: rows seq[i] to seq[i+1] - 1, or seq[i+1] when overlapping,
    clipped to the last row), as [start, stop) pairs."""
    return [[[a, min(b if call.overlapping else b - 1, length - 1) + 1] for a, b in zip(seq, seq[1:])]
            for seq, length in zip(call.sequences, shape[2:])]


@pytest.mark.parametrize("kind", ["partition", "overlapping"])
@pytest.mark.parametrize("shape", [(1, 2, 7, 7), (1, 1, 6, 6), (2, 1, 7, 4), (1, 1, 3, 1)])
def test_tf_sequences_give_the_catalogues_regions(kind, shape):
    regions = [fractional_regions(kind, n) for n in shape[2:]]
    call = tf_plan.plan(_spec(regions, "float64"), "eager", shape)
    assert all(seq[0] == 0 and seq[-1] == n for seq, n in zip(call.sequences, shape[2:]))
    assert _tf_regions(call, shape) == regions


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_tf_sequences_give_every_region_set_it_can_draw(data):
    """Regions drawn as TensorFlow draws them (its steps, overlapping or not) come back from
    the plan's sequences; each dim has the steps TensorFlow's generator makes."""
    shape = (1, 1, data.draw(st.integers(1, 9)), data.draw(st.integers(1, 9)))
    regions = [data.draw(drawn_regions(n)) for n in shape[2:]]
    call = tf_plan.plan(_spec(regions), "eager", shape)
    if isinstance(call, Unsupported):  # windows of one size (torch's) or the two dims' modes differ
        return
    assert _tf_regions(call, shape) == regions
    for seq, n in zip(call.sequences, shape[2:]):
        k = n // (len(seq) - 1)
        assert {b - a for a, b in zip(seq, seq[1:])} <= {k, k + 1}


@pytest.mark.parametrize("regions, dtype, shape, variant, why", [
    ([[[0, 2], [2, 3], [3, 5]], [[0, 5]]], "float32", (1, 1, 5, 5), "function", "eagerly only"),
    ([[[0, 2], [2, 3], [3, 5]]] * 3, "float32", (1, 1, 5, 5, 5), "eager", "2-D only"),
    ([[[1, 3], [3, 5]], [[0, 5]]], "float32", (1, 1, 5, 5), "eager", "not increasing from 0"),
    ([[[0, 1], [1, 5]], [[0, 5]]], "float32", (1, 1, 5, 5), "eager", "steps [1, 4]"),
    ([[[0, 2], [2, 4], [4, 5]], [[0, 5]]], "float32", (1, 1, 5, 5), "eager", None),  # the control
    ([[[0, 3], [2, 4], [4, 5]], [[0, 5]]], "float32", (1, 1, 5, 5), "eager", "stops (3, 4, 5)"),
    ([[[0, 3], [2, 5]], [[0, 2], [2, 5]]], "float32", (1, 1, 5, 5), "eager", "one flag for both"),
])
def test_tf_says_which_regions_it_cannot_draw(regions, dtype, shape, variant, why):
    call = tf_plan.plan(_spec(regions, dtype), variant, shape)
    if why is None:
        assert _tf_regions(call, shape) == regions and not call.overlapping
    else:
        assert isinstance(call, Unsupported) and why in call.reason
