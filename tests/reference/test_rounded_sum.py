"""accumulate="rounded_sum": avg's window sum exact, rounded once to the input dtype, then divided
(tinygrad's half sum accumulated in float32 and cast back before its division). Expected
values are derived by hand in the comments."""

import numpy as np
import pytest

from poolgrad.reference import PoolSpec, SpecError, backward, forward


def arr(values, dtype=np.float16):
    return np.asarray(values, dtype=np.float64).reshape(1, 1, -1).astype(dtype)


def avg(**kw):
    return PoolSpec.from_dict({"op": "avg_pool", "kernel_size": 3, "dtype": "float16", **kw})


def test_a_sum_on_the_last_midpoint_rounds_to_inf():
    # 40064 + 8 * 3182 = 65520, half-way between float16's largest 65504 and 65536: ties to even
    # round it up, past the range, so the division sees inf. The spec divides the exact sum
    # (65520 / 9 = 7280); adding in float16 rounds the partial sums down (40064 + 3182 = 43246
    # is 43232 in float16's steps of 32, and so on: 65408), a finite 65408 / 9.
    spec = PoolSpec.from_dict({"op": "avg_pool2d", "kernel_size": 3, "stride": 2, "ceil_mode": True,
                               "dtype": "float16"})
    x = np.array([[[[40064, 3182, 3182], [3182, 3182, 3182], [3182, 3182, 3182]]]], dtype=np.float16)
    assert forward(spec, x).item() == 7280
    assert forward(spec, x, accumulate="dtype").item() == np.float16(65408 / 9)
    assert forward(spec, x, accumulate="rounded_sum").item() == np.inf


def test_the_sum_is_rounded_before_the_division():
    # 2048 + 1 + 0 = 2049 is between float16's 2048 and 2050: ties to even give 2048, and
    # 2048 / 3 = 682.67 is 682.5 in float16's steps of 0.5; the spec's 2049 / 3 is 683 exactly.
    x = arr([2048, 1, 0])
    assert forward(avg(), x).item() == 683
    assert forward(avg(), x, accumulate="rounded_sum").item() == 682.5


def test_a_sum_the_dtype_holds_is_the_spec():
    x = arr([40000, 20000, -30000, 7, 1, 2])  # sums 30000 and 10: exact in float16
    assert np.array_equal(forward(avg(), x, accumulate="rounded_sum"), forward(avg(), x))


def test_the_gradient_and_other_ops_are_the_spec():
    # The policy rounds avg's forward window sum only: the gradient's shares and lp's power sums
    # stay float64 sums rounded once.
    x = arr([2048, 1, 0, 60000, 60000, 1])
    g = arr([3, 5])
    assert np.array_equal(backward(avg(), x, g, accumulate="rounded_sum"), backward(avg(), x, g))
    lp = PoolSpec.from_dict({"op": "lp_pool", "kernel_size": 3, "norm_type": 2, "dtype": "float16"})
    assert np.array_equal(forward(lp, x, accumulate="rounded_sum"), forward(lp, x), equal_nan=True)


def test_an_unknown_accumulation_names_the_new_one():
    with pytest.raises(SpecError, match="rounded_sum"):
        forward(avg(), arr([1, 2, 3]), accumulate="rounded")
