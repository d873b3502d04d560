"""The routing probe: exact sums in every dtype, decodable routing, exact max backward."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from poolgrad import reference
from poolgrad.cases import catalogue, routing_probe
from poolgrad.cases.model import default_grad_output
from poolgrad.reference.probes import significand_bits

DTYPES = list(reference.DTYPES)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("volume", [1, 2, 3, 4, 8, 9, 27, 64, 125])
def test_any_sum_of_up_to_volume_values_is_exact(dtype, volume):
    g = routing_probe((2, 3, 7, 5), dtype, volume)
    assert g.dtype == reference.DTYPES[dtype]
    values = np.unique(g.astype(np.float64))
    assert (np.log2(values) % 1 == 0).all()  # powers of two
    # The largest possible sum bounds all others; every integer up to it is exact then.
    worst = values.max() * volume
    assert worst <= 2.0 ** significand_bits(dtype)
    assert float(np.array(worst).astype(g.dtype)) == worst
    rng = np.random.default_rng(volume)
    for _ in range(200):
        picked = rng.choice(g.ravel().astype(np.float64), size=rng.integers(1, volume + 1))
        assert float(np.array(picked.sum()).astype(g.dtype)) == picked.sum()


@pytest.mark.parametrize("dtype, p", [("bfloat16", 5), ("float16", 8), ("float32", 21), ("float64", 24)])
def test_consecutive_outputs_decode(dtype, p):
    """For a 3x3 window, P = bits + 1 - ceil(log2 9) distinct powers of two (capped at 24);
    any run of P consecutive outputs has distinct ones, so a subset's sum identifies it."""
    g = routing_probe((1, 1, 64), dtype, 9).astype(np.float64).ravel()
    assert len(np.unique(g)) == p and len(set(g[:p])) == p
    run = g[3:3 + p]
    sums = {sum(s) for r in range(p + 1) for s in itertools.combinations(run[:min(p, 10)], r)}
    assert len(sums) == 2 ** min(p, 10)


def test_zero_size_probe():
    assert routing_probe((0, 2, 3), "float32", 4).shape == (0, 2, 3)


def test_max_backward_of_every_catalogue_case_is_exact_in_its_dtype():
    """The reference accumulates in float64 and rounds once; with the probe as grad_output,
    rounding must change nothing for tie policies that route whole gradients (the
    accumulation families bring their own, inexact, grad_output)."""
    probed = [c for c in catalogue() if c.spec.is_max and
              np.array_equal(c.grad_output, default_grad_output(c.spec, c.input.shape))]
    assert len(probed) > 1000
    for case in probed:
        spec64 = case.spec.with_dtype("float64")
        for tie in ("first", "all"):
            dx = reference.backward(case.spec, case.input, case.grad_output, tie=tie)
            exact = reference.backward(spec64, case.input.astype(np.float64),
                                       case.grad_output.astype(np.float64), tie=tie)
            assert np.array_equal(dx.astype(np.float64), exact, equal_nan=True), (case.id, tie)
