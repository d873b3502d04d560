"""Indices a path returns are judged: they must point at the forward's value and carry the
gradient the path returned."""

import numpy as np

from poolgrad.adapters.base import OK, Outcome
from poolgrad.reference import PoolSpec
from verdict_cases import classify
from poolgrad.verdicts.indices import plane_indices

SPEC = PoolSpec.from_dict({"op": "max_pool1d", "kernel_size": 2, "stride": 2, "dtype": "float32"})
X = np.array([[[1, 3, 2, 5], [7, 0, 4, 6]]], dtype=np.float32)      # N=1, C=2
G = np.array([[[1, 2], [4, 8]]], dtype=np.float32)
FWD = np.array([[[3, 5], [7, 6]]], dtype=np.float32)
GRAD = np.array([[[0, 1, 0, 2], [4, 0, 0, 8]]], dtype=np.float32)
PLANE = np.array([[[1, 3], [0, 3]]])


def _verdict(indices, layout):
    out = Outcome(OK, forward=FWD, grad_input=GRAD, indices=indices)
    return classify(SPEC, X, G, out, index_layout=layout)


def test_indices_that_agree_leave_the_verdict_alone():
    assert _verdict(PLANE, "plane").verdict == "conforms"


def test_an_index_elsewhere_is_inconsistent_indices():
    v = _verdict(np.array([[[1, 2], [0, 3]]]), "plane")
    assert v.verdict == "inconsistent_indices"
    assert "1 of 4 indices" in v.message and "scattered through the indices" in v.message


def test_channels_last_image_indices_are_read_per_channel():
    tf_style = PLANE * 2 + np.array([0, 1]).reshape(1, 2, 1)      # (position * C + c)
    assert np.array_equal(plane_indices(tf_style, "image_channels_last", 2), PLANE)
    assert _verdict(tf_style, "image_channels_last").verdict == "conforms"
    other_channel = tf_style.copy()
    other_channel[0, 0, 0] += 1                                   # names channel 1's element
    assert _verdict(other_channel, "image_channels_last").verdict == "inconsistent_indices"


def test_a_negative_zero_upstream_routed_by_assignment_agrees_with_its_index():
    """g = -0.0 (a dropped-out negative gradient): a kernel that assigns g at its index returns
    -0.0 there, one that adds it to zeros +0.0; both route it to where the index points."""
    g = np.array([[[-0.0, 2], [4, 8]]], dtype=np.float32)
    for zero in (-0.0, 0.0):
        grad = GRAD.copy()
        grad[0, 0, 1] = zero
        out = Outcome(OK, forward=FWD, grad_input=grad, indices=PLANE)
        assert classify(SPEC, X, g, out, index_layout="plane").verdict != "inconsistent_indices"
    elsewhere = GRAD.copy()
    elsewhere[0, 0, 1], elsewhere[0, 0, 0] = 0.0, 1.0                      # g's 1 at another element
    out = Outcome(OK, forward=FWD, grad_input=elsewhere, indices=PLANE)
    assert classify(SPEC, X, G, out, index_layout="plane").verdict == "inconsistent_indices"
