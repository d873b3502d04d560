"""The worked examples of SPEC.md, exactly as written there."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from poolgrad.reference import PoolSpec, backward, forward
from poolgrad.reference.dtypes import round_to

NAN, INF = np.nan, np.inf


def spec(**d):
    return PoolSpec.from_dict(d)


def one_d(values):
    return np.array(values, dtype=np.float64)[None, None]


def test_seed_003_four_by_four_stride_two():
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    s = spec(op="max_pool", kernel_size=2, stride=2)
    assert forward(s, x)[0, 0].tolist() == [[5, 7], [13, 15]]
    dx = backward(s, x, np.array([[[[1.0, 2.0], [3.0, 4.0]]]]))[0, 0]
    assert dx.tolist() == [[0, 0, 0, 0], [0, 1, 0, 2], [0, 0, 0, 0], [0, 3, 0, 4]]


@pytest.mark.parametrize("tie, expected", [
    ("first", [[0, 2], [0, 0]]), ("last", [[0, 0], [2, 0]]),
    ("all", [[0, 2], [2, 0]]), ("split", [[0, 1], [1, 0]]),
])
def test_tie_policies_give_four_answers(tie, expected):
    x = np.array([[[[1.0, 3.0], [3.0, 2.0]]]])
    assert backward(spec(op="max_pool", kernel_size=2), x, np.full((1, 1, 1, 1), 2.0), tie=tie)[0, 0].tolist() == expected


def test_signed_zeros_tie():
    s, x = spec(op="max_pool", kernel_size=2), one_d([-0.0, 0.0])
    assert np.signbit(forward(s, x, tie="first")).item() and not np.signbit(forward(s, x, tie="last")).item()


@pytest.mark.parametrize("tie, nan, y, dx", [
    ("first", "propagate", NAN, [0, 1, 0, 0]), ("last", "propagate", NAN, [0, 0, 0, 1]),
    ("all", "propagate", NAN, [0, 1, 0, 1]), ("split", "propagate", NAN, [0, 0.5, 0, 0.5]),
    ("first", "ignore", 3.0, [0, 0, 1, 0]),
])
def test_nan_policies(tie, nan, y, dx):
    s, x = spec(op="max_pool", kernel_size=4), one_d([1.0, NAN, 3.0, NAN])
    np.testing.assert_equal(forward(s, x, tie=tie, nan=nan).item(), y)
    assert backward(s, x, one_d([1.0]), tie=tie, nan=nan)[0, 0].tolist() == dx


def test_same_padding_puts_the_odd_element_at_the_end():
    # L = 5, k = 2, s = 2: pads (0, 1), windows {0,1} {2,3} {4,pad}
    s = spec(op="avg_pool", kernel_size=2, stride=2, padding="SAME", count_include_pad=True)
    assert forward(s, one_d([0, 1, 2, 3, 4])).tolist() == [[[0.5, 2.5, 2.0]]]


def test_ceil_mode_drops_a_window_starting_in_the_right_padding():
    s = spec(op="max_pool", kernel_size=2, stride=2, padding=1, ceil_mode=True)
    assert forward(s, one_d([0, 1, 2, 3, 4])).tolist() == [[[0, 2, 4]]]


def test_avg_ceil_mode_divisor_ignores_the_overhang():
    s = spec(op="avg_pool", kernel_size=2, stride=2, ceil_mode=True)
    assert forward(s, one_d([0, 1, 2, 3, 4])).tolist() == [[[0.5, 2.5, 4.0]]]


def test_adaptive_bins():
    x = one_d([1, 5, 2, 4, 3])
    s = spec(op="adaptive_max_pool", output_size=3)
    assert forward(s, x).tolist() == [[[5, 5, 4]]]
    assert backward(s, x, one_d([1, 2, 4])).tolist() == [[[0, 3, 0, 4, 0]]]
    np.testing.assert_allclose(forward(spec(op="adaptive_avg_pool", output_size=3), x), [[[3, 11 / 3, 3.5]]])
    # out > L: bins [0, 1), [0, 2), [1, 2)
    assert forward(spec(op="adaptive_max_pool", output_size=3), one_d([2, 1])).tolist() == [[[2, 2, 1]]]


def test_window_wholly_in_padding():
    x, pads = one_d([5.0]), [[0, 3]]
    s = spec(op="max_pool", kernel_size=2, padding=pads)
    assert forward(s, x).tolist() == [[[5.0, -INF]]]
    assert backward(s, x, one_d([1.0, 7.0])).tolist() == [[[1.0]]]
    excl = spec(op="avg_pool", kernel_size=2, padding=pads, count_include_pad=False)
    np.testing.assert_equal(forward(excl, x), [[[5.0, NAN]]])
    assert backward(excl, x, one_d([1.0, 7.0])).tolist() == [[[1.0]]]
    incl = spec(op="avg_pool", kernel_size=2, padding=pads, count_include_pad=True)
    assert forward(incl, x).tolist() == [[[2.5, 0.0]]]


def test_lp_pool():
    s = spec(op="lp_pool", kernel_size=2, norm_type=2)
    assert forward(s, one_d([3, 4])).tolist() == [[[5.0]]]
    np.testing.assert_allclose(backward(s, one_d([3, 4]), one_d([1.0])), [[[0.6, 0.8]]])
    assert backward(s, one_d([0, 0]), one_d([1.0])).tolist() == [[[0.0, 0.0]]]


def test_bfloat16_is_rounded_once():
    assert float(round_to(np.array(1 + 2**-8 + 2**-30), ml_dtypes.bfloat16)) == 1 + 2**-7


@pytest.mark.parametrize("regions, y, dx", [
    ([[0, 2], [2, 3], [3, 5]], [5, 2, 4], [0, 1, 2, 4, 0]),   # TensorFlow sequence [0, 2, 3, 5]
    ([[0, 3], [2, 4], [3, 5]], [5, 4, 4], [0, 1, 0, 6, 0]),   # the same, overlapping
])
def test_fractional_regions(regions, y, dx):
    s = spec(op="fractional_max_pool", regions=[regions])
    x = one_d([1, 5, 2, 4, 3])
    assert forward(s, x)[0, 0].tolist() == y
    assert backward(s, x, one_d([1, 2, 4]))[0, 0].tolist() == dx


def test_segment_pooling():
    # ids [2, 0, 2, 0, 3], 4 segments: segment 1 is empty, 0 holds a tie, 3 one item.
    ids = dict(segment_ids=[2, 0, 2, 0, 3], num_segments=4)
    x, g = one_d([1, 5, 3, 5, 2]), one_d([1, 2, 4, 8])
    s = spec(op="segment_max_pool", **ids)
    assert forward(s, x)[0, 0].tolist() == [5, -INF, 3, 2]
    assert backward(s, x, g)[0, 0].tolist() == [0, 1, 4, 0, 8]
    assert backward(s, x, g, tie="split")[0, 0].tolist() == [0, 0.5, 4, 0.5, 8]
    a = spec(op="segment_avg_pool", **ids)
    assert forward(a, x)[0, 0].tolist() == [5, 0, 2, 2]
    assert backward(a, x, g)[0, 0].tolist() == [2, 0.5, 2, 0.5, 8]


def test_roi_crop_max_pool():
    # Three crop points per axis at 0.5, 1.5, 2.5 of x[r, c] = 4 r + c, max-pooled 2 x 2 with stride 1.
    s = spec(op="roi_crop_max_pool", boxes=[[0, 0.5, 0.5, 2.5, 2.5]], output_size=2, kernel_size=2, stride=1)
    x = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)
    assert forward(s, x)[0, 0].tolist() == [[7.5, 8.5], [11.5, 12.5]]
    assert backward(s, x, np.ones((1, 1, 2, 2)))[0, 0].tolist() == [
        [0, 0, 0, 0], [0, 0.25, 0.5, 0.25], [0, 0.5, 1, 0.5], [0, 0.25, 0.5, 0.25]]
