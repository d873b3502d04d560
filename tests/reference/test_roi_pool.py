"""roi_pool and roi_align in the reference: hand-checked examples of torchvision's coordinate
rules (SPEC.md, "RoI pooling"), the spec's refusals, and the adjoint identities."""

import numpy as np
import pytest

from poolgrad.reference import PoolSpec, SpecError, backward, error_scale, forward, jvp, output_shape
from poolgrad.verdicts.tolerances import bound

X = np.arange(16, dtype=np.float64).reshape(1, 1, 4, 4)   # x[r, c] = 4 r + c


def spec(op, boxes, output_size, **kw):
    return PoolSpec.from_dict({"op": op, "boxes": boxes, "output_size": output_size, "dtype": "float64", **kw})


def test_roi_pool_bins_of_a_whole_box():
    s = spec("roi_pool", [[0, 0, 0, 3, 3]], 2)
    np.testing.assert_array_equal(forward(s, X)[0, 0], [[5, 7], [13, 15]])
    dx = backward(s, X, np.array([[[[1.0, 2], [3, 4]]]]))[0, 0]
    np.testing.assert_array_equal(dx, [[0, 0, 0, 0], [0, 1, 0, 2], [0, 0, 0, 0], [0, 3, 0, 4]])


def test_roi_pool_rounds_half_away_and_bins_overlap():
    # 1 * 0.5 rounds to 1, 5 * 0.5 = 2.5 to 3: rows and cols [1, 3], 3 pixels in 2 bins: [1, 3), [2, 4)
    s = spec("roi_pool", [[0, 1, 1, 5, 5]], 2, spatial_scale=0.5)
    np.testing.assert_array_equal(forward(s, X)[0, 0], [[10, 11], [14, 15]])
    dx = backward(s, X, np.array([[[[1.0, 2], [4, 8]]]]))[0, 0]
    assert dx[2, 2] == 1 and dx[2, 3] == 2 and dx[3, 2] == 4 and dx[3, 3] == 8 and dx.sum() == 15


def test_roi_pool_ties_go_to_the_first_in_row_major_order():
    x = np.ones((1, 1, 2, 2))
    s = spec("roi_pool", [[0, 0, 0, 1, 1]], 1)
    np.testing.assert_array_equal(backward(s, x, np.ones((1, 1, 1, 1)))[0, 0], [[1, 0], [0, 0]])
    np.testing.assert_array_equal(backward(s, x, np.ones((1, 1, 1, 1)), tie="last")[0, 0], [[0, 0], [0, 1]])


def test_roi_pool_empty_bins_output_zero_and_route_nothing():
    # a box past the right edge: its bins clip to nothing; a degenerate box is one pixel
    s = spec("roi_pool", [[0, 5, 0, 7, 3], [0, 2, 1, 1, 0]], 2)
    y = forward(s, -X - 1)
    np.testing.assert_array_equal(y[0, 0], np.zeros((2, 2)))
    np.testing.assert_array_equal(y[1, 0], np.full((2, 2), -7.0))   # the pixel (1, 2)
    dx = backward(s, -X - 1, np.ones((2, 1, 2, 2)))[0, 0]
    assert dx[1, 2] == 4 and dx.sum() == 4


def test_roi_pool_clips_a_box_past_the_border():
    s = spec("roi_pool", [[0, -2, -2, 1, 1]], 1)  # [-2, 1] in 1 bin, clipped to [0, 2)
    assert forward(s, X)[0, 0, 0, 0] == 5


def test_roi_pool_nan_propagates_and_boxes_pick_their_image():
    x = np.stack([X[0], X[0] + 100])
    x[0, 0, 0, 0] = np.nan
    s = spec("roi_pool", [[1, 0, 0, 1, 1], [0, 0, 0, 1, 1]], 1)
    y = forward(s, x)
    assert y[0, 0, 0, 0] == 105 and np.isnan(y[1, 0, 0, 0])
    assert forward(s, x, nan="ignore")[1, 0, 0, 0] == 5
    dx = backward(s, x, np.array([2.0, 3.0]).reshape(2, 1, 1, 1))
    assert dx[1, 0, 1, 1] == 2 and dx[0, 0, 0, 0] == 3 and dx.sum() == 5


def test_roi_align_one_sample_is_the_pixel():
    s = spec("roi_align", [[0, 0, 0, 2, 2]], 1, sampling_ratio=1)
    x = X.copy()
    x[0, 0, 2, 2] = np.inf   # the sample (1, 1) falls on a pixel: its neighbours have weight 0
    assert forward(s, x)[0, 0, 0, 0] == 5


def test_roi_align_interpolates_and_spreads_the_gradient():
    s = spec("roi_align", [[0, 0, 0, 1, 1]], 1, sampling_ratio=1)   # sample (0.5, 0.5)
    assert forward(s, X)[0, 0, 0, 0] == 2.5
    np.testing.assert_array_equal(backward(s, X, np.ones((1, 1, 1, 1)))[0, 0, :2, :2], [[0.25, 0.25], [0.25, 0.25]])
    aligned = spec("roi_align", [[0, 0.5, 0.5, 1.5, 1.5]], 1, sampling_ratio=1, aligned=True)
    assert forward(aligned, X)[0, 0, 0, 0] == 2.5


def test_roi_align_adaptive_grid_clamps_at_the_last_pixel():
    # ceil(4 / 1) = 4 samples per axis at 0.5, 1.5, 2.5, 3.5; 3.5 reads the last row alone:
    # mean row 1.875, mean column 1.875
    s = spec("roi_align", [[0, 0, 0, 4, 4]], 1)
    assert forward(s, X)[0, 0, 0, 0] == 4 * 1.875 + 1.875


def test_roi_align_samples_outside_contribute_zero():
    far = spec("roi_align", [[0, -4, -4, -2, -2]], 1, sampling_ratio=1)   # sample (-3, -3)
    assert forward(far, X)[0, 0, 0, 0] == 0
    assert not backward(far, X, np.ones((1, 1, 1, 1))).any()
    near = spec("roi_align", [[0, -1, -1, 0, 0]], 1, sampling_ratio=1)   # (-0.5, -0.5) clamps to 0
    assert forward(near, X + 1)[0, 0, 0, 0] == 1


@pytest.mark.parametrize("op,kw", [("roi_pool", {}), ("roi_align", {"sampling_ratio": 2}), ("roi_align", {"aligned": True})])
def test_forward_and_backward_are_transposes(op, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 7, 6))
    s = spec(op, [[1, 0.5, 1, 4.5, 6], [0, -1, 2, 3, 9], [1, 2, 2, 2, 2]], [2, 3], spatial_scale=0.75, **kw)
    g = rng.standard_normal(output_shape(s, x.shape))
    t = rng.standard_normal(x.shape)
    np.testing.assert_allclose(np.sum(jvp(s, x, t) * g), np.sum(t * backward(s, x, g)), rtol=1e-12)


@pytest.mark.parametrize("fields,field", [
    ({"boxes": [[0, 1, 2, 3]]}, "boxes"),
    ({"boxes": [[0.5, 1, 2, 3, 4]]}, "boxes"),
    ({"boxes": [[0, 1, 2, 3, float("nan")]]}, "boxes"),
    ({"output_size": [2, 0]}, "output_size"),
    ({"spatial_scale": 0}, "spatial_scale"),
    ({"aligned": True}, "aligned"),        # roi_pool has no aligned
])
def test_refusals_name_the_field(fields, field):
    with pytest.raises(SpecError) as e:
        PoolSpec.from_dict({"op": "roi_pool", "boxes": [[0, 0, 0, 1, 1]], "output_size": 2, **fields})
    assert e.value.field == field


def test_a_box_of_a_missing_image_is_refused():
    with pytest.raises(SpecError) as e:
        forward(spec("roi_pool", [[1, 0, 0, 1, 1]], 1), X)
    assert e.value.field == "boxes"


def test_roi_align_error_scale_covers_positions_computed_in_the_dtype():
    """A kernel that computes a sample's position in float32 misplaces it by a few eps of the
    position's size: the tolerance takes that (a small weight moves by many of its own ulp), but not
    a misplacement a rule could make (1e-3 of a pixel)."""
    s = PoolSpec.from_dict({"op": "roi_align", "boxes": [[0, 4.7, 4.7, 5.9, 5.9]], "output_size": 1,
                            "sampling_ratio": 1, "dtype": "float32"})
    x = np.zeros((1, 1, 8, 8), np.float32)
    g = np.ones((1, 1, 1, 1), np.float32)

    def gradient_at(position):   # the sample's four corners, float64 weights
        low, frac = np.floor(position), position - np.floor(position)
        dx = np.zeros((8, 8))
        for r, wr in ((low, 1 - frac), (low + 1, frac)):
            for c, wc in ((low, 1 - frac), (low + 1, frac)):
                dx[int(r), int(c)] = wr * wc
        return dx
    want = backward(s, x, g)[0, 0].astype(np.float64)
    np.testing.assert_allclose(want, gradient_at(5.3), rtol=1e-6)
    tol = bound("roi_align", np.dtype(np.float32), error_scale(s, x, g)[1][0, 0])
    moved = gradient_at(5.3 + 4 * np.spacing(np.float32(5.3)).item())
    assert (np.abs(moved - want) <= tol).all()
    assert not (np.abs(moved - want) <= bound("roi_align", np.dtype(np.float32), np.abs(want))).all()
    assert not (np.abs(gradient_at(5.301) - want) <= tol).all()
