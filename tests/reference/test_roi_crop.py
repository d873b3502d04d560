"""roi_crop_max_pool in the reference (SPEC.md, "roi_crop_max_pool"; its worked example is in
test_spec_examples): hand-checked crops, the definition's loop against the fast path under every
policy, and TensorFlow's plan putting crop_and_resize's points where the spec has them."""

import numpy as np
import pytest

from poolgrad.adapters.tensorflow.crop_and_resize import plan
from poolgrad.cases.catalogue import catalogue
from poolgrad.reference import PoolSpec, SpecError, backward, error_scale, forward, jvp
from poolgrad.reference.definition import BY_OP
from poolgrad.reference.dtypes import dtype_from_name
from poolgrad.reference.taps import plan_for

X = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)   # x[r, c] = 4 r + c
POLICIES = [(tie, nan) for tie in ("first", "last", "all", "split") for nan in ("propagate", "ignore")]


def spec(boxes, output_size, kernel_size, dtype="float64", **kw):
    return PoolSpec.from_dict({"op": "roi_crop_max_pool", "boxes": boxes, "output_size": output_size,
                               "kernel_size": kernel_size, "dtype": dtype, **kw})


def test_points_outside_are_zero_and_pass_nothing():
    s = spec([[0, -1, -1, 1, 1]], 2, 2, stride=1)   # points -1, 0, 1: the first row and column outside
    assert forward(s, X + 1).tolist() == [[[[1, 2], [5, 6]]]]
    assert forward(s, X - 16).tolist() == [[[[0, 0], [0, -11]]]]   # the extrapolated 0 beats negatives
    dx = backward(s, X - 16, np.ones((1, 1, 2, 2)))
    assert dx[0, 0, 1, 1] == 1 and np.count_nonzero(dx) == 1   # only the window without outside points routes


def test_a_point_on_a_pixel_reads_that_pixel_alone():
    x = X.copy()
    x[0, 0, 1, 2] = np.nan   # beside the points (1, 1) and (2, 1), never under them
    x[0, 0, 0, 1] = -np.inf
    s = spec([[0, 1, 0, 1, 2]], [3, 1], 1)   # one column of points at x = 1, rows 0, 1, 2
    assert forward(s, x)[0, 0, :, 0].tolist() == [-np.inf, 5, 9]


def test_one_point_sits_at_the_centre_and_flipped_boxes_reverse_the_crop():
    assert forward(spec([[0, 0, 0, 3, 1]], 1, 1), X).item() == 0.5 * 4 + 1.5
    flipped = spec([[0, 3, 3, 0, 0]], 2, 2, stride=2)   # 4 points per axis, 3 down to 0
    assert forward(flipped, X)[0, 0].tolist() == [[15, 13], [7, 5]]


def test_kernel_and_stride_are_pairs_and_required():
    assert spec([[0, 0, 0, 3, 3]], 2, [2, 1]).stride == (2, 1)
    with pytest.raises(SpecError) as err:
        PoolSpec.from_dict({"op": "roi_crop_max_pool", "boxes": [[0, 0, 0, 1, 1]], "output_size": 1})
    assert err.value.field == "kernel_size"
    with pytest.raises(SpecError) as err:
        spec([[0, 0, 0, 1, 1]], 1, [1, 1, 1])
    assert err.value.field == "kernel_size"


@pytest.mark.parametrize("case", [c for c in catalogue() if c.spec.op == "roi_crop_max_pool"], ids=lambda c: c.id)
def test_the_definition_is_the_fast_path(case):
    x, g = case.input, case.grad_output
    for tie, nan in POLICIES:
        y, dx = BY_OP["roi_crop_max_pool"](case.spec, x, g, tie=tie, nan=nan)
        np.testing.assert_array_equal(forward(case.spec, x, tie=tie, nan=nan), y)
        np.testing.assert_allclose(backward(case.spec, x, g, tie=tie, nan=nan), dx, rtol=2e-7, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float64"])
def test_the_definition_is_the_fast_path_in_every_dtype(dtype):
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 4, (2, 1, 5, 6)).astype(np.float64)
    s = spec([[0, -0.75, 0.5, 4.25, 3.5], [1, 5, 4, 0.5, 0.25], [1, 2, 2, 2, 2]], [2, 3], [3, 2], dtype, stride=[1, 2])
    xd = x.astype(dtype_from_name(dtype))
    g = rng.standard_normal((3, 1, 2, 3))
    for tie, nan in POLICIES:
        y, dx = BY_OP["roi_crop_max_pool"](s, xd, g, tie=tie, nan=nan)
        np.testing.assert_array_equal(forward(s, xd, tie=tie, nan=nan), y)
        np.testing.assert_allclose(backward(s, xd, g, tie=tie, nan=nan).astype(np.float64), dx.astype(np.float64),
                                   rtol=float(np.finfo(np.float16).eps) if dtype != "float64" else 1e-12)


def test_forward_mode_is_the_transpose_of_the_gradient():
    rng = np.random.default_rng(3)
    s = spec([[0, 0.5, 0.25, 2.75, 3], [0, -1, 2, 2, -0.5]], 2, 2, stride=1)
    t, u = rng.standard_normal(X.shape), rng.standard_normal((2, 1, 2, 2))
    for tie in ("first", "last", "all", "split"):
        assert np.isclose((jvp(s, X, t, tie=tie) * u).sum(), (t * backward(s, X, u, tie=tie)).sum())


def test_tensorflow_plans_the_spec_points():
    case = next(c for c in catalogue() if c.spec.op == "roi_crop_max_pool")
    call, points = plan(case.spec, "crop_and_resize_max", case.input.shape), plan_for(case.spec, case.input.shape)
    corners = np.array(call.boxes, dtype=np.float32).astype(np.float64)
    height, width = case.input.shape[2:]
    assert call.crop_size == points.crop_shape[2:] and call.pool == "max" and not call.function
    # crop_and_resize's first and last points, from float32 corners: the spec's, exactly
    np.testing.assert_array_equal(corners[:, 0] * (height - 1), points.y[:, 0])
    np.testing.assert_array_equal(corners[:, 3] * (width - 1), points.x[:, -1])
    function, xla = (plan(case.spec, f"crop_and_resize_max_{v}", case.input.shape) for v in ("function", "xla"))
    assert function.function and not function.jit_compile and xla.function and xla.jit_compile
    assert xla.boxes == call.boxes
    assert "roi_align" in plan(case.spec, "crop_and_resize", case.input.shape).reason


def test_the_error_scale_is_the_crop_of_the_magnitudes_not_of_the_values():
    """A point halfway between 2 and -2 is 0, and a kernel's lerp rounds terms of size 2 there
    (SPEC.md, "Tolerances"); a corner of weight 0 adds nothing, an infinite one is compared exactly."""
    x = np.array([[[[2.0, -2.0, np.inf]]]], dtype=np.float32)
    s = spec([[0, 0.5, 0, 0.5, 0]], 1, 1, dtype="float32")   # one point, at x = 0.5 on the first row
    assert forward(s, x).item() == 0.0
    assert error_scale(s, x, np.ones((1, 1, 1, 1), np.float32))[0].item() == 2.0
